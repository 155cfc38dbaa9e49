"""A copy_thread that ends without committing (its source deleted while it copied)
takes back what it wrote into a target that had no item, and leaves a live target as
it was; a rollback that empties a thread leaves nothing under it. Otherwise no item
would ever lead a deletion or a sweep to those objects, and the content would
outlive its thread's deletion."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from langgraph_s3.checkpoint.erasure import ERASED
from langgraph_s3.testing.fakes import MemoryBucket, MemoryTable, memory_saver
from langgraph_s3.testing.graphs import chat_graph

pytestmark = pytest.mark.unit


def cfg(thread: str, **extra: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": "", **extra}}


async def ids(saver: Any, thread: str) -> list[str]:
    return [c.config["configurable"]["checkpoint_id"] async for c in saver.alist(cfg(thread))]


def contents(bucket: MemoryBucket, thread: str) -> list[str]:
    """The keys under ``thread`` that hold more than an erasure marker."""
    prefix = f"threads/{thread}/"
    return sorted(k for k, o in bucket.objects.items() if k.startswith(prefix) and o.body != ERASED)


def pause_copies(saver: Any, at: int) -> tuple[asyncio.Event, asyncio.Event]:
    """The saver's ``at``-th CopyObject (and every later one) waits for ``go``."""
    store = saver.maintenance().objects
    real, sent = store.copy, [0]
    reached, go = asyncio.Event(), asyncio.Event()

    async def copy(source: str, target: str, **kw: Any) -> None:
        sent[0] += 1
        if sent[0] >= at:
            reached.set()
            await go.wait()
        await real(source, target, **kw)

    store.copy = copy
    return reached, go


async def chat(saver: Any, thread: str, *words: str) -> None:
    graph = chat_graph().compile(checkpointer=saver)
    for text in words:
        await graph.ainvoke({"messages": [HumanMessage(text)]}, cfg(thread))


async def copy_beside_deletion(bucket: MemoryBucket, table: MemoryTable, target: str) -> Any:
    """Copy ``t`` into ``target`` while another process deletes ``t`` (after the
    copy's first CopyObject landed); the copy's outcome."""
    copier, deleter = (
        memory_saver(bucket=bucket, table=table),
        memory_saver(bucket=bucket, table=table),
    )
    reached, go = pause_copies(copier, 2)
    copying = asyncio.ensure_future(copier.acopy_thread("t", target))
    await reached.wait()
    await deleter.adelete_thread("t")
    go.set()
    return (await asyncio.gather(copying, return_exceptions=True))[0]


async def test_a_copy_whose_source_was_deleted_meanwhile_takes_back_what_it_wrote() -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    await chat(writer, "t", "my card number is 4111", "and my address")
    await writer.aflush()
    outcome = await copy_beside_deletion(bucket, table, "c")
    assert getattr(outcome, "skipped", None) == 1, outcome
    assert contents(bucket, "t") == []
    assert contents(bucket, "c") == []  # before the fix: the objects copied in round one
    assert await ids(writer, "c") == []
    # the target's id stays usable: a later copy of a new conversation lands whole
    await chat(writer, "t", "a new conversation")
    await writer.aflush()
    report = await writer.acopy_thread("t", "c")
    assert report.threads == 1
    assert await ids(writer, "c") == await ids(writer, "t")


async def test_a_copy_given_up_leaves_a_live_target_as_it_was() -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    await chat(writer, "t", "the source's words", "more of them")
    await chat(writer, "c", "the target's own conversation")
    await writer.aflush()
    before = await ids(writer, "c")
    state = (await writer.aget_tuple(cfg("c"))).checkpoint["channel_values"]
    outcome = await copy_beside_deletion(bucket, table, "c")
    assert getattr(outcome, "skipped", None) == 1, outcome
    assert await ids(writer, "c") == before
    after = (await memory_saver(bucket=bucket, table=table).aget_tuple(cfg("c"))).checkpoint
    assert after["channel_values"] == state


async def test_a_copy_into_a_deleted_target_given_up_takes_back_what_it_wrote() -> None:
    """The target is the tombstone of an earlier deletion: an ended life, so what the
    copy wrote there is its own, taken back as into a target with no item."""
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    await chat(writer, "c", "the target's old life")
    await writer.adelete_thread("c")
    await chat(writer, "t", "my card number is 4111", "and my address")
    await writer.aflush()
    outcome = await copy_beside_deletion(bucket, table, "c")
    assert getattr(outcome, "skipped", None) == 1, outcome
    assert contents(bucket, "c") == []  # before: the objects copied in round one


async def test_a_cancelled_copy_takes_back_what_it_wrote() -> None:
    """A copy cut by a timeout (a cancel: the caller's deadline, a client gone) after
    its first CopyObject takes back what it wrote, the source deleted or not."""
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    await chat(writer, "t", "my card number is 4111", "and my address")
    await writer.aflush()
    copier = memory_saver(bucket=bucket, table=table)
    reached, _ = pause_copies(copier, 2)
    copying = asyncio.ensure_future(copier.acopy_thread("t", "c"))
    await reached.wait()
    copying.cancel()
    with pytest.raises(asyncio.CancelledError):
        await copying
    for _ in range(100):  # the shielded removal goes on
        await asyncio.sleep(0)
    assert contents(bucket, "c") == []
    assert await ids(writer, "c") == []


async def test_a_copy_whose_target_was_deleted_and_begun_again_copies_it_all_again() -> None:
    """Between a round's copies and its commit the target is deleted (what the copy
    wrote goes with it) and a new conversation begins there: the next round sees a new
    life, copies everything again and commits tips whose objects are there (before:
    the commit named checkpoints whose objects the deletion had taken)."""
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    await chat(writer, "t", "source turn one", "source turn two")
    await chat(writer, "c", "the target's old life")
    await writer.aflush()
    copier, other = (memory_saver(bucket=bucket, table=table) for _ in range(2))
    real, calls = copier.manifest.upkeep.merge, [0]

    async def merge(thread: str, source: Any, target: Any) -> Any:
        calls[0] += 1
        if calls[0] == 1:
            await other.adelete_thread("c")
            await chat(other, "c", "a new conversation on c")
            await other.aflush()
        return await real(thread, source, target)

    copier.manifest.upkeep.merge = merge  # type: ignore[method-assign]
    report = await copier.acopy_thread("t", "c")
    assert report.threads == 1 and calls[0] >= 2
    reader = memory_saver(bucket=bucket, table=table)
    latest = (await reader.aget_tuple(cfg("t"))).checkpoint["id"]
    got = await reader.aget_tuple(cfg("c", checkpoint_id=latest))
    assert got is not None and len(got.checkpoint["channel_values"]["messages"]) == 4


async def test_a_rollback_that_empties_a_thread_leaves_nothing_under_it() -> None:
    """Run A, then run B, whose checkpoints refer to A's objects: rolling A back keeps
    those objects (moved aside); rolling B back then empties the thread, and what was
    kept for it goes with it."""
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    graph = chat_graph().compile(checkpointer=writer)
    runs = ["11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"]
    for run, text in zip(runs, ["first run", "second run"], strict=True):
        await graph.ainvoke({"messages": [HumanMessage(text)]}, cfg("t", run_id=run))
    await writer.aflush()
    await writer.adelete_for_runs([runs[0]])
    kept = contents(bucket, "t")
    assert any("/h/" in k for k in kept), kept  # the world this test needs: A's moved aside
    await writer.adelete_for_runs([runs[1]])
    assert await ids(writer, "t") == []
    assert contents(bucket, "t") == []
