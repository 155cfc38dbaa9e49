"""An import that fails while it writes a thread removes what it wrote; when that
removal fails in its turn after its tombstones, the thread stays deleted (the next
sweep finishes the removal), never back half-imported."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_s3.checkpoint.erasure import ERASED
from langgraph_s3.core.records import DELETE_LEASE_SECONDS
from langgraph_s3.errors import ServiceError
from langgraph_s3.testing.fakes import MemoryBucket, MemoryTable, memory_saver
from langgraph_s3.testing.graphs import CHAT_TURNS, chat_graph

pytestmark = pytest.mark.unit

CFG: Any = {"configurable": {"thread_id": "t"}}


class Outage(ServiceError):
    """An AWS error (the 503 a throttled or failing endpoint answers)."""


@pytest.mark.parametrize("replace", [False, True])
async def test_an_import_whose_removal_fails_too_leaves_the_thread_deleted(
    replace: bool, tmp_path: Any
) -> None:
    now = [1_800_000_000.0]
    bucket, table = MemoryBucket(clock=lambda: now[0]), MemoryTable(clock=lambda: now[0])
    source = memory_saver()
    graph = chat_graph().compile(checkpointer=source)
    for turn in CHAT_TURNS[:3]:
        await graph.ainvoke({"messages": [("user", turn)]}, CFG)
    export = tmp_path / "t.jsonl"
    await source.aexport(["t"], export)
    target = memory_saver(bucket=bucket, table=table)
    if replace:  # an older thread of the id, replaced by the import
        old = chat_graph().compile(checkpointer=target)
        await old.ainvoke({"messages": [("user", "an older conversation")]}, CFG)
    puts, real_put, real_renew = 0, target.aput, target.manifest.renew

    async def put(*args: Any) -> Any:
        nonlocal puts
        puts += 1
        if puts == 4:  # the import fails after 3 of its checkpoints are committed
            raise Outage("service unavailable")
        return await real_put(*args)

    async def renew(*args: Any) -> bool:
        if puts >= 4:  # and then its removal, after its tombstones
            raise Outage("service unavailable")
        return await real_renew(*args)

    target.aput = put  # type: ignore[method-assign]
    target.manifest.renew = renew  # type: ignore[method-assign]
    with pytest.raises(Outage) as info:
        await target.aimport(export, replace=replace)
    notes = " | ".join(getattr(info.value, "__notes__", ()))
    assert "removing it failed too" in notes and "reading as deleted" in notes
    target.aput, target.manifest.renew = real_put, real_renew  # type: ignore[method-assign]
    reader = memory_saver(bucket=bucket, table=table)
    # before: the removal's failure put the three checkpoints back, readable
    assert await reader.aget_tuple(CFG) is None
    assert [c async for c in reader.alist(CFG)] == []
    now[0] += DELETE_LEASE_SECONDS + 1  # the removal's lease ran out: the sweep finishes it
    await reader.asweep_ttl()
    assert [k for k, o in bucket.objects.items() if "threads/t/" in k and o.body != ERASED] == []
    await target.aimport(export)  # the id is free again: the import runs as new
    assert len((await graph.aget_state(CFG)).values["messages"]) == len(
        (await chat_graph().compile(checkpointer=reader).aget_state(CFG)).values["messages"]
    )
