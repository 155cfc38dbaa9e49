"""A prune that listed a thread before an import replaced it: its deletes come late, and
hit keys the import writes anew. Its mark on the manifest item holds the import's new
life off until those deletes are done; the imported thread then reads whole."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Sequence
from typing import Any

import pytest

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.checkpoint.erasure import ERASED
from langgraph_s3.core.put_mode import Create
from langgraph_s3.manifest import deployment_key
from langgraph_s3.testing.fakes import (
    MemoryBucket,
    MemoryManifest,
    MemoryObjectStore,
    MemoryTable,
    memory_saver,
)
from langgraph_s3.testing.graphs import chat_graph

pytestmark = pytest.mark.unit


def cfg(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


class Gated(MemoryObjectStore):
    """Holds its first non-empty delete until ``release`` is set."""

    def __init__(self, bucket: MemoryBucket) -> None:
        super().__init__(bucket)
        self.reached, self.release = asyncio.Event(), asyncio.Event()

    async def delete(self, keys: Sequence[str]) -> None:
        if keys and not self.release.is_set():
            self.reached.set()
            await self.release.wait()
        await super().delete(keys)


async def test_an_import_waits_for_a_prune_that_listed_the_old_thread() -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    graph = chat_graph().compile(checkpointer=writer)
    for text in ("hello there", "what is the weather in Oslo?", "and in Bergen?"):
        await graph.ainvoke({"messages": [("user", text)]}, cfg("t"))
    want = len((await graph.aget_state(cfg("t"))).values["messages"])
    file = io.BytesIO()
    await writer.aexport(["t"], file)
    file.seek(0)
    gated = Gated(bucket)
    pruner = AsyncS3Saver(
        bucket=bucket.name,
        object_store=gated,
        manifest=MemoryManifest(table, deployment=deployment_key(bucket.name, "")),
    )
    prune = asyncio.ensure_future(pruner.aprune(["t"], keep_last=1))
    await gated.reached.wait()  # the floor is raised; its deletes are held
    importer = memory_saver(bucket=bucket, table=table)
    load = asyncio.ensure_future(importer.aimport(file, replace=True))
    for _ in range(50):  # the import deletes the thread, then waits on the mark
        if load.done():
            break
        await asyncio.sleep(0.01)
    assert not load.done(), "the import's new life began while the prune still deleted"
    gated.release.set()  # the prune's late deletes: keys the import writes again
    await prune
    assert (await load).threads == 1
    cold = memory_saver(bucket=bucket, table=table, cache_bytes=0)
    state = await chat_graph().compile(checkpointer=cold).aget_state(cfg("t"))
    assert len(state.values["messages"]) == want
    assert len([c async for c in cold.alist(cfg("t"))]) > 3  # the whole history
    raw = await cold.manifest.reads.read("t", "")
    assert raw is not None and not raw.removing  # the mark is gone


async def test_an_unpacking_whose_put_lost_its_answer_takes_it_back_when_replaced() -> None:
    """An unpacking's PUT lands but its answer is lost, while the thread is deleted: the
    unpacking reads the key back and takes its own bytes away before its mark comes off,
    so the import that replaces the thread writes its own checkpoint under that key."""
    from langgraph.checkpoint.base import empty_checkpoint

    from langgraph_s3.errors import EndpointTimeoutError

    cid = "1f000000-0000-6000-8000-000000000001"

    async def one(bucket: MemoryBucket, table: MemoryTable, text: str) -> AsyncS3Saver:
        saver = memory_saver(bucket=bucket, table=table)
        c = dict(empty_checkpoint(), id=cid)
        c["channel_values"], c["channel_versions"] = {"note": text}, {"note": "1"}
        await saver.aput(cfg("t"), c, {"step": 0}, {"note": "1"})  # type: ignore[arg-type]
        return saver

    file = io.BytesIO()
    await (await one(MemoryBucket(), MemoryTable(), "NEW")).aexport(["t"], file)
    bucket, table = MemoryBucket(), MemoryTable()
    saver = await one(bucket, table, "OLD")
    await saver.apack(["t"])
    maintenance = saver.maintenance()
    reached, go = asyncio.Event(), asyncio.Event()
    real = maintenance.raw.put

    async def put(key: str, body: bytes, **kw: Any) -> Any:
        if isinstance(kw.get("mode"), Create) and "/c/" in key:
            reached.set()
            await go.wait()
            await real(key, body, **kw)
            raise EndpointTimeoutError("the PUT landed, its answer was lost")
        return await real(key, body, **kw)

    maintenance.raw.put = put  # type: ignore[method-assign]
    unpacking = asyncio.create_task(maintenance.unpack_thread("t"))
    await reached.wait()
    await memory_saver(bucket=bucket, table=table).adelete_thread("t")
    go.set()
    with pytest.raises(EndpointTimeoutError):
        await unpacking
    # taken back (only the deletion's empty erasure markers are there)
    assert not [k for k, o in bucket.objects.items() if "/c/" in k and o.body != ERASED]
    file.seek(0)
    await memory_saver(bucket=bucket, table=table).aimport(file, replace=True)
    tup = await memory_saver(bucket=bucket, table=table).aget_tuple(cfg("t"))
    assert tup is not None and tup.checkpoint["channel_values"]["note"] == "NEW"
