"""An import that fails while it writes a thread removes what it wrote, which no reader
saw (it was staged); when that removal fails in its turn, the thread still reads as
before the import (deleted, with replace), and the next sweep once the import's hold
ran out removes what it wrote: its stage's items and its objects."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_s3.checkpoint.erasure import ERASED
from langgraph_s3.core.staging import STAGE_LEASE_SECONDS
from langgraph_s3.errors import ServiceError
from langgraph_s3.manifest.stage_items import (
    STAGE_MARK,
)
from langgraph_s3.testing.fakes import MemoryBucket, MemoryTable, memory_saver
from langgraph_s3.testing.graphs import CHAT_TURNS, chat_graph

pytestmark = pytest.mark.unit

CFG: Any = {"configurable": {"thread_id": "t"}}


class Outage(ServiceError):
    """An AWS error (the 503 a throttled or failing endpoint answers)."""


@pytest.mark.parametrize("replace", [False, True])
async def test_an_import_whose_removal_fails_too_is_never_seen_and_swept_later(
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
    puts, real_put, real_unstage = 0, target.aput, target.manifest.staging.unstage

    async def put(*args: Any) -> Any:
        nonlocal puts
        puts += 1
        if puts == 4:  # the import fails after 3 of its checkpoints are committed
            raise Outage("service unavailable")
        return await real_put(*args)

    async def unstage(*args: Any, **kw: Any) -> Any:
        raise Outage("service unavailable")  # and then its removal

    target.aput = put  # type: ignore[method-assign]
    target.manifest.staging.unstage = unstage  # type: ignore[method-assign]
    with pytest.raises(Outage) as info:
        await target.aimport(export, replace=replace)
    notes = " | ".join(getattr(info.value, "__notes__", ()))
    assert "was published" in notes and "removing what was written failed too" in notes
    target.aput, target.manifest.staging.unstage = real_put, real_unstage  # type: ignore[method-assign]
    reader = memory_saver(bucket=bucket, table=table)
    # the three checkpoints it committed were staged: no reader sees them
    assert await reader.aget_tuple(CFG) is None
    assert [c async for c in reader.alist(CFG)] == []
    assert [t async for t in reader.alist_threads()] == []
    staged = [k for k in table.items if STAGE_MARK in k[0]]
    assert len(staged) >= 2  # the claim, and the root namespace's item
    await reader.asweep_ttl()  # the import's hold is not over: its stage stays
    assert [k for k in table.items if STAGE_MARK in k[0]] == staged
    now[0] += STAGE_LEASE_SECONDS + 1  # its hold ran out: the sweep removes it all
    await reader.asweep_ttl()
    assert [k for k in table.items if STAGE_MARK in k[0]] == []
    assert [k for k, o in bucket.objects.items() if "threads/t/" in k and o.body != ERASED] == []
    await target.aimport(export)  # the id is free again: the import runs as new
    assert len((await graph.aget_state(CFG)).values["messages"]) == len(
        (await chat_graph().compile(checkpointer=reader).aget_state(CFG)).values["messages"]
    )
