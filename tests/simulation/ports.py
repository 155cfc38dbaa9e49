"""The two ports with a yield point at every request: the in-memory fakes, each request
held at the scheduler's gate (``Scheduler.request``) until the seed picks it.

The fakes' own logic (conditions, listings, the manifest's decisions) is untouched:
only ``Requester.request``, the one place every fake request passes through, is
replaced, and the public calls name their target (a key, a thread) for the trace.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from typing import Any

from langgraph_s3.aws.stats import RequestStats
from langgraph_s3.checkpoint.erasure import ERASED
from langgraph_s3.core.held import InlineCommit, InlineCopy
from langgraph_s3.core.records import (
    Deletion,
    Entry,
    Expiry,
    Fields,
    Late,
    Listed,
    PackRef,
    Raw,
    ThreadInfo,
)
from langgraph_s3.core.tasks import permit
from langgraph_s3.testing.fakes import (
    MemoryBucket,
    MemoryManifest,
    MemoryObjectStore,
    MemoryTable,
    MemoryTableClient,
)

from .loop import Process, Scheduler

WRITES = frozenset(
    {
        "s3.PutObject",
        "s3.CopyObject",
        "s3.DeleteObjects",
        "s3.DeleteObject",
        "dynamodb.UpdateItem",
        "dynamodb.PutItem",
        "dynamodb.DeleteItem",
    }
)
"""Requests that change state: only these may have their answer lost."""

_TARGET: contextvars.ContextVar[str] = contextvars.ContextVar("sim_target", default="*")


@contextlib.contextmanager
def _target(name: str) -> Iterator[None]:
    token = _TARGET.set(name)
    try:
        yield
    finally:
        _TARGET.reset(token)


class _Gate:
    """The replacement of ``Requester.request``: permit, count, then the gate."""

    sim: Scheduler
    proc: Process
    stats: RequestStats

    @contextlib.asynccontextmanager
    async def request(self, operation: str, nbytes: int = 0) -> AsyncIterator[None]:
        async with permit():
            attempt = self.stats.sent(operation, nbytes)
            try:
                async with self.sim.request(
                    self.proc, operation, _TARGET.get(), write=operation in WRITES
                ):
                    yield
            finally:
                self.stats.done(attempt)


class SimObjectStore(_Gate, MemoryObjectStore):
    """A :class:`MemoryObjectStore` whose every request is a yield point."""

    def __init__(
        self, bucket: MemoryBucket, sim: Scheduler, proc: Process, *, cache_bytes: int = 0
    ) -> None:
        super().__init__(bucket, cache_bytes=cache_bytes, yields=0)
        self.sim, self.proc = sim, proc

    async def put(self, key: str, body: bytes, **kw: Any) -> str | None:
        with _target(key):
            out = await super().put(key, body, **kw)
        if out is None and body != ERASED:
            there = self.data.objects.get(key)
            if there is not None and there.body == ERASED:
                self.sim.tally["a PUT refused by an erasure marker"] += 1
        if self.sim.on_put is not None:
            self.sim.on_put(self.proc, key, body, out)
        return out

    async def copy(self, source_key: str, target_key: str, *, if_match: str | None = None) -> None:
        with _target(target_key):
            await super().copy(source_key, target_key, if_match=if_match)

    async def delete(self, keys: Sequence[str]) -> int:
        with _target(f"{keys[0]} (+{len(keys) - 1})" if keys else "-"):
            return await super().delete(keys)

    async def delete_if_match(self, key: str, etag: str) -> bool:
        with _target(key):
            return await super().delete_if_match(key, etag)

    async def get_with_etag(self, key: str) -> tuple[bytes | None, str | None]:
        with _target(key):
            return await super().get_with_etag(key)

    async def get_range(self, key: str, start: int, length: int) -> bytes | None:
        with _target(key):
            return await super().get_range(key, start, length)

    async def list_pages(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[list[Listed]]:
        pages = super().list_pages(prefix, start_after=start_after, page_size=page_size)
        try:
            while True:
                with _target(prefix):
                    try:
                        page = await pages.__anext__()
                    except StopAsyncIteration:
                        return
                yield page
        finally:
            aclose = getattr(pages, "aclose", None)
            if aclose is not None:
                await aclose()


class SimTable(_Gate, MemoryTableClient):
    """A :class:`MemoryTableClient` whose every request is a yield point."""

    def __init__(self, table: MemoryTable, sim: Scheduler, proc: Process) -> None:
        super().__init__(table, yields=0)
        self.sim, self.proc = sim, proc


class SimManifest(MemoryManifest):
    """A :class:`MemoryManifest` on a :class:`SimTable`; its calls name their thread."""

    def __init__(self, table: MemoryTable, sim: Scheduler, proc: Process, **kw: Any) -> None:
        super().__init__(table, client=SimTable(table, sim, proc), **kw)
        self.sim, self.proc = sim, proc

    async def read(self, thread_id: str, checkpoint_ns: str) -> Raw | None:
        with _target(thread_id):
            return await super().read(thread_id, checkpoint_ns)

    async def latest(self, thread_id: str, checkpoint_ns: str) -> Entry | None:
        with _target(thread_id):
            return await super().latest(thread_id, checkpoint_ns)

    async def namespaces(self, thread_id: str) -> list[Entry]:
        with _target(thread_id):
            return await super().namespaces(thread_id)

    async def thread(self, thread_id: str) -> ThreadInfo | None:
        with _target(thread_id):
            return await super().thread(thread_id)

    async def seal_born(self, thread_id: str, born: str) -> bool:
        with _target(thread_id):
            return await super().seal_born(thread_id, born)

    async def pack_of(self, encoded_thread: str) -> PackRef | None:
        with _target(encoded_thread):
            return await super().pack_of(encoded_thread)

    async def set_pack(
        self,
        thread_id: str,
        new: PackRef | None,
        old: PackRef | None,
        *,
        mark: str | None = None,
        life: str | None = None,
    ) -> bool:
        with _target(thread_id):
            return await super().set_pack(thread_id, new, old, mark=mark, life=life)

    async def touch(self, thread_id: str) -> bool:
        with _target(thread_id):
            return await super().touch(thread_id)

    async def publish(self, thread_id: str, token: str) -> bool:
        with _target(thread_id):
            done = await super().publish(thread_id, token)
        self.sim.tally["an import published" if done else "an import not published"] += 1
        return done

    async def unstage(self, thread_id: str, token: str, *, dead: bool = False) -> Late | None:
        with _target(thread_id):
            late = await super().unstage(thread_id, token, dead=dead)
        if late is not None:
            self.sim.tally[
                "a dead import's stage dropped" if dead else "a failed import's stage dropped"
            ] += 1
        return late

    async def advance(self, thread_id: str, *args: Any, **kw: Any) -> str | None:
        clear = kw.get("clear")
        if clear is not None:

            async def counted(raw: Raw) -> None:
                self.sim.tally["a crowded item cleared"] += 1
                await clear(raw)

            kw["clear"] = counted
        before = self.proc.requests
        with _target(thread_id):
            out = await super().advance(thread_id, *args, **kw)
        if self.proc.requests - before > 1:
            self.sim.tally["a contended commit"] += 1
        inline: InlineCommit | None = kw.get("inline")
        for c in (inline.held or ()) if inline is not None else ():
            if self._others(c, "a commit handed back the copy of"):
                self.sim.tally["a commit handed back another writer's copy"] += 1
        for c in inline.drop if inline is not None else ():
            self._others(c, "a commit dropped the copy of")
        return out

    def _others(self, c: InlineCopy, what: str) -> bool:
        """Count a held copy another process put (by that writer's state)."""
        writer = self.sim.put_by.get(c.checkpoint_id)
        if writer is None or writer is self.proc:
            return False
        state = "a reaped" if writer.reaped else "a frozen" if writer.asleep else ""
        state = state or ("a crashed" if writer.dead else "")
        if state:
            self.sim.tally[f"{what} {state} writer"] += 1
        return True

    async def written(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> bool:
        with _target(thread_id):
            return await super().written(thread_id, checkpoint_ns, checkpoint_id)

    async def settle(
        self,
        thread_id: str,
        checkpoint_ns: str,
        copies: Iterable[InlineCopy],
        *,
        life: str | None = None,
    ) -> None:
        copies = list(copies)
        with _target(thread_id):
            await super().settle(thread_id, checkpoint_ns, copies, life=life)
        for c in copies:
            self._others(c, "settled the copy of")

    async def recount(self, thread_id: str, checkpoint_ns: str, raw: Raw) -> bool:
        with _target(thread_id):
            return await super().recount(thread_id, checkpoint_ns, raw)

    async def raise_floor(
        self, entry: Entry, floor: str, removed: Iterable[str], *, mark: str | None = None
    ) -> bool:
        with _target(entry.thread_id):
            return await super().raise_floor(entry, floor, removed, mark=mark)

    async def retip(
        self, entry: Entry, new: Fields, runs: Iterable[str], *, mark: str | None = None
    ) -> bool:
        with _target(entry.thread_id):
            return await super().retip(entry, new, runs, mark=mark)

    async def replace(self, entry: Entry, new: Fields) -> bool:
        with _target(entry.thread_id):
            return await super().replace(entry, new)

    async def merge(self, thread_id: str, source: Entry, target: Raw | None) -> bool:
        with _target(thread_id):
            return await super().merge(thread_id, source, target)

    async def tombstone(self, thread_id: str, *, revivable: bool = True) -> Deletion:
        with _target(thread_id):
            return await super().tombstone(thread_id, revivable=revivable)

    async def tombstone_expired(self, expiry: Expiry) -> Deletion | None:
        with _target(expiry.thread_id):
            return await super().tombstone_expired(expiry)

    def _thread_of(self, keys: list[dict[str, Any]]) -> str:
        pk = str(keys[0]["pk"]["S"]) if keys else ""
        return pk[len(self.deployment) :] if pk.startswith(self.deployment) else pk

    async def renew(self, keys: list[dict[str, Any]], stamp: int) -> bool:
        with _target(self._thread_of(keys)):
            return await super().renew(keys, stamp)

    async def release(self, keys: list[dict[str, Any]], stamp: int) -> None:
        with _target(self._thread_of(keys)):
            await super().release(keys, stamp)

    async def note_late(self, thread_id: str, late: Late) -> None:
        with _target(thread_id):
            await super().note_late(thread_id, late)

    async def late_done(self, thread_id: str, due: int) -> None:
        with _target(thread_id):
            await super().late_done(thread_id, due)

    async def drop(self, entry: Entry, *, mark: str | None = None) -> bool:
        with _target(entry.thread_id):
            return await super().drop(entry, mark=mark)

    async def mark(self, entry: Entry, mark: str) -> bool:
        with _target(entry.thread_id):
            return await super().mark(entry, mark)

    async def unmark(self, thread_id: str, checkpoint_ns: str, mark: str) -> None:
        with _target(thread_id):
            await super().unmark(thread_id, checkpoint_ns, mark)
