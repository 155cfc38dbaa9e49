"""Checkpoints a manifest item holds (their objects not stored yet: a writer frozen or
reaped right after its commit) are owned to the end: every maintenance call acts on
them as on stored ones, and the item's bound holds across processes."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from langgraph_s3.checkpoint.saver import AsyncS3Saver
from langgraph_s3.core.held import HELD_BUDGET, held_size
from langgraph_s3.manifest.schema import HELD_BYTES, INLINE_PREFIX, inline_copies
from langgraph_s3.testing.fakes import MemoryBucket, MemoryTable, memory_saver
from langgraph_s3.testing.graphs import chat_graph

pytestmark = pytest.mark.unit


def run_cfg(thread: str, run_id: str) -> Any:
    return {"configurable": {"thread_id": thread, "run_id": run_id}}


def held_ids(table: MemoryTable) -> set[str]:
    return {n[len(INLINE_PREFIX) :] for i in table.items.values() for n in i if is_copy(n)}


def is_copy(name: str) -> bool:
    return name.startswith(INLINE_PREFIX)


def counted_exactly(item: dict[str, Any]) -> tuple[int, int]:
    """(the item's held-bytes count, what its copies count)."""
    return int(item[HELD_BYTES]["N"]), sum(held_size(c) for c in inline_copies(item))


def freeze_checkpoint_puts(saver: AsyncS3Saver, prefix: str = "") -> Callable[[], None]:
    """The saver's checkpoint PUTs (those under ``prefix``) never land (a Lambda frozen,
    then reaped, right after it answered): returns what thaws them."""
    real_put = saver.objects.put
    gate = asyncio.Event()

    async def frozen(key: str, body: bytes, **kw: Any) -> Any:
        if "/c/" in key and key.startswith(prefix):
            await gate.wait()
        return await real_put(key, body, **kw)

    saver.objects.put = frozen  # type: ignore[method-assign]
    return gate.set


@pytest.mark.parametrize("indexed", [True, False], ids=["run-index", "scan"])
async def test_a_rollback_removes_a_run_whose_checkpoints_are_all_held(indexed: bool) -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    if indexed:
        await writer.setup()
    graph = chat_graph().compile(checkpointer=writer)
    await graph.ainvoke({"messages": [("user", "hello there")]}, run_cfg("t", "r1"))
    await writer.aflush()
    kept = [c.checkpoint["id"] async for c in writer.alist(run_cfg("t", "r1"))]
    freeze_checkpoint_puts(writer)  # the cancelled run's turn: all of it held
    await graph.ainvoke({"messages": [("user", "what is the weather?")]}, run_cfg("t", "r2"))
    assert len(held_ids(table)) >= 3
    admin = memory_saver(bucket=bucket, table=table)
    report = await admin.adelete_for_runs(["r2"])
    assert report.checkpoints >= 3
    after = [c.checkpoint["id"] async for c in admin.alist(run_cfg("t", "r1"))]
    assert after == kept
    fresh = memory_saver(bucket=bucket, table=table)
    assert [c.checkpoint["id"] async for c in fresh.alist(run_cfg("t", "r1"))] == kept


async def test_reaped_one_put_writers_keep_the_item_within_its_bound() -> None:
    """80 writers (an API Lambda scaled out: each answers one approval on the thread,
    then is frozen and reaped before its checkpoint's object lands): every commit goes
    through, the item never holds more than DynamoDB's condition allows, and the count
    is exact; every checkpoint is in the history."""
    bucket, table = MemoryBucket(), MemoryTable()
    first = memory_saver(bucket=bucket, table=table)
    cfg: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    c = empty_checkpoint()
    c["id"], c["channel_values"], c["channel_versions"] = str(uuid6()), {"v": 0}, {"v": 1}
    await first.aput(cfg, c, {"step": -1}, {"v": 1})
    ids = [c["id"]]
    biggest = contended = 0
    for i in range(80):
        w = memory_saver(bucket=bucket, table=table)
        warm: Any = {"configurable": {"thread_id": f"other-{i}", "checkpoint_ns": ""}}
        await w.aput(warm, empty_checkpoint(), {"step": -1}, {})  # a warm container
        latest = await w.aget_tuple(cfg)
        assert latest is not None
        c = empty_checkpoint()
        c["id"] = str(uuid6())
        own = w.layout.namespace("t", "").checkpoint_id_prefix(c["id"])
        # then reaped right after it answers: its own checkpoint's PUT never lands
        # (unless the put itself waits for it: then it is still alive)
        thaw = freeze_checkpoint_puts(w, own)
        c["channel_values"] = {"v": os.urandom(2500).hex()}  # about 5 KB, incompressible
        c["channel_versions"] = {"v": i + 2}
        put = asyncio.ensure_future(w.aput(latest.config, c, {"step": i}, {"v": i + 2}))
        for _ in range(200):
            await asyncio.sleep(0)
        if not put.done():
            contended += 1
            thaw()
        await put
        ids.append(c["id"])
        item = next(i for i in table.items.values() if i["thread_id"]["S"] == "t")
        count, exact = counted_exactly(item)
        assert count == exact
        biggest = max(biggest, exact)
    assert 0 < biggest <= HELD_BUDGET
    assert 0 < contended < 20  # the bound made some commits store the copies first
    reader = memory_saver(bucket=bucket, table=table)
    assert [t.checkpoint["id"] async for t in reader.alist(cfg)] == ids[::-1]
