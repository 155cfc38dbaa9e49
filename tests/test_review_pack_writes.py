"""Regular writes are first-write-wins per (task, idx); after packing, a second
put_writes of the same task makes a plain object that shadows the pack's."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing import MotoServer, unique_names


def s3(server: MotoServer, names: dict[str, str], **kw: Any) -> AsyncS3Saver:
    return AsyncS3Saver(endpoint_url=server.url, **names, **kw)


async def scenario(saver: Any, pack: Any) -> list[Any]:
    ck = create_checkpoint(empty_checkpoint(), None, 0)
    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    out = await saver.aput(cfg, ck, {"source": "loop", "step": 0}, {})
    await saver.aput_writes(out, [("a", 1), ("b", 2)], "task1")
    await pack()
    await saver.aput_writes(out, [("a", 10), ("b", 20), ("c", 30)], "task1")
    tup = await saver.aget_tuple(out)
    return sorted(tup.pending_writes)


async def test_first_wins_across_pack(s3_fresh: MotoServer) -> None:
    async def nothing() -> None:
        return None

    expected = await scenario(InMemorySaver(), nothing)
    names = unique_names()
    async with s3(s3_fresh, names) as saver:
        await saver.setup()
        got = await scenario(saver, lambda: saver.apack(["t"]))
        async with s3(s3_fresh, names) as cold:
            got_cold = sorted(
                (
                    await cold.aget_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
                ).pending_writes
            )
    print("memory:", expected)
    print("s3    :", got)
    print("cold  :", got_cold)
    assert got == expected
