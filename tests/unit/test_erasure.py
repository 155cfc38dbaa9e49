"""Erasure is erasure: after ``delete_thread`` returns, no object, item attribute or
tombstone of the deleted conversation holds its content, even where its writer's PUTs
were still on their way (a Lambda frozen right after it answered) and land, or are
begun again, after the deletion."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from langgraph_s3.checkpoint.erasure import ERASED, late_put_seconds
from langgraph_s3.core.records import DELETE_LEASE_SECONDS
from langgraph_s3.manifest.schema import INLINE_PREFIX
from langgraph_s3.testing.fakes import MemoryBucket, MemoryTable, memory_saver
from langgraph_s3.testing.graphs import chat_graph

pytestmark = pytest.mark.unit

CFG: Any = {"configurable": {"thread_id": "t"}}
WORDS = ("my card number is 4111", "and my address is 1 Main St")


def content_left(bucket: MemoryBucket, table: MemoryTable) -> list[str]:
    """Where the deleted conversation's bytes can still be read: any object under the
    thread but an (empty) erasure marker, any envelope an item of it holds."""
    found = [
        k
        for k, o in bucket.objects.items()
        if f"/{k}".find("/threads/t/") >= 0 and o.body != ERASED
    ]
    for item in table.items.values():
        if item["pk"]["S"].endswith("/t"):
            found += [f"item {item['sk']['S']}: {n}" for n in item if n.startswith(INLINE_PREFIX)]
    return found


class Frozen:
    """A writer's checkpoint PUTs held back (frozen before they reach S3), then let go
    (``thaw``: they land), or failed (``fail``: ``aflush`` begins them again)."""

    def __init__(self, saver: Any) -> None:
        self.real, self.gate, self.failing = saver.objects.put, asyncio.Event(), False
        saver.objects.put = self.put

    async def put(self, key: str, body: bytes, **kw: Any) -> Any:
        if "/c/" in key and not self.gate.is_set():
            await self.gate.wait()
            if self.failing:
                raise ConnectionError("the connection was reset while frozen")
        return await self.real(key, body, **kw)


@pytest.mark.parametrize("then", ["land", "resent"])
async def test_puts_in_flight_at_a_deletion_never_bring_the_conversation_back(then: str) -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    graph = chat_graph().compile(checkpointer=writer)
    await graph.ainvoke({"messages": [("user", "hello")]}, CFG)  # proves the bucket
    frozen = Frozen(writer)
    for text in WORDS:  # answered; the objects' PUTs still on their way
        await graph.ainvoke({"messages": [("user", text)]}, CFG)
    assert content_left(bucket, table)  # held in the item
    admin = memory_saver(bucket=bucket, table=table)
    await admin.adelete_thread("t")
    assert content_left(bucket, table) == []  # the tombstone holds no envelope
    frozen.failing = then == "resent"
    frozen.gate.set()  # the writer thaws: its PUTs land, or fail and are begun again
    for _ in range(100):
        await asyncio.sleep(0)
    await writer.aflush()
    await writer.aclose()
    assert content_left(bucket, table) == []
    assert await admin.aget_tuple(CFG) is None
    # a new conversation on the id starts clean, and its own objects are whole
    fresh = memory_saver(bucket=bucket, table=table)
    out = (
        await chat_graph()
        .compile(checkpointer=fresh)
        .ainvoke({"messages": [("user", "hi again")]}, CFG)
    )
    assert out["messages"][0].content == "hi again"


async def test_a_late_put_of_a_copy_stored_elsewhere_finds_its_key_erased() -> None:
    """The writer's PUT is on its way; maintenance stores the copy itself and takes it
    out of the item (the writer's copy is no longer held); the thread is deleted; the
    writer's PUT then arrives: it stores nothing."""
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    graph = chat_graph().compile(checkpointer=writer)
    await graph.ainvoke({"messages": [("user", "hello")]}, CFG)
    frozen = Frozen(writer)
    await graph.ainvoke({"messages": [("user", WORDS[0])]}, CFG)
    admin = memory_saver(bucket=bucket, table=table)
    await admin.aprune(["t"], keep_last=100)  # maintenance settles what the item held
    assert not [n for i in table.items.values() for n in i if n.startswith(INLINE_PREFIX)]
    await admin.adelete_thread("t")
    frozen.gate.set()
    for _ in range(100):
        await asyncio.sleep(0)
    await writer.aclose()
    assert content_left(bucket, table) == []


@pytest.mark.parametrize("before", ["pack", "prune", "rollback"])
async def test_maintenance_just_before_a_deletion_leaves_a_late_put_nothing(before: str) -> None:
    """Maintenance stores the held copies (their writer frozen), takes them out and packs
    or deletes their objects; the thread is then deleted; the frozen PUTs arrive: they
    store nothing."""
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    graph = chat_graph().compile(checkpointer=writer)
    run: Any = {"configurable": {"thread_id": "t", "run_id": "r1"}}
    await graph.ainvoke({"messages": [("user", "hello")]}, run)
    await writer.aflush()
    frozen = Frozen(writer)
    run = {"configurable": {"thread_id": "t", "run_id": "r2"}}
    await graph.ainvoke({"messages": [("user", WORDS[0])]}, run)
    admin = memory_saver(bucket=bucket, table=table)
    if before == "pack":
        await admin.apack(["t"])
    elif before == "prune":
        await admin.aprune(["t"], keep_last=1)
    else:
        await admin.adelete_for_runs(["r2"])
    await admin.adelete_thread("t")
    await thaw(frozen, writer)
    assert content_left(bucket, table) == []


async def test_a_rollback_leaves_a_late_put_of_its_run_nothing() -> None:
    """A run's last turn is held in the item (its writer frozen before its PUTs); the run
    is rolled back (LangGraph's cancel): the rollback stores and removes those copies,
    and the frozen PUTs, landing after it, find erasure markers: the rolled-back turn is
    nowhere, the run before it whole."""
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    graph = chat_graph().compile(checkpointer=writer)
    await graph.ainvoke(
        {"messages": [("user", "hello")]}, {"configurable": {"thread_id": "t", "run_id": "r1"}}
    )
    await writer.aflush()
    kept = [c.checkpoint["id"] async for c in writer.alist(CFG)]
    frozen = Frozen(writer)
    run = {"configurable": {"thread_id": "t", "run_id": "r2"}}
    await graph.ainvoke({"messages": [("user", WORDS[0])]}, run)
    admin = memory_saver(bucket=bucket, table=table)
    await admin.adelete_for_runs(["r2"])
    await thaw(frozen, writer)
    reader = memory_saver(bucket=bucket, table=table)
    assert [c.checkpoint["id"] async for c in reader.alist(CFG)] == kept
    late = [k for k, o in bucket.objects.items() if "/c/" in k and o.body != ERASED]
    assert len(late) == len(kept)  # before the fix: the rolled-back turn's 3 came back


async def test_a_deletion_begun_again_after_a_crash_still_erases_what_was_held() -> None:
    """The first deletion dies after its tombstones (the envelopes already out of the
    items); the second finds no copy held, yet leaves markers where the first would
    have: the keys the tombstones recorded."""
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    graph = chat_graph().compile(checkpointer=writer)
    await graph.ainvoke({"messages": [("user", "hello")]}, CFG)
    frozen = Frozen(writer)
    for text in WORDS:
        await graph.ainvoke({"messages": [("user", text)]}, CFG)
    first = memory_saver(bucket=bucket, table=table)
    real = first.raw_objects.list_all

    async def killed(prefix: str, **kw: Any) -> Any:
        raise Killed  # the process dies after its tombstones

    first.raw_objects.list_all = killed  # type: ignore[method-assign]
    with pytest.raises(Killed):
        await first.adelete_thread("t")
    first.raw_objects.list_all = real  # type: ignore[method-assign]
    await memory_saver(bucket=bucket, table=table).adelete_thread("t")
    await thaw(frozen, writer)
    assert content_left(bucket, table) == []


async def test_a_large_checkpoint_committed_beside_its_put_is_erased_too() -> None:
    """A checkpoint over the carried size commits beside its PUT: a deletion between the
    two leaves a marker under the latest's key, and the PUT stores nothing."""
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    root: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    first = await writer.aput(root, ck("hello"), {"source": "input", "step": -1}, {"doc": 1})
    await writer.aflush()
    frozen = Frozen(writer)
    big = ck("SECRET " + os.urandom(10_000).hex())
    put = asyncio.ensure_future(writer.aput(first, big, {"source": "loop", "step": 0}, {"doc": 2}))
    while not any(i.get("latest_id", {}).get("S") == big["id"] for i in table.items.values()):
        await asyncio.sleep(0)
    await memory_saver(bucket=bucket, table=table).adelete_thread("t")
    frozen.gate.set()
    await asyncio.gather(put, return_exceptions=True)
    await writer.aclose()
    assert content_left(bucket, table) == []


async def test_a_tombstone_keeps_no_metadata() -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    saver = memory_saver(bucket=bucket, table=table)
    graph = chat_graph().compile(checkpointer=saver)
    meta: Any = {**CFG, "metadata": {"title": "Refund for card 4111", "user_id": "alice"}}
    await graph.ainvoke({"messages": [("user", "hello")]}, meta)
    await saver.adelete_thread("t")
    items = [i for i in table.items.values() if i["pk"]["S"].endswith("/t")]
    assert items  # the tombstone is there
    for item in items:  # (a stamp's digits may hold "4111": the title's words may not)
        assert "card 4111" not in str(item) and "alice" not in str(item)


async def thaw(frozen: Frozen, writer: Any) -> None:
    """The frozen writer thaws: its PUTs go on, and it closes (storing what it holds)."""
    frozen.gate.set()
    for _ in range(200):
        await asyncio.sleep(0)
    await writer.aclose()


class Killed(Exception):
    """A process killed in the middle of a call (nothing of it runs after)."""


def ck(value: str) -> Any:
    c = empty_checkpoint()
    c["id"], c["channel_values"], c["channel_versions"] = str(uuid6()), {"doc": value}, {"doc": 1}
    return c


@pytest.mark.parametrize("size", [200, 20_000])
async def test_an_import_replace_writes_over_the_markers_its_deletion_left(
    size: int, tmp_path: Any
) -> None:
    """An import's replace deletes the thread (markers under its recent keys), then
    writes the same ids again: small checkpoints (carried) and large ones (stored beside
    their commit) replace the markers, and the thread reads as exported."""
    from langgraph.checkpoint.base import empty_checkpoint as empty

    from langgraph_s3.transfer import aexport_threads, aimport_threads

    bucket, table = MemoryBucket(), MemoryTable()
    saver = memory_saver(bucket=bucket, table=table)
    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    for step in range(4):
        c = empty()
        c["id"] = str(uuid6())
        c["channel_values"] = {"x": os.urandom(size // 2).hex()}
        c["channel_versions"] = {"x": step + 1}
        config = await saver.aput(config, c, {"source": "loop", "step": step}, {"x": step + 1})
    await saver.aflush()
    before = [c.checkpoint async for c in saver.alist(CFG)]
    export = tmp_path / "t.jsonl"
    await aexport_threads(saver, ["t"], export)
    await aimport_threads(saver, export, replace=True)
    await saver.aflush()
    reader = memory_saver(bucket=bucket, table=table)
    after = [c.checkpoint async for c in reader.alist(CFG)]
    assert [c["channel_values"] for c in after] == [c["channel_values"] for c in before]
    assert [o.body for o in bucket.objects.values()].count(ERASED) == 0


async def clocked_chat() -> tuple[list[float], MemoryBucket, MemoryTable, Any, Any]:
    """Thread ``t`` of three stored turns on fakes whose clock is ``now[0]``."""
    now = [1_800_000_000.0]
    bucket, table = MemoryBucket(clock=lambda: now[0]), MemoryTable(clock=lambda: now[0])
    writer = memory_saver(bucket=bucket, table=table)
    graph = chat_graph().compile(checkpointer=writer)
    for text in ("hello", *WORDS):
        await graph.ainvoke({"messages": [("user", text)]}, CFG)
    await writer.aflush()
    return now, bucket, table, writer, graph


async def test_a_deletion_killed_before_its_end_is_finished_by_the_next_sweep() -> None:
    """A deletion that dies after its tombstones (its lease never released) leaves the
    thread reading as deleted and its objects there; once its lease ran out, the next
    ``asweep_ttl`` finds the thread as it finds an expired one and erases it (before: it
    looked only for expired lives, and nothing ever removed those objects)."""
    now, bucket, table, _, graph = await clocked_chat()
    first = memory_saver(bucket=bucket, table=table)

    async def killed(prefix: str, **kw: Any) -> Any:
        raise Killed  # the process dies after its tombstones

    first.raw_objects.list_all = killed  # type: ignore[method-assign]
    with pytest.raises(Killed):
        await first.adelete_thread("t")
    sweeper = memory_saver(bucket=bucket, table=table)
    assert await sweeper.aget_tuple(CFG) is None
    await sweeper.asweep_ttl()  # its lease still holds: the deletion may yet go on
    assert content_left(bucket, table) != []
    now[0] += DELETE_LEASE_SECONDS + 1
    await sweeper.asweep_ttl()
    assert content_left(bucket, table) == []
    await graph.ainvoke({"messages": [("user", "a new conversation")]}, CFG)
    assert len((await graph.aget_state(CFG)).values["messages"]) == 2


async def test_markers_a_prune_left_do_not_make_every_packing_repeat() -> None:
    """A prune's markers are no new writes: a packed thread packs once, and the next
    ``apack`` skips it; a packing once the window passed takes the stale markers."""
    now, bucket, _, writer, graph = await clocked_chat()
    await writer.aprune(["t"], keep_last=1)
    markers = [k for k, o in bucket.objects.items() if o.body == ERASED]
    assert markers  # recent checkpoints pruned: their keys are marked
    assert (await writer.apack(["t"])).threads == 1
    assert (await writer.apack(["t"])).skipped == 1  # before: packed again each time
    now[0] += late_put_seconds(writer.clients.limits.request_timeout) + 1
    await graph.ainvoke({"messages": [("user", "later")]}, CFG)
    await writer.aflush()
    assert (await writer.apack(["t"])).threads == 1
    assert [k for k, o in bucket.objects.items() if o.body == ERASED] == []
