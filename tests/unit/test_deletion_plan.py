"""``aprune(strategy="delete", dry_run=True)``: what a deletion would remove, counted as
the deletion counts it, and nothing written."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_s3.testing.fakes import MemoryBucket, memory_saver
from langgraph_s3.testing.graphs import chat_graph, delta_graph, nested_graph

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("make", [chat_graph, delta_graph, nested_graph])
async def test_a_deletions_plan_counts_what_the_deletion_removes(make: Any) -> None:
    bucket = MemoryBucket()
    saver = memory_saver(bucket=bucket)
    graph = make().compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    for i in range(9):  # a DeltaChannel's seeds are history a prune would keep
        if make is nested_graph:
            await graph.ainvoke({"trail": [f"t{i}"]}, {"configurable": {"thread_id": f"t{i}"}})
        else:
            await graph.ainvoke({"messages": [("user", f"m{i}")]}, config)
    threads = ["t"] if make is not nested_graph else [f"t{i}" for i in range(9)]
    listed = [t for th in threads async for t in _all(saver, th)]
    before = {k: o.body for k, o in bucket.objects.items()}
    plan = await saver.aprune(threads, strategy="delete", dry_run=True)
    assert plan.checkpoints == len(listed) > 0 and plan.threads == len(threads)
    assert {k: o.body for k, o in bucket.objects.items()} == before  # a plan writes nothing
    done = await saver.aprune(threads, strategy="delete")
    assert done.checkpoints == plan.checkpoints


async def _all(saver: Any, thread: str) -> Any:
    async for t in saver.alist({"configurable": {"thread_id": thread}}):
        yield t
