"""The bucket in memory: S3's rules for conditional writes, listings and deletes.

:class:`MemoryBucket` is what a bucket holds (shared by every store on it);
:class:`MemoryObjectStore` one client's :class:`~langgraph_s3.core.ports.ObjectStorePort`
on it, counting its requests. ``If-None-Match``/``If-Match`` writes, a 404 on
``If-Match`` counting as a failed condition, ascending listings with ``StartAfter`` and
pages, LastModified in whole seconds: each is S3's, in Python.
"""

from __future__ import annotations

import bisect
import copy
import hashlib
import threading
import time
from collections.abc import (
    AsyncIterator,
    Callable,
    Sequence,
)
from dataclasses import dataclass
from typing import Any

from langgraph_s3.aws.s3 import DELETE_BATCH
from langgraph_s3.aws.stats import RequestStats
from langgraph_s3.core import fence
from langgraph_s3.core.cache import ByteLRU
from langgraph_s3.core.keys import ERASURE_MARKER
from langgraph_s3.core.put_mode import Create, PutMode
from langgraph_s3.core.records import (
    Lifecycle,
    Listed,
)
from langgraph_s3.core.tasks import bounded_map
from langgraph_s3.errors import (
    MissingResourceError,
    NotFoundError,
    ServiceError,
)
from langgraph_s3.testing.requests import YIELDS, Requester

__all__ = ["MemoryBucket", "MemoryObjectStore", "StoredObject"]

DEFAULT_BUCKET = "memory"


def _etag(body: bytes) -> str:
    """S3's ETag of a single-part upload: the quoted MD5 of the body."""
    return f'"{hashlib.md5(body, usedforsecurity=False).hexdigest()}"'


# -------------------------------------------------------------- the bucket
@dataclass(slots=True)
class StoredObject:
    """One object of a :class:`MemoryBucket`."""

    body: bytes
    etag: str
    modified: float
    """LastModified, epoch seconds, whole (S3 lists it to the second)."""
    tagging: str | None = None


class _Objects(dict[str, StoredObject]):
    """A dict that counts the changes to its keys (the bucket's sorted index follows)."""

    version = 0

    def __setitem__(self, key: str, value: StoredObject) -> None:
        if key not in self:
            self.version += 1
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self.version += 1

    def pop(self, key: str, *default: Any) -> Any:
        self.version += 1
        return super().pop(key, *default)

    def popitem(self) -> tuple[str, StoredObject]:
        self.version += 1
        return super().popitem()

    def clear(self) -> None:
        self.version += 1
        super().clear()

    def update(self, *args: Any, **kwargs: Any) -> None:
        self.version += 1
        super().update(*args, **kwargs)

    def setdefault(self, key: str, default: Any = None) -> Any:
        self.version += 1
        return super().setdefault(key, default)


class MemoryBucket:
    """What an S3 bucket holds, shared by every :class:`MemoryObjectStore` on it.

    Args:
        name: the bucket's name.
        exists: False for a bucket ``create_bucket`` (``setup()``) has yet to create.
        clock: epoch seconds now (LastModified); ``time.time`` by default.
    """

    def __init__(
        self,
        name: str = DEFAULT_BUCKET,
        *,
        exists: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        self.exists = exists
        self.clock = clock
        self.objects: dict[str, StoredObject] = _Objects()
        """Key -> object; a test may read or change it directly (no request counted)."""
        self.lifecycle: Lifecycle | None = None
        self.lock = threading.RLock()
        """Held while a request is applied: requests are atomic, from any thread."""
        self._sorted: list[str] = []
        self._version = -1

    def keys_after(self, prefix: str, after: str | None) -> list[str]:
        """Keys under ``prefix`` sorting after ``after``, ascending (UTF-8 byte order,
        which is code point order)."""
        version = getattr(self.objects, "version", None)
        if version is None or version != self._version:  # a key was added or removed
            self._sorted, self._version = sorted(self.objects), -1 if version is None else version
        keys = self._sorted
        start = bisect.bisect_left(keys, prefix)
        if after is not None:
            start = max(start, bisect.bisect_right(keys, after))
        out: list[str] = []
        for key in keys[start:]:
            if not key.startswith(prefix):
                break
            out.append(key)
        return out

    def now(self) -> float:
        return float(int(self.clock()))


class MemoryObjectStore(Requester):
    """:class:`~langgraph_s3.aws.s3.ObjectStore`'s interface on a :class:`MemoryBucket`.

    Args:
        bucket: the bucket's name (a new, existing bucket), or a shared MemoryBucket.
        concurrency: requests in flight per operation (as the real one).
        cache_bytes: the cache of immutable objects; 0 (the default, unlike the
            saver's) disables it, so every read is a request and counts are cold.
        stats: where requests are counted (a new RequestStats by default).
        yields: event-loop turns each request lasts (see :data:`YIELDS`).
    """

    def __init__(
        self,
        bucket: str | MemoryBucket = DEFAULT_BUCKET,
        *,
        concurrency: int = 32,
        cache_bytes: int = 0,
        stats: RequestStats | None = None,
        yields: int = YIELDS,
    ) -> None:
        self.data = bucket if isinstance(bucket, MemoryBucket) else MemoryBucket(bucket)
        self.bucket = self.data.name
        self.concurrency = concurrency
        self.cache = ByteLRU(cache_bytes) if cache_bytes > 0 else None
        self.stats = stats if stats is not None else RequestStats()
        self.yields = yields

    def _require_bucket(self) -> None:
        # S3 answers NoSuchBucket, which aws/door.py translates to MissingResourceError
        if not self.data.exists:
            raise MissingResourceError("bucket", self.bucket)

    # -- writes -------------------------------------------------------------
    async def put(
        self,
        key: str,
        body: bytes,
        *,
        mode: PutMode = None,
        cache: bool = False,
        tagging: str | None = None,
    ) -> str | None:
        """Write an object; its ETag, or None when ``mode``'s condition failed."""
        if_none_match, if_match = isinstance(mode, Create), getattr(mode, "etag", None)
        fence.check()  # the S3 client's before-send hook: a stale manifest write not sent
        async with self.request("s3.PutObject", len(body)):
            with self.data.lock:
                self._require_bucket()
                current = self.data.objects.get(key)
                # If-None-Match: * -> 412 PreconditionFailed when the key exists
                if if_none_match and current is not None:
                    return None
                # If-Match: 404 NoSuchKey when it is gone, 412 when its ETag differs;
                # ObjectStore.put answers None for both
                if if_match is not None and (current is None or current.etag != if_match):
                    return None
                etag = _etag(body)
                self.data.objects[key] = StoredObject(bytes(body), etag, self.data.now(), tagging)
        if self.cache is not None:  # a write replaces what this process cached of the key
            if cache:
                self.cache.put(key, body)
            else:
                self.cache.evict(key)
        return etag

    async def copy(self, source_key: str, target_key: str, *, if_match: str | None = None) -> None:
        """CopyObject: body and tags (TaggingDirective COPY); NotFoundError when the
        source is gone (NoSuchKey) or is not ``if_match`` (412 PreconditionFailed),
        ServiceError onto itself (InvalidRequest)."""
        async with self.request("s3.CopyObject"):
            with self.data.lock:
                self._require_bucket()
                source = self.data.objects.get(source_key)
                if source is None:
                    raise NotFoundError(
                        f"s3.copy_object on s3://{self.bucket}/{target_key} (in memory) failed: "
                        f"NoSuchKey: the source {source_key!r} does not exist"
                    )
                if if_match and source.etag.strip('"') != if_match.strip('"'):
                    raise NotFoundError(
                        f"s3.copy_object on s3://{self.bucket}/{target_key} (in memory) failed: "
                        f"PreconditionFailed: the source {source_key!r} is not {if_match}"
                    )
                if source_key == target_key:  # S3 refuses a copy onto itself (400)
                    raise ServiceError(
                        f"s3.copy_object on s3://{self.bucket}/{target_key} (in memory) failed: "
                        "InvalidRequest: this copy request is illegal because it is trying to "
                        "copy an object to itself without changing its metadata",
                        code="InvalidRequest",
                        status=400,
                    )
                self.data.objects[target_key] = StoredObject(
                    source.body, source.etag, self.data.now(), source.tagging
                )

    async def delete(self, keys: Sequence[str]) -> int:
        """Delete keys in batches of 1,000 (one DeleteObjects each). Returns how many."""
        if not keys:
            return 0
        if self.cache is not None:
            for key in keys:
                self.cache.evict(key)
        batches = [keys[i : i + DELETE_BATCH] for i in range(0, len(keys), DELETE_BATCH)]

        async def one(batch: Sequence[str]) -> int:
            async with self.request("s3.DeleteObjects"):
                with self.data.lock:
                    self._require_bucket()
                    for key in batch:  # a missing key is no error (Quiet mode)
                        self.data.objects.pop(key, None)
            return len(batch)

        return sum(await bounded_map(one, batches))

    async def delete_if_match(self, key: str, etag: str) -> bool:
        """DeleteObject with If-Match: False when the ETag differs (412); True when it
        went, or was already gone (S3 answers a missing key 204: that version is no
        longer there)."""
        async with self.request("s3.DeleteObject"):
            with self.data.lock:
                self._require_bucket()
                current = self.data.objects.get(key)
                if current is None:
                    return True
                if current.etag != etag:
                    return False
                self.data.objects.pop(key, None)
        if self.cache is not None:
            self.cache.evict(key)
        return True

    # -- reads --------------------------------------------------------------
    async def get(self, key: str, *, cache: bool = False) -> bytes | None:
        """Read an object; None when it does not exist (a cache hit makes no request)."""
        if cache and self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                return hit
        body, _ = await self.get_with_etag(key)
        # an erasure marker is no immutable object: a new life's write replaces it
        if body is not None and cache and self.cache is not None and body != ERASURE_MARKER:
            self.cache.put(key, body)
        return body

    async def get_range(self, key: str, start: int, length: int) -> bytes | None:
        """A ranged GetObject (ObjectStore.get_range)."""
        async with self.request("s3.GetObject"):
            with self.data.lock:
                self._require_bucket()
                current = self.data.objects.get(key)
                return None if current is None else current.body[start : start + length]

    async def get_with_etag(self, key: str) -> tuple[bytes | None, str | None]:
        """The body and ETag, or ``(None, None)`` when the object does not exist."""
        fence.check()
        async with self.request("s3.GetObject"):
            with self.data.lock:
                self._require_bucket()
                current = self.data.objects.get(key)
                if current is None:
                    return None, None
                return current.body, current.etag

    async def get_many(self, keys: Sequence[str], *, cache: bool = False) -> list[bytes | None]:
        async def one(key: str) -> bytes | None:
            return await self.get(key, cache=cache)

        return await bounded_map(one, keys)

    async def list_pages(
        self,
        prefix: str,
        *,
        start_after: str | None = None,
        page_size: int = 1000,
    ) -> AsyncIterator[list[Listed]]:
        """Yield pages of keys under ``prefix`` in ascending key order.

        One ListObjectsV2 per page, each reading the bucket as it is then (a key
        written meanwhile after the last one listed shows up, as on S3).
        """
        # ObjectStore sends StartAfter only when it sorts after the prefix
        after = start_after if start_after is not None and start_after > prefix else None
        while True:
            async with self.request("s3.ListObjectsV2"):
                with self.data.lock:
                    self._require_bucket()
                    keys = self.data.keys_after(prefix, after)
                    page = [
                        Listed(
                            k,
                            self.data.objects[k].etag,
                            self.data.objects[k].modified,
                            len(self.data.objects[k].body),
                        )
                        for k in keys[:page_size]
                    ]
                    truncated = len(keys) > page_size  # IsTruncated
            if page:
                yield page
            if not truncated:
                return
            after = page[-1].key  # NextContinuationToken: after the last key listed

    async def list_all(self, prefix: str, *, start_after: str | None = None) -> list[Listed]:
        out: list[Listed] = []
        async for page in self.list_pages(prefix, start_after=start_after):
            out.extend(page)
        return out

    # -- setup --------------------------------------------------------------
    async def bucket_exists(self) -> bool:
        async with self.request("s3.HeadBucket"):
            return self.data.exists

    async def create_bucket(self) -> None:
        async with self.request("s3.CreateBucket"):
            self.data.exists = True  # BucketAlreadyOwnedByYou is fine too

    async def lifecycle(self) -> Lifecycle:
        """The bucket's lifecycle configuration (none: no rules)."""
        async with self.request("s3.GetBucketLifecycleConfiguration"):
            with self.data.lock:
                self._require_bucket()
                return copy.deepcopy(self.data.lifecycle or Lifecycle())

    async def set_lifecycle(self, config: Lifecycle) -> None:
        """Replace it whole, as PutBucketLifecycleConfiguration does."""
        async with self.request("s3.PutBucketLifecycleConfiguration"):
            with self.data.lock:
                self._require_bucket()
                self.data.lifecycle = copy.deepcopy(config)
