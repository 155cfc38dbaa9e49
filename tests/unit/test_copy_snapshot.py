"""A copy is the source as readers saw it at one moment, even when the source's latest
was still in flight (its manifest update landed, its object not yet) and even when
another process packed the source after the copier last noted where its objects are."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from langgraph_s3.core.records import Listed
from langgraph_s3.testing.fakes import MemoryBucket, MemoryTable, memory_saver
from langgraph_s3.testing.graphs import chat_graph

pytestmark = pytest.mark.unit


def cfg(thread: str, **extra: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": "", **extra}}


async def ids(saver: Any, thread: str) -> set[str]:
    return {c.config["configurable"]["checkpoint_id"] async for c in saver.alist(cfg(thread))}


def hold_last_put(saver: Any) -> tuple[asyncio.Event, asyncio.Event]:
    """The saver's checkpoint PUTs of the next turn's last checkpoint wait for ``release``
    (``held`` is set once the turn's third checkpoint PUT is reached)."""
    real = saver.objects.put
    held, release = asyncio.Event(), asyncio.Event()
    seen: list[str] = []

    async def put(key: str, body: bytes, **kw: Any) -> Any:
        if "/c/" in key:
            seen.append(key)
            if len(seen) == 3:  # a plain chat turn writes three checkpoints
                held.set()
                await release.wait()
        return await real(key, body, **kw)

    saver.objects.put = put
    return held, release


async def settle() -> None:
    for _ in range(50):  # the manifest update sent beside the held PUT lands
        await asyncio.sleep(0)


async def in_flight_world() -> tuple[MemoryBucket, MemoryTable, Any, Any, asyncio.Event]:
    """A thread ``t`` of one turn, then a second turn whose latest is in flight."""
    b, t = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=b, table=t)
    graph = chat_graph().compile(checkpointer=writer)
    await graph.ainvoke({"messages": [HumanMessage("hello")]}, cfg("t"))
    held, release = hold_last_put(writer)
    turn = asyncio.create_task(graph.ainvoke({"messages": [HumanMessage("again")]}, cfg("t")))
    await held.wait()
    await settle()
    return b, t, writer, turn, release


async def fork(b: MemoryBucket, t: MemoryTable) -> str:
    """Another process continues from the thread's oldest checkpoint: a fork."""
    other = memory_saver(bucket=b, table=t)
    first = sorted(await ids(other, "t"))[0]
    base = await other.aget_tuple(cfg("t", checkpoint_id=first))
    assert base is not None
    graph = chat_graph().compile(checkpointer=other)
    await graph.ainvoke({"messages": [HumanMessage("meanwhile")]}, base.config)
    return first


async def test_a_copy_taken_while_the_latest_is_in_flight_is_the_state_readers_saw() -> None:
    b, t, _, turn, release = await in_flight_world()
    reader = memory_saver(bucket=b, table=t)
    seen = await ids(reader, "t")  # its parent stands in
    stand_in = await reader.aget_tuple(cfg("t"))
    assert stand_in is not None
    copier = memory_saver(bucket=b, table=t)
    # no wait for the latest's object: its writer may never come back
    await asyncio.wait_for(copier.acopy_thread("t", "c"), timeout=10)
    release.set()
    await turn
    assert await ids(memory_saver(bucket=b, table=t), "c") == seen
    # the target's latest is the stand-in: not a put in flight it would wait for
    entry = await copier.manifest.reads.latest("c", "")
    assert entry is not None and entry.latest_id == stand_in.checkpoint["id"]


async def test_a_copy_that_listed_after_the_latest_landed_includes_a_fork_made_before() -> None:
    b, t, _, turn, release = await in_flight_world()
    copier = memory_saver(bucket=b, table=t)
    listing, go = asyncio.Event(), asyncio.Event()
    real_pages = copier.raw_objects.list_pages

    async def pages(prefix: str, **kw: Any) -> AsyncIterator[list[Listed]]:
        if not go.is_set():  # the copy's first listing waits: its entries are read
            listing.set()
            await go.wait()
        async for page in real_pages(prefix, **kw):
            yield page

    copier.raw_objects.list_pages = pages
    copy = asyncio.create_task(copier.acopy_thread("t", "c"))
    await listing.wait()
    # between the copy's read of the entries and its listing: a fork is committed
    # while the latest is still in flight, then the latest lands
    await fork(b, t)
    release.set()
    await turn
    go.set()
    await copy
    want = await ids(memory_saver(bucket=b, table=t), "t")
    # no reader ever saw the latest without the fork: the copy has both
    assert await ids(memory_saver(bucket=b, table=t), "c") == want


async def test_a_copy_follows_objects_packed_after_it_last_noted_the_thread() -> None:
    b, t = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=b, table=t)
    graph = chat_graph().compile(checkpointer=writer)
    await graph.ainvoke({"messages": [HumanMessage("hello")]}, cfg("t"))
    copier = memory_saver(bucket=b, table=t)
    await copier.aget_tuple(cfg("t"))  # it notes the thread as not packed
    (key,) = [k for k in b.objects if "/c/" in k][:1]
    report = await memory_saver(bucket=b, table=t).apack(["t"])
    assert report.threads == 1 and key not in b.objects  # the plain object went
    target = key.replace("/t/", "/u/", 1)
    before = copier.stats.by_operation.get("dynamodb.GetItem", 0)
    await copier.objects.copy(key, target)  # from the pack, found through the manifest
    assert target in b.objects
    assert copier.stats.by_operation["dynamodb.GetItem"] == before + 1  # the one lookup
