"""Crash sweep of one archiver shard (``arun_shard``: the TTL sweep, then packing
every idle thread): its process is killed before every request, and after every one
that writes (``killing.Killer``: nothing it would do after that point reaches moto).

The shard holds an expired thread (the sweep deletes it) and a live one (a turn that
calls a tool). After
each kill a fresh process must read every live thread exactly as before the run, and
the expired one as absent; the shard run again must complete and the live thread
read as before (nothing lost: ``lost``), and leave it in exactly one pack with no
loose object and nothing of the expired thread (no stray state: ``stray``); a third
run finds nothing to do, and deleting the live thread leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from typing import Any

import pytest

from helpers import cfg, clocked, dump, left_of, thread_items
from killing import LANES, SESSION, Killer, crash_points, in_lanes, once_per_run, sweep_endpoint
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.archiver import arun_shard
from langgraph_s3.core.keys import encode
from langgraph_s3.core.records import DELETE_LEASE_SECONDS
from langgraph_s3.core.shards import Shard
from langgraph_s3.testing import unique_names
from langgraph_s3.testing.graphs import CHAT_TURNS, chat_graph

pytestmark = pytest.mark.sweep

LIVE = ("chat",)
EXPIRED = "gone"
SHARD = Shard(0, 1)
TTL = {"thread_ttl_days": 30}


async def build(saver: AsyncS3Saver) -> None:
    graph = chat_graph().compile(checkpointer=saver)
    for thread, text in (("chat", CHAT_TURNS[1]), (EXPIRED, CHAT_TURNS[0])):
        await graph.ainvoke({"messages": [("user", text)]}, cfg(thread))
    ddb = await saver.clients.client("dynamodb")  # the expired thread's TTL lies in the past
    await ddb.update_item(
        TableName=saver.target.table,
        Key={"pk": {"S": saver.manifest.deployment + encode(EXPIRED)}, "sk": {"S": encode("")}},
        UpdateExpression="SET expires_at = :t",
        ExpressionAttributeValues={":t": {"N": "1000"}},
    )


async def left(saver: AsyncS3Saver, thread: str) -> tuple[int, int]:
    """Loose objects (erasure markers aside) and packs of a thread."""
    raw = await left_of(saver, thread)
    packs = await saver.raw_objects.list_all(saver.layout.packs(thread))
    return len(raw), len(packs)


async def items(saver: AsyncS3Saver, thread: str) -> list[dict[str, Any]]:
    return await thread_items(saver, thread)


class ShardSweep:
    def __init__(self, moto: str) -> None:
        self.moto = moto
        self.table = unique_names()["table"]
        self.outcomes: Counter[str] = Counter()
        self.failures: list[str] = []
        """What a reader saw wrongly (a checkpoint lost or changed, an expired one read)."""
        self.stray: list[str] = []
        """What the runs left that no reader serves (objects, packs)."""
        self.requests: list[str] = []
        self.points = 0
        self.seconds = 0.0

    def saver(self, names: dict[str, str]) -> AsyncS3Saver:
        return AsyncS3Saver(endpoint_url=self.moto, session=SESSION, **names, **TTL)

    async def deployment(self) -> tuple[dict[str, str], dict[str, Any]]:
        names = {"bucket": unique_names()["bucket"], "table": self.table}
        async with self.saver(names) as direct:
            await direct.setup()
            await build(direct)
            before = {t: await dump(direct, t) for t in LIVE}
        assert all(before.values())
        return names, before

    async def attempt(
        self, killer: Killer, names: dict[str, str], k: int, after: bool
    ) -> BaseException | None:
        async def act(saver: AsyncS3Saver) -> None:
            await arun_shard(saver, SHARD, pack_after_days=0)

        return await killer.run(k, after, act, **names, **TTL)

    async def crash_point(self, killer: Killer, k: int, after: bool) -> None:
        where = f"{'after' if after else 'before'} {k} ({self.requests[k - 1]})"
        names, before = await self.deployment()
        error = await self.attempt(killer, names, k, after)
        self.outcomes["killed" if error is not None else "completed"] += 1
        async with self.saver(names) as fresh:
            # the next scheduled run, once the killed one's marks and leases ran out
            clocked(fresh).now += DELETE_LEASE_SECONDS + 1
            for problem in await self.check(fresh, before):
                self.failures.append(f"{where}, after the kill: {problem}")
            await arun_shard(fresh, SHARD, pack_after_days=0)
            for problem in await self.check(fresh, before):
                self.failures.append(f"{where}, run again: {problem}")
            for problem in await self.leftovers(fresh):
                self.stray.append(f"{where}, run again: {problem}")
            third = await arun_shard(fresh, SHARD, pack_after_days=0)
            if third.swept.threads or third.packed.threads:
                self.failures.append(f"{where}: a third run did more: {third}")
            for t in LIVE:
                await fresh.adelete_thread(t)
                if await left(fresh, t) != (0, 0) or await fresh.aget_tuple(cfg(t)):
                    self.failures.append(f"{where}: {t} left after its deletion")

    async def check(self, saver: AsyncS3Saver, before: dict[str, Any]) -> list[str]:
        problems = []
        for t in LIVE:
            if await dump(saver, t) != before[t]:
                problems.append(f"{t} reads otherwise than before")
        if await saver.aget_tuple(cfg(EXPIRED)) is not None:
            problems.append(f"{EXPIRED} (expired) is read")
        return problems

    async def leftovers(self, saver: AsyncS3Saver) -> list[str]:
        problems = []
        for t in LIVE:
            if await left(saver, t) != (0, 1):
                problems.append(f"{t}: (loose objects, packs) {await left(saver, t)}, not (0, 1)")
        if await left(saver, EXPIRED) != (0, 0):
            problems.append(f"{EXPIRED} left {await left(saver, EXPIRED)} after its sweep")
        if any(i.get("latest") or i.get("md") for i in await items(saver, EXPIRED)):
            problems.append(f"{EXPIRED}: an item still names a checkpoint")
        return problems

    async def run(self) -> ShardSweep:
        started = time.monotonic()
        killers = [Killer(self.moto) for _ in range(LANES)]
        with contextlib.ExitStack() as stack:
            for killer in killers:
                stack.enter_context(killer.running())
            names, before = await self.deployment()
            assert await self.attempt(killers[0], names, 0, False) is None
            self.requests = list(killers[0].seen)
            async with self.saver(names) as fresh:
                assert not await self.check(fresh, before)
                assert not await self.leftovers(fresh)
            points = crash_points(self.requests)
            await in_lanes(points, killers, self.crash_point)
        self.points, self.seconds = len(points), time.monotonic() - started
        return self

    def summary(self) -> str:
        return (
            f"archiver shard: {len(self.requests)} requests, {self.points} crash points "
            f"(before each, after each write): {dict(self.outcomes)}; failures "
            f"{len(self.failures)}, stray {len(self.stray)}; {self.seconds:.1f}s; "
            f"requests {dict(Counter(self.requests))}"
        )


@pytest.fixture(scope="module")
def sweep() -> ShardSweep:
    def compute() -> ShardSweep:
        with sweep_endpoint() as moto:
            return asyncio.run(ShardSweep(moto).run())

    done: ShardSweep = once_per_run("archiver-sweep", compute)
    print("\n" + done.summary() + "".join(f"\n  {p}" for p in done.failures + done.stray))
    return done


def test_an_archiver_shard_killed_at_each_request_loses_nothing_and_completes_when_run_again(
    sweep: ShardSweep,
) -> None:
    assert not sweep.failures, sweep.summary() + "\n" + "\n".join(sweep.failures)
    assert sum(sweep.outcomes.values()) == sweep.points > len(sweep.requests) >= 8
    assert sweep.outcomes["killed"] > sweep.points - 8  # a kill in the close's flush is late


def test_an_archiver_shard_killed_at_each_request_leaves_no_stray_state_when_run_again(
    sweep: ShardSweep,
) -> None:
    """Run again after a kill, the shard finishes what the killed run left: a TTL
    sweep's deletion (its lease run out: the next sweep finds it), a packing's loose
    objects after its switch (its mark left on the item: the thread counts as not
    packed, and the next packing removes them and the mark), and a packing's pack
    stored before its switch (its mark, put on before the pack, ran out: the next
    packing takes the mark off, so that switch can never come, and the pack with it)."""
    assert not sweep.stray, sweep.summary() + "\n" + "\n".join(sweep.stray)
