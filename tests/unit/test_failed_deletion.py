"""A delete_thread (or an import's replace) that fails before removing any object puts
the thread back as it was: the failed call says so and leaves nothing half-done."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.checkpoint.erasure import ERASED
from langgraph_s3.core.records import Listed
from langgraph_s3.errors import EndpointUnreachableError, S3PersistenceError
from langgraph_s3.manifest import deployment_key
from langgraph_s3.manifest.schema import INLINE_PREFIX
from langgraph_s3.testing.fakes import (
    Faults,
    FaultyObjectStore,
    MemoryBucket,
    MemoryManifest,
    MemoryObjectStore,
    MemoryTable,
    MemoryTableClient,
    memory_saver,
)
from langgraph_s3.testing.graphs import chat_graph, nested_graph

pytestmark = pytest.mark.unit


def cfg(thread: str) -> dict[str, object]:
    return {"configurable": {"thread_id": thread}}


def cfg_ns(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def run_config(thread: str, run_id: str) -> Any:
    return {"configurable": {"thread_id": thread, "run_id": run_id}}


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


class FailingListing(MemoryObjectStore):
    """Holds its first listing until ``release`` is set, then fails it: a deletion
    that tombstoned the thread, then failed before removing anything."""

    def __init__(self, bucket: MemoryBucket) -> None:
        super().__init__(bucket)
        self.reached, self.release = asyncio.Event(), asyncio.Event()

    async def list_all(self, prefix: str, *, start_after: str | None = None) -> list[Listed]:
        if not self.reached.is_set():
            self.reached.set()
            await self.release.wait()
            raise EndpointUnreachableError("the deletion's listing failed")
        return await super().list_all(prefix, start_after=start_after)


R1, R2 = "00000000-0000-4000-8000-0000000000a1", "00000000-0000-4000-8000-0000000000a2"


@pytest.mark.parametrize("removal", ["delete_for_runs", "prune"])
async def test_a_removal_beside_a_failing_deletion_acts_on_what_it_puts_back(
    removal: str,
) -> None:
    """A removal that meets a deletion in progress (the thread tombstoned) waits for it
    to end: the deletion fails and puts the thread back, and the removal then does what
    it says on the thread put back, instead of reporting success on a thread it never
    touched."""
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    graph = chat_graph().compile(checkpointer=writer)
    for text, run in (("hello there", R1), ("what is the weather in Oslo?", R2)):
        await graph.ainvoke({"messages": [("user", text)]}, run_config("t", run))
    listing = FailingListing(bucket)
    deleter = AsyncS3Saver(
        bucket=bucket.name,
        object_store=listing,
        manifest=MemoryManifest(table, deployment=deployment_key(bucket.name, "")),
    )
    deletion = asyncio.ensure_future(deleter.adelete_thread("t"))
    await listing.reached.wait()  # tombstoned: gone for readers, maybe not for good
    admin = memory_saver(bucket=bucket, table=table)
    if removal == "delete_for_runs":
        act = asyncio.ensure_future(admin.adelete_for_runs([R1]))
    else:
        act = asyncio.ensure_future(admin.aprune(["t"], keep_last=1))
    await asyncio.sleep(0.05)
    assert not act.done(), "the removal took the deletion in progress as done"
    listing.release.set()
    with pytest.raises(EndpointUnreachableError):
        await deletion  # failed: the thread is put back
    report = await act
    assert report.threads == 1 and report.checkpoints >= 1, report
    reader = memory_saver(bucket=bucket, table=table, cache_bytes=0)
    history = [c async for c in reader.alist(cfg("t"))]
    if removal == "delete_for_runs":
        assert history and {c.metadata.get("run_id") for c in history} == {R2}
    else:
        assert len(history) == 1
    state = await chat_graph().compile(checkpointer=reader).aget_state(cfg("t"))
    assert state.values["messages"][-1].type == "ai"


class CutRevive(MemoryTableClient):
    """Fails the first transaction it is asked for: a revive cut short."""

    transactions = 0

    @contextlib.asynccontextmanager
    async def request(self, operation: str, nbytes: int = 0) -> AsyncIterator[None]:
        if operation == "dynamodb.TransactWriteItems":
            self.transactions += 1
            if self.transactions == 1:
                raise EndpointUnreachableError("the revive's transaction failed")
        async with super().request(operation, nbytes):
            yield


async def test_a_revive_cut_short_leaves_the_thread_deleted_not_half_back() -> None:
    """A revive puts the root and its subgraph namespaces back in one transaction: cut
    short, the thread is still wholly deleted (never a namespace live under the root's
    tombstone, which a new conversation on the id would inherit once the lease ends,
    nor a live root whose namespaces are still tombstones); once it goes through, it
    is whole."""
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    graph = nested_graph().compile(checkpointer=writer)
    await graph.ainvoke({"trail": []}, cfg_ns("t"))
    assert len(await writer.manifest.reads.namespaces("t")) == 3  # the root and two subgraphs
    cut = MemoryManifest(table, deployment=deployment_key(bucket.name, ""), client=CutRevive(table))
    deletion = await cut.deletions.tombstone("t")
    with pytest.raises(EndpointUnreachableError):
        await cut.deletions.revive(deletion)
    items = [i for i in table.items.values() if i["pk"]["S"].endswith("/t")]
    assert len(items) == 3 and all(i.get("deleted") == {"BOOL": True} for i in items)
    reader = memory_saver(bucket=bucket, table=table)
    assert await reader.manifest.reads.namespaces("t") == []
    assert [c async for c in reader.alist(cfg("t"))] == []
    await MemoryManifest(table, deployment=deployment_key(bucket.name, "")).deletions.revive(
        deletion
    )
    assert len(await reader.manifest.reads.namespaces("t")) == 3  # whole, once it goes through


class FailsTableRequest(MemoryTableClient):
    """Fails its ``at``-th request (before it is applied)."""

    def __init__(self, table: MemoryTable, at: int) -> None:
        super().__init__(table)
        self.at, self.sent = at, 0

    @contextlib.asynccontextmanager
    async def request(self, operation: str, nbytes: int = 0) -> AsyncIterator[None]:
        self.sent += 1
        if self.sent == self.at:
            raise EndpointUnreachableError(f"the deletion's {operation} failed")
        async with super().request(operation, nbytes):
            yield


def content_of(bucket: MemoryBucket, table: MemoryTable) -> list[str]:
    """What of thread ``t`` still holds content: objects and held envelopes."""
    found = [k for k, o in bucket.objects.items() if "/t/" in k and o.body != ERASED]
    for item in table.items.values():
        if item["pk"]["S"].endswith("/t"):
            found += [n for n in item if n.startswith(INLINE_PREFIX)]
    return found


@pytest.mark.parametrize("at", [2, 3, 4])
async def test_a_deletion_cut_while_it_tombstones_puts_the_thread_back(at: int) -> None:
    """The deletion's ``at``-th table request fails (after the root's tombstone: the
    follow-up that takes the root's held copies out, the Query, a namespace's
    tombstone): the call raises and the thread is as it was, held copies and all
    (before: a revivable tombstone still holding the conversation's envelopes, the
    thread read as deleted and its objects never removed)."""
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    graph = nested_graph().compile(checkpointer=writer)
    await graph.ainvoke({"trail": []}, cfg_ns("t"))
    before = [c.checkpoint["id"] async for c in writer.alist(cfg_ns("t"))]
    items = {k: dict(v) for k, v in table.items.items() if k[0].endswith("/t")}
    failing = AsyncS3Saver(
        bucket=bucket.name,
        object_store=MemoryObjectStore(bucket),
        manifest=MemoryManifest(
            table, deployment=deployment_key(bucket.name, ""), client=FailsTableRequest(table, at)
        ),
    )
    with pytest.raises(EndpointUnreachableError) as raised:
        await failing.adelete_thread("t")
    assert any("call it again" in n for n in getattr(raised.value, "__notes__", []))
    after = {k: v for k, v in table.items.items() if k[0].endswith("/t")}
    reader = memory_saver(bucket=bucket, table=table)
    if at < 4:  # every item a tombstone was written to is known as it was: put back
        assert after == items
        assert [c.checkpoint["id"] async for c in reader.alist(cfg_ns("t"))] == before
    else:  # a namespace's tombstone may have been applied, its old item unknown: the
        # thread stays deleted (no namespace comes back empty), not yet erased
        assert [c async for c in reader.alist(cfg_ns("t"))] == []
    await reader.adelete_thread("t")  # called again, it goes through
    assert content_of(bucket, table) == []
    assert [c async for c in reader.alist(cfg_ns("t"))] == []
