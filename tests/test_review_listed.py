"""Review of the walk's listing (``Listed``, issue 13): it serves LangGraph's generic
DeltaChannel walk only. Two savers on one bucket and table stand for two processes:
a read by id after another process wrote, deleted or packed sees what is there now,
and an internal signal never escapes a read."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

from helpers import cfg
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing import MotoServer, unique_names


@pytest.fixture
async def two(s3_fresh: MotoServer) -> AsyncIterator[tuple[AsyncS3Saver, AsyncS3Saver]]:
    names = unique_names()
    a = AsyncS3Saver(endpoint_url=s3_fresh.url, **names)
    b = AsyncS3Saver(endpoint_url=s3_fresh.url, **names)
    await a.setup()
    try:
        yield a, b
    finally:
        await a.aclose()
        await b.aclose()


async def chain(saver: AsyncS3Saver, thread: str, n: int) -> list[str]:
    ids: list[str] = []
    conf: Any = cfg(thread)
    cp = empty_checkpoint()
    for i in range(n):
        cp = create_checkpoint(cp, None, i)
        v = saver.get_next_version(cp["channel_versions"].get("x"), None)
        cp["channel_values"]["x"] = f"v{i}"
        cp["channel_versions"]["x"] = v
        conf = await saver.aput(conf, cp, {"source": "loop", "step": i, "parents": {}}, {"x": v})
        ids.append(conf["configurable"]["checkpoint_id"])
    return ids


async def test_reads_by_id_see_another_process_writes_and_deletes(
    two: tuple[AsyncS3Saver, AsyncS3Saver],
) -> None:
    a, b = two
    ids = await chain(b, "t", 4)
    assert await a.aget_tuple(cfg("t", ids[0])) is not None  # an older one: a listing
    await b.aput_writes(cfg("t", ids[-1]), [("x", "from b")], task_id="task-1")
    await b.aput_writes(cfg("t", ids[1]), [("x", "resumed")], task_id="task-2")
    tip = await a.aget_tuple(cfg("t", ids[-1]))
    old = await a.aget_tuple(cfg("t", ids[1]))
    assert tip is not None and [w[2] for w in tip.pending_writes or []] == ["from b"]
    assert old is not None and [w[2] for w in old.pending_writes or []] == ["resumed"]
    await b.adelete_thread("t")
    assert await a.aget_tuple(cfg("t", ids[0])) is None
    assert await a.aget_tuple(cfg("t", ids[2])) is None


async def test_a_pack_by_another_process_between_two_reads_is_read_through(
    two: tuple[AsyncS3Saver, AsyncS3Saver],
) -> None:
    a, b = two
    ids = await chain(b, "t", 5)
    assert await a.aget_tuple(cfg("t", ids[0])) is not None
    await b.apack(["t"])  # the loose objects a listed are gone now
    got = await a.aget_tuple(cfg("t", ids[2]))
    assert got is not None and got.checkpoint["channel_values"] == {"x": "v2"}


def test_langgraphs_generic_walk_still_looks_as_the_saver_expects() -> None:
    """walk_scope finds the walk by its code and tells a walk's first read by a local
    not yet set: if LangGraph renames it, the walks stop sharing their listing (each
    still correct, each as slow as before), and this says why."""
    from langgraph.checkpoint.base import BaseCheckpointSaver

    code = BaseCheckpointSaver.aget_delta_channel_history.__code__
    assert "target_tuple" in code.co_varnames
