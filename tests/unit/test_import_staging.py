"""An import writes each thread aside and publishes it whole (``core.staging``): no
reader ever sees a part of it; it never publishes over a thread that changed since
it began; an import paused past its hold is dropped and never mixes into another;
two imports of one thread do not run at once; a deletion's late pass waits for an
import in progress."""

from __future__ import annotations

import asyncio
import contextvars
import io
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from langgraph.types import Command

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.checkpoint.transfer import aexport_threads, staged
from langgraph_s3.core.records import Late
from langgraph_s3.core.staging import STAGE_LEASE_SECONDS, Claim
from langgraph_s3.errors import CheckpointConflictError, ConflictError
from langgraph_s3.manifest.stage_items import (
    STAGE_MARK,
)
from langgraph_s3.testing.fakes import MemoryBucket, MemoryTable, memory_saver
from langgraph_s3.testing.graphs import CHAT_TURNS, ahistory, chat_graph, nested_graph

pytestmark = pytest.mark.unit

CFG: Any = {"configurable": {"thread_id": "t"}}
Hook = Callable[[int], Awaitable[None]]


class World:
    """One bucket and table on a clock the test moves; savers on them."""

    def __init__(self) -> None:
        self.now = [1_800_000_000.0]
        self.bucket = MemoryBucket(clock=lambda: self.now[0])
        self.table = MemoryTable(clock=lambda: self.now[0])

    def saver(self) -> AsyncS3Saver:
        return memory_saver(bucket=self.bucket, table=self.table)

    def staged(self) -> list[tuple[str, str]]:
        return [k for k in self.table.items if STAGE_MARK in k[0]]


async def nested_export(first: str = "yes") -> tuple[bytes, list[Any]]:
    """A thread of three namespaces (a nested graph resumed once), exported."""
    source = memory_saver()
    graph = nested_graph().compile(checkpointer=source)
    await graph.ainvoke({"trail": []}, CFG)
    await graph.ainvoke(Command(resume=first), CFG)
    out = io.BytesIO()
    await aexport_threads(source, ["t"], out)
    return out.getvalue(), await ahistory(graph, CFG)


async def chat_export(*turns: str) -> tuple[bytes, list[Any]]:
    source = memory_saver()
    graph = chat_graph().compile(checkpointer=source)
    for turn in turns:
        await graph.ainvoke({"messages": [("user", turn)]}, CFG)
    out = io.BytesIO()
    await aexport_threads(source, ["t"], out)
    return out.getvalue(), await ahistory(graph, CFG)


def hooked(saver: AsyncS3Saver, hook: Hook) -> None:
    """Call ``hook(n)`` before the import's n-th write (put or put_writes)."""
    calls = 0
    put, put_writes = saver.aput, saver.aput_writes

    async def counted(real: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        nonlocal calls
        calls += 1
        await hook(calls)
        return await real(*args)

    saver.aput = lambda *a: counted(put, *a)  # type: ignore[method-assign]
    saver.aput_writes = lambda *a: counted(put_writes, *a)  # type: ignore[method-assign]


async def outside(coro: Awaitable[Any]) -> Any:
    """Run ``coro`` as another process would: not in the import's context."""
    return await asyncio.get_running_loop().create_task(_run(coro), context=contextvars.Context())


async def _run(coro: Awaitable[Any]) -> Any:
    return await coro


async def seen(saver: AsyncS3Saver, graph: Any) -> tuple[Any, ...]:
    """What a reader sees of thread t, every way it can look."""
    return (
        await saver.aget_tuple(CFG),
        [c.config async for c in saver.alist(CFG)],
        [c.config async for c in saver.alist(None)],
        [t.thread_id async for t in saver.alist_threads()],
        await ahistory(graph, CFG),
    )


@pytest.mark.parametrize("replace", [False, True])
async def test_no_reader_sees_a_part_of_an_import(replace: bool) -> None:
    world = World()
    data, source = await nested_export()
    target, reader = world.saver(), world.saver()
    graph = nested_graph().compile(checkpointer=reader)
    if replace:  # an older conversation on the id
        old = chat_graph().compile(checkpointer=target)
        await old.ainvoke({"messages": [("user", "an older conversation")]}, CFG)
    absent = (None, [], [], [], [])
    looks: list[bool] = []

    async def look(n: int) -> None:
        looks.append(await outside(seen(reader, graph)) == absent)

    hooked(target, look)
    await target.aimport(io.BytesIO(data), replace=replace)
    assert len(looks) > 10 and all(looks)  # before each write: nothing of it
    assert await ahistory(graph, CFG) == source  # then all of it
    assert len(await reader.manifest.reads.namespaces("t")) == 3
    assert world.staged() == []


async def test_an_import_never_publishes_over_a_conversation_begun_meanwhile() -> None:
    world = World()
    data, _ = await chat_export(*CHAT_TURNS[:3])
    target, other = world.saver(), world.saver()
    mine = chat_graph().compile(checkpointer=other)

    async def begin(n: int) -> None:
        if n == 3:
            await outside(mine.ainvoke({"messages": [("user", "hello, a new chat")]}, CFG))

    hooked(target, begin)
    with pytest.raises(CheckpointConflictError, match="changed while it was imported") as info:
        await target.aimport(io.BytesIO(data))
    assert "nothing of thread 't' was published" in " ".join(info.value.__notes__)
    ref_bucket = MemoryBucket()
    ref = memory_saver(bucket=ref_bucket)
    await (
        chat_graph()
        .compile(checkpointer=ref)
        .ainvoke({"messages": [("user", "hello, a new chat")]}, CFG)
    )
    expected = await ahistory(chat_graph().compile(checkpointer=ref), CFG)
    assert await ahistory(mine, CFG) == expected  # the new conversation, untouched
    assert world.staged() == []
    # the import's writes went with its late pass; its checkpoints are out of the history
    writes = [k for k in world.bucket.objects if "/w/" in k]
    assert len(writes) == len([k for k in ref_bucket.objects if "/w/" in k])


async def test_an_import_paused_past_its_hold_is_dropped_and_never_mixed_into_another() -> None:
    world = World()
    first, _ = await chat_export(*CHAT_TURNS[:3])
    second, expected = await chat_export("another conversation", "and its second turn")
    paused, other = world.saver(), world.saver()

    async def pause(n: int) -> None:
        if n == 3:  # frozen mid-import, past its hold: another import takes the thread
            world.now[0] += STAGE_LEASE_SECONDS + 1
            await outside(other.aimport(io.BytesIO(second)))

    hooked(paused, pause)
    with pytest.raises(ConflictError) as info:  # its hold is gone, or its life changed
        await paused.aimport(io.BytesIO(first))
    assert "nothing of thread 't' was published" in " ".join(info.value.__notes__)
    graph = chat_graph().compile(checkpointer=world.saver())
    assert await ahistory(graph, CFG) == expected  # the other import, whole and alone
    assert world.staged() == []  # what the paused one wrote after it thawed: dropped


async def test_an_import_waits_for_a_claim_left_unrenewed_and_not_for_one_at_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(staged, "WAIT_POLL", 0.01)
    world = World()
    data, expected = await chat_export(*CHAT_TURNS[:3])
    first, second = world.saver(), world.saver()
    waiting: list[asyncio.Task[Any]] = []

    async def race(n: int) -> None:
        if n == 2:  # a second import of the thread begins, and waits on the claim
            task = asyncio.get_running_loop().create_task(
                _run(second.aimport(io.BytesIO(data))), context=contextvars.Context()
            )
            waiting.append(task)
            await asyncio.sleep(0.05)
            assert not task.done()
        if n >= 3:  # a minute a write: the first renews its hold
            world.now[0] += 61
            await asyncio.sleep(0.05)

    hooked(first, race)
    await first.aimport(io.BytesIO(data))
    with pytest.raises(ConflictError, match="being imported by another process"):
        await waiting[0]
    assert await ahistory(chat_graph().compile(checkpointer=second), CFG) == expected

    # a claim its import left (it failed and could not clean up) is waited out
    world = World()
    late = world.saver()
    assert (
        await late.manifest.staging.stage("t", Claim("gone", int(world.now[0]) + 30, "~")) is None
    )
    again = asyncio.get_running_loop().create_task(late.aimport(io.BytesIO(data)))
    await asyncio.sleep(0.05)
    assert not again.done()  # waiting, the thread untouched
    world.now[0] += 31
    await again
    assert await ahistory(chat_graph().compile(checkpointer=late), CFG) == expected
    assert world.staged() == []


async def test_a_late_pass_waits_for_an_import_in_progress() -> None:
    world = World()
    data, expected = await chat_export(*CHAT_TURNS[:3])
    target, sweeper = world.saver(), world.saver()
    reports: list[Any] = []

    async def late(n: int) -> None:
        if n == 4:  # a deletion's late pass falls due while the import writes
            maintenance = sweeper.maintenance()
            report = await outside(maintenance.late_pass("t", Late(int(world.now[0]), "~")))
            reports.append(report)

    hooked(target, late)
    await target.aimport(io.BytesIO(data))
    assert [r.skipped for r in reports] == [1]  # deferred: nothing of the import went
    assert await ahistory(chat_graph().compile(checkpointer=sweeper), CFG) == expected
    world.now[0] += 301  # deferred 5 minutes: then it runs, and takes nothing it holds
    await sweeper.asweep_ttl()
    assert await ahistory(chat_graph().compile(checkpointer=sweeper), CFG) == expected
