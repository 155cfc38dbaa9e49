"""LangGraph's BaseStore on S3: one JSON object per item, segments for bulk reads.

Requests:

* ``get``: one GET (plus one conditional PUT when it refreshes a TTL).
* ``put``: one PUT, vectors included: ``If-None-Match`` for a new item, ``If-Match``
  for an item this process has seen; an unseen existing item costs a GET more,
  because ``created_at`` is kept across updates. A lost condition is retried
  from a fresh read: last writer wins, no write is ever lost.
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

import asyncio
import logging
import random
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)
from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path

from . import codec
from . import items as it
from .clients import ClientFactory, Limits, RequestStats, check_bucket_name, conn_kwargs
from .errors import (
    ConfigurationError,
    ConflictError,
    CorruptObjectError,
    InvalidRequestError,
)
from .keys import Layout
from .objects import Listed, ObjectStore, bounded_map
from .runner import BackgroundLoop

logger = logging.getLogger(__name__)

COMPACT_AFTER = 16
"""A read that had to fetch this many items one by one writes a new segment."""
KNOWN_ITEMS = 10_000
PUT_ATTEMPTS = 64
"""Conditional attempts of one put; with the backoff below, 32 writers on one key all land."""
BACKOFF_BASE, BACKOFF_CAP = 0.01, 0.5
"""Seconds: full jitter, doubling per attempt, so colliding writers spread out."""
RULE_PREFIX = "langgraph-s3-ttl-"


@dataclass(slots=True)
class _Live:
    key: str
    etag: str
    item: it.StoredItem


class _S3StoreBase(BaseStore):
    """The async core and its sync twin ``batch``."""

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
    ) -> None:
        check_bucket_name(bucket)
        self.bucket = bucket
        self.layout = Layout(prefix)
        self.clients = ClientFactory(
            session=session,
            endpoint_url=endpoint_url,
            region=region,
            max_connections=max(concurrency * 2, 10),
            limits=Limits(connect_timeout, read_timeout, max_attempts, request_timeout),
        )
        self.objects = ObjectStore(self.clients, bucket, concurrency=concurrency, cache_bytes=0)
        self.concurrency = concurrency
        self.compact_after = compact_after
        self.ttl_config = ttl
        self.index_config: dict[str, Any] | None = None
        self.embeddings: Any = None
        if index:
            if "dims" not in index or "embed" not in index:
                raise ConfigurationError(
                    "index= needs 'dims' and 'embed' (and optionally 'fields')"
                )
            self.index_config = dict(index)
            self.embeddings = ensure_embeddings(index["embed"])
            self.index_config["__tokenized_fields"] = [
                (p, tokenize_path(p)) if p != "$" else (p, p)
                for p in (index.get("fields") or ["$"])
            ]
        self._known: OrderedDict[str, tuple[str, datetime]] = OrderedDict()
        self._reported: set[tuple[str, str]] = set()
        self._sweeper: asyncio.Task[None] | None = None
        self._runner = BackgroundLoop(self.clients.aclose_running)

    @property
    def stats(self) -> RequestStats:
        return self.clients.stats

    # ------------------------------------------------------------------ batch
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self._runner.run(self.abatch(ops))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Reads see the store as it was before the batch; then its writes apply.

        Independent requests of one batch go out concurrently.
        """
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, SearchOp):
                it.validate_filter(op.filter)
                if op.query and self.embeddings is None:
                    raise ConfigurationError(
                        "search(query=...) needs a vector index: create the store with "
                        "index={'dims': ..., 'embed': ..., 'fields': [...]}"
                    )
        results: list[Result] = [None] * len(ops)
        reads = [(i, op) for i, op in enumerate(ops) if not isinstance(op, PutOp)]

        async def read(pair: tuple[int, Op]) -> None:
            i, op = pair
            if isinstance(op, GetOp):
                results[i] = await self._get(op)
            elif isinstance(op, SearchOp):
                results[i] = await self._search(op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = await self._list_namespaces(op)
            else:
                raise InvalidRequestError(f"unknown store operation {type(op).__name__}")

        await bounded_map(read, reads, self.concurrency)
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, PutOp):
                puts[(op.namespace, op.key)] = op  # the last put of a key wins
        if puts:
            await self._put_many(list(puts.values()))
        return results

    # -------------------------------------------------------------------- get
    async def _get(self, op: GetOp) -> Item | None:
        key = self.layout.store_item(op.namespace, op.key)
        body, etag = await self.objects.get_with_etag(key)
        if body is None or etag is None:
            return None
        stored = self._load(key, body)
        at = it.now()
        if stored.expired(at):
            return None
        self._remember(key, etag, stored.created_at)
        if op.refresh_ttl and stored.ttl is not None:
            await self._refresh([_Live(key, etag, stored)], at)
        return stored.to_item()

    async def _refresh(self, live: Sequence[_Live], at: datetime) -> None:
        """Move expiry forward; rewriting also restarts the lifecycle clock."""

        async def one(entry: _Live) -> None:
            fresh = entry.item.refreshed(at)
            etag = await self.objects.put(
                entry.key,
                it.dump_item(fresh),
                if_match=entry.etag,
                tagging=_tagging(fresh.ttl),
            )
            if etag:  # a concurrent update won otherwise: it set its own expiry
                self._remember(entry.key, etag, fresh.created_at)

        await bounded_map(one, [e for e in live if e.item.ttl is not None], self.concurrency)

    # -------------------------------------------------------------------- put
    async def _put_many(self, ops: list[PutOp]) -> None:
        vectors = await self._embed([op for op in ops if op.value is not None])
        deletes = [self.layout.store_item(op.namespace, op.key) for op in ops if op.value is None]
        writes = [op for op in ops if op.value is not None]

        async def write(op: PutOp) -> _Live:
            return await self._put_one(op, vectors.get((op.namespace, op.key), {}))

        _, written = await asyncio.gather(
            self.objects.delete(deletes) if deletes else _nothing(),
            bounded_map(write, writes, self.concurrency),
        )
        for key in deletes:
            self._known.pop(key, None)
        await self._fold_into_segments(written)

    async def _fold_into_segments(self, written: list[_Live]) -> None:
        """A large batch (a bulk load) updates its namespaces' segments itself.

        One GET and one PUT per namespace, never per item: the first search
        after a bulk load then reads a segment instead of every item. Single
        puts skip this and stay one request; the segment is only a cache, so a
        lost race here costs a later search some GETs, never a wrong answer.
        """
        groups: dict[tuple[str, ...], list[_Live]] = {}
        for entry in written:
            groups.setdefault(entry.item.namespace, []).append(entry)
        due = [ns for ns, entries in groups.items() if len(entries) >= self.compact_after]

        async def fold(ns: tuple[str, ...]) -> None:
            key = self.layout.store_segment(ns)
            body = await self.objects.get(key)
            entries = _segment(self.layout, key, body)
            entries.update({e.key: (e.etag, e.item) for e in groups[ns]})
            await self.objects.put(key, it.dump_segment(entries))

        await bounded_map(fold, due, self.concurrency)

    async def _put_one(self, op: PutOp, vectors: dict[str, list[float]]) -> _Live:
        """Upsert: the last writer wins; ``created_at`` is kept unless the item was gone.

        Each write is conditional on the version it builds on (``If-Match`` its
        ETag, ``If-None-Match`` when there is none). A 412, or a 404 for an item
        deleted meanwhile, means it changed under us: read it afresh and write
        again, after a jittered backoff so that many writers on one key spread
        out instead of colliding in lockstep.
        """
        key = self.layout.store_item(op.namespace, op.key)
        value = cast(dict[str, Any], dict(op.value or {}))
        tagging = _tagging(op.ttl)
        base: tuple[str, datetime | None] | None = self._known.get(key)
        for attempt in range(PUT_ATTEMPTS):
            at = it.now()
            created = (base[1] if base else None) or at
            expires = at + timedelta(minutes=op.ttl) if op.ttl is not None else None
            stored = it.StoredItem(
                op.namespace, op.key, value, created, at, expires, op.ttl, vectors
            )
            etag = await self.objects.put(
                key,
                it.dump_item(stored),
                if_none_match=base is None,
                if_match=base[0] if base else None,
                tagging=tagging,
            )
            if etag:
                self._remember(key, etag, created)
                return _Live(key, etag, stored)
            if attempt:
                await asyncio.sleep(random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt)))
            base = await self._base(key)
        raise ConflictError(
            f"item {op.namespace}/{op.key} kept changing under concurrent writers "
            f"({PUT_ATTEMPTS} conditional attempts): retry the put"
        )

    async def _base(self, key: str) -> tuple[str, datetime | None] | None:
        """What a put builds on: the ETag to condition on and the ``created_at`` to keep.

        None when there is no item. An expired or corrupt item is replaced as a
        new one (no ``created_at`` kept), still conditional on its ETag.
        """
        body, etag = await self.objects.get_with_etag(key)
        if body is None or etag is None:
            return None
        try:
            stored = self._load(key, body)
        except CorruptObjectError as exc:
            self._report(exc, etag)
            return etag, None
        return etag, None if stored.expired(it.now()) else stored.created_at

    def _load(self, key: str, body: bytes) -> it.StoredItem:
        """Decode the item stored at ``key``; a body naming another item is corrupt.

        The S3 key decides where an item lives: trusting the namespace inside
        the body would let an object under ``('u', '2')`` answer as ``('admin',)``.
        """
        with codec.reading(key):
            stored = it.load_item(body)
            if self.layout.store_item(stored.namespace, stored.key) != key:
                raise ValueError(f"its body names item {stored.namespace}/{stored.key!r}")
        return stored

    def _report(self, exc: CorruptObjectError, etag: str) -> None:
        """Warn once per corrupt version: a search repeated every turn must not flood the log."""
        if (exc.key, etag) in self._reported:
            return
        if len(self._reported) >= KNOWN_ITEMS:
            self._reported.clear()
        self._reported.add((exc.key, etag))
        logger.warning("skipping a store item: %s", exc)

    def _remember(self, key: str, etag: str, created: datetime) -> None:
        self._known[key] = (etag, created)
        self._known.move_to_end(key)
        while len(self._known) > KNOWN_ITEMS:
            self._known.popitem(last=False)

    async def _embed(
        self, ops: list[PutOp]
    ) -> dict[tuple[tuple[str, ...], str], dict[str, list[float]]]:
        if self.embeddings is None or self.index_config is None:
            return {}
        jobs: list[tuple[tuple[tuple[str, ...], str], str, str]] = []
        for op in ops:
            if op.index is False:
                continue
            if op.index is None:
                paths = self.index_config["__tokenized_fields"]
            else:
                paths = [(p, tokenize_path(p)) for p in op.index]
            for path, field in paths:
                texts = get_text_at_path(op.value, field)
                for i, text in enumerate(texts):
                    label = f"{path}.{i}" if len(texts) > 1 else path
                    jobs.append(((op.namespace, op.key), label, text))
        if not jobs:
            return {}
        vecs = await self.embeddings.aembed_documents([t for _, _, t in jobs])
        if len(vecs) != len(jobs):
            raise ConfigurationError(
                f"the embedding function returned {len(vecs)} vectors for {len(jobs)} texts"
            )
        out: dict[tuple[tuple[str, ...], str], dict[str, list[float]]] = {}
        for (item_id, label, _), vec in zip(jobs, vecs, strict=True):
            out.setdefault(item_id, {})[label] = [float(x) for x in vec]
        return out

    # ---------------------------------------------------------------- reading
    async def _scan(
        self, prefix: tuple[str, ...], *, include_expired: bool = False, compact: bool = True
    ) -> list[_Live]:
        """Every item under a namespace prefix: listing, segments, then the rest.

        The listing decides what exists and which version (ETag); a segment
        entry is used only when its ETag matches. When many items were missing
        from the segments, the prefix gets a fresh one.
        """
        ipfx = self.layout.store_namespace(prefix)
        listed, seg_listed = await asyncio.gather(
            self.objects.list_all(ipfx), self.objects.list_all(self.layout.store_segments(prefix))
        )
        if not listed:
            return []
        seg_bodies = await self.objects.get_many([s.key for s in seg_listed])
        cached: dict[str, tuple[str, it.StoredItem]] = {}
        for listed_seg, body in zip(seg_listed, seg_bodies, strict=True):
            cached.update(_segment(self.layout, listed_seg.key, body))
        hits: list[_Live] = []
        loose: list[Listed] = []
        for entry in listed:
            seg = cached.get(entry.key)
            if seg is not None and seg[0] == entry.etag:
                hits.append(_Live(entry.key, entry.etag, seg[1]))
            else:
                loose.append(entry)
        fetched = await bounded_map(
            lambda e: self.objects.get_with_etag(e.key), loose, self.concurrency
        )
        for entry, (body, etag) in zip(loose, fetched, strict=True):
            if body is None or etag is None:
                continue  # deleted since the listing
            try:
                hits.append(_Live(entry.key, etag, self._load(entry.key, body)))
            except CorruptObjectError as exc:  # that item alone: the others are served
                self._report(exc, etag)
        if compact:
            await self._compact(prefix, hits, loose, seg_listed)
        if include_expired:
            return hits
        at = it.now()
        return [h for h in hits if not h.item.expired(at)]

    async def _compact(
        self,
        prefix: tuple[str, ...],
        live: list[_Live],
        loose: list[Listed],
        segments: list[Listed],
    ) -> None:
        """Write one segment for the prefix just read; retire the ones beneath it.

        Segments belong to the prefixes people search, so a search over many
        small namespaces (``("users", id)``) compacts as well as one big one.
        """
        if len(loose) < self.compact_after:
            return
        key = self.layout.store_segment(prefix)
        await self.objects.put(key, it.dump_segment({h.key: (h.etag, h.item) for h in live}))
        await self.objects.delete([s.key for s in segments if s.key != key])

    async def acompact(self, namespace_prefix: tuple[str, ...] = ()) -> int:
        """Write the segment for a prefix now (after a bulk load, say); items in it."""
        live = await self._scan(namespace_prefix, include_expired=True, compact=False)
        key = self.layout.store_segment(namespace_prefix)
        await self.objects.put(key, it.dump_segment({h.key: (h.etag, h.item) for h in live}))
        return len(live)

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        live = [
            h
            for h in await self._scan(op.namespace_prefix)
            if it.matches_filter(h.item.value, op.filter)
        ]
        scored: list[tuple[float | None, _Live]]
        if op.query and self.embeddings is not None:
            qvec = await self.embeddings.aembed_query(op.query)
            with_vec = [
                (max(it.cosine(qvec, v) for v in h.item.vectors.values()), h)
                for h in live
                if h.item.vectors
            ]
            with_vec.sort(key=lambda p: (-p[0], p[1].item.namespace, p[1].item.key))
            without: list[tuple[float | None, _Live]] = [
                (None, h) for h in live if not h.item.vectors
            ]
            scored = [*with_vec, *without]
        else:
            live.sort(key=lambda h: (h.item.updated_at, h.item.namespace, h.item.key), reverse=True)
            scored = [(None, h) for h in live]
        page = scored[op.offset : op.offset + op.limit]
        if op.refresh_ttl:
            await self._refresh([h for _, h in page], it.now())
        return [
            SearchItem(
                namespace=h.item.namespace,
                key=h.item.key,
                value=h.item.value,
                created_at=h.item.created_at,
                updated_at=h.item.updated_at,
                score=score,
            )
            for score, h in page
        ]

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        fixed: list[str] = []
        for cond in op.match_conditions or ():
            if cond.match_type == "prefix":
                for label in cond.path:
                    if label == "*":
                        break
                    fixed.append(label)
                break
        found = {h.item.namespace for h in await self._scan(tuple(fixed))}
        if op.match_conditions:
            found = {ns for ns in found if it.namespace_matches(ns, op.match_conditions)}
        if op.max_depth is not None:
            found = {ns[: op.max_depth] for ns in found}
        return sorted(found)[op.offset : op.offset + op.limit]

    # -------------------------------------------------------------------- TTL
    async def sweep_ttl(self) -> int:
        """Delete every expired item now. Returns how many were deleted.

        Each delete is conditional on the ETag of the version seen expired: an
        item rewritten since the listing (a fresh value, maybe without TTL) is
        left alone, and not counted.
        """
        at = it.now()
        expired = [h for h in await self._scan((), include_expired=True) if h.item.expired(at)]
        deleted = await bounded_map(
            lambda h: self.objects.delete_if_match(h.key, h.etag), expired, self.concurrency
        )
        for entry, gone in zip(expired, deleted, strict=True):
            if gone:
                self._known.pop(entry.key, None)
        return sum(deleted)

    async def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> asyncio.Task[None]:
        """Sweep every ``sweep_interval_minutes`` (default: the TTL config's, else 5)."""
        if self._sweeper is not None and not self._sweeper.done():
            return self._sweeper
        minutes = (
            sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        )

        async def loop() -> None:
            while True:
                try:
                    n = await self.sweep_ttl()
                    if n:
                        logger.info("TTL sweep deleted %d expired item(s)", n)
                except Exception:
                    logger.exception("TTL sweep failed; retrying at the next interval")
                await asyncio.sleep(minutes * 60)

        self._sweeper = asyncio.create_task(loop(), name="langgraph-s3-ttl-sweeper")
        return self._sweeper

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; True when it stopped within ``timeout`` seconds."""
        return await self._stop_sweeper(timeout)

    async def _stop_sweeper(
        self, timeout: float | None, *, blocked: asyncio.AbstractEventLoop | None = None
    ) -> bool:
        """``blocked``: a loop whose thread waits for this call (a sync close() from
        async code); a sweeper there is cancelled, never waited for."""
        task, self._sweeper = self._sweeper, None
        if task is None or task.done():
            return True
        home = task.get_loop()
        if home is asyncio.get_running_loop():
            task.cancel()
            return await _stopped(task, timeout)
        # started on another loop (the sync façade's, or an earlier asyncio.run)
        if home.is_closed():
            return True
        try:
            home.call_soon_threadsafe(task.cancel)
        except RuntimeError:  # closed meanwhile
            return True
        if home is blocked or not home.is_running():
            return False  # it stops when that loop next runs
        fut = asyncio.run_coroutine_threadsafe(_stopped(task, timeout), home)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(fut), timeout)
        except TimeoutError:
            return False

    # ------------------------------------------------------------------ setup
    async def _asetup(self) -> None:
        if not await self.objects.bucket_exists():
            await self.objects.create_bucket()
        await self._install_lifecycle_rules()

    async def _install_lifecycle_rules(self) -> None:
        """One expiration rule per TTL class, merged with the bucket's own rules."""
        existing = await self.objects.lifecycle_rules()
        keep = [r for r in existing if not str(r.get("ID", "")).startswith(RULE_PREFIX)]
        ours = lifecycle_rules()
        if [r for r in existing if str(r.get("ID", "")).startswith(RULE_PREFIX)] == ours:
            return
        await self.objects.set_lifecycle_rules(keep + ours)


def lifecycle_rules() -> list[dict[str, Any]]:
    """The S3 lifecycle rules that expire what each TTL class tag marks."""
    return [
        {
            "ID": f"{RULE_PREFIX}{days}d",
            "Filter": {"Tag": {"Key": it.TTL_TAG, "Value": f"{days}d"}},
            "Status": "Enabled",
            "Expiration": {"Days": days},
        }
        for days in it.TTL_CLASSES_DAYS
    ]


def _tagging(ttl: float | None) -> str | None:
    cls = it.ttl_class(ttl)
    return f"{it.TTL_TAG}={cls}" if cls else None


def _segment(layout: Layout, key: str, body: bytes | None) -> dict[str, tuple[str, it.StoredItem]]:
    """A segment's entries; a corrupt one is only a cache: skipped, and said.

    An entry counts only for the item it names; any other is dropped, so
    that item is read from its own object (and checked there).
    """
    if body is None:
        return {}
    try:
        with codec.reading(key):
            entries = it.load_segment(body)
            return {
                k: e for k, e in entries.items() if layout.store_item(e[1].namespace, e[1].key) == k
            }
    except CorruptObjectError as exc:
        logger.warning("ignoring a segment: %s", exc)
        return {}


async def _stopped(task: asyncio.Task[None], timeout: float | None) -> bool:
    """Wait for a cancelled task on its own loop. asyncio.wait never raises the task's
    cancellation, so a cancellation of the caller itself still propagates."""
    done, _ = await asyncio.wait({task}, timeout=timeout)
    return task in done


async def _nothing() -> None:
    return None


class AsyncS3Store(_S3StoreBase):
    """Async LangGraph store on S3: items as JSON objects, TTL, vector search."""

    @classmethod
    @asynccontextmanager
    async def from_conn_string(cls, conn_string: str, **kwargs: Any) -> AsyncIterator[AsyncS3Store]:
        """``s3://BUCKET/PREFIX[?region=R][&endpoint_url=URL]``."""
        store = cls(**conn_kwargs(conn_string, kwargs, with_table=False))
        try:
            yield store
        finally:
            await store.aclose()

    @classmethod
    def from_url(cls, conn_string: str, **kwargs: Any) -> AsyncS3Store:
        """Build from a connection string without a context manager (module scope)."""
        return cls(**conn_kwargs(conn_string, kwargs, with_table=False))

    async def setup(self) -> None:
        """Create the bucket when missing and install the TTL lifecycle rules; idempotent."""
        await self._asetup()

    async def aclose(self) -> None:
        await self.stop_ttl_sweeper()
        await self.clients.aclose()
        self._runner.close()

    async def __aenter__(self) -> AsyncS3Store:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
