"""An ``expires_at`` DynamoDB's TTL cannot read (a string another program or a console
edit wrote) is no expiry, for readers and writers alike: the thread reads as live, and
its turns, prunes and rollbacks go on (each write puts a number back, or removes it)."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_s3.manifest.schema import TTL_ATTRIBUTE
from langgraph_s3.testing.fakes import MemoryBucket, MemoryTable, memory_saver
from langgraph_s3.testing.graphs import chat_graph

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("ttl_days", [None, 30], ids=["no-ttl", "ttl"])
async def test_a_string_expiry_neither_hides_the_thread_nor_stops_its_writes(
    ttl_days: int | None,
) -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    saver = memory_saver(bucket=bucket, table=table, thread_ttl_days=ttl_days)
    graph = chat_graph().compile(checkpointer=saver)
    cfg: Any = {"configurable": {"thread_id": "t"}}
    await graph.ainvoke({"messages": [("user", "hello")]}, cfg)
    root = next(i for i in table.items.values() if i["sk"]["S"] == "~")
    root[TTL_ATTRIBUTE] = {"S": "2030-01-01"}  # a console edit
    assert await saver.aget_tuple(cfg) is not None  # live for readers
    out = await graph.ainvoke({"messages": [("user", "again")]}, cfg)  # and for writers
    assert "again" in [m.content for m in out["messages"]]
    root = next(i for i in table.items.values() if i["sk"]["S"] == "~")
    if ttl_days:  # the turn set a number again (without a TTL, writes leave it be)
        assert "N" in root[TTL_ATTRIBUTE]
    root[TTL_ATTRIBUTE] = {"S": "soon"}
    report = await saver.aprune(["t"], keep_last=1)
    assert report.checkpoints > 0
    assert len([t async for t in saver.alist(cfg)]) == 1
