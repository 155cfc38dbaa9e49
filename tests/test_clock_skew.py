"""Writers whose clocks disagree: checkpoint ids are time-ordered uuid6 made from the
writer's clock, so a writer behind the one before it makes a child older than its
parent. Such a turn becomes the latest or is refused with ClockSkewError (saying by
how much); it never silently becomes a side branch the thread continues without.

Each skewed writer is a process of its own (an id made in this process would be
bumped past this process's last one by uuid6's own monotonic guard).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

from helpers import cfg
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing import MotoServer, Names
from langgraph_s3.testing.graphs import chat_graph

SCRIPT = Path(__file__).parent / "scripts" / "skewed_writer.py"


class Writer:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    def turn(self, message: str) -> dict[str, object]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(message + "\n")
        self.proc.stdin.flush()
        out: dict[str, object] = orjson.loads(self.proc.stdout.readline())
        return out


@contextmanager
def writer(server: MotoServer, names: Names, thread: str, offset: float) -> Iterator[Writer]:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(SCRIPT),
            server.url,
            names["bucket"],
            names["table"],
            thread,
            str(offset),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        yield Writer(proc)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(30)


async def messages(saver: AsyncS3Saver, thread: str) -> list[str]:
    state = await chat_graph().compile(checkpointer=saver).aget_state(cfg(thread))
    return [str(m.content) for m in state.values.get("messages", [])]


@pytest.mark.parametrize("skew", [0.005, 2.0, 600.0])
@pytest.mark.parametrize("age", ["young", "old"])
async def test_a_skewed_writer_never_loses_a_turn_silently(
    s3_fresh: MotoServer, names: Names, skew: float, age: str
) -> None:
    thread = f"skew-{age}-{skew}"
    # an old thread began long before the skew (its first turns by a process whose
    # clock then read that long ago); a young one, just now
    began = -(skew + 60.0) if age == "old" else 0.0
    with (
        writer(s3_fresh, names, thread, began) as first,
        writer(s3_fresh, names, thread, 0.0) as right,
        writer(s3_fresh, names, thread, -skew) as behind,
    ):
        assert first.turn("hello there") == {"ok": True}
        async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as saver:
            refused = 0
            for i in range(3):  # turns alternate: the right clock, then the one behind
                assert right.turn(f"right {i}") == {"ok": True}
                assert (await messages(saver, thread))[-2] == f"right {i}"
                got = behind.turn(f"behind {i}")
                said = await messages(saver, thread)
                if got == {"ok": True}:
                    # acknowledged: it is the latest, and the next turn continues it
                    assert said[-2] == f"behind {i}", said
                else:
                    refused += 1
                    assert got["error"] == "ClockSkewError", got
                    assert "clock skew" in str(got["message"])
                    assert " s: this process's clock" in str(got["message"])
                    assert f"behind {i}" not in said  # nothing of it was written
                    assert said[-2] == f"right {i}"
            entry = await saver.manifest.reads.latest(thread, "")
            assert entry is not None and not entry.heads  # no side branch was made
    if skew >= 600:
        assert refused == 3  # each of its turns came well within the skew
    elif skew >= 2.0:
        assert refused >= 1  # a turn slower than 2 s (a loaded machine) is simply newer
