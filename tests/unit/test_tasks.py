"""Unit tier: the operation limit, TaskGroup fan-out and the CAS loop, without a server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from langgraph_s3.core.retry import LOST, Done, Retry, cas
from langgraph_s3.core.tasks import bounded_map, gather_all, permit
from langgraph_s3.errors import CheckpointConflictError, ConflictError
from langgraph_s3.runtime.operations import operation, operation_iter


class Probe:
    """Counts "requests" (permit holders) in flight, like aws.call does."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self.in_flight = 0
        self.peak = 0

    async def request(self) -> None:
        async with permit():
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            await asyncio.sleep(0.001)
            self.in_flight -= 1

    @operation
    async def fan_out(self, outer: int, inner: int) -> None:
        """Two nested maps side by side: before, each had its own limit."""

        async def one(_: int) -> None:
            await bounded_map(lambda _: self.request(), range(inner))

        await gather_all(bounded_map(one, range(outer)), bounded_map(one, range(outer)))

    @operation
    async def nested(self) -> None:
        await self.fan_out(4, 4)  # shares this call's permits

    @operation_iter
    async def items(self, n: int) -> AsyncIterator[int]:
        for i in range(n):
            await bounded_map(lambda _: self.request(), range(10))
            yield i


async def test_one_limit_per_operation_however_it_fans_out() -> None:
    probe = Probe(concurrency=3)
    await probe.fan_out(8, 8)
    assert probe.peak == 3  # 128 requests, never more than 3 at once
    probe.peak = 0
    await probe.nested()
    assert probe.peak == 3
    probe.peak = 0
    assert [i async for i in probe.items(4)] == [0, 1, 2, 3]
    assert probe.peak == 3


async def test_separate_operations_have_separate_limits() -> None:
    probe = Probe(concurrency=2)
    await asyncio.gather(probe.fan_out(4, 4), probe.fan_out(4, 4))
    assert probe.peak == 4  # two calls, two limits


async def test_outside_an_operation_requests_are_not_limited() -> None:
    probe = Probe(concurrency=1)
    await bounded_map(lambda _: probe.request(), range(20))
    assert probe.peak == 20
    probe.peak = 0
    await bounded_map(lambda _: probe.request(), range(20), 5)
    assert probe.peak == 5


async def test_gather_all_cancels_siblings_and_raises_the_first_error() -> None:
    finished: list[str] = []

    async def slow() -> None:
        await asyncio.sleep(5)
        finished.append("slow")

    async def boom() -> None:
        await asyncio.sleep(0.001)
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        await gather_all(slow(), boom(), slow())
    assert finished == []  # not an ExceptionGroup, and nobody kept running
    assert await gather_all(asyncio.sleep(0, "a"), asyncio.sleep(0, "b")) == ["a", "b"]


async def test_cas_rereads_until_the_write_lands() -> None:
    reads: list[int] = []
    state = {"version": 0}

    async def read() -> int:
        reads.append(state["version"])
        return state["version"]

    async def update(seen: int) -> Done[str] | Retry:
        if seen < 3:
            state["version"] += 1  # someone else wrote first
            return LOST
        return Done(f"written over {seen}")

    assert await cas(read, update, attempts=10, what="x") == "written over 3"
    assert reads == [0, 1, 2, 3]


async def test_cas_gives_up_after_the_configured_attempts() -> None:
    calls = 0

    async def update(_: None) -> Retry:
        nonlocal calls
        calls += 1
        return LOST

    async def read() -> None:
        return None

    with pytest.raises(CheckpointConflictError, match=r"'k' kept changing .* 4 attempts"):
        await cas(read, update, attempts=4, what="'k'", error=CheckpointConflictError)
    assert calls == 4
    with pytest.raises(ConflictError, match="raise max_conflicts"):
        await cas(read, update, attempts=1, what="'k'")


async def test_cas_waits_do_not_count_as_attempts() -> None:
    outcomes: list[Done[int] | Retry] = [Retry(after=0.001)] * 5 + [LOST, Done(7)]

    async def read() -> None:
        return None

    async def update(_: None) -> Done[int] | Retry:
        return outcomes.pop(0)

    assert await cas(read, update, attempts=2, what="x") == 7
    assert outcomes == []


async def test_a_failure_cancels_siblings_but_those_past_their_commit() -> None:
    from langgraph_s3.core.tasks import committed

    ended: list[str] = []

    async def fails() -> None:
        await asyncio.sleep(0.01)
        raise ConflictError("boom")

    async def sibling(name: str, commit: bool) -> None:
        if commit:
            committed()
        await asyncio.sleep(0.05)
        ended.append(name)

    with pytest.raises(ConflictError, match="boom"):
        await gather_all(fails(), sibling("committed", True), sibling("plain", False))
    assert ended == ["committed"]  # finished before the error was raised; the other cut


async def test_gather_all_of_nothing_is_nothing() -> None:
    """A fan-out over an empty list (a thread with no subgraph namespace) makes no task."""
    assert await gather_all() == []
