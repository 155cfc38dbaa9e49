"""Seeded faults: wrappers that make chosen calls of any port fail, deterministically.

:class:`FaultyObjectStore` and :class:`FaultyManifest` wrap any implementation and,
for a seed, make chosen calls fail with the library's own transient errors, either
before anything is applied or after (the answer is lost), the way SlateDB tests on a
seeded failing store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections import Counter
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Iterator,
    Sequence,
)
from typing import Any, TypeVar

from langgraph_s3.aws.s3 import DELETE_BATCH
from langgraph_s3.core.cache import ByteLRU
from langgraph_s3.core.ports import ManifestPort, ObjectStorePort
from langgraph_s3.core.records import (
    Deletion,
    Entry,
    Expiry,
    Fields,
    Lifecycle,
    Listed,
    PackRef,
    Raw,
    ThreadInfo,
)
from langgraph_s3.core.tasks import bounded_map
from langgraph_s3.errors import (
    EndpointTimeoutError,
    EndpointUnreachableError,
    S3PersistenceError,
    ServiceError,
)

__all__ = ["Faults", "FaultyManifest", "FaultyObjectStore"]

logger = logging.getLogger("langgraph_s3.testing.fakes")
T = TypeVar("T")
P = TypeVar("P")


# ------------------------------------------------------------------- faults
class Faults:
    """A seeded plan of failures: which calls fail, and how.

    Each call a wrapper sees (while ``enabled``, among ``only`` when given, until
    ``limit`` faults were injected) fails with probability ``rate``: a write
    ``lost`` of the time after it was applied (its answer is lost: an
    :class:`~langgraph_s3.errors.EndpointTimeoutError`), otherwise before (a
    :class:`~langgraph_s3.errors.ServiceError` 503 or an
    :class:`~langgraph_s3.errors.EndpointUnreachableError`: what outlasts the
    SDK's retries). One plan may drive several wrappers (a store and a manifest).

    **Deterministic by seed**: the fate of the n-th call of each kind (the n-th
    ``s3.PutObject``, the n-th ``advance``) depends on ``(seed, kind, n)`` alone, not
    on how calls of different kinds interleave; so the same seed and the same calls
    of each kind, in the same order, give the same faults (a graph whose sync nodes
    run in threads may order concurrent calls of one kind differently from run to
    run; its faults then differ a little).
    """

    def __init__(
        self,
        seed: int = 0,
        rate: float = 0.1,
        *,
        lost: float = 0.5,
        only: Collection[str] | None = None,
        limit: int | None = None,
    ) -> None:
        self.seed = seed
        self.rate = rate
        self.lost = lost
        self.only = only
        self.limit = limit
        self.enabled = True
        self.seen: Counter[str] = Counter()
        """Calls seen while enabled, by kind."""
        self.injected: Counter[str] = Counter()
        """Faults by ``"fail:<call>"`` / ``"lost:<call>"``, and totals ``"fail"`` / ``"lost"``."""
        self.log: list[tuple[int, str, str, str]] = []
        """``(n, fault, call, target)`` of each fault: the n-th call of its kind."""

    @property
    def total(self) -> int:
        return self.injected["fail"] + self.injected["lost"]

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No faults inside the block (and no draws: the sequence resumes after it)."""
        before, self.enabled = self.enabled, False
        try:
            yield
        finally:
            self.enabled = before

    def draw(self, call: str, target: str, *, write: bool) -> tuple[str, S3PersistenceError] | None:
        """The fault of the next ``call``: ``("fail", error)`` to raise instead of it,
        ``("lost", error)`` to raise after it, or None: it goes through."""
        if not self.enabled or (self.only is not None and call not in self.only):
            return None
        n = self.seen[call] = self.seen[call] + 1
        rng = random.Random(f"{self.seed}/{call}/{n}")  # str seeds: the same in any process
        if rng.random() >= self.rate or (self.limit is not None and self.total >= self.limit):
            return None
        kind = "lost" if write and rng.random() < self.lost else "fail"
        self.injected[kind] += 1
        self.injected[f"{kind}:{call}"] += 1
        self.log.append((n, kind, call, target))
        where = f"{call} {target!r} (injected fault #{self.total}, seed {self.seed})"
        if kind == "lost":
            return kind, EndpointTimeoutError(f"{where}: applied, but its answer was lost")
        if rng.random() < 0.5:
            return kind, ServiceError(
                f"{where}: 503 SlowDown after every retry", code="SlowDown", status=503
            )
        return kind, EndpointUnreachableError(f"{where}: the connection was reset")

    async def around(
        self, call: str, target: str, run: Callable[[], Awaitable[T]], *, write: bool
    ) -> T:
        """Run ``run`` under this plan: fail before it, or after it (``lost``)."""
        fault = self.draw(call, target, write=write)
        if fault is not None and fault[0] == "fail":
            raise fault[1]
        result = await run()
        if fault is not None:
            raise fault[1]  # lost: applied, then the answer went missing
        return result


class FaultyObjectStore:
    """Wraps an object store; a seeded :class:`Faults` plan fails chosen requests.

    Faults are drawn per request, named as requests are counted
    (``"s3.PutObject"``, ``"s3.GetObject"`` ...): a ``get_many`` draws once per
    key, a listing once per page pulled, a ``delete`` once per batch; a cache
    hit makes no request and never fails.

    Args:
        inner: the store to wrap (any :class:`~langgraph_s3.core.ports.ObjectStorePort`).
        seed, rate: see :class:`Faults`; or pass ``faults`` to share a plan.
        lost: the share of write faults that happen after the write was applied.
        only: the requests that may fail (all by default).
        limit: at most this many faults in all.
    """

    def __init__(
        self,
        inner: ObjectStorePort,
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

    @property
    def bucket(self) -> str:
        return self.inner.bucket

    @property
    def concurrency(self) -> int:
        return self.inner.concurrency

    @property
    def cache(self) -> ByteLRU | None:
        return self.inner.cache

    async def put(
        self,
        key: str,
        body: bytes,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
        cache: bool = False,
        tagging: str | None = None,
    ) -> str | None:
        return await self.faults.around(
            "s3.PutObject",
            key,
            lambda: self.inner.put(
                key,
                body,
                if_none_match=if_none_match,
                if_match=if_match,
                cache=cache,
                tagging=tagging,
            ),
            write=True,
        )

    async def copy(self, source_key: str, target_key: str) -> None:
        await self.faults.around(
            "s3.CopyObject", target_key, lambda: self.inner.copy(source_key, target_key), write=True
        )

    async def delete(self, keys: Sequence[str]) -> int:
        batches = [keys[i : i + DELETE_BATCH] for i in range(0, len(keys), DELETE_BATCH)]

        async def one(batch: Sequence[str]) -> int:
            return await self.faults.around(
                "s3.DeleteObjects", batch[0], lambda: self.inner.delete(batch), write=True
            )

        return sum(await bounded_map(one, batches))

    async def delete_if_match(self, key: str, etag: str) -> bool:
        return await self.faults.around(
            "s3.DeleteObject", key, lambda: self.inner.delete_if_match(key, etag), write=True
        )

    async def get(self, key: str, *, cache: bool = False) -> bytes | None:
        if cache and self.inner.cache is not None and self.inner.cache.get(key) is not None:
            return await self.inner.get(key, cache=cache)  # a hit: no request
        return await self.faults.around(
            "s3.GetObject", key, lambda: self.inner.get(key, cache=cache), write=False
        )

    async def get_with_etag(self, key: str) -> tuple[bytes | None, str | None]:
        return await self.faults.around(
            "s3.GetObject", key, lambda: self.inner.get_with_etag(key), write=False
        )

    async def get_range(self, key: str, start: int, length: int) -> bytes | None:
        return await self.faults.around(
            "s3.GetObject", key, lambda: self.inner.get_range(key, start, length), write=False
        )

    async def get_many(self, keys: Sequence[str], *, cache: bool = False) -> list[bytes | None]:
        async def one(key: str) -> bytes | None:
            return await self.get(key, cache=cache)

        return await bounded_map(one, keys)

    async def list_pages(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[list[Listed]]:
        pages = self.inner.list_pages(prefix, start_after=start_after, page_size=page_size)
        try:
            while True:
                try:
                    page = await self.faults.around(
                        "s3.ListObjectsV2", prefix, pages.__anext__, write=False
                    )
                except StopAsyncIteration:
                    return
                yield page
        finally:
            aclose = getattr(pages, "aclose", None)
            if aclose is not None:
                await aclose()

    async def list_all(self, prefix: str, *, start_after: str | None = None) -> list[Listed]:
        out: list[Listed] = []
        async for page in self.list_pages(prefix, start_after=start_after):
            out.extend(page)
        return out

    async def bucket_exists(self) -> bool:
        return await self.faults.around(
            "s3.HeadBucket", self.bucket, self.inner.bucket_exists, write=False
        )

    async def create_bucket(self) -> None:
        await self.faults.around(
            "s3.CreateBucket", self.bucket, self.inner.create_bucket, write=True
        )

    async def lifecycle(self) -> Lifecycle:
        return await self.faults.around(
            "s3.GetBucketLifecycleConfiguration",
            self.bucket,
            self.inner.lifecycle,
            write=False,
        )

    async def set_lifecycle(self, config: Lifecycle) -> None:
        await self.faults.around(
            "s3.PutBucketLifecycleConfiguration",
            self.bucket,
            lambda: self.inner.set_lifecycle(config),
            write=True,
        )


_MANIFEST_WRITES = frozenset(
    {
        "advance",
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
        "revive",
        "drop",
        "create",
        "adopt",
        "mark_migrated",
    }
)


class FaultyManifest:
    """Wraps a manifest; a seeded :class:`Faults` plan fails chosen calls.

    Faults are drawn per call, named by method (``"advance"``, ``"latest"`` ...):
    a manifest call may make several requests, and a ``lost`` fault fails it after
    all of them were applied (``advance`` committed, its caller told otherwise).
    Arguments as :class:`FaultyObjectStore`'s.
    """

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

    @property
    def table(self) -> str:
        return self.inner.table

    @property
    def deployment(self) -> str:
        return self.inner.deployment

    @property
    def ttl_seconds(self) -> int | None:
        return self.inner.ttl_seconds

    async def _around(self, call: str, target: str, run: Callable[[], Awaitable[T]]) -> T:
        return await self.faults.around(call, target, run, write=call in _MANIFEST_WRITES)

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
            aclose = getattr(pages, "aclose", None)
            if aclose is not None:
                await aclose()

    def scan(self, *, deleting: set[str] | None = None) -> AsyncIterator[list[Entry]]:
        return self._faulty_pages("scan", self.inner.scan(deleting=deleting))

    def threads(self, after: str | None = None) -> AsyncIterator[list[ThreadInfo]]:
        return self._faulty_pages("threads", self.inner.threads(after))

    def expired(self) -> AsyncIterator[list[Expiry]]:
        return self._faulty_pages("expired", self.inner.expired())

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
                ),
            )
        finally:
            if task is not None and not task.done():
                with contextlib.suppress(Exception):
                    await task

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

    async def tombstone(self, thread_id: str) -> Deletion:
        return await self._around("tombstone", thread_id, lambda: self.inner.tombstone(thread_id))

    async def tombstone_expired(self, expiry: Expiry) -> Deletion | None:
        return await self._around(
            "tombstone_expired", expiry.thread_id, lambda: self.inner.tombstone_expired(expiry)
        )

    async def renew(self, keys: list[dict[str, Any]], stamp: int) -> bool:
        return await self._around("renew", str(stamp), lambda: self.inner.renew(keys, stamp))

    async def release(self, keys: list[dict[str, Any]], stamp: int) -> None:
        await self._around("release", str(stamp), lambda: self.inner.release(keys, stamp))

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

    async def mark_migrated(self) -> None:
        await self._around("mark_migrated", self.deployment, self.inner.mark_migrated)
