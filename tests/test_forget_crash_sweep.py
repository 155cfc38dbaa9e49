"""Crash sweep of a subject's forgetting (``aforget``): its process is killed before every
request, and after every one that writes (``killing.Killer``: nothing it would do after
that point reaches moto).

The deployment holds a thread and a store item of alice's and of bob's, sealed with
their keys. After each kill a fresh process must read each of alice's threads and items
either exactly as before or not at all (never half: a thread is gone for readers at its
tombstone, its first write), and bob's exactly as before; run again, the forgetting
must finish: alice read nowhere, her key destroyed, her words in no byte of the bucket
or the table, one receipt in a chain that holds; a third run answers the same receipt
and writes none.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from typing import Any

import boto3
import pytest

from helpers import clocked, dump
from killing import SESSION, Killer, in_lanes, once_per_run, sweep_endpoint
from langgraph_s3 import AsyncS3Saver, AsyncS3Store
from langgraph_s3.checkpoint.saver.forgetting import Forgetting
from langgraph_s3.testing import unique_names
from langgraph_s3.testing.graphs import chat_graph

pytestmark = pytest.mark.sweep

WORDS = "zebra-penguin-7731"
ALICE = ("a1",)
BOB = "b1"
LATER = 10_000.0
"""Seconds the fresh process's clock is ahead: the killed run's bound and marks ran out."""
LANES = 2
"""Crash points run at once (two: it runs beside the other sweeps, on two cores)."""
READS = frozenset(
    {"GET-s3", "HEAD-s3", "GetItem", "Query", "Scan", "DescribeTable", "Decrypt"}
    | {"DescribeContinuousBackups", "LIST-s3"}
)


def cfg(thread: str) -> dict[str, Any]:
    user = "bob" if thread == BOB else "alice"
    return {"configurable": {"thread_id": thread, "user_id": user}}


async def forget(saver: AsyncS3Saver, clock: Any) -> dict[str, Any]:
    """``aforget("alice")``, the bound waited out on the saver's clock at once."""

    async def sleep(seconds: float) -> None:
        clock.now += seconds

    return await Forgetting(saver._w).aforget("alice", sleep=sleep)


class ForgetSweep:
    def __init__(self, moto: str) -> None:
        self.moto = moto
        self.table = unique_names()["table"]
        kms = boto3.client("kms", endpoint_url=moto, region_name="us-east-1")
        self.key = kms.create_key(Description="subjects")["KeyMetadata"]["KeyId"]
        self.outcomes: Counter[str] = Counter()
        self.failures: list[str] = []
        self.requests: list[str] = []
        self.points = 0
        self.seconds = 0.0

    def kw(self) -> dict[str, Any]:
        return {
            "subjects": "user_id",
            "subject_label": 1,
            "kms_key": self.key,
            "subject_key_seconds": 5,
        }

    def store(self, names: dict[str, str]) -> AsyncS3Store:
        kw = {k: v for k, v in self.kw().items() if k != "subjects"}
        return AsyncS3Store(endpoint_url=self.moto, session=SESSION, **names, **kw)

    async def items(self, names: dict[str, str]) -> dict[str, Any]:
        """What a fresh store reads of alice's and bob's items."""
        async with self.store(names) as store:
            return {
                user: getattr(await store.aget(("users", user, "m"), "k"), "value", None)
                for user in ("alice", "bob")
            }

    def saver(self, names: dict[str, str]) -> AsyncS3Saver:
        return AsyncS3Saver(endpoint_url=self.moto, session=SESSION, **names, **self.kw())

    async def deployment(self) -> tuple[dict[str, str], dict[str, Any]]:
        names = {"bucket": unique_names()["bucket"], "table": self.table}
        async with self.saver(names) as direct:
            await direct.setup()
            graph = chat_graph().compile(checkpointer=direct)
            for thread in (*ALICE, BOB):
                words = WORDS if thread != BOB else "walrus"
                await graph.ainvoke({"messages": [("user", words)]}, cfg(thread))
            await direct.aflush()
            before = {t: await dump(direct, t) for t in (*ALICE, BOB)}
        async with self.store(names) as store:
            for user, words in (("alice", WORDS), ("bob", "walrus")):
                await store.aput(("users", user, "m"), "k", {"text": words})
        before["items"] = await self.items(names)
        assert all(before.values()) and all(before["items"].values())
        return names, before

    async def attempt(
        self, killer: Killer, names: dict[str, str], k: int, after: bool
    ) -> BaseException | None:
        async def act(saver: AsyncS3Saver) -> None:
            await forget(saver, clocked(saver))

        return await killer.run(k, after, act, **names, **self.kw())

    async def crash_point(self, killer: Killer, k: int, after: bool) -> None:
        where = f"{'after' if after else 'before'} {k} ({self.requests[k - 1]})"
        names, before = await self.deployment()
        error = await self.attempt(killer, names, k, after)
        self.outcomes["killed" if error is not None else "completed"] += 1
        async with self.saver(names) as fresh:
            for t in (*ALICE, BOB):
                got = await dump(fresh, t)
                if got != before[t] and (t == BOB or got):
                    self.failures.append(f"{where}, after the kill: {t} half read or changed")
            items = await self.items(names)
            if items["bob"] != before["items"]["bob"] or items["alice"] not in (
                None,
                before["items"]["alice"],
            ):
                self.failures.append(f"{where}, after the kill: the items read {items}")
            clock = clocked(fresh)
            clock.now += LATER
            receipt = await forget(fresh, clock)
            self.failures += [f"{where}, run again: {p}" for p in await self.check(fresh, before)]
            if receipt.get("state") != "forgotten":
                self.failures.append(f"{where}: run again, it did not finish: {receipt}")
            if await forget(fresh, clock) != receipt:
                self.failures.append(f"{where}: a third run answered another receipt")
            if len([r async for r in fresh.receipts().all()]) != 1:
                self.failures.append(f"{where}: not exactly one receipt")
            broken = await fresh.receipts().verify()
            if broken is not None:
                self.failures.append(f"{where}: the receipts' chain breaks: {broken}")

    async def check(self, saver: AsyncS3Saver, before: dict[str, Any]) -> list[str]:
        problems = []
        for t in ALICE:
            if await saver.aget_tuple(cfg(t)) is not None:
                problems.append(f"{t} is read after alice was forgotten")
        if await dump(saver, BOB) != before[BOB]:
            problems.append("bob reads otherwise than before")
        names = {"bucket": saver.target.bucket, "table": self.table}
        if await self.items(names) != {**before["items"], "alice": None}:
            problems.append(f"the items read {await self.items(names)} after alice was forgotten")
        s3 = await saver.clients.client("s3")
        listed = await s3.list_objects_v2(Bucket=saver.target.bucket)
        for o in listed.get("Contents", []):
            body = await (await s3.get_object(Bucket=saver.target.bucket, Key=o["Key"]))[
                "Body"
            ].read()
            if WORDS.encode() in body:
                problems.append(f"alice's words in {o['Key']}")
        ddb = await saver.clients.client("dynamodb")
        items = (await ddb.scan(TableName=self.table))["Items"]
        if any(WORDS in repr(i) for i in items):
            problems.append("alice's words in an item")
        record = [i for i in items if "~subjects/" in i["pk"]["S"] and i["sk"]["S"] == "~"]
        token = (await saver.aforget("alice", dry_run=True))["subject"]
        alices = [i for i in record if i["pk"]["S"].endswith(token)]
        if not alices or "wrapped" in alices[0] or alices[0]["state"]["S"] != "forgotten":
            problems.append(f"alice's key not destroyed: {alices}")
        return problems

    async def run(self) -> ForgetSweep:
        started = time.monotonic()
        killers = [Killer(self.moto) for _ in range(LANES)]
        with contextlib.ExitStack() as stack:
            for killer in killers:
                stack.enter_context(killer.running())
            names, before = await self.deployment()
            assert await self.attempt(killers[0], names, 0, False) is None
            self.requests = list(killers[0].seen)
            async with self.saver(names) as fresh:
                clocked(fresh).now += LATER
                assert not await self.check(fresh, before)
            points = [(k, False) for k in range(1, len(self.requests) + 1)]
            points += [
                (k, True)
                for k in range(1, len(self.requests) + 1)
                if self.requests[k - 1] not in READS
            ]
            await in_lanes(points, killers, self.crash_point)
        self.points, self.seconds = len(points), time.monotonic() - started
        return self

    def summary(self) -> str:
        return (
            f"forgetting: {len(self.requests)} requests, {self.points} crash points "
            f"(before each, after each write): {dict(self.outcomes)}; failures "
            f"{len(self.failures)}; {self.seconds:.1f}s; requests {dict(Counter(self.requests))}"
        )


@pytest.fixture(scope="module")
def sweep() -> ForgetSweep:
    def compute() -> ForgetSweep:
        with sweep_endpoint() as moto:
            return asyncio.run(ForgetSweep(moto).run())

    done: ForgetSweep = once_per_run("forget-sweep", compute)
    print("\n" + done.summary() + "".join(f"\n  {p}" for p in done.failures))
    return done


def test_a_forgetting_killed_at_each_request_is_never_half_read_and_finishes_when_run_again(
    sweep: ForgetSweep,
) -> None:
    assert not sweep.failures, sweep.summary() + "\n" + "\n".join(sweep.failures[:40])
    assert sum(sweep.outcomes.values()) == sweep.points > len(sweep.requests) >= 20
    assert sweep.outcomes["killed"] > sweep.points - 8
