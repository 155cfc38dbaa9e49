"""A manifest whose chosen calls fail, deterministically for a seed (see :class:`Faults`).

Faults are drawn per call, named by method (``"advance"``, ``"latest"`` ...): a manifest
call may make several requests, and a ``lost`` fault fails it after all of them were
applied (``advance`` committed, its caller told otherwise)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Mapping,
    Sequence,
)
from typing import Any, TypeVar

from langgraph_s3.core.held import (
    InlineCommit,
    InlineCopy,
)
from langgraph_s3.core.meta import Meta, Scalar
from langgraph_s3.core.ports import ManifestPort
from langgraph_s3.core.records import (
    Deletion,
    Entry,
    Expiry,
    Fields,
    Late,
    PackRef,
    Raw,
    ThreadInfo,
)
from langgraph_s3.core.shards import Shard
from langgraph_s3.testing.faults import Faults
from langgraph_s3.testing.faulty_staging import STAGING_WRITES, FaultyStaging

__all__ = ["FaultyManifest"]

logger = logging.getLogger("langgraph_s3.testing.fakes")
T = TypeVar("T")
P = TypeVar("P")


MANIFEST_WRITES = frozenset(
    {
        "advance",
        "note_run",
        "written",
        "settle",
        "recount",
        "raise_floor",
        "mark",
        "unmark",
        "retip",
        "replace",
        "merge",
        "tombstone",
        "tombstone_expired",
        "touch",
        "set_pack",
        "seal_born",
        "renew",
        "release",
        "note_late",
        "late_done",
        "revive",
        "drop",
        "create",
        "adopt",
        "mark_migrated",
        *STAGING_WRITES,
    }
)
"""The manifest calls that change state: only these may have their answer lost."""


class FaultyManifest(FaultyStaging):
    """Wraps a manifest; a seeded :class:`Faults` plan fails chosen calls (see the
    module). Arguments as :class:`FaultyObjectStore`'s."""

    def __init__(
        self,
        inner: ManifestPort,
        seed: int = 0,
        rate: float = 0.1,
        *,
        lost: float = 0.5,
        only: Collection[str] | None = None,
        limit: int | None = None,
        faults: Faults | None = None,
    ) -> None:
        self.inner = inner
        self.faults = faults or Faults(seed, rate, lost=lost, only=only, limit=limit)

    table = property(lambda self: self.inner.table)
    deployment = property(lambda self: self.inner.deployment)
    ttl_seconds = property(lambda self: self.inner.ttl_seconds)

    async def _around(self, call: str, target: str, run: Callable[[], Awaitable[T]]) -> T:
        return await self.faults.around(call, target, run, write=call in MANIFEST_WRITES)

    async def read(self, thread_id: str, checkpoint_ns: str) -> Raw | None:
        return await self._around(
            "read", thread_id, lambda: self.inner.read(thread_id, checkpoint_ns)
        )

    async def latest(self, thread_id: str, checkpoint_ns: str) -> Entry | None:
        return await self._around(
            "latest", thread_id, lambda: self.inner.latest(thread_id, checkpoint_ns)
        )

    async def namespaces(self, thread_id: str) -> list[Entry]:
        return await self._around("namespaces", thread_id, lambda: self.inner.namespaces(thread_id))

    async def thread(self, thread_id: str) -> ThreadInfo | None:
        return await self._around("thread", thread_id, lambda: self.inner.thread(thread_id))

    async def _faulty_pages(
        self, call: str, pages: AsyncIterator[list[P]]
    ) -> AsyncIterator[list[P]]:
        try:
            while True:
                try:
                    page = await self._around(call, self.deployment, pages.__anext__)
                except StopAsyncIteration:
                    return
                yield page
        finally:
            if (aclose := getattr(pages, "aclose", None)) is not None:
                await aclose()

    def scan(
        self, *, deleting: set[str] | None = None, shard: Shard | None = None
    ) -> AsyncIterator[list[Entry]]:
        return self._faulty_pages("scan", self.inner.scan(deleting=deleting, shard=shard))

    def threads(
        self, after: str | None = None, *, shard: Shard | None = None
    ) -> AsyncIterator[list[ThreadInfo]]:
        return self._faulty_pages("threads", self.inner.threads(after, shard=shard))

    def expired(self, *, shard: Shard | None = None) -> AsyncIterator[list[Expiry]]:
        return self._faulty_pages("expired", self.inner.expired(shard=shard))

    def matching(
        self,
        want: Mapping[str, Scalar],
        *,
        shard: Shard | None = None,
        after: str | None = None,
    ) -> AsyncIterator[list[ThreadInfo]]:
        return self._faulty_pages("matching", self.inner.matching(want, shard=shard, after=after))

    def meta_change(self, checkpoint_ns: str, metadata: Mapping[str, Any] | None) -> Meta | None:
        return self.inner.meta_change(checkpoint_ns, metadata)

    async def note_run(self, thread_id: str, run_token: str) -> None:
        await self._around("note_run", thread_id, lambda: self.inner.note_run(thread_id, run_token))

    async def marker_says(self) -> frozenset[str]:
        return await self.inner.marker_says()

    async def marker_add(self, name: str) -> None:
        await self.inner.marker_add(name)

    async def record_meta(self, thread_id: str, latest_id: str, metadata: Any) -> bool:
        return await self._around(
            "record_meta", thread_id, lambda: self.inner.record_meta(thread_id, latest_id, metadata)
        )

    async def run_threads(self, run_tokens: Sequence[str]) -> list[str]:
        return await self._around(
            "run_threads", self.deployment, lambda: self.inner.run_threads(run_tokens)
        )

    async def run_entries(self, threads: list[str], deleting: set[str]) -> list[Entry]:
        return await self._around(
            "run_entries", self.deployment, lambda: self.inner.run_entries(threads, deleting)
        )

    async def missing_indexes(self) -> list[str]:
        return await self.inner.missing_indexes()

    async def create_index(self, key: str) -> None:
        await self.inner.create_index(key)

    async def touch(self, thread_id: str) -> bool:
        return await self._around("touch", thread_id, lambda: self.inner.touch(thread_id))

    async def seal_born(self, thread_id: str, born: str) -> bool:
        return await self._around(
            "seal_born", thread_id, lambda: self.inner.seal_born(thread_id, born)
        )

    async def pack_of(self, encoded_thread: str) -> PackRef | None:
        return await self._around(
            "pack_of", encoded_thread, lambda: self.inner.pack_of(encoded_thread)
        )

    async def set_pack(
        self,
        thread_id: str,
        new: PackRef | None,
        old: PackRef | None,
        *,
        mark: str | None = None,
        life: str | None = None,
    ) -> bool:
        return await self._around(
            "set_pack",
            thread_id,
            lambda: self.inner.set_pack(thread_id, new, old, mark=mark, life=life),
        )

    def now(self) -> float:
        return self.inner.now()

    async def advance(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        tail: str,
        parent_id: str | None,
        *,
        uses_delta: bool = False,
        rewrite: Callable[[], Awaitable[None]] | None = None,
        stored: Awaitable[Any] | None = None,
        sweep: Callable[[Expiry, str], Awaitable[None]] | None = None,
        spill: Callable[[Entry, list[str], str], Awaitable[None]] | None = None,
        ensure: Callable[[], Awaitable[None]] | None = None,
        life: str | None = None,
        inline: InlineCommit | None = None,
        metadata: Mapping[str, Any] | None = None,
        clear: Callable[[Raw], Awaitable[None]] | None = None,
    ) -> str | None:
        # the object's PUT goes out whatever happens to the manifest call, as it would
        # beside a real UpdateItem that fails or never leaves
        task = asyncio.ensure_future(stored) if stored is not None else None
        try:
            return await self._around(
                "advance",
                checkpoint_id,
                lambda: self.inner.advance(
                    thread_id,
                    checkpoint_ns,
                    checkpoint_id,
                    tail,
                    parent_id,
                    uses_delta=uses_delta,
                    rewrite=rewrite,
                    stored=task,
                    sweep=sweep,
                    spill=spill,
                    ensure=ensure,
                    life=life,
                    inline=inline,
                    metadata=metadata,
                    clear=clear,
                ),
            )
        finally:
            if task is not None and not task.done():
                with contextlib.suppress(Exception):
                    await task

    async def written(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> bool:
        return await self._around(
            "written",
            checkpoint_id,
            lambda: self.inner.written(thread_id, checkpoint_ns, checkpoint_id),
        )

    async def settle(
        self,
        thread_id: str,
        checkpoint_ns: str,
        copies: Iterable[InlineCopy],
        *,
        life: str | None = None,
    ) -> None:
        held = list(copies)
        await self._around(
            "settle",
            thread_id,
            lambda: self.inner.settle(thread_id, checkpoint_ns, held, life=life),
        )

    async def recount(self, thread_id: str, checkpoint_ns: str, raw: Raw) -> bool:
        return await self._around(
            "recount", thread_id, lambda: self.inner.recount(thread_id, checkpoint_ns, raw)
        )

    async def raise_floor(
        self, entry: Entry, floor: str, removed: Iterable[str], *, mark: str | None = None
    ) -> bool:
        return await self._around(
            "raise_floor",
            entry.thread_id,
            lambda: self.inner.raise_floor(entry, floor, removed, mark=mark),
        )

    async def retip(
        self, entry: Entry, new: Fields, runs: Iterable[str], *, mark: str | None = None
    ) -> bool:
        return await self._around(
            "retip", entry.thread_id, lambda: self.inner.retip(entry, new, runs, mark=mark)
        )

    async def replace(self, entry: Entry, new: Fields) -> bool:
        return await self._around(
            "replace", entry.thread_id, lambda: self.inner.replace(entry, new)
        )

    async def merge(self, thread_id: str, source: Entry, target: Raw | None) -> bool:
        return await self._around(
            "merge", thread_id, lambda: self.inner.merge(thread_id, source, target)
        )

    async def tombstone(self, thread_id: str, *, revivable: bool = True) -> Deletion:
        run = lambda: self.inner.tombstone(thread_id, revivable=revivable)  # noqa: E731
        return await self._around("tombstone", thread_id, run)

    async def tombstone_expired(self, expiry: Expiry) -> Deletion | None:
        return await self._around(
            "tombstone_expired", expiry.thread_id, lambda: self.inner.tombstone_expired(expiry)
        )

    async def renew(self, keys: list[dict[str, Any]], stamp: int) -> bool:
        return await self._around("renew", str(stamp), lambda: self.inner.renew(keys, stamp))

    async def release(self, keys: list[dict[str, Any]], stamp: int) -> None:
        await self._around("release", str(stamp), lambda: self.inner.release(keys, stamp))

    async def note_late(self, thread_id: str, late: Late) -> None:
        await self._around("note_late", thread_id, lambda: self.inner.note_late(thread_id, late))

    async def late_done(self, thread_id: str, due: int) -> None:
        await self._around("late_done", thread_id, lambda: self.inner.late_done(thread_id, due))

    async def revive(self, deletion: Deletion) -> None:
        await self._around("revive", "", lambda: self.inner.revive(deletion))

    async def drop(self, entry: Entry, *, mark: str | None = None) -> bool:
        return await self._around(
            "drop", entry.thread_id, lambda: self.inner.drop(entry, mark=mark)
        )

    async def mark(self, entry: Entry, mark: str) -> bool:
        return await self._around("mark", entry.thread_id, lambda: self.inner.mark(entry, mark))

    async def unmark(self, thread_id: str, checkpoint_ns: str, mark: str) -> None:
        await self._around(
            "unmark", thread_id, lambda: self.inner.unmark(thread_id, checkpoint_ns, mark)
        )

    async def exists(self) -> bool:
        return await self._around("exists", self.table, self.inner.exists)

    async def create(self) -> None:
        await self._around("create", self.table, self.inner.create)

    async def migrated(self) -> bool:
        return await self._around("migrated", self.deployment, self.inner.migrated)

    async def legacy_entries(self) -> AsyncIterator[Entry]:
        async for entry in self.inner.legacy_entries():
            yield entry

    async def adopt(self, legacy: Entry) -> None:
        await self._around("adopt", legacy.thread_id, lambda: self.inner.adopt(legacy))

    async def mark_migrated(self, also: Iterable[str] = ()) -> None:
        await self._around("mark_migrated", self.deployment, lambda: self.inner.mark_migrated(also))
