"""A delete_thread (or an import's replace) that fails before removing any object puts
the thread back as it was: the failed call says so and leaves nothing half-done."""

from __future__ import annotations

import pytest

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.errors import S3PersistenceError
from langgraph_s3.graphs import chat_graph
from langgraph_s3.manifest import deployment_key
from langgraph_s3.memory import (
    Faults,
    FaultyObjectStore,
    MemoryBucket,
    MemoryManifest,
    MemoryObjectStore,
    MemoryTable,
    memory_saver,
)

pytestmark = pytest.mark.unit


def cfg(thread: str) -> dict[str, object]:
    return {"configurable": {"thread_id": thread}}


async def test_a_deletion_failing_before_its_deletes_leaves_the_thread_whole() -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    graph = chat_graph().compile(checkpointer=writer)
    for text in ("hello there", "what is the weather in Oslo?"):
        await graph.ainvoke({"messages": [("user", text)]}, cfg("t"))
    before = [c.checkpoint["id"] async for c in writer.alist(cfg("t"))]
    # the deletion's listing fails (after its tombstones, before any object goes)
    faults = Faults(1, 1.0, lost=0.0, only={"s3.ListObjectsV2"}, limit=1)
    failing = AsyncS3Saver(
        bucket=bucket.name,
        object_store=FaultyObjectStore(MemoryObjectStore(bucket), faults=faults),
        manifest=MemoryManifest(table, deployment=deployment_key(bucket.name, "")),
    )
    with pytest.raises(S3PersistenceError):
        await failing.adelete_thread("t")
    assert faults.total == 1
    reader = memory_saver(bucket=bucket, table=table)
    assert [c.checkpoint["id"] async for c in reader.alist(cfg("t"))] == before
    state = await chat_graph().compile(checkpointer=reader).aget_state(cfg("t"))
    assert len(state.values["messages"]) == 6  # two turns, one with a tool call
    await graph.ainvoke({"messages": [("user", "thanks!")]}, cfg("t"))
    # and a deletion that goes through still removes it all
    await reader.adelete_thread("t")
    assert [c async for c in reader.alist(cfg("t"))] == []
