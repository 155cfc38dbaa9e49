"""Seeded faults: wrappers that make chosen calls of any port fail, deterministically.

:class:`FaultyObjectStore` and :class:`~.faulty_table.FaultyTable` wrap any implementation and,
for a seed, make chosen calls fail with the library's own transient errors, either
before anything is applied or after (the answer is lost), the way SlateDB tests on a
seeded failing store.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections import Counter
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterator,
    Sequence,
)
from typing import TypeVar

from langgraph_s3.aws.s3 import DELETE_BATCH
from langgraph_s3.core.cache import ByteLRU
from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.core.put_mode import PutMode
from langgraph_s3.core.records import (
    Lifecycle,
    Listed,
)
from langgraph_s3.core.tasks import bounded_map
from langgraph_s3.errors import (
    EndpointTimeoutError,
    EndpointUnreachableError,
    S3PersistenceError,
    ServiceError,
)

__all__ = ["Faults", "FaultyObjectStore"]

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
        mode: PutMode = None,
        cache: bool = False,
        tagging: str | None = None,
    ) -> str | None:
        return await self.faults.around(
            "s3.PutObject",
            key,
            lambda: self.inner.put(
                key,
                body,
                mode=mode,
                cache=cache,
                tagging=tagging,
            ),
            write=True,
        )

    async def copy(self, source_key: str, target_key: str, *, if_match: str | None = None) -> None:
        await self.faults.around(
            "s3.CopyObject",
            target_key,
            lambda: self.inner.copy(source_key, target_key, if_match=if_match),
            write=True,
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
