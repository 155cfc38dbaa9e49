"""A root committed late (older than the manifest's floor) joins the thread only when
two first writers of a new thread raced (tests/test_concurrency.py). Across a deletion,
a copy onto a deleted thread or a delete_for_runs of its own run, it is refused, and
so is the old life's run that holds a deleted checkpoint: none of them may bring the
floor down over removed objects (on the in-memory fakes, which share the manifest's
rules, and one on moto)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata

from helpers import cfg, until_stored
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.errors import CheckpointConflictError
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.fakes import MemoryBucket, MemoryTable, memory_saver

pytestmark = pytest.mark.unit


def ck(cid: str, values: dict[str, Any], versions: dict[str, Any]) -> Any:
    cp = generate_checkpoint(channel_values=values, channel_versions=versions)
    cp["id"] = cid
    return cp


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


def gated(saver: Any) -> tuple[asyncio.Event, asyncio.Event]:
    """Pause saver's first manifest.commits.advance (objects already stored) until released."""
    stored, release = asyncio.Event(), asyncio.Event()
    real = saver.manifest.commits.advance
    first = [True]

    async def advance(*a: Any, **k: Any) -> str | None:
        if first[0]:
            first[0] = False
            await until_stored(saver, a)  # the object lands; its manifest update stalls
            stored.set()
            await release.wait()
        return await real(*a, **k)  # type: ignore[no-any-return]

    saver.manifest.commits.advance = advance  # the instance the saver's context shares
    return stored, release


async def root(saver: Any, thread: str, cid: str, run: str = "") -> Any:
    """A new conversation's first checkpoint ``cid`` (run ``run``)."""
    versions = {"x": f"1.{cid}"}
    meta = generate_metadata(step=-1, run_id=run)
    return await saver.aput(cfg(thread), ck(cid, {"x": cid}, versions), meta, versions)


async def stalled_root(saver: Any, thread: str, cid: str) -> tuple[Any, asyncio.Event]:
    """``saver`` stores root ``cid``'s objects and stalls before its manifest commit;
    returns the put's task and the event that lets it go on."""
    stored, release = gated(saver)
    task = asyncio.create_task(root(saver, thread, cid, "run-a"))
    await stored.wait()
    return task, release


async def test_delete_for_runs_of_the_late_root_run_then_it_commits() -> None:
    """delete_for_runs of an in-flight root's run deletes the root's objects (below the
    floor, so not in 'gone'): the floor may not come down to it any more."""
    clock = Clock()
    bucket, table = MemoryBucket(clock=clock), MemoryTable(clock=clock)
    a, b = (memory_saver(bucket=bucket, table=table) for _ in range(2))
    r0, r2, c2 = (str(uuid6()) for _ in range(3))
    late, release = await stalled_root(a, "t", r0)
    clock.t += 10
    conf = await root(b, "t", r2, "run-b")
    await b.aput(conf, ck(c2, {"x": "B2"}, {"x": "2.c2"}), generate_metadata(step=0), {"x": "2.c2"})
    await b.adelete_for_runs(["run-a"])  # removes r0's checkpoint and blob
    release.set()
    with pytest.raises(CheckpointConflictError, match="older than the thread's history"):
        await late


@pytest.mark.parametrize("backend", ["memory", "moto"])
async def test_delete_thread_then_new_life_then_late_root_is_refused(
    backend: str, s3_fresh: MotoServer
) -> None:
    """A root stored before delete_thread (which deletes its objects) commits after a
    new life began: it belongs to the deleted life and is refused; the new life is
    all a reader sees."""
    async with contextlib.AsyncExitStack() as stack:
        if backend == "memory":
            bucket, table = MemoryBucket(), MemoryTable()
            a, b = (memory_saver(bucket=bucket, table=table) for _ in range(2))
        else:
            names = unique_names()
            a, b = [
                await stack.enter_async_context(AsyncS3Saver(endpoint_url=s3_fresh.url, **names))
                for _ in range(2)
            ]
            await a.setup()
        r0, r2 = (str(uuid6()) for _ in range(2))
        late, release = await stalled_root(a, "t", r0)
        await b.adelete_thread("t")  # tombstone, list (r0's objects too), delete, release
        await root(b, "t", r2, "run-b")
        release.set()
        with pytest.raises(CheckpointConflictError, match="older than the thread's history"):
            await late
        latest = await b.aget_tuple(cfg("t"))
        assert latest is not None and latest.checkpoint["id"] == r2
        assert [t.checkpoint["id"] async for t in b.alist(cfg("t"))] == [r2]


async def deleted_life(saver: Any, thread: str) -> str:
    """A conversation of two checkpoints (run "old"), then deleted; returns its latest."""
    first, latest = (str(uuid6()) for _ in range(2))
    conf = await root(saver, thread, first, "old")
    await saver.aput(
        conf, ck(latest, {"x": "p"}, {"x": "2.p"}), generate_metadata(step=0), {"x": "2.p"}
    )
    await saver.adelete_thread(thread)  # the user deleted the conversation
    return latest


async def old_writers_are_refused(thread: str, late: str, held: str, *savers: Any) -> None:
    """The deleted life's stalled first writer commits its root ``late`` now, and its run
    still holding ``held`` writes its next step: both are refused."""
    stalled, old_run = savers
    with pytest.raises(CheckpointConflictError, match="older than the thread's history"):
        await root(stalled, thread, late, "stalled")
    nxt = str(uuid6())
    with pytest.raises(CheckpointConflictError):
        await old_run.aput(
            cfg(thread, held),
            ck(nxt, {"x": "p", "y": 1}, {"x": "2.p", "y": "1.q"}),
            generate_metadata(step=1),
            {"y": "1.q"},
        )


async def test_old_life_run_continues_into_new_life_after_floor_lowered() -> None:
    """A deleted life's stalled first writer (its root made before the deletion) and
    its run holding a deleted checkpoint: after a new life began, both are refused."""
    bucket, table = MemoryBucket(), MemoryTable()
    a, b, c, d = (memory_saver(bucket=bucket, table=table) for _ in range(4))
    r0 = str(uuid6())
    held = await deleted_life(b, "t")
    await root(c, "t", str(uuid6()), "new")
    await old_writers_are_refused("t", r0, held, a, d)


async def test_copy_onto_a_deleted_thread_then_old_life_continues() -> None:
    """copy_thread onto a deleted target: the copy's floor may not come down either."""
    bucket, table = MemoryBucket(), MemoryTable()
    a, b, d = (memory_saver(bucket=bucket, table=table) for _ in range(3))
    r0 = str(uuid6())
    held = await deleted_life(b, "dst")
    await root(b, "src", str(uuid6()), "src")
    await b.acopy_thread("src", "dst")
    await old_writers_are_refused("dst", r0, held, a, d)
