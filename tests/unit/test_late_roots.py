"""A root committed late (older than the manifest's floor) joins the thread only when
two first writers of a new thread raced (tests/test_concurrency.py). Across a deletion,
a copy onto a deleted thread or a delete_for_runs of its own run, it is refused, and
so is the old life's run that holds a deleted checkpoint: none of them may bring the
floor down over removed objects (the review's cases; on the in-memory fakes, which
share the manifest's rules, and one on moto)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata

from helpers import cfg
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.errors import CheckpointConflictError
from langgraph_s3.memory import MemoryBucket, MemoryTable, memory_saver
from langgraph_s3.testing import MotoServer, unique_names

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
    """Pause saver's first manifest.advance (objects already stored) until released."""
    stored, release = asyncio.Event(), asyncio.Event()
    real = saver.manifest.advance
    first = [True]

    async def advance(*a: Any, **k: Any) -> None:
        if first[0]:
            first[0] = False
            stored.set()
            await release.wait()
        await real(*a, **k)

    saver.manifest.advance = advance  # the instance the saver's context shares
    return stored, release


async def test_delete_for_runs_of_the_late_root_run_then_it_commits() -> None:
    """delete_for_runs of an in-flight root's run deletes the root's objects (below the
    floor, so not in 'gone'): the floor may not come down to it any more."""
    clock = Clock()
    bucket, table = MemoryBucket(clock=clock), MemoryTable(clock=clock)
    a = memory_saver(bucket=bucket, table=table)
    b = memory_saver(bucket=bucket, table=table)
    r0, r2, c2 = (str(uuid6()) for _ in range(3))
    stored, release = gated(a)
    w3 = asyncio.create_task(
        a.aput(
            cfg("t"),
            ck(r0, {"x": "x-of-r0"}, {"x": "1.r0"}),
            generate_metadata(step=-1, run_id="run-a"),
            {"x": "1.r0"},
        )
    )
    await stored.wait()
    clock.t += 10
    c = await b.aput(
        cfg("t"),
        ck(r2, {"x": "B"}, {"x": "1.r2"}),
        generate_metadata(step=-1, run_id="run-b"),
        {"x": "1.r2"},
    )
    await b.aput(
        c,
        ck(c2, {"x": "B2"}, {"x": "2.c2"}),
        generate_metadata(step=0, run_id="run-b"),
        {"x": "2.c2"},
    )
    await b.adelete_for_runs(["run-a"])  # removes r0's checkpoint and blob
    release.set()
    with pytest.raises(CheckpointConflictError, match="older than the thread's history"):
        await w3


async def test_delete_thread_then_new_life_then_late_root_is_corrupt() -> None:
    """A root stored before delete_thread (which deletes its objects) commits after a
    new life began: it belongs to the deleted life and is refused."""
    clock = Clock()
    bucket, table = MemoryBucket(clock=clock), MemoryTable(clock=clock)
    a = memory_saver(bucket=bucket, table=table)
    b = memory_saver(bucket=bucket, table=table)
    r0, r2 = (str(uuid6()) for _ in range(2))
    stored, release = gated(a)
    w3 = asyncio.create_task(
        a.aput(
            cfg("t"),
            ck(r0, {"x": "x-of-r0"}, {"x": "1.r0"}),
            generate_metadata(step=-1, run_id="run-a"),
            {"x": "1.r0"},
        )
    )
    await stored.wait()
    await b.adelete_thread("t")  # tombstone, list (r0's objects too), delete, release
    await b.aput(
        cfg("t"),
        ck(r2, {"x": "B"}, {"x": "1.r2"}),
        generate_metadata(step=-1, run_id="run-b"),
        {"x": "1.r2"},
    )
    release.set()
    with pytest.raises(CheckpointConflictError, match="older than the thread's history"):
        await w3


async def test_moto_delete_thread_then_new_life_then_late_root(s3_fresh: MotoServer) -> None:
    """The same race on moto (the real manifest)."""
    names = unique_names()
    async with (
        AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as a,
        AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as b,
    ):
        await a.setup()
        r0, r2 = (str(uuid6()) for _ in range(2))
        stored, release = gated(a)
        w3 = asyncio.create_task(
            a.aput(
                cfg("t"),
                ck(r0, {"x": "x-of-r0"}, {"x": "1.r0"}),
                generate_metadata(step=-1, run_id="run-a"),
                {"x": "1.r0"},
            )
        )
        await stored.wait()
        await b.adelete_thread("t")
        await b.aput(
            cfg("t"),
            ck(r2, {"x": "B"}, {"x": "1.r2"}),
            generate_metadata(step=-1, run_id="run-b"),
            {"x": "1.r2"},
        )
        release.set()
        with pytest.raises(CheckpointConflictError, match="older than the thread's history"):
            await w3
        latest = await b.aget_tuple(cfg("t"))
        assert latest is not None and latest.checkpoint["id"] == r2
        assert [t.checkpoint["id"] async for t in b.alist(cfg("t"))] == [r2]


async def test_old_life_run_continues_into_new_life_after_floor_lowered() -> None:
    """A deleted life's run continues into the new life once a late root (a first
    writer of the deleted life that stalled before its put) lowered the floor below
    the deleted checkpoint it holds. No gating needed: plain sequential calls."""
    bucket, table = MemoryBucket(), MemoryTable()
    a, b, c, d = (memory_saver(bucket=bucket, table=table) for _ in range(4))
    A, R0, P, Q, R2 = (str(uuid6()) for _ in range(5))
    ca = await b.aput(
        cfg("t"),
        ck(A, {"x": "a"}, {"x": "1.a"}),
        generate_metadata(step=-1, run_id="old"),
        {"x": "1.a"},
    )
    await b.aput(
        ca, ck(P, {"x": "p"}, {"x": "2.p"}), generate_metadata(step=0, run_id="old"), {"x": "2.p"}
    )
    await b.adelete_thread("t")  # the user deleted the conversation
    await c.aput(
        cfg("t"),
        ck(R2, {"x": "new"}, {"x": "1.r2"}),
        generate_metadata(step=-1, run_id="new"),
        {"x": "1.r2"},
    )
    # the stalled first writer of the OLD life commits its root now
    with pytest.raises(CheckpointConflictError, match="older than the thread's history"):
        await a.aput(
            cfg("t"),
            ck(R0, {"x": "r0"}, {"x": "1.r0"}),
            generate_metadata(step=-1, run_id="stalled"),
            {"x": "1.r0"},
        )
    # the old life's run, still holding P, writes its next step: must be refused
    with pytest.raises(CheckpointConflictError):
        await d.aput(
            cfg("t", P),
            ck(Q, {"x": "p", "y": 1}, {"x": "2.p", "y": "1.q"}),
            generate_metadata(step=1, run_id="old"),
            {"y": "1.q"},
        )


async def test_copy_onto_a_deleted_thread_then_old_life_continues() -> None:
    """copy_thread onto a deleted target gives it the source's 'born' (merge, target
    not live): the same resurrection as above, through acopy_thread."""
    bucket, table = MemoryBucket(), MemoryTable()
    a, b, d = (memory_saver(bucket=bucket, table=table) for _ in range(3))
    A, R0, P, S, Q = (str(uuid6()) for _ in range(5))
    ca = await b.aput(
        cfg("dst"),
        ck(A, {"x": "a"}, {"x": "1.a"}),
        generate_metadata(step=-1, run_id="old"),
        {"x": "1.a"},
    )
    await b.aput(
        ca, ck(P, {"x": "p"}, {"x": "2.p"}), generate_metadata(step=0, run_id="old"), {"x": "2.p"}
    )
    await b.adelete_thread("dst")
    await b.aput(
        cfg("src"),
        ck(S, {"x": "s"}, {"x": "1.s"}),
        generate_metadata(step=-1, run_id="src"),
        {"x": "1.s"},
    )
    await b.acopy_thread("src", "dst")
    with pytest.raises(CheckpointConflictError, match="older than the thread's history"):
        await a.aput(
            cfg("dst"),
            ck(R0, {"x": "r0"}, {"x": "1.r0"}),
            generate_metadata(step=-1, run_id="stalled"),
            {"x": "1.r0"},
        )
    with pytest.raises(CheckpointConflictError):
        await d.aput(
            cfg("dst", P),
            ck(Q, {"x": "p", "y": 1}, {"x": "2.p", "y": "1.q"}),
            generate_metadata(step=1, run_id="old"),
            {"y": "1.q"},
        )
