"""Items another writer left (a console edit, a script: every value valid DynamoDB) are
read as far as they can be and never make the manifest spin: a count of held bytes that
is no integer hides nothing and stops no turn, a life whose counters are no integers is
kept apart (the thread reads as absent, a write over it fails at once), its pack is
still named, and a write over an expired root whose ``rev`` cannot be read gives up
after ``max_conflicts`` rounds instead of sweeping it again without end."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from langgraph_s3.errors import ConflictError
from langgraph_s3.manifest.schema import deleting_threads, raw_of
from langgraph_s3.testing.fakes import MemoryBucket, MemoryTable, memory_saver
from langgraph_s3.testing.graphs import chat_graph

pytestmark = pytest.mark.unit

CFG: Any = {"configurable": {"thread_id": "t"}}


async def one_turn(**kw: Any) -> tuple[Any, Any, MemoryTable]:
    table = MemoryTable()
    saver = memory_saver(bucket=MemoryBucket(), table=table, **kw)
    graph = chat_graph().compile(checkpointer=saver)
    await graph.ainvoke({"messages": [("user", "hi")]}, CFG)
    return saver, graph, table


def root_of(table: MemoryTable) -> dict[str, Any]:
    return next(i for i in table.items.values() if i["sk"]["S"] == "~")


async def test_a_count_of_held_bytes_that_is_no_integer_is_put_right() -> None:
    saver, graph, table = await one_turn()
    root_of(table)["held_bytes"] = {"N": "1.5"}
    assert await saver.aget_tuple(CFG) is not None  # the thread reads as before
    out = await graph.ainvoke({"messages": [("user", "again")]}, CFG)
    assert "again" in [m.content for m in out["messages"]]
    tup = await saver.aget_tuple(CFG)
    assert tup is not None and "again" in str(tup.checkpoint["channel_values"]["messages"])


@pytest.mark.parametrize("attr", ["rev", "created_at", "updated_at", "packings"])
async def test_a_life_whose_counters_are_no_integers_is_kept_apart(attr: str) -> None:
    saver, graph, table = await one_turn()
    root = root_of(table)
    root[attr] = {"N": "1.5"}
    root["pack"] = {"M": {k: {"N": "1"} for k in ("size", "index", "count")} | {"key": {"S": "k"}}}
    raw = raw_of(root)
    assert raw.garbled and raw.committed and raw.pack is not None  # its pack still named
    assert await saver.aget_tuple(CFG) is None  # not read wrong
    assert [t async for t in saver.alist_threads()] == []
    with pytest.raises(ValueError, match="no readable latest"):
        await graph.ainvoke({"messages": [("user", "again")]}, CFG)


@pytest.mark.parametrize("rev", [{"N": "1.5"}, {"S": "3"}], ids=["fraction", "string"])
async def test_a_write_over_an_expired_root_of_an_unreadable_rev_gives_up(
    rev: dict[str, str],
) -> None:
    _, graph, table = await one_turn(thread_ttl_days=1)
    root = root_of(table)
    root["rev"] = rev
    root["expires_at"] = {"N": str(int(time.time()) - 10)}
    with pytest.raises(ConflictError, match="max_conflicts"):
        await asyncio.wait_for(graph.ainvoke({"messages": [("user", "new")]}, CFG), 30)


def test_a_revivable_tombstone_with_an_odd_count_still_holds_its_thread() -> None:
    now = 1_900_000_000
    tomb = {
        "thread_id": {"S": "t"},
        "deleted": {"BOOL": True},
        "revivable": {"BOOL": True},
        "lease_until": {"N": str(now + 60)},
        "held_bytes": {"N": "1.5"},
    }
    assert deleting_threads([tomb], now) == {"t"}
