"""In-memory stand-ins for tests and offline experiments.

:class:`MemoryObjectStore` and :class:`MemoryManifest` implement the same
interfaces as :class:`~langgraph_s3.aws.s3.ObjectStore` (S3) and
:class:`~langgraph_s3.manifest.Manifest` (DynamoDB)
(:mod:`langgraph_s3.core.ports`), with the same semantics, over dicts: a saver built
on them runs its whole logic with no network and no moto server, a few
milliseconds per call::

    saver = memory_saver()                       # an AsyncS3Saver on fresh fakes
    graph = builder.compile(checkpointer=saver)
    await graph.ainvoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t"}})
    saver.stats.by_operation                     # {"s3.PutObject": ..., "dynamodb.UpdateItem": ...}

or, explicitly::

    AsyncS3Saver(bucket="b", object_store=MemoryObjectStore("b"), manifest=MemoryManifest())

**Fidelity.** Every rule the AWS implementations leave to S3 or DynamoDB
(``If-None-Match``/``If-Match`` writes, a 404 on ``If-Match`` counting as a
failed condition, ascending listings with ``StartAfter`` and pages,
LastModified in whole seconds, the manifest's condition expressions) is
implemented here in Python, each citing the expression it stands for; the
manifest's pure decisions (``_decide``, ``trim_gone``, ``Raw``, ``Entry``)
are the real ones, and its items are stored in DynamoDB's attribute format.
``tests/unit/test_contract_*.py`` run the same assertions on these and on the
real classes against moto.

**Requests** are counted like the real clients count them, per
``"service.Operation"`` in a :class:`~langgraph_s3.aws.stats.RequestStats`
(``memory_saver`` shares the saver's, so ``saver.stats`` works as on AWS):
a cache hit makes none, a listing one per page, a delete one per 1,000 keys.
Each request yields to the event loop before it is applied, so requests
issued together are in flight together and ``round_trips`` is the critical
path (the longest chain of requests, each sent after the one before it
answered), as on a network. ``bytes_sent`` counts object bodies only.

**State** lives in a :class:`MemoryBucket` / :class:`MemoryTable`: several
stores or manifests (a writer and a cold reader, two deployments on one
table) share one by passing it in. Their ``objects`` / ``items`` are plain
dicts a test may inspect or damage directly (no request is counted).

**Faults.** :class:`FaultyObjectStore` and :class:`FaultyManifest` wrap any
implementation and, deterministically for a seed, make chosen calls fail with
the library's own transient errors, either before anything is applied or
after (the answer is lost), the way SlateDB tests on a seeded failing store.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import copy
import hashlib
import logging
import random
import threading
import time
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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from langgraph_s3.aws.clients import Limits
from langgraph_s3.aws.s3 import DELETE_BATCH
from langgraph_s3.aws.stats import RequestStats
from langgraph_s3.core.cache import ByteLRU
from langgraph_s3.core.keys import encode
from langgraph_s3.core.ports import ManifestPort, ObjectStorePort
from langgraph_s3.core.records import (
    DELETE_LEASE_SECONDS,
    IDLE_ATTRIBUTE,
    REMOVING,
    REVIVABLE,
    ROOT_SK,
    TTL_ATTRIBUTE,
    Deletion,
    Entry,
    Expiry,
    Fields,
    Lifecycle,
    Listed,
    PackRef,
    Raw,
    ThreadInfo,
    entry_of,
)
from langgraph_s3.core.tasks import bounded_map, gather_all, permit
from langgraph_s3.errors import (
    EndpointTimeoutError,
    EndpointUnreachableError,
    MissingResourceError,
    NotFoundError,
    S3PersistenceError,
    ServiceError,
)
from langgraph_s3.manifest.dynamodb import (
    LAYOUT_VERSION,
    META_SK,
    RETIP_RUNS,
    TOMBSTONE_SECONDS,
    CommitRounds,
    demoted,
    deployment_key,
    expiry_attribute,
    trim_gone,
    whole_item,
)

if TYPE_CHECKING:
    from langgraph_s3.aws.s3 import ObjectStore
    from langgraph_s3.checkpoint.saver import AsyncS3Saver
    from langgraph_s3.manifest.dynamodb import Manifest

__all__ = [
    "Faults",
    "FaultyManifest",
    "FaultyObjectStore",
    "MemoryBucket",
    "MemoryManifest",
    "MemoryObjectStore",
    "MemoryTable",
    "StoredObject",
    "memory_saver",
]

logger = logging.getLogger(__name__)
T = TypeVar("T")
P = TypeVar("P")

DEFAULT_BUCKET = "memory"
DEFAULT_TABLE = "langgraph-s3-manifest"
YIELDS = 6
"""Event-loop turns a fake request lasts: long enough for the tasks a call starts
together (through ``gather``, ``TaskGroup``, ``bounded_map``, LangGraph's background
writes) to all be in flight before the first answer arrives, so ``round_trips``
counts as on a network (tests/unit/test_contract_saver.py compares them with moto's)."""
PAGE_ITEMS = 1000
"""Items per Query or Scan page (DynamoDB pages by 1 MB, about this many entries)."""


# ---------------------------------------------------------------- requests
class _Requester:
    """Counts a fake request like the real clients do, holds one of the current
    operation's permits (as ``aws.call`` does), and lets the loop turn."""

    stats: RequestStats
    yields: int

    @contextlib.asynccontextmanager
    async def _request(self, operation: str, nbytes: int = 0) -> AsyncIterator[None]:
        async with permit():
            attempt = self.stats.sent(operation, nbytes)
            try:
                for _ in range(self.yields):
                    await asyncio.sleep(0)
                yield  # the caller applies the request here, without awaiting
            finally:
                self.stats.done(attempt)


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


class MemoryObjectStore(_Requester):
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
        if_none_match: bool = False,
        if_match: str | None = None,
        cache: bool = False,
        tagging: str | None = None,
    ) -> str | None:
        """Write an object; its ETag, or None when a condition failed."""
        async with self._request("s3.PutObject", len(body)):
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
        if cache and self.cache is not None:
            self.cache.put(key, body)
        return etag

    async def copy(self, source_key: str, target_key: str) -> None:
        """CopyObject: body and tags (TaggingDirective COPY); NotFoundError when the
        source is gone (NoSuchKey), ServiceError onto itself (InvalidRequest)."""
        async with self._request("s3.CopyObject"):
            with self.data.lock:
                self._require_bucket()
                source = self.data.objects.get(source_key)
                if source is None:
                    raise NotFoundError(
                        f"s3.copy_object on s3://{self.bucket}/{target_key} (in memory) failed: "
                        f"NoSuchKey: the source {source_key!r} does not exist"
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
            async with self._request("s3.DeleteObjects"):
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
        async with self._request("s3.DeleteObject"):
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
        if body is not None and cache and self.cache is not None:
            self.cache.put(key, body)
        return body

    async def get_range(self, key: str, start: int, length: int) -> bytes | None:
        """A ranged GetObject (ObjectStore.get_range)."""
        async with self._request("s3.GetObject"):
            with self.data.lock:
                self._require_bucket()
                current = self.data.objects.get(key)
                return None if current is None else current.body[start : start + length]

    async def get_with_etag(self, key: str) -> tuple[bytes | None, str | None]:
        """The body and ETag, or ``(None, None)`` when the object does not exist."""
        async with self._request("s3.GetObject"):
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
            async with self._request("s3.ListObjectsV2"):
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
        async with self._request("s3.HeadBucket"):
            return self.data.exists

    async def create_bucket(self) -> None:
        async with self._request("s3.CreateBucket"):
            self.data.exists = True  # BucketAlreadyOwnedByYou is fine too

    async def lifecycle(self) -> Lifecycle:
        """The bucket's lifecycle configuration (none: no rules)."""
        async with self._request("s3.GetBucketLifecycleConfiguration"):
            with self.data.lock:
                self._require_bucket()
                return copy.deepcopy(self.data.lifecycle or Lifecycle())

    async def set_lifecycle(self, config: Lifecycle) -> None:
        """Replace it whole, as PutBucketLifecycleConfiguration does."""
        async with self._request("s3.PutBucketLifecycleConfiguration"):
            with self.data.lock:
                self._require_bucket()
                self.data.lifecycle = copy.deepcopy(config)


# --------------------------------------------------------------- the table
def _s(item: dict[str, Any] | None, name: str) -> str | None:
    """A string attribute (None when absent)."""
    value = (item or {}).get(name)
    return None if value is None else str(value["S"])


def _n(item: dict[str, Any] | None, name: str) -> float | None:
    """A number attribute (None when absent)."""
    value = (item or {}).get(name)
    return None if value is None else float(value["N"])


def _int(item: dict[str, Any] | None, name: str) -> int | None:
    """A whole-number attribute, exactly (stamps are nanoseconds: beyond a float)."""
    value = (item or {}).get(name)
    return None if value is None else int(value["N"])


def _unexpired(item: dict[str, Any], now: int) -> bool:
    # "(attribute_not_exists(expires_at) OR expires_at > :now)"
    exp = _n(item, TTL_ATTRIBUTE)
    return exp is None or exp > now


def _expire(item: dict[str, Any], checkpoint_ns: str, now: int, ttl: int | None) -> None:
    # "SET {expiry_attribute(ns)} = :exp" [" REMOVE expires_at" for a subgraph namespace]
    if ttl:
        item[expiry_attribute(checkpoint_ns)] = {"N": str(now + ttl)}
        if checkpoint_ns:
            item.pop(TTL_ATTRIBUTE, None)


def _add_number(item: dict[str, Any], name: str, delta: int) -> None:
    # "ADD name :delta": a missing number counts as 0
    item[name] = {"N": str((_int(item, name) or 0) + delta)}


def _add_strings(item: dict[str, Any], name: str, values: Iterable[str]) -> None:
    # "ADD name :set" on a string set: the union (a missing set counts as empty)
    current = set((item.get(name) or {}).get("SS", ()))
    item[name] = {"SS": sorted(current | set(values))}


class MemoryTable:
    """What the manifest's DynamoDB table holds, shared by every :class:`MemoryManifest`
    on it (one per deployment, as on AWS).

    Args:
        name: the table's name.
        exists: False for a table ``create()`` (``setup()``) has yet to create.
        clock: epoch seconds now (TTL, leases, ``updated_at``); ``time.time`` by default.
    """

    def __init__(
        self,
        name: str = DEFAULT_TABLE,
        *,
        exists: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        self.exists = exists
        self.ttl_enabled = exists
        self.clock = clock
        self.items: dict[tuple[str, str], dict[str, Any]] = {}
        """(pk, sk) -> the item in DynamoDB's attribute format; a test may change it."""
        self.lock = threading.RLock()
        self._last_stamp = 0

    def stamp(self) -> int:
        """``time.time_ns()`` of the table's clock, strictly increasing."""
        self._last_stamp = max(int(self.clock() * 1e9), self._last_stamp + 1)
        return self._last_stamp

    def get(self, key: tuple[str, str]) -> dict[str, Any] | None:
        item = self.items.get(key)
        return copy.deepcopy(item) if item is not None else None

    def sorted_keys(self, after: tuple[str, str] | None) -> list[tuple[str, str]]:
        keys = sorted(self.items)
        return keys if after is None else [k for k in keys if k > after]


class MemoryManifest(CommitRounds, _Requester):
    """:class:`~langgraph_s3.manifest.Manifest`'s interface on a :class:`MemoryTable`.

    Args:
        table: the table's name (a new, existing table), or a shared MemoryTable.
        deployment: this deployment's partition key prefix
            (``manifest.deployment_key(bucket, prefix)``; by default that of
            bucket ``"memory"`` without a prefix).
        ttl_seconds: idle seconds before a thread expires; None keeps threads forever.
        stats: where requests are counted (a new RequestStats by default).
        max_conflicts: compare-and-swap rounds before a ConflictError.
        page_items: items per Query or Scan page.
        yields: event-loop turns each request lasts (see :data:`YIELDS`).
    """

    def __init__(
        self,
        table: str | MemoryTable = DEFAULT_TABLE,
        *,
        deployment: str | None = None,
        ttl_seconds: int | None = None,
        stats: RequestStats | None = None,
        max_conflicts: int = Limits.max_conflicts,
        page_items: int = PAGE_ITEMS,
        yields: int = YIELDS,
    ) -> None:
        self.data = table if isinstance(table, MemoryTable) else MemoryTable(table)
        self.table = self.data.name
        self.deployment = (
            deployment if deployment is not None else deployment_key(DEFAULT_BUCKET, "")
        )
        self.ttl_seconds = ttl_seconds
        self.stats = stats if stats is not None else RequestStats()
        self.max_conflicts = max_conflicts
        self.page_items = page_items
        self.yields = yields

    # -- keys and items ---------------------------------------------------------
    def _pk(self, thread_id: str) -> str:
        return f"{self.deployment}{encode(thread_id, 'thread_id')}"

    def _key(self, thread_id: str, checkpoint_ns: str) -> tuple[str, str]:
        return self._pk(thread_id), encode(checkpoint_ns, "checkpoint_ns")

    @staticmethod
    def _key_attrs(key: tuple[str, str]) -> dict[str, Any]:
        return {"pk": {"S": key[0]}, "sk": {"S": key[1]}}

    @staticmethod
    def _key_of(attrs: dict[str, Any]) -> tuple[str, str]:
        return str(attrs["pk"]["S"]), str(attrs["sk"]["S"])

    def _now(self) -> int:
        return int(self.data.clock())

    def _require_table(self) -> None:
        # DynamoDB answers ResourceNotFoundException, which aws/door.py translates so
        if not self.data.exists:
            raise MissingResourceError("manifest table", self.table)

    async def _pages(
        self,
        operation: str,
        match: Callable[[tuple[str, str]], bool],
        after: tuple[str, str] | None = None,
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """A Query or Scan: pages of ``page_items`` matching items in key order, one
        request each, each reading the table as it is then (after ``after``:
        ExclusiveStartKey)."""
        while True:
            async with self._request(operation):
                with self.data.lock:
                    self._require_table()
                    keys = [k for k in self.data.sorted_keys(after) if match(k)]
                    page = [self.data.items[k] for k in keys[: self.page_items]]
                    page = copy.deepcopy(page)
                    more = len(keys) > self.page_items  # LastEvaluatedKey
            yield page
            if not more:
                return
            after = self._key_of(page[-1])

    def _query(self, thread_id: str) -> AsyncIterator[list[dict[str, Any]]]:
        # KeyConditionExpression "pk = :pk"
        pk = self._pk(thread_id)
        return self._pages("dynamodb.Query", lambda k: k[0] == pk)

    # -- reading ------------------------------------------------------------
    async def read(self, thread_id: str, checkpoint_ns: str) -> Raw | None:
        """The item as stored (live, tombstone or expired). Cost: 1 GetItem."""
        async with self._request("dynamodb.GetItem"):
            with self.data.lock:
                self._require_table()
                item = self.data.get(self._key(thread_id, checkpoint_ns))
        return Raw(item) if item else None

    async def latest(self, thread_id: str, checkpoint_ns: str) -> Entry | None:
        """The live entry; None for a thread that does not exist, was deleted or expired.
        Cost: 1 GetItem; for a subgraph namespace 1 BatchGetItem (it and the root)."""
        if not checkpoint_ns:
            raw = await self.read(thread_id, checkpoint_ns)
            items = [raw.item] if raw is not None else []
        else:
            async with self._request("dynamodb.BatchGetItem"):
                with self.data.lock:
                    self._require_table()
                    got = (self.data.get(self._key(thread_id, ns)) for ns in ("", checkpoint_ns))
                    items = [i for i in got if i is not None]
        want = encode(checkpoint_ns, "checkpoint_ns")
        entries = self._live(items, self.data.clock())
        return next((e for e in entries if encode(e.checkpoint_ns, "checkpoint_ns") == want), None)

    async def namespaces(self, thread_id: str) -> list[Entry]:
        """Every live namespace of one thread, in namespace (sort key) order."""
        items: list[dict[str, Any]] = []
        async for page in self._query(thread_id):
            items.extend(page)
        return self._live(items, self.data.clock())

    def _scan_pages(self, start: dict[str, Any] | None) -> AsyncIterator[list[dict[str, Any]]]:
        # FilterExpression "begins_with(pk, :d)" (DynamoDB filters after reading; here
        # the pages hold only this deployment's items, which the callers cannot tell)
        after = self._key_of(start) if start is not None else None
        return self._pages("dynamodb.Scan", lambda k: k[0].startswith(self.deployment), after=after)

    async def _read_pair(self, thread_id: str, checkpoint_ns: str) -> tuple[Raw | None, Raw | None]:
        """The root's item and the namespace's (Manifest._read_pair): 1 BatchGetItem."""
        async with self._request("dynamodb.BatchGetItem"):
            with self.data.lock:
                self._require_table()
                root = self.data.get(self._key(thread_id, ""))
                sub = self.data.get(self._key(thread_id, checkpoint_ns))
        return (Raw(root) if root else None), (Raw(sub) if sub else None)

    async def seal_born(self, thread_id: str, born: str) -> bool:
        """Fix a life's beginning (Manifest.seal_born): 1 conditional UpdateItem."""
        key = self._key(thread_id, "")
        async with self._request("dynamodb.UpdateItem"):
            with self.data.lock:
                self._require_table()
                item = self.data.items.get(key)
                if item is None or "latest_id" not in item or _s(item, "born") != born:
                    return False
                item.pop("born", None)
                _add_number(item, "rev", 1)
                return True

    async def pack_of(self, encoded_thread: str) -> PackRef | None:
        """The pack of a thread by its key segment (Manifest.pack_of): 1 GetItem."""
        async with self._request("dynamodb.GetItem"):
            with self.data.lock:
                self._require_table()
                item = self.data.get((self.deployment + encoded_thread, ROOT_SK))
        raw = Raw(item) if item else None
        return PackRef.of(raw.item.get("pack")) if raw is not None and raw.committed else None

    async def set_pack(
        self,
        thread_id: str,
        new: PackRef | None,
        old: PackRef | None,
        *,
        mark: str | None = None,
        life: str | None = None,
    ) -> bool:
        """Packing's commit (Manifest.set_pack): 1 conditional UpdateItem."""
        key = self._key(thread_id, "")
        async with self._request("dynamodb.UpdateItem"):
            with self.data.lock:
                self._require_table()
                item = self.data.items.get(key)
                if item is None or "latest_id" not in item or "deleted" in item:
                    return False
                current = PackRef.of(item.get("pack"))
                if (current.key if current else None) != (old.key if old else None):
                    return False
                if life and _s(item, "life") != life:  # " AND life = :life"
                    return False
                if new is None:
                    item.pop("pack", None)
                else:
                    item["pack"] = new.item()
                _add_number(item, "rev", 1)
                _add_number(item, "packings", 1)
                if mark:  # ", removing :mk"
                    _add_strings(item, REMOVING, [mark])
                return True

    async def touch(self, thread_id: str) -> bool:
        """Refresh a live thread's TTL (Manifest.touch): 1 conditional UpdateItem."""
        if not self.ttl_seconds:
            return False
        key = self._key(thread_id, "")
        async with self._request("dynamodb.UpdateItem"):
            with self.data.lock:
                self._require_table()
                now = self._now()
                item = self.data.items.get(key)
                exp = _n(item, TTL_ATTRIBUTE)
                if item is None or "latest_id" not in item or "deleted" in item:
                    return False
                if exp is None or not now < exp < now + self.ttl_seconds:
                    return False
                item[TTL_ATTRIBUTE] = {"N": str(now + self.ttl_seconds)}
                return True

    # -- the writer -----------------------------------------------------------
    async def _advance_fast(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        tail: str,
        parent_id: str | None,
        uses_delta: bool,
        life: str | None,
        fresh: str,
    ) -> bool:
        """Manifest._advance_fast's UpdateItem; ``advance`` itself (with the contended
        read-decide-write rounds and the real ``_decide``) is CommitRounds'."""
        key = self._key(thread_id, checkpoint_ns)
        async with self._request("dynamodb.UpdateItem"):
            with self.data.lock:
                self._require_table()
                now = self._now()
                item = self.data.items.get(key)
                if parent_id is not None:
                    # "latest_id = :p AND latest_id < :id AND attribute_not_exists(deleted)
                    #  AND (attribute_not_exists(expires_at) OR expires_at > :now)"
                    #  [" AND (attribute_not_exists(life) OR life = :life)"]
                    ok = (
                        item is not None
                        and _s(item, "latest_id") == parent_id
                        and parent_id < checkpoint_id
                        and "deleted" not in item
                        and _unexpired(item, now)
                        and (not life or _s(item, "life") in (None, life))
                    )
                else:
                    ok = item is None  # "attribute_not_exists(pk)"
                if ok:
                    new = copy.deepcopy(item) if item is not None else self._key_attrs(key)
                    # "SET latest_id = :id, latest_tail = :tail, updated_at = :now,
                    #  uses_delta = :d [, expires_at = :exp]"
                    new["latest_id"] = {"S": checkpoint_id}
                    new["latest_tail"] = {"S": tail}
                    new["updated_at"] = {"N": str(now)}
                    new["uses_delta"] = {"BOOL": uses_delta}
                    _expire(new, checkpoint_ns, now, self.ttl_seconds)
                    if parent_id is None:
                        # ", thread_id = :t, checkpoint_ns = :ns, floor = :id, born = :id,
                        #  created_at = :now"
                        new["thread_id"] = {"S": thread_id}
                        new["checkpoint_ns"] = {"S": checkpoint_ns}
                        new["floor"] = {"S": checkpoint_id}
                        new["born"] = {"S": checkpoint_id}
                        new["created_at"] = {"N": str(now)}
                        new["life"] = {"S": fresh}
                    _add_number(new, "rev", 1)  # "ADD rev :one"
                    self.data.items[key] = new
        return ok

    def _conflict_rounds(self) -> int:
        return self.max_conflicts

    def _clock(self) -> float:
        return self.data.clock()

    def now(self) -> float:
        return self.data.clock()

    async def _add_tip(
        self, entry: Entry, cid: str, tail: str, parent: str | None, uses_delta: bool
    ) -> bool:
        """Commit ``cid`` beside the tips of ``entry``'s life (Manifest._add_tip)."""
        key = self._key(entry.thread_id, entry.checkpoint_ns)
        async with self._request("dynamodb.UpdateItem"):
            with self.data.lock:
                self._require_table()
                now = self._now()
                item = self.data.items.get(key)
                # live = "floor = :floor AND attribute_not_exists(deleted) AND
                #   (attribute_not_exists(expires_at) OR expires_at > :now)"
                #   [" AND life = :life" | " AND attribute_not_exists(life)"]
                #   " AND (attribute_not_exists(gone) OR NOT contains(gone, :id))"
                #   [" AND (attribute_not_exists(gone) OR NOT contains(gone, :p))"]
                gone = item.get("gone", {}).get("SS", ()) if item is not None else ()
                live = (
                    item is not None
                    and _s(item, "floor") == entry.floor
                    and (_s(item, "life") or "") == entry.life
                    and "deleted" not in item
                    and _unexpired(item, now)
                    and cid not in gone
                    and (parent is None or parent not in gone)
                )
                if not live or item is None:
                    return False
                new = copy.deepcopy(item)
                if cid > entry.latest_id:
                    # "latest_id = :old AND {live}"
                    if _s(item, "latest_id") != entry.latest_id:
                        return False
                    # "SET latest_id = :id, latest_tail = :tail, uses_delta = :d,
                    #  updated_at = :now [, expires_at = :exp] ADD heads :oldset, rev :one"
                    new["latest_id"] = {"S": cid}
                    new["latest_tail"] = {"S": tail}
                    new["uses_delta"] = {"BOOL": uses_delta}
                    new["updated_at"] = {"N": str(now)}
                    _expire(new, entry.checkpoint_ns, now, self.ttl_seconds)
                    _add_strings(new, "heads", demoted(entry))
                else:
                    # "latest_id > :id AND {live}"
                    latest = _s(item, "latest_id")
                    if latest is None or not latest > cid:
                        return False
                    # "SET updated_at = :now ADD heads :idset, rev :one"
                    new["updated_at"] = {"N": str(now)}
                    _add_strings(new, "heads", [cid])
                _add_number(new, "rev", 1)
                self.data.items[key] = new
                return True

    async def _swap(
        self, thread_id: str, checkpoint_ns: str, new: Fields, *, rev: int | None
    ) -> bool:
        """Write the whole item as ``new`` if it is still at ``rev`` (None: if there is
        no item): one PutItem, as Manifest._swap."""
        key = self._key(thread_id, checkpoint_ns)
        async with self._request("dynamodb.PutItem"):
            with self.data.lock:
                self._require_table()
                now = self._now()
                current = self.data.items.get(key)
                if rev is None:
                    ok = current is None  # "attribute_not_exists(pk)"
                else:  # "rev = :rev" (false when the item or its rev is missing)
                    ok = current is not None and _int(current, "rev") == rev
                if not ok:
                    return False
                self.data.items[key] = whole_item(
                    self._key_attrs(key), thread_id, checkpoint_ns, new, rev, now, self.ttl_seconds
                )
                return True

    async def _drop_heads(self, entry: Entry, moved: list[str], spill: str) -> bool:
        """Spill's commit (Manifest._drop_heads): 1 UpdateItem conditioned on ``rev``."""
        key = self._key(entry.thread_id, entry.checkpoint_ns)
        async with self._request("dynamodb.UpdateItem"):
            with self.data.lock:
                self._require_table()
                item = self.data.items.get(key)
                if item is None or _int(item, "rev") != entry.rev:  # "rev = :rev"
                    return False
                # "SET spilled = :t DELETE heads :moved ADD rev :one"
                new = copy.deepcopy(item)
                new["spilled"] = {"S": spill}
                left = sorted(set(new.get("heads", {}).get("SS", ())) - set(moved))
                if left:
                    new["heads"] = {"SS": left}
                else:
                    new.pop("heads", None)  # DynamoDB drops a set left empty
                _add_number(new, "rev", 1)
                self.data.items[key] = new
                return True

    # -- maintenance ------------------------------------------------------------
    async def raise_floor(
        self, entry: Entry, floor: str, removed: Iterable[str], *, mark: str | None = None
    ) -> bool:
        """Prune's commit (Manifest.raise_floor): 1 UpdateItem conditioned on the life,
        floor, heads and gone prune saw, and a latest no older than it saw."""
        key = self._key(entry.thread_id, entry.checkpoint_ns)
        async with self._request("dynamodb.UpdateItem"):
            with self.data.lock:
                self._require_table()
                now = self._now()
                item = self.data.items.get(key)
                # manifest._as_read: "floor = :f0 AND latest_id >= :l AND
                #  attribute_not_exists(deleted) AND (not expired) AND spilled, heads
                #  and gone as read"
                if not self._as_read(item, entry, now) or item is None:
                    return False
                new = copy.deepcopy(item)
                # "SET floor = :f[, gone = :gone] REMOVE heads, born[, gone] ADD rev :one"
                new["floor"] = {"S": floor}
                gone = trim_gone({*entry.gone, *removed}, floor, now)
                new.pop("heads", None)
                new.pop("spilled", None)
                new.pop("born", None)
                new.pop("gone", None)
                if gone:
                    new["gone"] = {"SS": sorted(gone)}
                _add_number(new, "rev", 1)
                if mark:  # ", removing :mk"
                    _add_strings(new, REMOVING, [mark])
                self.data.items[key] = new
                return True

    async def retip(
        self, entry: Entry, new: Fields, runs: Iterable[str], *, mark: str | None = None
    ) -> bool:
        """delete_for_runs' commit (Manifest.retip): while the latest stays, 1 UpdateItem
        conditioned as raise_floor's and on the latest not being one of ``runs``'; else
        a compare-and-swap on ``rev``."""
        tokens = sorted(set(runs))
        if new.latest_id != entry.latest_id or len(tokens) > RETIP_RUNS:
            if mark:
                new = replace(new, removing=new.removing | {mark})
            return await self.replace(entry, new)
        key = self._key(entry.thread_id, entry.checkpoint_ns)
        async with self._request("dynamodb.UpdateItem"):
            with self.data.lock:
                self._require_table()
                now = self._now()
                item = self.data.items.get(key)
                tail = _s(item, "latest_tail") or ""
                # _as_read(entry) AND (latest_id = :l OR NOT contains(latest_tail, :run_i)...)
                moved = _s(item, "latest_id") != entry.latest_id
                if not self._as_read(item, entry, now) or (
                    moved and any(f".{t}" in tail for t in tokens)
                ):
                    return False
                assert item is not None
                new_item = copy.deepcopy(item)
                gone = trim_gone(new.gone, new.floor, now)
                for name, value in (("heads", new.heads), ("gone", gone)):
                    if value:  # "SET heads = :heads" / "REMOVE heads"
                        new_item[name] = {"SS": sorted(value)}
                    else:
                        new_item.pop(name, None)
                for name, text in (("born", new.born), ("spilled", new.spilled)):
                    if text:  # "SET born = :born" / "REMOVE born", the same for spilled
                        new_item[name] = {"S": text}
                    else:
                        new_item.pop(name, None)
                _add_number(new_item, "rev", 1)
                if mark:  # ", removing :mk"
                    _add_strings(new_item, REMOVING, [mark])
                self.data.items[key] = new_item
                return True

    @staticmethod
    def _as_read(item: dict[str, Any] | None, entry: Entry, now: int) -> bool:
        """``manifest._as_read``: the same life as ``entry``, a latest no older."""
        return (
            item is not None
            and (_s(item, "life") or "") == entry.life
            and _s(item, "floor") == entry.floor
            and _s(item, "latest_id") is not None
            and (_s(item, "latest_id") or "") >= entry.latest_id
            and "deleted" not in item
            and _unexpired(item, now)
            and set(item.get("heads", {}).get("SS", ())) == set(entry.heads)
            and set(item.get("gone", {}).get("SS", ())) == set(entry.gone)
            and item.get("spilled", {}).get("S", "") == entry.spilled
        )

    async def replace(self, entry: Entry, new: Fields) -> bool:
        """Compare-and-swap one entry as read (Manifest.replace)."""
        return await self._swap(entry.thread_id, entry.checkpoint_ns, new, rev=entry.rev)

    def _retire(
        self, key: tuple[str, str], stamp: int, lease: int, now: int, *, revivable: bool = False
    ) -> None:
        """ "SET deleted = :t, deleted_at = :stamp, lease_until = :lease, expires_at = :exp
        ADD rev :one REMOVE latest_id, latest_tail, heads, uses_delta" (creates the item
        when there is none, as UpdateItem does)."""
        item = self.data.items.get(key)
        new = copy.deepcopy(item) if item is not None else self._key_attrs(key)
        new["deleted"] = {"BOOL": True}
        new["deleted_at"] = {"N": str(stamp)}
        new["lease_until"] = {"N": str(lease)}
        if revivable:  # "SET revivable = :t" (delete_thread's), else "REMOVE revivable"
            new[REVIVABLE] = {"BOOL": True}
        else:
            new.pop(REVIVABLE, None)
        new[TTL_ATTRIBUTE] = {"N": str(now + TOMBSTONE_SECONDS)}
        _add_number(new, "rev", 1)
        for name in (
            "latest_id",
            "latest_tail",
            "heads",
            "spilled",
            "uses_delta",
            IDLE_ATTRIBUTE,
            "pack",
        ):
            new.pop(name, None)
        self.data.items[key] = new

    async def tombstone(self, thread_id: str) -> Deletion:
        """delete_thread's first step (Manifest.tombstone): 1 Query, then 1 UpdateItem
        per namespace (the root one always), concurrently."""
        deletion = await self._tombstone(thread_id, None)
        assert deletion is not None  # unconditional
        return deletion

    async def tombstone_expired(self, expiry: Expiry) -> Deletion | None:
        """The TTL sweep's first step (Manifest.tombstone_expired): the root item first,
        conditioned on ``expiry.rev``; None when it changed."""
        return await self._tombstone(expiry.thread_id, expiry)

    async def _tombstone(self, thread_id: str, expect: Expiry | None) -> Deletion | None:
        stamp = self.data.stamp()
        now = self._now()
        root = self._key(thread_id, "")
        keys = [root]
        async for page in self._query(thread_id):
            keys += [self._key_of(i) for i in page if i["sk"]["S"] != META_SK]
        unique = list(dict.fromkeys(keys))

        before: dict[str, dict[str, Any]] = {}

        async def one(key: tuple[str, str]) -> bool:
            async with self._request("dynamodb.UpdateItem"):
                with self.data.lock:
                    self._require_table()
                    if expect is not None and key == root:
                        item = self.data.items.get(key)
                        # "attribute_not_exists(pk)" or "rev = :rev"
                        if (
                            (item is not None)
                            if expect.rev is None
                            else (item is None or _int(item, "rev") != expect.rev)
                        ):
                            return False
                    old = self.data.items.get(key)
                    if old is not None:  # ReturnValues="ALL_OLD"
                        before[key[1]] = copy.deepcopy(old)
                    lease = now + DELETE_LEASE_SECONDS
                    self._retire(key, stamp, lease, now, revivable=expect is None)
                    return True

        if expect is not None:
            if not await one(root):
                return None
            await gather_all(*(one(k) for k in unique if k != root))
        else:
            await gather_all(*(one(k) for k in unique))
        return Deletion(stamp, [self._key_attrs(k) for k in unique], before)

    async def _if_stamp(self, key: dict[str, Any], stamp: int, lease: int) -> bool:
        # "SET lease_until = :lease" with ConditionExpression "deleted_at = :stamp"
        async with self._request("dynamodb.UpdateItem"):
            with self.data.lock:
                self._require_table()
                item = self.data.items.get(self._key_of(key))
                if item is None or _int(item, "deleted_at") != stamp:
                    return False
                item["lease_until"] = {"N": str(lease)}
                return True

    async def renew(self, keys: list[dict[str, Any]], stamp: int) -> bool:
        """Extend a deletion's lease (Manifest.renew); False when a tombstone was
        replaced meanwhile."""
        lease = self._now() + DELETE_LEASE_SECONDS
        return all(await gather_all(*(self._if_stamp(k, stamp, lease) for k in keys)))

    async def release(self, keys: list[dict[str, Any]], stamp: int) -> None:
        """delete_thread's last step (Manifest.release): the lease ends."""
        await gather_all(*(self._if_stamp(k, stamp, 0) for k in keys))

    async def revive(self, deletion: Deletion) -> None:
        """Manifest.revive: each tombstone still the deletion's, its lease not run out,
        back to its old item; the root last."""
        now = self._now()
        for key in sorted(deletion.keys, key=lambda key: self._key_of(key)[1] == ROOT_SK):
            k = self._key_of(key)
            request = "dynamodb.PutItem" if k[1] in deletion.before else "dynamodb.DeleteItem"
            async with self._request(request):
                with self.data.lock:
                    self._require_table()
                    item = self.data.items.get(k)
                    if item is None or _int(item, "deleted_at") != deletion.stamp:
                        continue  # "deleted_at = :stamp"
                    if not (_int(item, "lease_until") or 0) > now:
                        continue  # "AND lease_until > :now"
                    old = deletion.before.get(k[1])
                    if old is None:
                        self.data.items.pop(k, None)
                    else:
                        self.data.items[k] = copy.deepcopy(old)

    async def drop(self, entry: Entry, *, mark: str | None = None) -> bool:
        """Retire an entry as read (Manifest.drop): a tombstone without a lease."""
        key = self._key(entry.thread_id, entry.checkpoint_ns)
        async with self._request("dynamodb.UpdateItem"):
            with self.data.lock:
                self._require_table()
                item = self.data.items.get(key)
                if item is None or _int(item, "rev") != entry.rev:  # "rev = :rev"
                    return False
                self._retire(key, self.data.stamp(), 0, self._now())
                if mark:  # ", removing :mk"
                    _add_strings(self.data.items[key], REMOVING, [mark])
                return True

    async def mark(self, entry: Entry, mark: str) -> bool:
        """A mark on an item of the entry's life and pack (Manifest.mark): 1
        conditional UpdateItem, ``ADD removing :mk``."""
        key = self._key(entry.thread_id, entry.checkpoint_ns)
        async with self._request("dynamodb.UpdateItem"):
            with self.data.lock:
                self._require_table()
                item = self.data.items.get(key)
                # "attribute_exists(latest_id) AND attribute_not_exists(deleted)
                #  AND life = :life AND (attribute_not_exists(pack) | pack.#k = :pk)"
                if item is None or "latest_id" not in item or "deleted" in item:
                    return False
                if entry.life and item.get("life", {}).get("S") != entry.life:
                    return False
                pack = item.get("pack", {}).get("M", {}).get("key", {}).get("S")
                if pack != (entry.pack.key if entry.pack is not None else None):
                    return False
                _add_strings(item, REMOVING, [mark])
                return True

    async def unmark(self, thread_id: str, checkpoint_ns: str, mark: str) -> None:
        """A removal's deletes are done (Manifest.unmark): 1 UpdateItem,
        ``DELETE removing :mk`` where the item exists."""
        key = self._key(thread_id, checkpoint_ns)
        async with self._request("dynamodb.UpdateItem"):
            with self.data.lock:
                self._require_table()
                item = self.data.items.get(key)
                if item is None:  # "attribute_exists(pk)"
                    return
                # "DELETE removing :mk ADD rev :one"
                left = sorted(set(item.get(REMOVING, {}).get("SS", ())) - {mark})
                if left:
                    item[REMOVING] = {"SS": left}
                else:
                    item.pop(REMOVING, None)  # DynamoDB drops a set left empty
                _add_number(item, "rev", 1)

    # -- setup --------------------------------------------------------------
    async def exists(self) -> bool:
        async with self._request("dynamodb.DescribeTable"):
            return self.data.exists

    async def create(self) -> None:
        """CreateTable (an existing one is fine), one DescribeTable (ACTIVE at once),
        UpdateTimeToLive: the requests Manifest.create makes on an on-demand table."""
        async with self._request("dynamodb.CreateTable"):
            self.data.exists = True
        async with self._request("dynamodb.DescribeTable"):
            pass
        async with self._request("dynamodb.UpdateTimeToLive"):
            self.data.ttl_enabled = True

    async def migrated(self) -> bool:
        """Whether this deployment's marker says its entries use this key layout."""
        async with self._request("dynamodb.GetItem"):
            with self.data.lock:
                self._require_table()
                item = self.data.get((self.deployment, META_SK)) or {}
        return int(item.get("version", {}).get("N", "0")) >= LAYOUT_VERSION

    async def legacy_entries(self) -> AsyncIterator[Entry]:
        """Entries written by langgraph-s3 0.1 (key without the deployment)."""
        async for items in self._pages("dynamodb.Scan", lambda k: True):
            for item in items:
                if "/" in item.get("pk", {}).get("S", "/") or "rev" in item:
                    continue
                try:
                    yield entry_of(item)
                except (KeyError, TypeError, AttributeError, ValueError):
                    continue

    async def adopt(self, legacy: Entry) -> None:
        """Give a 0.1 entry this deployment's key (1 PutItem, if there is none yet)."""
        new = Fields(legacy.latest_id, legacy.latest_tail, "", legacy.uses_delta, 0, set())
        await self._swap(legacy.thread_id, legacy.checkpoint_ns, new, rev=None)

    async def mark_migrated(self) -> None:
        async with self._request("dynamodb.PutItem"):
            with self.data.lock:
                self._require_table()
                self.data.items[(self.deployment, META_SK)] = {
                    **self._key_attrs((self.deployment, META_SK)),
                    "version": {"N": str(LAYOUT_VERSION)},
                    "migrated_at": {"N": str(self._now())},
                }


# ------------------------------------------------------------------ a saver
def memory_saver(
    *,
    bucket: str | MemoryBucket = DEFAULT_BUCKET,
    table: str | MemoryTable = DEFAULT_TABLE,
    prefix: str = "",
    cache_bytes: int = 0,
    thread_ttl_days: float | None = None,
    **kwargs: Any,
) -> AsyncS3Saver:
    """An :class:`~langgraph_s3.AsyncS3Saver` on a :class:`MemoryObjectStore` and a
    :class:`MemoryManifest`, which count their requests in ``saver.stats``.

    Pass the same MemoryBucket and MemoryTable to two calls for two savers on the
    same data (a writer and a cold reader). ``cache_bytes`` is 0 by default (every
    read a request); other keyword arguments go to the saver (``serde``,
    ``concurrency``, ``max_conflicts``...). The saver makes no AWS request.
    """
    from langgraph_s3.checkpoint.saver import AsyncS3Saver

    name = bucket.name if isinstance(bucket, MemoryBucket) else bucket
    concurrency = int(kwargs.get("concurrency", 32))
    store = MemoryObjectStore(bucket, concurrency=concurrency, cache_bytes=cache_bytes)
    manifest = MemoryManifest(
        table,
        deployment=deployment_key(name, prefix),
        ttl_seconds=int(thread_ttl_days * 86400) if thread_ttl_days else None,
        max_conflicts=int(kwargs.get("max_conflicts", Limits.max_conflicts)),
    )
    saver = AsyncS3Saver(
        bucket=name,
        prefix=prefix,
        table=manifest.table,
        object_store=store,
        manifest=manifest,
        **kwargs,
    )
    store.stats = manifest.stats = saver.stats
    return saver


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


# mypy --strict proves that the AWS classes, the fakes and the wrappers all satisfy
# the ports: each assignment below is checked against the protocol.
if TYPE_CHECKING:

    def _satisfy_ports(
        s3: ObjectStore,
        dynamodb: Manifest,
        objects: MemoryObjectStore,
        manifest: MemoryManifest,
        faulty_objects: FaultyObjectStore,
        faulty_manifest: FaultyManifest,
    ) -> None:
        stores: list[ObjectStorePort] = [s3, objects, faulty_objects]
        manifests: list[ManifestPort] = [dynamodb, manifest, faulty_manifest]
        del stores, manifests
