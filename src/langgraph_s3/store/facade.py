"""LangGraph's BaseStore on S3: one JSON object per item, segments for bulk reads.

This module is the façade; each job lives in a module of its own:

* :mod:`.store_items`: get, upsert (``created_at`` kept), delete, one item at a time;
* :mod:`.store_search`: search (filters, vector similarity) and list_namespaces;
* :mod:`.store_segments`: items folded into segments, and compaction;
* :mod:`.store_ttl`: TTL refresh, the sweep, the background sweeper, lifecycle rules;
* :mod:`.items`: the item format and the pure rules (filters, TTL classes).

Requests (``round trips`` are the critical path: the longest chain of
requests each sent after the previous one's answer):

* ``get``: one GET (plus one conditional PUT when it refreshes a TTL).
* ``put``: one PUT, vectors included: ``If-None-Match`` for a new item, ``If-Match``
  for an item this process has seen; an unseen existing item costs a GET and a
  PUT more, because ``created_at`` is kept across updates. A lost condition is
  retried from a fresh read: last writer wins, no write is ever lost.
* ``delete``: one DeleteObjects.
* ``search`` / ``list_namespaces``: one listing of the namespace prefix (the
  source of truth: keys and ETags) beside a listing of its segments, then
  the segments, then only the items whose ETag no segment holds. A search
  that finds many such items writes a fresh segment for their namespace, so
  the next one reads a handful of objects instead of one per item.

Integrity: an item is trusted only for the key it is stored at. A body that
cannot be decoded, or that names another namespace or key, raises
``CorruptObjectError`` naming the key from ``get``, and is skipped (with one
warning) by ``search``, ``list_namespaces`` and the TTL sweep.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from langgraph_s3.aws.clients import Limits, check_table_name
from langgraph_s3.aws.config import check_manifest_kind
from langgraph_s3.aws.probes import check_conditions
from langgraph_s3.aws.stats import RequestStats
from langgraph_s3.core import retry
from langgraph_s3.core.clock import wall_clock
from langgraph_s3.core.ports import KeyVaultPort
from langgraph_s3.core.shards import shard_of
from langgraph_s3.core.subject_keys import DEFAULT_TTL
from langgraph_s3.core.subject_policy import SubjectPolicy, policy_of
from langgraph_s3.core.tasks import bounded_map, gather_all
from langgraph_s3.errors import InvalidRequestError, MissingResourceError
from langgraph_s3.manifest import deployment_key
from langgraph_s3.manifest.dynamodb import DynamoTable
from langgraph_s3.manifest.objects import ObjectTable
from langgraph_s3.manifest.schema import DEFAULT_TABLE
from langgraph_s3.manifest.table import TablePort
from langgraph_s3.runtime.foundation import foundation
from langgraph_s3.runtime.lifecycle import STORE_PARAMS, AsyncLifecycle, SweeperLifecycle
from langgraph_s3.runtime.operations import operation
from langgraph_s3.runtime.subjects import deployment_subjects
from langgraph_s3.store import format as it
from langgraph_s3.store.items import KNOWN_ITEMS, ItemStore, Live
from langgraph_s3.store.sealing import ItemSealing
from langgraph_s3.store.seals import ItemSeals
from langgraph_s3.store.search import Queries, VectorIndex, check_search
from langgraph_s3.store.segments import COMPACT_AFTER, Segments
from langgraph_s3.store.ttl import (
    RULE_PREFIX,
    ItemExpiry,
    install_lifecycle_rules,
    lifecycle_rules,
    sweep_interval,
)

__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_CAP",
    "COMPACT_AFTER",
    "KNOWN_ITEMS",
    "PUT_ATTEMPTS",
    "RULE_PREFIX",
    "AsyncS3Store",
    "lifecycle_rules",
]

PUT_ATTEMPTS = Limits.max_conflicts
"""Deprecated: the default of ``max_conflicts``, the rounds of one contended put."""
BACKOFF_BASE, BACKOFF_CAP = retry.BASE_DELAY, retry.MAX_DELAY
"""Deprecated: the backoff of :mod:`langgraph_s3.core.retry`."""


class _S3StoreBase(SweeperLifecycle, BaseStore):
    """The async core and its sync twin ``batch``, shared by AsyncS3Store and S3Store."""

    supports_ttl = True

    def __init__(
        self,
        *,
        bucket: str,
        prefix: str = "",
        endpoint_url: str | None = None,
        region: str | None = None,
        session: Any = None,
        ttl: TTLConfig | None = None,
        index: IndexConfig | None = None,
        concurrency: int = 32,
        compact_after: int = COMPACT_AFTER,
        max_attempts: int = Limits.max_attempts,
        connect_timeout: float = Limits.connect_timeout,
        read_timeout: float = Limits.read_timeout,
        request_timeout: float = Limits.request_timeout,
        max_conflicts: int = Limits.max_conflicts,
        table: str | None = None,
        manifest: str = "dynamodb",
        subjects: SubjectPolicy | int | None = None,
        kms_key: str | KeyVaultPort | None = None,
        subject_key_seconds: float = DEFAULT_TTL,
        subject_label: int | None = None,
    ) -> None:
        limits = Limits(connect_timeout, read_timeout, max_attempts, request_timeout, max_conflicts)
        base = foundation(
            bucket=bucket,
            prefix=prefix,
            endpoint_url=endpoint_url,
            region=region,
            session=session,
            concurrency=concurrency,
            cache_bytes=0,
            limits=limits,
        )
        self.bucket, self.layout, self.clients = bucket, base.layout, base.clients
        self.objects = base.objects
        self.manifest_kind = check_manifest_kind(manifest, table, bucket)
        self.table = check_table_name(table or DEFAULT_TABLE)
        self.seals = self._seals(
            policy_of(subjects, subject_label), kms_key, subject_key_seconds, prefix
        )
        self.concurrency = concurrency
        self.ttl_config = ttl
        self._index = VectorIndex(index) if index else None
        self.index_config = self._index.config if self._index else None
        self.embeddings: Any = self._index.embeddings if self._index else None
        self._items = ItemStore(
            self.objects, self.layout, max_conflicts=limits.max_conflicts, seals=self.seals
        )
        self._segments = Segments(
            self.objects, self.layout, self._items, compact_after=compact_after
        )
        self._expiry = ItemExpiry(self._items, self._segments)
        self._queries = Queries(self._segments, self._expiry, self._index)
        self._sweeper, self._runner = base.sweeper, base.runner

    def _seals(
        self,
        policy: SubjectPolicy | None,
        kms_key: str | KeyVaultPort | None,
        key_seconds: float,
        prefix: str,
    ) -> ItemSeals | None:
        """The items of the deployment's subjects sealed, when its policy names a
        namespace's subject (a saver's metadata key alone seals no item)."""
        if policy is None or (policy.namespace_label is None and policy.of_namespace is None):
            return None
        people = deployment_subjects(
            self.clients,
            self._subjects_table(prefix),
            deployment_key(self.bucket, prefix),
            kms_key=kms_key,
            key_seconds=key_seconds,
            copies=(self.objects, self.layout.subjects_secret()),
            clock=wall_clock,
        )
        return ItemSeals(people, policy, self.layout)

    def _subjects_table(self, prefix: str) -> TablePort:
        """Where the deployment's subjects and keys are: its manifest table, or its
        manifest in the bucket (``manifest="s3"``), as the saver's."""
        if self.manifest_kind == "s3":
            strip = deployment_key(self.bucket, prefix)
            return ObjectTable(self.objects, self.layout.manifest(), strip=strip)
        return DynamoTable(self.clients, self.table)

    @property
    def stats(self) -> RequestStats:
        """Requests, round trips and bytes sent by this store's clients."""
        return self.clients.stats

    @property
    def compact_after(self) -> int:
        """Items a read fetches one by one (or a batch writes to one namespace) before
        it writes a segment."""
        return self._segments.compact_after

    @compact_after.setter
    def compact_after(self, value: int) -> None:
        self._segments.compact_after = value

    # ------------------------------------------------------------------ batch
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`abatch` from sync code, on this store's background loop."""
        return self._runner.run(self.abatch(ops))

    @operation
    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run a batch: reads see the store as it was before it, then its writes apply.

        Every op is checked before any request. The reads (GetOp, SearchOp,
        ListNamespacesOp) go out concurrently; then the writes: all deletes in
        one DeleteObjects beside one PUT per item (the last PutOp of a key
        wins), the values embedded in one call of the embedder. A batch that
        writes ``compact_after`` items or more to one namespace folds them into
        its segment: a GET and a PUT per such namespace. Round trips: the
        slowest read's, then one for the writes (one per ``concurrency``
        requests: 40 puts take two), then two for a fold.

        Args:
            ops: LangGraph store operations.

        Returns:
            One result per op, in order (None for a PutOp).

        Raises:
            InvalidNamespaceError: a namespace label is empty or holds a ``.``.
            InvalidIdError: an item's key would pass S3's 1,024 bytes (nothing is written).
            InvalidRequestError: an unknown filter operator or op type.
            ConfigurationError: a search ``query`` on a store without ``index=``.
            CorruptObjectError: a GetOp found an object that is not its item.
            ConflictError: a put lost ``max_conflicts`` rounds to other writers.
        """
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, SearchOp):
                check_search(op, self._index)
            elif isinstance(op, (GetOp, PutOp)):
                self.layout.store_item(op.namespace, op.key)  # within S3's key limit
        reads = [(i, op) for i, op in enumerate(ops) if not isinstance(op, PutOp)]
        results: list[Result] = [None] * len(ops)
        found = await bounded_map(self._read, [op for _, op in reads])
        for (i, _), result in zip(reads, found, strict=True):
            results[i] = result
        puts = {(op.namespace, op.key): op for op in ops if isinstance(op, PutOp)}
        if puts:
            await self._write(list(puts.values()))
        return results

    async def _read(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return await self._get(op)
        if isinstance(op, SearchOp):
            return await self._queries.search(op)
        if isinstance(op, ListNamespacesOp):
            return await self._queries.list_namespaces(op)
        raise InvalidRequestError(f"unknown store operation {type(op).__name__}")

    async def _get(self, op: GetOp) -> Item | None:
        live = await self._items.get(self.layout.store_item(op.namespace, op.key))
        if live is None:
            return None
        if op.refresh_ttl:
            await self._expiry.refresh([live], it.now())
        return live.item.to_item()

    async def _write(self, ops: list[PutOp]) -> None:
        writes = [op for op in ops if op.value is not None]
        deletes = [self.layout.store_item(op.namespace, op.key) for op in ops if op.value is None]
        vectors = await self._index.embed_puts(writes) if self._index else {}

        async def put(op: PutOp) -> Live:
            return await self._items.put(op, vectors.get((op.namespace, op.key), {}))

        _, written = await gather_all(self._items.delete(deletes), bounded_map(put, writes))
        await self._segments.fold(written)

    # ------------------------------------------------------------- segments
    @operation
    async def acompact(self, namespace_prefix: tuple[str, ...] = ()) -> int:
        """Write the segment of a namespace prefix now (after a bulk load, say).

        Requests: two listings at once, the segments under the prefix, the
        items no segment holds, then one PUT: four round trips at most, three
        when the segments are current (one more per 1,000 keys listed).

        Returns:
            How many items the segment holds (expired ones included).
        """
        return await self._segments.compact(namespace_prefix)

    # -------------------------------------------------------------------- TTL
    @operation
    async def asweep_ttl(
        self, *, segment: int | None = None, total_segments: int | None = None
    ) -> int:
        """Delete every expired item now (``sweep_ttl`` on each store: async on
        AsyncS3Store, blocking on S3Store, as LangGraph's own stores name it).

        Requests: a read of the whole store (as :meth:`acompact`, and it may
        write a segment like a search), then one DeleteObject per expired item,
        concurrently, each conditional on the version seen expired: an item
        rewritten since the listing is left alone, and not counted.

        Args:
            segment: with ``total_segments``, only the expired items of that shard
                (zero-based; by a hash of the item's key): N sweepers of N delete
                each expired item once. Each still reads the whole store.

        Returns:
            How many items were deleted.
        """
        return await self._expiry.sweep(shard_of(segment, total_segments))

    @operation
    async def aseal(
        self,
        *,
        dry_run: bool = False,
        segment: int | None = None,
        total_segments: int | None = None,
    ) -> dict[str, Any]:
        """Rewrite sealed the items of the subjects' namespaces stored plain (before the
        deployment declared subjects), each only while unchanged; drop the segments that
        hold one in plain (docs/subjects.md).

        Args:
            segment: with ``total_segments``, only that shard of the items (by a hash
                of the item's key).

        Returns:
            How many items were rewritten (``changed``: written by others meanwhile,
            sealed by them), how many segments were dropped, and what plaintext remains
            readable until when (noncurrent versions). With ``dry_run``: how many would
            be, nothing written.

        Cost: a listing of every item and segment, a GET of each item of the shard and
        of each segment, a PUT per item rewritten, a DeleteObjects for the segments.
        """
        sealing = ItemSealing(self._items, self.objects, self.layout, self.clients)
        return await sealing.aseal(dry_run=dry_run, shard=shard_of(segment, total_segments))

    async def _sweep_once(self) -> int:
        return await self.asweep_ttl()

    def _sweep_minutes(self, minutes: float | None) -> float:
        return sweep_interval(minutes, self.ttl_config)

    # ------------------------------------------------------------------ setup
    @operation
    async def _asetup(self, *, dry_run: bool = False) -> list[str]:
        """Create the bucket when missing; check that it honours conditional writes
        and deletes (``objects.check_conditions``); install the TTL lifecycle rules.
        What it created (``dry_run``: would create, with no probe and no write).

        HeadBucket (CreateBucket when missing), the probe's 5 requests, then
        GetBucketLifecycleConfiguration (PutBucketLifecycleConfiguration when
        our rules are missing or outdated): seven to nine round trips.
        """
        done: list[str] = []
        if not await self.objects.bucket_exists():
            done.append(f"bucket {self.objects.bucket!r}")
            if dry_run:
                return [*done, "the store's TTL lifecycle rules"]
            await self.objects.create_bucket()
        if not dry_run:
            await check_conditions(self.objects, self.layout.root, deletes=True)
        subjects = self._subjects_table(self.layout.root.rstrip("/"))
        if self.seals is not None and not await subjects.exists():
            raise MissingResourceError(
                "table (the subjects' keys)" if self.manifest_kind != "s3" else "manifest",
                subjects.name,
                fix="run the saver's setup on this URL first (langgraph-s3 setup URL)",
            )
        if await install_lifecycle_rules(self.objects, dry_run=dry_run):
            done.append("the store's TTL lifecycle rules")
        return done


class AsyncS3Store(AsyncLifecycle, _S3StoreBase):
    """Async LangGraph store on S3: items as JSON objects, TTL, vector search.

    Example::

        async with AsyncS3Store.from_conn_string("s3://my-bucket/memories") as store:
            await store.setup()  # once per deployment: bucket, TTL lifecycle rules
            await store.aput(("users", "1"), "prefs", {"theme": "dark"})
            item = await store.aget(("users", "1"), "prefs")
            hits = await store.asearch(("users",), filter={"theme": "dark"})

    Requests per call, measured on moto (round trips in brackets): ``aget``
    1 GET [1], 2 [2] when it refreshes a TTL; ``aput`` 1 PUT [1] for a new
    item or one this store has seen, 3 [3] for an existing item it has not;
    ``adelete`` 1 DeleteObjects [1]; ``asearch`` / ``alist_namespaces``: two
    listings, each segment, each item no segment holds [2 when the segments
    are current; 3 when items are loose; a PUT and a DeleteObjects more, [5]
    in all, when the read writes a segment; one more per 1,000 keys listed;
    ``refresh_ttl`` adds a PUT per returned item with a TTL, [1] more];
    ``setup`` 7 to 9 [7 to 9]. Requests in flight are bounded by
    ``concurrency`` per call: 40 puts in one batch take [2]. See
    :meth:`abatch` for batches; ``stats`` counts requests and round trips.

    Args:
        bucket: the S3 bucket.
        prefix: key prefix of this store's objects.
        endpoint_url: an S3-compatible endpoint (moto, LocalStack); default: AWS.
        region: the AWS region; default: the environment's.
        session: an aiobotocore (or aioboto3) session to make the clients with.
        ttl: LangGraph's ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``,
            ``sweep_interval_minutes``).
        index: LangGraph's ``IndexConfig`` (``dims``, ``embed``, ``fields``).
        concurrency: requests in flight per call.
        compact_after: items read one by one that make a read write a segment.
        max_attempts: attempts per request (``Limits``).
        connect_timeout: seconds to connect (``Limits``).
        read_timeout: seconds to wait for an answer (``Limits``).
        request_timeout: seconds a request may take in all (``Limits``).
        max_conflicts: compare-and-swap rounds before a ``ConflictError`` (``Limits``).
        manifest: ``"s3"`` when the saver beside it keeps its manifest in the bucket
            (the subjects' keys are there); ``table`` then names none.
        table: the manifest table the deployment's subjects are kept in (the saver's;
            default ``langgraph-s3-manifest``); used only with subjects.
        subjects: whom a namespace belongs to: a label's index (``1``: the ``"u1"`` of
            ``("users", "u1", "memories")``) or a ``SubjectPolicy`` (``of_namespace=``).
            Their items are sealed with their key, and forgotten with the saver's
            ``aforget`` on the same URL (docs/subjects.md). None: nothing is sealed.
        kms_key: the KMS key (id, ARN or alias) wrapping the subjects' data keys, or a
            key vault (``testing.memory_vault``).
        subject_key_seconds: how long a process keeps a subject's key unwrapped (the
            deployment's first process sets it for all).
        subject_label: ``subjects`` as a connection string gives it (``subject_label=1``).
    """

    CONN_STRING = (
        "s3://BUCKET/PREFIX[?region=R][&endpoint_url=URL][&subject_label=N&kms_key=K[&table=T]]"
    )
    CONN_PARAMS = STORE_PARAMS

    async def sweep_ttl(self) -> int:
        """:meth:`asweep_ttl`, under the name LangGraph's async stores give it."""
        return await self.asweep_ttl()

    async def aclose(self) -> None:
        """Stop the TTL sweeper, then close the clients; no request."""
        await self.stop_ttl_sweeper()
        await super().aclose()
