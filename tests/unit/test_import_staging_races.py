"""An import's staging (``core.staging``) beside what can go wrong around it: a thread
of more namespaces than one transaction publishes (never seen in part, never left in
part), a copy still held when it is published, a thread that expired unswept, a
deletion at work when the import claims, a root removed and made again at the same
``rev``, a claim of the wrong shape, and a publishing call whose answer is lost."""

from __future__ import annotations

import asyncio
import contextvars
import io
from collections.abc import Awaitable
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.checkpoint.transfer import aexport_threads
from langgraph_s3.errors import CheckpointConflictError
from langgraph_s3.manifest.stage_items import STAGE_MARK, STAGE_SK
from langgraph_s3.testing.fakes import MemoryBucket, MemoryTable, memory_saver

pytestmark = pytest.mark.unit


class World:
    def __init__(self) -> None:
        self.now = [1_800_000_000.0]
        self.bucket = MemoryBucket(clock=lambda: self.now[0])
        self.table = MemoryTable(clock=lambda: self.now[0])

    def saver(self, **kw: Any) -> AsyncS3Saver:
        return memory_saver(bucket=self.bucket, table=self.table, **kw)

    def staged(self) -> list[tuple[str, str]]:
        return [k for k in self.table.items if STAGE_MARK in k[0]]


async def outside(coro: Awaitable[Any]) -> Any:
    """Run ``coro`` as another process would: not in the import's context."""

    async def run() -> Any:
        return await coro

    return await asyncio.get_running_loop().create_task(run(), context=contextvars.Context())


def cfg(thread: str = "t", ns: str = "") -> Any:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}


async def many_ns_export(namespaces: int, thread: str = "t") -> bytes:
    """A thread of a root checkpoint and one checkpoint in each of ``namespaces``
    subgraph namespaces, exported."""
    src = memory_saver()
    c = empty_checkpoint()
    c["id"] = str(uuid6())
    await src.aput(cfg(thread), c, {"source": "input", "step": 0}, {})
    for i in range(namespaces):
        c = empty_checkpoint()
        c["id"] = str(uuid6())
        await src.aput(cfg(thread, f"child:{i}"), c, {"step": 0}, {})
    out = io.BytesIO()
    await aexport_threads(src, [thread], out)
    return out.getvalue()


async def conversation(saver: AsyncS3Saver, thread: str = "t") -> None:
    c = empty_checkpoint()
    c["id"] = str(uuid6())
    await saver.aput(cfg(thread), c, {"source": "input", "step": 0}, {})


def after_transaction(saver: AsyncS3Saver, hook: Any) -> None:
    """Call ``await hook(n)`` after the n-th publishing TransactWriteItems of
    ``saver``'s manifest (one naming the import's claim)."""
    db = saver.manifest.db
    real = db.transact
    n = 0

    async def transact(writes: Any, *a: Any, **k: Any) -> Any:
        nonlocal n
        out = await real(writes, *a, **k)
        if any(getattr(w, "key", {}).get("sk", {}).get("S") == STAGE_SK for w in writes):
            n += 1
            await hook(n)
        return out

    db.transact = transact  # type: ignore[method-assign]


# 1. a thread of more than 49 namespaces is published in several transactions, its
#    subgraph namespaces first: between them, readers see a part of the import
async def test_a_thread_of_many_namespaces_is_never_seen_in_part() -> None:
    world = World()
    data = await many_ns_export(60)
    target, reader = world.saver(), world.saver()
    seen: list[Any] = []

    async def look(n: int) -> None:
        if n == 1:
            seen.append(
                (
                    [t.thread_id async for t in outside_iter(reader.alist_threads())],
                    await outside(reader.aget_tuple(cfg("t", "child:0"))),
                )
            )

    after_transaction(target, look)
    await target.aimport(io.BytesIO(data))
    threads, tup = seen[0]
    assert threads == [] and tup is None, (
        f"mid-publish a reader saw {threads}, {tup and tup.config}"
    )


def outside_iter(it: Any) -> Any:
    class It:
        def __aiter__(self) -> Any:
            return self

        async def __anext__(self) -> Any:
            return await outside(it.__anext__())

    return It()


# 2. the later transaction fails (a conversation begun on the root meanwhile): the
#    subgraph namespaces the first one published stay, mixed into the conversation
async def test_a_publishing_refused_midway_leaves_no_namespace_behind() -> None:
    world = World()
    data = await many_ns_export(60)
    target, other = world.saver(), world.saver()

    async def begin(n: int) -> None:
        if n == 1:
            await outside(conversation(other))

    after_transaction(target, begin)
    with pytest.raises(CheckpointConflictError):
        await target.aimport(io.BytesIO(data))
    names = sorted(e.checkpoint_ns for e in await other.manifest.reads.namespaces("t"))
    assert names == [""], f"the conversation's thread has {len(names)} namespaces: {names[:4]}..."


# 3. a subgraph checkpoint's held copy whose S3 PUT failed stays in its item ("a
#    checkpoint whose PUT failed stays held": aflush); publish measures each item with
#    orjson, which cannot encode the copy's bytes: the import fails with a TypeError
async def test_a_copy_still_held_is_published_with_its_item() -> None:
    from langgraph_s3.errors import ServiceError

    world = World()
    data = await many_ns_export(2)
    target = world.saver()
    store = target._ctx.objects
    real_put = store.put

    failed: list[str] = []

    async def put(key: str, body: bytes, *a: Any, **k: Any) -> Any:
        # one object's PUT fails three times (throttling): drain tries it twice more
        if "child" in key and "/c/" in key and failed.count(key) < 3 and key in (failed or [key]):
            failed.append(key)
            raise ServiceError(f"SlowDown on {key}", code="SlowDown", status=503)
        return await real_put(key, body, *a, **k)

    store.put = put  # type: ignore[method-assign]
    await target.aimport(io.BytesIO(data))  # every checkpoint is durable: held by its item
    assert len(await world.saver().manifest.reads.namespaces("t")) == 3


# 2b. the importer is killed (cancelled: a Lambda's timeout, a SIGTERM) between its
#     publishing transactions: the subgraph namespaces of the first are a thread every
#     reader sees, until the lease ran out and a sweep found the stage (a day, where
#     only the stream sweeper runs)
async def test_an_import_killed_between_its_transactions_is_never_seen() -> None:
    world = World()
    data = await many_ns_export(60)
    target, reader = world.saver(), world.saver()
    db = target.manifest.db
    real = db.transact
    n = 0

    async def transact(writes: Any, *a: Any, **k: Any) -> Any:
        nonlocal n
        if any(getattr(w, "key", {}).get("sk", {}).get("S") == STAGE_SK for w in writes):
            n += 1
            if n == 2:
                raise asyncio.CancelledError  # killed here
        return await real(writes, *a, **k)

    db.transact = transact  # type: ignore[method-assign]
    with pytest.raises(asyncio.CancelledError):
        await target.aimport(io.BytesIO(data))
    threads = [t async for t in reader.alist_threads()]
    assert threads == [], (
        f"a killed import left {[(t.thread_id, len(t.namespaces)) for t in threads]}"
    )


# 4. thread TTL: a thread that expired (DynamoDB has not removed its items yet, no sweep
#    ran) reads as absent, yet an import of the id is refused as "changed while it was
#    imported": publish takes the expired subgraph items for a conversation
async def test_an_import_over_an_expired_unswept_thread_sweeps_it_first() -> None:
    world = World()
    data = await many_ns_export(2)
    old = world.saver(thread_ttl_days=1)
    for ns in ("", "child:0"):
        c = empty_checkpoint()
        c["id"] = str(uuid6())
        await old.aput(cfg("t", ns), c, {"step": 0}, {})
    world.now[0] += 2 * 86400  # expired
    target = world.saver(thread_ttl_days=1)
    assert await target.aget_tuple(cfg()) is None  # absent to every reader
    await target.aimport(io.BytesIO(data))
    assert len(await target.manifest.reads.namespaces("t")) == 3


# 6. one claim item of the wrong shape (a hand edit): the sweep's scan skips it with a
#    warning, but late_pass reads it through staged_claim -> claim_of, whose KeyError
#    (no S3PersistenceError) ends the whole asweep_ttl, every time, for every thread
async def test_a_claim_of_the_wrong_shape_does_not_stop_the_sweep() -> None:
    world = World()
    saver = world.saver()
    await conversation(saver, "u")
    await saver.adelete_thread("u")
    world.now[0] += 86400  # the late pass of u is due
    pk = f"{saver.manifest.deployment}{STAGE_MARK}u"
    world.table.items[(pk, STAGE_SK)] = {
        "pk": {"S": pk},
        "sk": {"S": STAGE_SK},
        "thread_id": {"S": "u"},
        "stage_token": {"S": "abc"},
        "stage_until": {"S": "soon"},  # not a number, and no stage_upto
    }
    await saver.asweep_ttl()  # the claim is taken as run out, with a warning
    assert [x async for page in saver.manifest.reads.expired() for x in page if x.late] == []


# 7. rev ABA: the claim records the expired root's rev (1: a thread of one checkpoint);
#    DynamoDB's TTL removes that root mid-import and the stream sweeper's sweep_removed
#    tombstones the id anew (rev 1 again), lists the thread (the import's objects with
#    it) and removes it; publish's condition rev == 1 holds, and the import is published
#    over objects that are gone, aimport returning success
async def test_a_root_made_again_at_the_same_rev_is_not_the_claimed_one() -> None:
    from test_import_staging import CFG, chat_export, hooked

    from langgraph_s3.testing.graphs import CHAT_TURNS, ahistory, chat_graph

    world = World()
    data, expected = await chat_export(*CHAT_TURNS[:3])
    old = world.saver(thread_ttl_days=1)
    await conversation(old)  # one checkpoint: its root at rev 1
    world.now[0] += 2 * 86400  # expired, not removed yet
    target, sweeper = world.saver(thread_ttl_days=1), world.saver(thread_ttl_days=1)

    async def ttl_removal(n: int) -> None:
        if n == 4:
            root = next(k for k in world.table.items if k[1] == "~" and STAGE_MARK not in k[0])
            expired_at = float(world.table.items.pop(root)["expires_at"]["N"])
            await outside(sweeper.maintenance().sweep_removed("t", expired_at))

    hooked(target, ttl_removal)
    with pytest.raises(CheckpointConflictError, match="changed while it was imported"):
        await target.aimport(io.BytesIO(data))  # the root it claimed was removed
    reader = world.saver(thread_ttl_days=1)
    assert await reader.aget_tuple(CFG) is None and world.staged() == []
    await reader.aimport(io.BytesIO(data))  # again: whole
    graph = chat_graph().compile(checkpointer=reader)
    assert await ahistory(graph, CFG) == expected


# 8. a publishing call that raised is taken for applied when the claim is gone, the
#    stage is empty and the thread has namespaces: true as well when the import was
#    paused past its hold, dropped as dead, and another import (or a conversation) took
#    the id; aimport then returns success for a file of which nothing was published
async def test_a_failed_publishing_is_success_only_for_its_own_life() -> None:
    from test_import_staging import CFG, chat_export

    from langgraph_s3.core.staging import STAGE_LEASE_SECONDS
    from langgraph_s3.errors import ServiceError
    from langgraph_s3.testing.graphs import CHAT_TURNS, ahistory, chat_graph

    world = World()
    mine, expected = await chat_export(*CHAT_TURNS[:3])
    theirs, _ = await chat_export("another conversation")
    paused, other = world.saver(), world.saver()

    async def publish(thread: str, token: str) -> Any:
        world.now[0] += STAGE_LEASE_SECONDS + 1  # frozen before publishing, past its hold
        await outside(other.aimport(io.BytesIO(theirs)))  # drops it as dead, imports
        raise ServiceError("request timed out", code="RequestTimeout", status=500)

    paused.manifest.staging.publish = publish  # type: ignore[method-assign]
    with pytest.raises(ServiceError):  # not taken for applied: the thread is theirs
        await paused.aimport(io.BytesIO(mine))
    graph = chat_graph().compile(checkpointer=world.saver())
    assert await ahistory(graph, CFG) != expected
    assert len(await ahistory(graph, CFG)) > 0  # theirs, whole


async def test_an_import_waits_for_a_deletion_at_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """A deletion of the id that begins after the import looked for one, before its
    claim: the claim waits for the deletion's lease, so the deletion never lists (and
    removes) what the import writes."""
    from test_import_staging import CFG, chat_export

    from langgraph_s3.checkpoint.transfer import staged
    from langgraph_s3.testing.graphs import CHAT_TURNS, ahistory, chat_graph

    monkeypatch.setattr(staged, "WAIT_POLL", 0.01)
    world = World()
    data, expected = await chat_export(*CHAT_TURNS[:2])
    target, deleter = world.saver(), world.saver()
    real_stage = target.manifest.staging.stage
    held: list[Any] = []

    async def stage(thread: str, claim: Any, *, renew: bool = False) -> Any:
        if not renew and not held:  # a deletion of the id begins just before the claim
            held.append(await outside(deleter.manifest.deletions.tombstone("t")))
        return await real_stage(thread, claim, renew=renew)

    target.manifest.staging.stage = stage  # type: ignore[method-assign]
    task = asyncio.get_running_loop().create_task(target.aimport(io.BytesIO(data)))
    await asyncio.sleep(0.05)
    assert not task.done() and world.staged() == []  # waiting: nothing written yet
    await deleter.manifest.deletions.release(held[0].keys, held[0].stamp)
    await task
    graph = chat_graph().compile(checkpointer=world.saver())
    assert await ahistory(graph, CFG) == expected
