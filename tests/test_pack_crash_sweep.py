"""Packing and unpacking crash at each of their requests: before a
request leaves, or after it was applied with its answer lost. After each crash a
fresh process reads the thread exactly as before, packs it (or prunes it) to the
end, and a deletion leaves nothing behind.

The crash is raised by our own object-store and manifest interfaces (the saver's
``raw_objects`` and ``manifest``), over HTTP on moto.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
from langgraph.types import Command

from helpers import cfg, dump, left_of
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.graphs import nested_graph

pytestmark = pytest.mark.sweep

STORE_CALLS = ("put", "delete", "get", "get_with_etag", "get_range", "list_pages", "copy")
READ_ROLE_CALLS = ("namespaces", "latest", "read", "pack_of")
UPKEEP_CALLS = ("set_pack", "raise_floor", "replace")
READ_CALLS = frozenset(
    {"get", "get_with_etag", "get_range", "list_pages", "namespaces", "latest", "read", "pack_of"}
)
"""Calls that change nothing: a crash after one of them is a crash before the next."""


class Crash(Exception):
    """The process died here."""


class CrashAt:
    """Counts the calls made through the wrapped interfaces; the k-th one crashes."""

    def __init__(self, k: int, after: bool) -> None:
        self.k, self.after, self.n = k, after, 0
        self.hit: str | None = None
        self.calls: list[str] = []
        """Every call's name, in order."""

    def wrap(self, target: Any, names: tuple[str, ...]) -> None:
        for name in names:
            setattr(target, name, self._wrapped(name, getattr(target, name)))

    def _step(self, name: str) -> bool:
        """True when this call is the crash point (the count goes on either way)."""
        self.n += 1
        self.calls.append(name)
        if self.n == self.k:
            self.hit = name
            return True
        return False

    def _wrapped(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.isasyncgenfunction(fn):

            async def pages(*args: Any, **kwargs: Any) -> Any:
                crash = self._step(name)
                if crash and not self.after:
                    raise Crash(name)
                async for page in fn(*args, **kwargs):
                    yield page
                if crash:
                    raise Crash(name)

            return pages

        async def call(*args: Any, **kwargs: Any) -> Any:
            crash = self._step(name)
            if crash and not self.after:
                raise Crash(name)
            out = await fn(*args, **kwargs)
            if crash:
                raise Crash(name)  # applied, and the answer lost
            return out

        return call


THREADS = ("n",)
"""A nested graph waiting on an interrupt: three namespaces, pending writes."""


async def build(saver: AsyncS3Saver) -> None:
    nested = nested_graph().compile(checkpointer=saver)
    await nested.ainvoke({"trail": []}, cfg("n", ns=None))


async def left(saver: AsyncS3Saver, thread: str) -> tuple[int, int]:
    raw = await left_of(saver, thread)
    packs = await saver.raw_objects.list_all(saver.layout.packs(thread))
    return len(raw), len(packs)


async def crash_once(
    server: MotoServer, k: int, after: bool, act: str
) -> tuple[str | None, list[str]]:
    names = unique_names()
    async with AsyncS3Saver(endpoint_url=server.url, **names) as saver:
        await saver.setup()
        await build(saver)
        if act == "unpack":
            await saver.apack(list(THREADS))
        before = {t: await dump(saver, t) for t in THREADS}
    async with AsyncS3Saver(endpoint_url=server.url, **names) as victim:
        plan = CrashAt(k, after)
        plan.wrap(victim.raw_objects, STORE_CALLS)
        plan.wrap(victim.manifest.reads, READ_ROLE_CALLS)
        plan.wrap(victim.manifest.upkeep, UPKEEP_CALLS)
        try:
            if act == "pack":
                await victim.apack(list(THREADS))
            else:
                await victim.maintenance().unpack_thread("n")  # what prune/copy/rollback do
        except Crash:
            pass
    async with AsyncS3Saver(endpoint_url=server.url, **names) as cold:
        for t in THREADS:
            assert await dump(cold, t) == before[t], (act, k, after, plan.hit, t)
        if act == "pack":
            await cold.apack(list(THREADS))
            for t in THREADS:
                raw, packs = await left(cold, t)
                assert raw == 0 and 1 <= packs <= 2, (k, after, plan.hit, t, raw, packs)
        else:
            await cold.maintenance().unpack_thread("n")
            for t in THREADS:  # unpacked: a pack the crash left is no one's (young: kept)
                root = await cold.manifest.reads.latest(t, "")
                assert root is not None and root.pack is None, (k, after, plan.hit, t)
                assert (await left(cold, t))[1] <= 1, (k, after, plan.hit, t)
        for t in THREADS:
            assert await dump(cold, t) == before[t], (act, k, after, plan.hit, t, "after")
        # the graph goes on from it
        await (
            nested_graph()
            .compile(checkpointer=cold)
            .ainvoke(Command(resume="yes"), cfg("n", ns=None))
        )
        for t in THREADS:
            await cold.adelete_thread(t)
            assert await left(cold, t) == (0, 0), (k, after, plan.hit, t)
    return plan.hit, plan.calls


@pytest.mark.parametrize("act", ["pack", "unpack"])
async def test_a_crash_at_each_request_of_packing_loses_nothing(
    s3_fresh: MotoServer, act: str
) -> None:
    _, calls = await crash_once(s3_fresh, 0, False, act)  # no crash: count the calls
    total = len(calls)
    hits: list[str | None] = []
    for k in range(1, total + 1):  # concurrent calls may come in either order
        hits.append((await crash_once(s3_fresh, k, False, act))[0])
        if calls[k - 1] not in READ_CALLS:  # after a read: before the next, swept above
            hits.append((await crash_once(s3_fresh, k, True, act))[0])
    assert None not in hits and total >= 8, hits  # every point crashed
    assert "set_pack" in hits and "delete" in hits, hits  # the switch and the deletes
    print(f"{act}: {total} crash points, before and after each: {hits}")
