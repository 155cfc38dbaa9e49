"""Crash sweep of ``aimport``: the importing process is killed before every request
of an import, and after every one that writes but a staged write (its answer lost is a
kill before the next request) (``killing.Killer``: nothing it would do after that point
reaches moto), for a fresh import and for an import with ``replace`` over an existing
thread.

With ``replace``, the points are those of the old thread's deletion, of the claim
that follows it and of the last request (``ImportSweep.points_of``): the import's
staged writes and its publishing are swept in the fresh mode.

After each kill a fresh saver must read the thread (every checkpoint, its parents,
values, metadata and pending writes; LangGraph's own history of it) as wholly the
old one (absent, for a fresh import) or wholly the imported one, never a part of it;
the import run again (``replace`` when the thread exists) must then succeed and give
exactly the source's history, under exactly the keys a clean import writes (no object
of the killed attempt left), and a deletion must leave nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import time
from collections import Counter
from typing import Any

import pytest

from helpers import cfg, clocked, dump, left_of
from killing import LANES, SESSION, Killer, crash_points, in_lanes, once_per_run, sweep_endpoint
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.core.records import DELETE_LEASE_SECONDS
from langgraph_s3.testing import unique_names
from langgraph_s3.testing.graphs import CHAT_TURNS, ahistory, chat_graph

pytestmark = pytest.mark.sweep

THREAD = "t"


async def chat(saver: AsyncS3Saver, *texts: str) -> None:
    graph = chat_graph().compile(checkpointer=saver)
    for text in texts:
        await graph.ainvoke({"messages": [("user", text)]}, cfg(THREAD))


async def seen(saver: AsyncS3Saver) -> tuple[Any, Any]:
    """What a reader sees of the thread: every checkpoint, and the graph's history."""
    graph = chat_graph().compile(checkpointer=saver)
    return await dump(saver, THREAD), await ahistory(graph, cfg(THREAD))


async def keys(saver: AsyncS3Saver) -> list[str]:
    top = saver.layout.thread(THREAD)
    return sorted(o.key[len(top) :] for o in await left_of(saver, THREAD))


class ImportSweep:
    def __init__(self, moto: str, replace: bool) -> None:
        self.moto, self.replace = moto, replace
        self.table = unique_names()["table"]
        self.export = b""
        self.source: Any = None
        self.clean_keys: list[str] = []
        self.outcomes: Counter[str] = Counter()
        self.torn: list[str] = []
        """Crash points after which the thread read as neither the old nor the new one."""
        self.failures: list[str] = []
        """Crash points after which the import run again failed, or left a stray."""
        self.points = 0
        self.requests: list[str] = []
        self.seconds = 0.0

    def saver(self, names: dict[str, str]) -> AsyncS3Saver:
        return AsyncS3Saver(endpoint_url=self.moto, session=SESSION, **names)

    def names(self) -> dict[str, str]:
        return {"bucket": unique_names()["bucket"], "table": self.table}

    async def prepare(self) -> None:
        """The source thread (a turn that calls a tool) and its export."""
        async with self.saver(self.names()) as source:
            await source.setup()
            await chat(source, CHAT_TURNS[1])
            out = io.BytesIO()
            await source.aexport([THREAD], out)
            self.export = out.getvalue()
            self.source = await seen(source)

    async def target(self) -> tuple[dict[str, str], Any]:
        """A target deployment: with ``replace``, an older conversation on the id."""
        names = self.names()
        async with self.saver(names) as direct:
            await direct.setup()
            if self.replace:
                await chat(direct, CHAT_TURNS[0])
            before = await seen(direct)
        assert bool(before[0]) == self.replace
        return names, before

    async def attempt(
        self, killer: Killer, names: dict[str, str], k: int, after: bool
    ) -> BaseException | None:
        async def act(saver: AsyncS3Saver) -> None:
            await saver.aimport(io.BytesIO(self.export), replace=self.replace)

        return await killer.run(k, after, act, **names)

    async def clean_count(self, killer: Killer) -> list[str]:
        names, _ = await self.target()
        error = await self.attempt(killer, names, 0, False)
        assert error is None, error
        requests = list(killer.seen)
        async with self.saver(names) as fresh:
            assert await seen(fresh) == self.source
            self.clean_keys = await keys(fresh)
        return requests

    async def crash_point(self, killer: Killer, k: int, after: bool) -> None:
        where = f"{'after' if after else 'before'} {k} ({self.requests[k - 1]})"
        names, old = await self.target()
        await self.attempt(killer, names, k, after)
        async with self.saver(names) as fresh:
            # the operator runs it again once a killed deletion's lease (2 minutes) ran
            # out: before that, a replace waits for it
            clocked(fresh).now += DELETE_LEASE_SECONDS + 1
            got = await seen(fresh)
            if got == self.source:
                outcome = "imported"
            elif got == old:
                outcome = "old" if self.replace else "absent"
            elif self.replace and got == ([], []):
                outcome = "absent"  # the old thread deleted, nothing of the new published
            else:
                outcome = "torn"
                self.torn.append(
                    f"{where}: neither the old thread nor the imported one: {len(got[0])} "
                    f"checkpoints ({len(old[0])} old, {len(self.source[0])} imported)"
                )
            self.outcomes[outcome] += 1
            await self.again(fresh, where, outcome)

    async def again(self, fresh: AsyncS3Saver, where: str, outcome: str) -> None:
        """The import run again (with ``replace`` where the thread exists, as a failed
        import's note says): exactly the source, under a clean import's keys."""
        try:
            exists = await fresh.aget_tuple(cfg(THREAD)) is not None
            await fresh.aimport(io.BytesIO(self.export), replace=exists or self.replace)
        except Exception as exc:
            self.failures.append(f"{where} ({outcome}): the import again: {exc!r:.300}")
            return
        if await seen(fresh) != self.source:
            self.failures.append(f"{where} ({outcome}): imported again, not the source")
            return
        if (left := await keys(fresh)) != self.clean_keys:
            stray = sorted(set(left) ^ set(self.clean_keys))
            self.failures.append(f"{where} ({outcome}): objects unlike a clean import's: {stray}")
            return
        await fresh.adelete_thread(THREAD)
        if await left_of(fresh, THREAD) or await fresh.aget_tuple(cfg(THREAD)) is not None:
            self.failures.append(f"{where} ({outcome}): left after a deletion")

    async def run(self) -> ImportSweep:
        started = time.monotonic()
        killers = [Killer(self.moto) for _ in range(LANES)]
        with contextlib.ExitStack() as stack:
            for killer in killers:
                stack.enter_context(killer.running())
            await self.prepare()
            self.requests = await self.clean_count(killers[0])
            points = self.points_of(crash_points(self.requests))
            await in_lanes(points, killers, self.crash_point)
        self.points, self.seconds = len(points), time.monotonic() - started
        return self

    def points_of(self, points: list[tuple[int, bool]]) -> list[tuple[int, bool]]:
        """Every point of a fresh import (but after a staged write: its answer lost is
        a kill before the next request, swept too). With ``replace``: those of the old thread's
        deletion and of the claim that follows it, and the last request's; the staged
        writes and the publishing between are the fresh import's own, swept there."""
        if not self.replace:  # a staged write's lost answer is a kill before the next
            first, last = self.requests.index("PutItem"), self.requests.index("TransactWriteItems")
            staged = {"UpdateItem", "PutObject-if-none-match"}
            return [
                (k, a)
                for k, a in points
                if not (a and first < k - 1 < last and self.requests[k - 1] in staged)
            ]
        claim = self.requests.index("PutItem") + 1  # the import's claim, after the deletion
        return [(k, a) for k, a in points if k <= claim + 1 or k >= len(self.requests)]

    def summary(self) -> str:
        mode = "replace" if self.replace else "fresh"
        return (
            f"aimport [{mode}]: {len(self.requests)} requests, {self.points} crash points "
            f"(before each, after each write): {dict(self.outcomes)}; torn {len(self.torn)}, "
            f"failures {len(self.failures)}; {self.seconds:.1f}s; "
            f"requests {dict(Counter(self.requests))}"
        )


def sweep_of(mode: str) -> ImportSweep:
    """The sweep of ``mode``, once per pytest run (each its own buckets and table, on
    a moto server of its own): two workers may run the two modes side by side."""

    def compute() -> ImportSweep:
        with sweep_endpoint() as moto:
            return asyncio.run(ImportSweep(moto, mode == "replace").run())

    done: ImportSweep = once_per_run(f"import-sweep-{mode}", compute)
    print("\n" + done.summary() + "".join(f"\n  {f}" for f in done.failures))
    return done


@pytest.mark.parametrize("mode", ["fresh", "replace"])
def test_aimport_killed_at_each_request_then_imported_again_is_the_source(
    mode: str,
) -> None:
    sweep = sweep_of(mode)
    assert not sweep.failures, sweep.summary() + "\n" + "\n".join(sweep.failures)
    assert sum(sweep.outcomes.values()) == sweep.points >= 30
    assert sweep.points > len(sweep.requests) >= 8 or mode == "replace"
    assert sweep.outcomes["imported"] > 0  # some kill came after the last commit


@pytest.mark.parametrize("mode", ["fresh", "replace"])
def test_aimport_killed_at_each_request_leaves_the_old_thread_or_the_imported_one(
    mode: str,
) -> None:
    sweep = sweep_of(mode)
    assert not sweep.torn, sweep.summary() + "\n" + "\n".join(sweep.torn)
    # the thread is published whole: before it, a killed import left it as it was (a
    # replace deletes the old thread first, once the file is checked: absent after that)
    assert sweep.outcomes["absent"] > 0
    assert sweep.outcomes["old"] > 0 if mode == "replace" else "old" not in sweep.outcomes
