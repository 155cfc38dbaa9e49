"""A subgraph namespace first committed while its thread is being deleted: either the
deletion finds it and it goes with the thread, or it begins after the deletion, its
objects whole; never a namespace the deletion left live whose objects it took."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from langgraph_s3.testing.fakes import MemoryBucket, MemoryTable, memory_saver

pytestmark = pytest.mark.unit


def cfg(ns: str = "", parent: str | None = None) -> Any:
    conf: dict[str, Any] = {"thread_id": "t", "checkpoint_ns": ns}
    if parent is not None:
        conf["checkpoint_id"] = parent
    return {"configurable": conf}


def checkpoint(text: str) -> Any:
    c = empty_checkpoint()
    c["id"] = str(uuid6())
    c["channel_values"] = {"said": text}
    c["channel_versions"] = {"said": 1}
    return c


class Paused:
    """Holds one saver's table requests from the ``at``-th on until ``go`` is set."""

    def __init__(self, saver: Any, at: int) -> None:
        self.client, self.at, self.sent = saver.manifest.client, at, 0
        self.reached, self.go = asyncio.Event(), asyncio.Event()
        self.real = self.client.request
        self.client.request = self.request

    @contextlib.asynccontextmanager
    async def request(self, operation: str, nbytes: int = 0) -> AsyncIterator[None]:
        self.sent += 1
        if self.sent >= self.at:
            self.reached.set()
            await self.go.wait()
        async with self.real(operation, nbytes):
            yield


WORDS = {"small": "the subgraph's first words", "large": os.urandom(20_000).hex()}


@pytest.mark.parametrize("size", ["small", "large"])
@pytest.mark.parametrize("at", [2, 3, 4])
async def test_a_namespace_born_during_a_deletion_is_deleted_or_whole(at: int, size: str) -> None:
    """The deleter pauses before its ``at``-th table request (after its first steps:
    the root's tombstone, its Query); meanwhile a subgraph commits its namespace's
    first checkpoint (carried by the item, or too large: stored beside its commit).
    Once both are done, the namespace reads whole or not at all."""
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    root = checkpoint("root")
    await writer.aput(cfg(), root, {"source": "input", "step": -1}, {})
    deleter = memory_saver(bucket=bucket, table=table)
    paused = Paused(deleter, at)
    deletion = asyncio.ensure_future(deleter.adelete_thread("t"))
    await paused.reached.wait()
    sub = checkpoint(WORDS[size])
    put = asyncio.ensure_future(writer.aput(cfg("sub:1"), sub, {"source": "loop", "step": 0}, {}))
    for _ in range(200):  # the put goes as far as it can while the deletion waits
        await asyncio.sleep(0)
    paused.go.set()
    await deletion
    outcome = await asyncio.gather(put, return_exceptions=True)
    reader = memory_saver(bucket=bucket, table=table)
    assert await reader.aget_tuple(cfg()) is None  # the root is gone
    got = await reader.aget_tuple(cfg("sub:1"))
    if got is None:  # deleted with the thread: its put may not have been acknowledged
        assert [c async for c in reader.alist(cfg("sub:1"))] == []
    else:  # born after the deletion: acknowledged, whole
        assert not isinstance(outcome[0], BaseException), outcome
        assert got.checkpoint["channel_values"] == {"said": WORDS[size]}
    await writer.aflush()
    # a namespace live in the table is one whose checkpoint reads whole
    pk = writer.manifest.key("t", "")["pk"]["S"]
    live = [i for i in table.items.values() if i["pk"]["S"] == pk and "deleted" not in i]
    assert [i["sk"]["S"] for i in live] == ([] if got is None else ["sub~3a1"])
