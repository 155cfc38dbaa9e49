"""The LangGraph checkpoint saver protocol on S3 + a DynamoDB manifest.

``AsyncS3Saver`` is the one async core; ``S3Saver`` (sync.py) and the sync
methods here drive it from a private background loop. Request shapes:

* ``aput``: blobs of changed channels + the checkpoint object, concurrently
  (``If-None-Match: *``), then one conditional manifest update: 2 round trips.
* ``aget_tuple`` latest: manifest GetItem; checkpoint GET + writes LIST;
  blob GETs + write GETs: 3 round trips, whatever the history length.
* ``alist(limit=k)``: one checkpoint LIST page + one writes LIST page; GETs;
  blob GETs: 3 round trips.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Self, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from . import codec
from .clients import (
    ClientFactory,
    Limits,
    RequestStats,
    Target,
    check_bucket_name,
    check_table_name,
    conn_kwargs,
)
from .errors import (
    CheckpointConflictError,
    CorruptObjectError,
    InvalidIdError,
    InvalidRequestError,
)
from .history import (
    DeltaWalk,
    Lineage,
    WritesCursor,
    channels_to_replay,
    first_page,
    pending_writes,
    snapshot_depth,
)
from .keys import CheckpointKey, Layout, encode, invert_id
from .manifest import Entry, Fields, Manifest, deployment_key
from .objects import Listed, ObjectStore, bounded_map
from .runner import BackgroundLoop

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_TABLE = "langgraph-s3-manifest"
DEFAULT_CACHE_BYTES = 64 * 1024 * 1024
CAS_ATTEMPTS = 8
FILTER_BATCH = 50
UNLIMITED_BATCH = 100
DELTA_MEMO_SIZE = 64
READ_ATTEMPTS = 3
MAINTENANCE_ATTEMPTS = 16


def _ids(config: RunnableConfig) -> tuple[str, str, str | None]:
    conf = config.get("configurable") or {}
    thread = conf.get("thread_id")
    if thread is None:
        raise InvalidIdError(
            "config['configurable']['thread_id'] is required: pass "
            "{'configurable': {'thread_id': ...}} when you invoke the graph"
        )
    ns = conf.get("checkpoint_ns") or ""
    cid = conf.get("checkpoint_id") or None
    return str(thread), str(ns), (str(cid) if cid is not None else None)


def _config(thread: str, ns: str, cid: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": cid}}


class _S3SaverBase(BaseCheckpointSaver[str]):
    """Everything both savers share: the async core and its sync twins."""

    def __init__(
        self,
        *,
        bucket: str,
        prefix: str = "",
        table: str | None = None,
        endpoint_url: str | None = None,
        region: str | None = None,
        session: Any = None,
        serde: SerializerProtocol | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        concurrency: int = 32,
        thread_ttl_days: float | None = None,
        max_attempts: int = Limits.max_attempts,
        connect_timeout: float = Limits.connect_timeout,
        read_timeout: float = Limits.read_timeout,
        request_timeout: float = Limits.request_timeout,
    ) -> None:
        super().__init__(serde=serde)
        check_bucket_name(bucket)
        self.target = Target(
            bucket,
            prefix.strip("/"),
            check_table_name(DEFAULT_TABLE if table is None else table),
            region,
            endpoint_url,
        )
        self.layout = Layout(prefix)
        self.clients = ClientFactory(
            session=session,
            endpoint_url=endpoint_url,
            region=region,
            max_connections=max(concurrency * 2, 10),
            limits=Limits(connect_timeout, read_timeout, max_attempts, request_timeout),
        )
        self.objects = ObjectStore(
            self.clients, bucket, concurrency=concurrency, cache_bytes=cache_bytes
        )
        ttl = int(thread_ttl_days * 86400) if thread_ttl_days else None
        self.manifest = Manifest(
            self.clients,
            self.target.table or DEFAULT_TABLE,
            deployment=deployment_key(bucket, prefix),
            ttl_seconds=ttl,
        )
        self.concurrency = concurrency
        self._runner = BackgroundLoop(self.clients.aclose_running)
        # histories walked by aget_tuple, awaiting LangGraph's next call; shared
        # (like the clients and the cache) with the copies with_allowlist makes
        self._delta_memo: OrderedDict[tuple[str, str], dict[str, DeltaChannelHistory]] = (
            OrderedDict()
        )

    @property
    def stats(self) -> RequestStats:
        """Requests, round trips and bytes sent by this saver's clients."""
        return self.clients.stats

    def preload(self) -> None:
        """Load the AWS SDK and its service models now (Lambda init phase)."""
        self.clients.preload()

    # ------------------------------------------------------------------ setup
    async def _asetup(self) -> None:
        if not await self.objects.bucket_exists():
            await self.objects.create_bucket()
        if not await self.manifest.exists():
            await self.manifest.create()
        if not await self.manifest.migrated():
            await self._migrate()
            await self.manifest.mark_migrated()

    async def _migrate(self) -> None:
        """Adopt the entries langgraph-s3 0.1 wrote (keyed by thread alone) whose latest
        checkpoint lies in this deployment's bucket and prefix."""
        async for legacy in self.manifest.legacy_entries():
            nsp = self.layout.namespace(legacy.thread_id, legacy.checkpoint_ns)
            if await self.objects.get(f"{nsp}c/{legacy.latest_tail}") is not None:
                await self.manifest.adopt(legacy)

    # ---------------------------------------------------------------- reading
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread, ns, cid = _ids(config)
        nsp = self.layout.namespace(thread, ns)
        for _ in range(READ_ATTEMPTS):
            try:
                if cid is None:
                    return await self._get_latest(thread, ns, nsp)
                return await self._get_by_id(thread, ns, nsp, cid)
            except _Missing as missing:
                await self._confirm_missing(thread, ns, missing)
        return None  # pragma: no cover - maintenance kept racing the read

    async def _get_latest(self, thread: str, ns: str, nsp: str) -> CheckpointTuple | None:
        entry = await self.manifest.latest(thread, ns)
        if entry is None:
            return None
        ck = self.layout.parse_checkpoint(nsp, f"{nsp}c/{entry.latest_tail}")
        if entry.uses_delta:
            return await self._get_latest_with_delta(thread, ns, nsp, ck, entry)
        (tup,) = await self._load(thread, ns, nsp, [ck], None, entry=entry)
        return tup

    async def _get_by_id(self, thread: str, ns: str, nsp: str, cid: str) -> CheckpointTuple | None:
        entry, found, wkeys = await asyncio.gather(
            self.manifest.latest(thread, ns),
            self.objects.list_all(self.layout.checkpoint_id_prefix(nsp, cid)),
            self.objects.list_all(self.layout.writes_of(nsp, cid)),
        )
        if entry is None or not await self._in_history(nsp, entry, cid):
            return None
        lineage = Lineage({cid}, entry.floor)
        matches = [
            ck
            for ck in self.layout.listed_checkpoints(nsp, (o.key for o in found))
            if lineage.admit(ck)
        ]
        if not matches:
            return None
        writes = {invert_id(cid): [w.key for w in wkeys]}
        (tup,) = await self._load(thread, ns, nsp, matches[:1], writes, entry=entry)
        return tup

    async def _in_history(self, nsp: str, entry: Entry, cid: str) -> bool:
        """Whether ``cid`` is a tip or an ancestor of one: the tips need no request,
        an older checkpoint is found by walking the listing down to it."""
        if cid in entry.tips:
            return True
        if cid < entry.floor or cid > entry.latest_id:
            return False
        lineage = Lineage(entry.tips, entry.floor, {entry.latest_id: f"{nsp}c/{entry.latest_tail}"})
        async for page in self.objects.list_pages(self.layout.checkpoints(nsp)):
            for ck in self.layout.listed_checkpoints(nsp, (o.key for o in page)):
                if ck.checkpoint_id < cid or lineage.exhausted:
                    return False
                if lineage.admit(ck) and ck.checkpoint_id == cid:
                    return True
        return False

    async def _confirm_missing(self, thread: str, ns: str, missing: _Missing) -> None:
        """An object the history refers to is gone. A delete or prune that ran meanwhile
        explains it (the caller reads again); otherwise it is corruption, named."""
        entry = await self.manifest.latest(thread, ns)
        if entry is not None and entry.rev == missing.rev:
            raise CorruptObjectError(
                ", ".join(missing.keys),
                f"missing: checkpoint {missing.checkpoint_id} of thread {thread!r} refers to it",
            )

    async def _load(
        self,
        thread: str,
        ns: str,
        nsp: str,
        cks: Sequence[CheckpointKey],
        writes: dict[str, list[str]] | None,
        envelopes: Sequence[bytes | None] | None = None,
        *,
        entry: Entry,
    ) -> list[CheckpointTuple]:
        """Materialize checkpoints of the history in at most two round trips.

        ``writes`` maps inverted checkpoint id to its write keys; None means
        "not listed yet" (listed alongside the checkpoint GETs). A checkpoint
        or blob that is gone raises ``_Missing``: the history refers to it.
        """
        serde = self.serde

        def flat(w: dict[str, list[str]]) -> list[str]:
            return [k for c in cks for k in w.get(invert_id(c.checkpoint_id), [])]

        # stage 1: envelopes (unless given) beside the writes, listed or read
        env_job = (
            self.objects.get_many([ck.key for ck in cks], cache=True)
            if envelopes is None
            else _value(list(envelopes))
        )
        early: list[bytes | None] | None = None
        if writes is None:
            envs, listed = await asyncio.gather(
                env_job,
                bounded_map(
                    lambda c: self.objects.list_all(self.layout.writes_of(nsp, c.checkpoint_id)),
                    cks,
                    self.concurrency,
                ),
            )
            writes = {
                invert_id(c.checkpoint_id): [w.key for w in ws]
                for c, ws in zip(cks, listed, strict=True)
            }
        elif envelopes is None:
            envs, early = await asyncio.gather(env_job, self.objects.get_many(flat(writes)))
        else:
            envs = await env_job
        all_wkeys = flat(writes)

        decoded: list[tuple[codec.CheckpointEnvelope, dict[str, Any]]] = []
        blob_keys: dict[str, None] = {}
        for ck, body in zip(cks, envs, strict=True):
            if body is None:
                raise _Missing([ck.key], ck.checkpoint_id, entry.rev)
            with codec.reading(ck.key):
                env = codec.load_checkpoint(body)
                cp = serde.loads_typed(env.checkpoint)
                versions = cp["channel_versions"]
                for ch in env.present:
                    blob_keys[self.layout.blob(nsp, ch, versions[ch])] = None
            decoded.append((env, cp))

        # stage 2: the blobs, beside the write bodies when only their keys are known
        bkeys = list(blob_keys)
        blob_bodies, write_bodies = await asyncio.gather(
            self.objects.get_many(bkeys, cache=True),
            self.objects.get_many(all_wkeys) if early is None else _value(early),
        )
        blobs = dict(zip(bkeys, blob_bodies, strict=True))
        wbodies = dict(zip(all_wkeys, write_bodies, strict=True))

        out: list[CheckpointTuple] = []
        for ck, (env, cp) in zip(cks, decoded, strict=True):
            versions = cp["channel_versions"]
            values: dict[str, Any] = {}
            gone = [
                self.layout.blob(nsp, ch, versions[ch])
                for ch in env.present
                if blobs[self.layout.blob(nsp, ch, versions[ch])] is None
            ]
            if gone:
                raise _Missing(gone, ck.checkpoint_id, entry.rev)
            for ch in env.present:
                bkey = self.layout.blob(nsp, ch, versions[ch])
                with codec.reading(bkey):
                    values[ch] = serde.loads_typed(codec.load_blob(cast(bytes, blobs[bkey])))
            pending = pending_writes(
                serde, [(k, wbodies[k]) for k in writes.get(invert_id(ck.checkpoint_id), [])]
            )
            with codec.reading(ck.key):
                metadata = cast(CheckpointMetadata, serde.loads_typed(env.metadata))
            out.append(
                CheckpointTuple(
                    config=_config(thread, ns, ck.checkpoint_id),
                    checkpoint=cast(Checkpoint, {**cp, "channel_values": values}),
                    metadata=metadata,
                    parent_config=(_config(thread, ns, ck.parent_id) if ck.parent_id else None),
                    pending_writes=pending,
                )
            )
        return out

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        if limit is not None and limit <= 0:
            return
        before_id = get_checkpoint_id(before) if before else None
        only_id: str | None = None
        if config is not None:
            thread, _, only_id = _ids(config)
            conf = config.get("configurable") or {}
            if conf.get("checkpoint_ns") is not None:
                targets: AsyncIterator[tuple[str, str, Entry | None]] = _one(
                    thread, str(conf["checkpoint_ns"])
                )
            else:
                targets = self._thread_namespaces(thread)
        else:
            targets = self._all_namespaces()
        remaining = limit
        async for thread, ns, entry in targets:
            if only_id is not None:
                found = await self._one_checkpoint(thread, ns, only_id, before_id, filter)
                listing: AsyncIterator[CheckpointTuple] = _each(found)
            else:
                listing = self._list_namespace(
                    thread, ns, entry, before_id=before_id, filter=filter, limit=remaining
                )
            async for tup in listing:
                yield tup
                if remaining is not None:
                    remaining -= 1
                    if remaining <= 0:
                        return

    async def _one_checkpoint(
        self,
        thread: str,
        ns: str,
        cid: str,
        before_id: str | None,
        filter: dict[str, Any] | None,
    ) -> list[CheckpointTuple]:
        if before_id is not None and cid >= before_id:
            return []
        tup = await self.aget_tuple(_config(thread, ns, cid))
        if tup is None or not _matches(tup.metadata, filter):
            return []
        return [tup]

    async def _thread_namespaces(self, thread: str) -> AsyncIterator[tuple[str, str, Entry | None]]:
        entries = await self.manifest.namespaces(thread)
        for e in sorted(entries, key=lambda e: e.checkpoint_ns):
            yield thread, e.checkpoint_ns, e

    async def _all_namespaces(self) -> AsyncIterator[tuple[str, str, Entry | None]]:
        entries: list[Entry] = []
        async for page in self.manifest.scan():
            entries.extend(page)
        for e in sorted(entries, key=lambda e: (e.thread_id, e.checkpoint_ns)):
            yield e.thread_id, e.checkpoint_ns, e

    async def _list_namespace(
        self,
        thread: str,
        ns: str,
        entry: Entry | None,
        *,
        before_id: str | None,
        filter: dict[str, Any] | None,
        limit: int | None,
    ) -> AsyncIterator[CheckpointTuple]:
        """The namespace's history, newest first: the listing filtered by the manifest's
        lineage (no phantom, nothing of a deleted life), read a chunk at a time."""
        nsp = self.layout.namespace(thread, ns)
        if filter:
            batch = FILTER_BATCH  # envelopes are read to filter: keep batches small
        else:
            batch = min(limit, 1000) if limit is not None else UNLIMITED_BATCH
        # the lineage is decided from the top, so `before` lists the newer keys too
        page_size = 1000 if before_id else min(batch, 1000)
        ckpt_pages = self.objects.list_pages(self.layout.checkpoints(nsp), page_size=page_size)
        wstart = self.layout.writes_older_than(nsp, before_id) if before_id else None
        cursor = WritesCursor(
            self.objects.list_pages(self.layout.writes(nsp), start_after=wstart), self.layout, nsp
        )
        # the manifest, the first checkpoint page and the first writes page go out together
        got, first, _ = await asyncio.gather(
            _value(entry) if entry is not None else self.manifest.latest(thread, ns),
            first_page(ckpt_pages),
            cursor.upto(""),
        )
        if got is None:
            return
        lineage = Lineage(got.tips, got.floor, {got.latest_id: f"{nsp}c/{got.latest_tail}"})
        page = first
        while page:
            cks = [
                ck
                for ck in self.layout.listed_checkpoints(nsp, (item.key for item in page))
                if lineage.admit(ck) and (before_id is None or ck.checkpoint_id < before_id)
            ]
            for i in range(0, len(cks), batch):
                chunk = cks[i : i + batch]
                async for tup in self._load_chunk(thread, ns, nsp, chunk, cursor, filter, got):
                    yield tup
                    if limit is not None:
                        limit -= 1
                        if limit <= 0:
                            return
            if lineage.exhausted:
                return
            page = await first_page(ckpt_pages)

    async def _load_chunk(
        self,
        thread: str,
        ns: str,
        nsp: str,
        cks: list[CheckpointKey],
        cursor: WritesCursor,
        filter: dict[str, Any] | None,
        entry: Entry,
    ) -> AsyncIterator[CheckpointTuple]:
        last_inv = invert_id(cks[-1].checkpoint_id)
        envelopes: list[bytes | None] | None = None
        if filter:
            # metadata decides which checkpoints are wanted: read envelopes first
            bodies, _ = await asyncio.gather(
                self.objects.get_many([c.key for c in cks], cache=True), cursor.upto(last_inv)
            )
            keep: list[tuple[CheckpointKey, bytes | None]] = []
            for ck, body in zip(cks, bodies, strict=True):
                with codec.reading(ck.key):
                    md = (
                        self.serde.loads_typed(codec.load_checkpoint(body).metadata)
                        if body
                        else None
                    )
                if body is None or _matches(md, filter):
                    keep.append((ck, body))  # a missing one is judged by _load
                else:
                    cursor.take(invert_id(ck.checkpoint_id))  # drop unwanted writes
            if not keep:
                return
            cks = [ck for ck, _ in keep]
            envelopes = [body for _, body in keep]
        else:
            await cursor.upto(last_inv)
        writes = {invert_id(c.checkpoint_id): cursor.take(invert_id(c.checkpoint_id)) for c in cks}
        while cks:
            try:
                loaded = await self._load(thread, ns, nsp, cks, writes, envelopes, entry=entry)
                break
            except _Missing as missing:
                await self._confirm_missing(thread, ns, missing)
                # maintenance removed it while we listed: it is no longer history
                at = [ck.checkpoint_id for ck in cks].index(missing.checkpoint_id)
                del cks[at]
                if envelopes is not None:
                    del envelopes[at]
        else:
            return
        for tup in loaded:
            yield tup

    # ---------------------------------------------------------------- writing
    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread, ns, parent = _ids(config)
        nsp = self.layout.namespace(thread, ns)
        serde = self.serde
        cid = checkpoint["id"]
        c = dict(checkpoint)
        values: dict[str, Any] = cast(dict[str, Any], c.pop("channel_values", None) or {})
        md = get_checkpoint_metadata(config, metadata)
        run = md.get("run_id")
        # serialize everything before the first request: bad input writes nothing
        blobs = [
            (self.layout.blob(nsp, ch, ver), codec.dump_blob(serde.dumps_typed(values[ch])))
            for ch, ver in new_versions.items()
            if ch in values
        ]
        versions = checkpoint.get("channel_versions") or {}
        env = codec.CheckpointEnvelope(
            checkpoint=serde.dumps_typed(c),
            metadata=serde.dumps_typed(md),
            present=tuple(ch for ch in versions if ch in values),
            written=tuple(ch for ch in new_versions if ch in values),
        )
        body = codec.dump_checkpoint(env)
        key = self.layout.checkpoint(nsp, cid, parent, None if run is None else str(run))
        tail = key[len(nsp) + 2 :]

        uses_delta = bool(md.get("counters_since_delta_snapshot"))
        await self._put_objects(key, body, blobs)
        await self.manifest.advance(
            thread,
            ns,
            cid,
            tail,
            parent,
            uses_delta=uses_delta,
            rewrite=lambda: self._put_objects(key, body, blobs),
        )
        return _config(thread, ns, cid)

    async def _put_objects(self, key: str, body: bytes, blobs: list[tuple[str, bytes]]) -> None:
        """The checkpoint and its new blobs, concurrently (one round trip). Nothing is
        committed yet: a failure or a crash leaves objects no reader will see."""
        results = await asyncio.gather(
            self._put_immutable(key, body),
            *(self.objects.put(k, b, if_none_match=True, cache=True) for k, b in blobs),
            return_exceptions=True,
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]

    async def _put_immutable(self, key: str, body: bytes) -> bool:
        """Write once. True: this call created it; False: it was already stored."""
        if await self.objects.put(key, body, if_none_match=True, cache=True):
            return True
        # 412: our own earlier attempt (answer lost) or a replay; compare before failing
        existing = await self.objects.get(key)
        if existing is None:  # a deletion took it meanwhile
            return await self._put_immutable(key, body)
        if existing != body:
            raise CheckpointConflictError(
                f"checkpoint {key!r} already exists with different content; checkpoints "
                "are immutable: write a new checkpoint id instead"
            )
        return False

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        thread, ns, cid = _ids(config)
        if cid is None:
            raise InvalidIdError("put_writes needs config['configurable']['checkpoint_id']")
        nsp = self.layout.namespace(thread, ns)
        serde = self.serde
        regular: list[tuple[int, str, codec.Typed]] = []
        special: dict[int, tuple[int, str, codec.Typed]] = {}
        for idx, (ch, value) in enumerate(writes):
            typed = serde.dumps_typed(value)
            if ch in WRITES_IDX_MAP:
                special[WRITES_IDX_MAP[ch]] = (WRITES_IDX_MAP[ch], ch, typed)
            else:
                regular.append((idx, ch, typed))
        jobs: list[Awaitable[Any]] = []
        if regular:
            key = self.layout.write(nsp, cid, task_id, "r")
            jobs.append(self._put_first_wins(key, task_id, task_path, regular))
        for sidx, entry in special.items():
            key = self.layout.write(nsp, cid, task_id, f"s{-sidx}")
            jobs.append(self.objects.put(key, codec.dump_writes(task_id, task_path, [entry])))
        await asyncio.gather(*jobs)

    async def _put_first_wins(
        self, key: str, task_id: str, task_path: str, writes: list[tuple[int, str, codec.Typed]]
    ) -> None:
        """Regular writes are first-write-wins per (task_id, idx): merge with CAS."""
        if await self.objects.put(
            key, codec.dump_writes(task_id, task_path, writes), if_none_match=True
        ):
            return
        for _ in range(CAS_ATTEMPTS):
            body, etag = await self.objects.get_with_etag(key)
            if body is None:  # deleted meanwhile: start over
                if await self.objects.put(
                    key, codec.dump_writes(task_id, task_path, writes), if_none_match=True
                ):
                    return
                continue
            with codec.reading(key):
                stored = codec.load_writes(body)
            have = {w.idx for w in stored}
            extra = [w for w in writes if w[0] not in have]
            if not extra:
                return  # idempotent replay, or our own write whose answer was lost
            merged = [(w.idx, w.channel, w.value) for w in stored] + extra
            merged.sort(key=lambda w: w[0])
            if await self.objects.put(
                key, codec.dump_writes(task_id, stored[0].task_path, merged), if_match=etag
            ):
                return
        raise CheckpointConflictError(f"writes {key!r} kept changing under concurrent writers")

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Zero-padded counter plus a random fraction: sortable and never reused.

        The random part matters here: blobs are addressed by (channel, version),
        so a fork must never produce a version an earlier branch already used.
        """
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(str(current).split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"

    # ------------------------------------------------------ delta channel walk
    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Rebuild DeltaChannel state: the parent chain from one listing, then
        the ancestors concurrently (see history.DeltaWalk).

        When ``aget_tuple`` of the latest checkpoint already walked the chain
        (it does so for DeltaChannel threads, overlapped with its own reads),
        the result is handed over here without a request.
        """
        if not channels:
            return {}
        thread, ns, cid = _ids(config)
        nsp = self.layout.namespace(thread, ns)
        if cid is not None:
            ready = self._delta_memo.pop((nsp, cid), None)
            if ready is not None and all(ch in ready for ch in channels):
                return {ch: ready[ch] for ch in channels}
        walk = DeltaWalk(self.objects, self.layout, self.serde, nsp, cid)
        entry, _ = await asyncio.gather(self.manifest.latest(thread, ns), walk.prime())
        if entry is None:
            return {ch: {"writes": []} for ch in channels}
        cid = cid or entry.latest_id
        walk.floor = entry.floor
        target = await walk.find(cid)
        cache = self.objects.cache
        cached = cache.get(target.key) if (cache is not None and target is not None) else None
        depth = snapshot_depth(self.serde, cached, channels, target.key if target else "")
        return await walk.history(target, channels, depth)

    async def _get_latest_with_delta(
        self, thread: str, ns: str, nsp: str, ck: CheckpointKey, entry: Entry
    ) -> CheckpointTuple | None:
        """Latest checkpoint of a DeltaChannel thread: 4 round trips in all.

        (1) manifest (done); (2) the checkpoint beside the namespace's first
        checkpoint and writes pages; (3) its blobs and writes beside the
        ancestors' envelopes and writes; (4) the seed blobs. The history is
        kept for the ``aget_delta_channel_history`` call LangGraph makes next.
        """
        walk = DeltaWalk(self.objects, self.layout, self.serde, nsp, ck.checkpoint_id, entry.floor)
        body, _ = await asyncio.gather(self.objects.get(ck.key, cache=True), walk.prime())
        inv = invert_id(ck.checkpoint_id)
        await walk.cursor.upto(inv)
        writes = {inv: walk.cursor.take(inv)}
        channels = channels_to_replay(self.serde, body, ck.key) if body is not None else []
        if not channels:
            (plain,) = await self._load(thread, ns, nsp, [ck], writes, [body], entry=entry)
            return plain
        depth = snapshot_depth(self.serde, body, channels, ck.key)
        loaded, hist = await asyncio.gather(
            self._load(thread, ns, nsp, [ck], writes, [body], entry=entry),
            walk.history(ck, channels, depth),
        )
        self._delta_memo[(nsp, ck.checkpoint_id)] = hist
        while len(self._delta_memo) > DELTA_MEMO_SIZE:
            self._delta_memo.popitem(last=False)
        tup: CheckpointTuple | None = loaded[0]
        return tup

    # --------------------------------------------------------------- deleting
    async def adelete_thread(self, thread_id: str) -> None:
        """Tombstone every namespace (the thread is gone for every reader at once),
        then remove the objects, then let a new life on the id begin."""
        thread = str(thread_id)
        stamp, keys = await self.manifest.tombstone(thread)
        prefix = self.layout.thread(thread)
        listed = await self.objects.list_all(prefix)
        if not await self.manifest.renew(keys, stamp):
            # the lease ran out (a stalled process) and a new conversation began: its
            # objects may be in the listing, so this deletion stops; the rest is garbage
            logger.warning("delete_thread(%r) outlasted its lease; objects left", thread)
            return
        await self.objects.delete([o.key for o in listed])  # evicts them from the cache
        await self.manifest.release(keys, stamp)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        tokens = {encode(str(r), "run_id") for r in run_ids}
        if not tokens:
            return
        entries: list[Entry] = []
        async for page in self.manifest.scan():
            entries.extend(page)
        await bounded_map(lambda e: self._delete_runs_in(e, tokens), entries, self.concurrency)

    async def _delete_runs_in(self, entry: Entry, tokens: set[str]) -> None:
        """Remove the runs' checkpoints; the manifest's tips move to what is left
        (compare-and-swap: a writer that committed meanwhile makes it start over)."""
        nsp = self.layout.namespace(entry.thread_id, entry.checkpoint_ns)
        for _ in range(MAINTENANCE_ATTEMPTS):
            listed = await self.objects.list_all(self.layout.checkpoints(nsp))
            cks = self.layout.listed_checkpoints(nsp, (o.key for o in listed))
            doomed = [ck for ck in cks if ck.run_token in tokens]
            if not doomed:
                return
            lineage = Lineage(entry.tips, entry.floor)
            visible = {ck.checkpoint_id for ck in cks if lineage.admit(ck)}
            history: list[CheckpointKey] = []
            for ck in cks:  # an id stored under two keys (a stray copy) counts once
                if ck.checkpoint_id in visible and ck.run_token not in tokens:
                    visible.discard(ck.checkpoint_id)
                    history.append(ck)
            parents = {ck.parent_id for ck in history}
            tips = [ck for ck in history if ck.checkpoint_id not in parents]
            if tips:
                top = tips[0]  # listings are newest first
                body = await self.objects.get(top.key, cache=True)
                removed = {ck.checkpoint_id for ck in doomed if ck.checkpoint_id >= entry.floor}
                new = Fields(
                    top.checkpoint_id,
                    top.key[len(self.layout.checkpoints(nsp)) :],
                    entry.floor,
                    body is None or bool(channels_to_replay(self.serde, body, top.key)),
                    entry.created_at,
                    {ck.checkpoint_id for ck in tips[1:]},
                    set(entry.gone) | removed,  # a run still writing may not continue them
                )
                swapped = await self.manifest.replace(entry, new)
            else:
                swapped = await self.manifest.drop(entry)
            if swapped:
                keep = [ck for ck in cks if ck.run_token not in tokens]
                await self._drop_checkpoints(nsp, doomed, keep, _modified(listed, entry, nsp))
                return
            fresh = await self.manifest.latest(entry.thread_id, entry.checkpoint_ns)
            if fresh is None:
                return
            entry = fresh
        raise CheckpointConflictError(
            f"thread {entry.thread_id!r} kept changing while its runs were deleted; retry"
        )

    async def _drop_checkpoints(
        self,
        nsp: str,
        doomed: list[CheckpointKey],
        keep: list[CheckpointKey],
        cutoff: float,
    ) -> None:
        """Delete checkpoints, their writes, and the blobs no kept checkpoint refers to.

        Only blobs stored before ``cutoff`` (the committed latest's own time) go: a
        writer's new blobs, stored after it and not yet committed, stay.
        """
        kept_ids = {ck.checkpoint_id for ck in keep}
        # an id under both (a stray key copying a kept one's id) keeps its writes
        doomed_ids = {ck.checkpoint_id for ck in doomed} - kept_ids
        wlisted, blisted, envs = await asyncio.gather(
            self.objects.list_all(self.layout.writes(nsp)),
            self.objects.list_all(self.layout.blobs(nsp)),
            self.objects.get_many([ck.key for ck in keep], cache=True),
        )
        doomed_inv = {invert_id(i) for i in doomed_ids}
        referenced: set[str] = set()
        for ck, body in zip(keep, envs, strict=True):
            if body is None:  # cannot tell what it refers to: leave every blob
                cutoff = 0.0
                continue
            with codec.reading(ck.key):
                env = codec.load_checkpoint(body)
                versions = self.serde.loads_typed(env.checkpoint)["channel_versions"]
            referenced.update(self.layout.blob(nsp, ch, versions[ch]) for ch in env.present)
        drop = [ck.key for ck in doomed]
        drop += [
            o.key for o in wlisted if self.layout.checkpoint_of_write(nsp, o.key) in doomed_inv
        ]
        drop += [o.key for o in blisted if o.key not in referenced and o.modified < cutoff]
        await self.objects.delete(drop)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        if strategy not in ("keep_latest", "delete"):
            raise InvalidRequestError(
                f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'"
            )
        if strategy == "delete":
            await bounded_map(self.adelete_thread, thread_ids, self.concurrency)
            return
        entries = [
            e
            for es in await bounded_map(
                lambda t: self.manifest.namespaces(str(t)), thread_ids, self.concurrency
            )
            for e in es
        ]
        await bounded_map(self._prune_ns, entries, self.concurrency)

    async def _prune_ns(self, entry: Entry) -> None:
        """Keep the latest checkpoint and, for DeltaChannel state, its chain to a seed.

        The manifest's floor is raised first, conditioned on the entry being what
        was read before the listing: every committed checkpoint is then listed, a
        writer that committed meanwhile makes prune start over, and nothing newer
        than the latest (a writer's checkpoint, not yet committed) is touched.
        """
        nsp = self.layout.namespace(entry.thread_id, entry.checkpoint_ns)
        for _ in range(MAINTENANCE_ATTEMPTS):
            listed = await self.objects.list_all(self.layout.checkpoints(nsp))
            cks = self.layout.listed_checkpoints(nsp, (o.key for o in listed))
            by_id: dict[str, CheckpointKey] = {}
            for ck in cks:
                by_id.setdefault(ck.checkpoint_id, ck)
            latest = by_id.get(entry.latest_id)
            if latest is None:
                raise CorruptObjectError(
                    f"{nsp}c/{entry.latest_tail}",
                    f"missing: it is the latest checkpoint of thread {entry.thread_id!r}",
                )
            keep = await self._seed_chain(latest, by_id)
            kept = {ck.checkpoint_id for ck in keep}
            doomed = [
                ck
                for ck in cks
                if ck.checkpoint_id < latest.checkpoint_id and ck.checkpoint_id not in kept
            ]
            removed = {ck.checkpoint_id for ck in doomed}
            if await self.manifest.raise_floor(entry, min(kept), removed):
                await self._drop_checkpoints(nsp, doomed, keep, _modified(listed, entry, nsp))
                return
            fresh = await self.manifest.latest(entry.thread_id, entry.checkpoint_ns)
            if fresh is None:
                return  # deleted meanwhile
            entry = fresh
        raise CheckpointConflictError(
            f"thread {entry.thread_id!r} kept changing while it was pruned; retry the prune"
        )

    async def _seed_chain(
        self, latest: CheckpointKey, by_id: dict[str, CheckpointKey]
    ) -> list[CheckpointKey]:
        """The latest and, for DeltaChannel state, the ancestors back to each seed."""
        keep = [latest]
        body = await self.objects.get(latest.key, cache=True)
        if body is None:
            raise CorruptObjectError(latest.key, "missing: it is the latest checkpoint")
        with codec.reading(latest.key):
            env = codec.load_checkpoint(body)
            md = self.serde.loads_typed(env.metadata)
        delta = set((md or {}).get("counters_since_delta_snapshot") or {}) - set(env.present)
        parent = latest.parent_id
        while delta and parent in by_id:
            ck = by_id[parent]
            keep.append(ck)
            pbody = await self.objects.get(ck.key, cache=True)
            if pbody is None:
                break
            with codec.reading(ck.key):
                delta -= set(codec.load_checkpoint(pbody).present)
            parent = ck.parent_id
        return keep

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every object, then give the target the source's tips.

        The source's entries are read before the listing (all they lead to is copied)
        and again after the copy: a change meanwhile (a delete, a prune) starts it
        over. The target's items are read before copying and the commit is
        conditioned on them: a deletion of the target begun meanwhile starts it over.
        """
        src, dst = str(source_thread_id), str(target_thread_id)
        if src == dst:
            return  # a thread is already a copy of itself
        sprefix, dprefix = self.layout.thread(src), self.layout.thread(dst)
        for _ in range(MAINTENANCE_ATTEMPTS):
            entries = await self.manifest.namespaces(src)
            if not entries:
                return
            targets = await bounded_map(
                lambda e: self.manifest.read(dst, e.checkpoint_ns), entries, self.concurrency
            )
            leased = [r.lease_until for r in targets if r is not None and r.tombstone]
            if leased and max(leased) > time.time():  # the target is being deleted
                await asyncio.sleep(min(max(leased) - time.time(), 0.25))
                continue
            listed = await self.objects.list_all(sprefix)
            await bounded_map(
                lambda o: self.objects.copy(o.key, dprefix + o.key[len(sprefix) :]),
                listed,
                self.concurrency,
            )
            after = {e.checkpoint_ns: e.rev for e in await self.manifest.namespaces(src)}
            if after != {e.checkpoint_ns: e.rev for e in entries}:
                continue  # the source changed while it was copied
            merged = await bounded_map(
                lambda pair: self.manifest.merge(dst, pair[0], pair[1]),
                list(zip(entries, targets, strict=True)),
                self.concurrency,
            )
            if all(merged):
                return
        raise CheckpointConflictError(
            f"copy_thread({src!r}, {dst!r}): the threads kept changing during the copy; retry"
        )

    # ----------------------------------------------------------- sync twins
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._runner.run(self.aget_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        return self._runner.iterate(self.alist(config, filter=filter, before=before, limit=limit))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._runner.run(self.aput(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._runner.run(self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._runner.run(self.adelete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._runner.run(self.adelete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._runner.run(self.acopy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._runner.run(self.aprune(thread_ids, strategy=strategy))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return self._runner.run(self.aget_delta_channel_history(config=config, channels=channels))


class AsyncS3Saver(_S3SaverBase):
    """Async LangGraph checkpointer on S3 with a DynamoDB manifest.

    Safe to build at import time, outside any event loop: clients are created
    per loop on first use, so a warm Lambda calling ``asyncio.run`` per
    invocation keeps working.
    """

    @classmethod
    @asynccontextmanager
    async def from_conn_string(cls, conn_string: str, **kwargs: Any) -> AsyncIterator[AsyncS3Saver]:
        """``s3://BUCKET/PREFIX?table=TABLE[&region=R][&endpoint_url=URL]``."""
        saver = cls(**conn_kwargs(conn_string, kwargs, with_table=True))
        try:
            yield saver
        finally:
            await saver.aclose()

    @classmethod
    def from_url(cls, conn_string: str, **kwargs: Any) -> Self:
        """Build from a connection string without a context manager: for Lambda
        module scope, where the saver lives as long as the process."""
        return cls(**conn_kwargs(conn_string, kwargs, with_table=True))

    async def setup(self) -> None:
        """Create the bucket and the manifest table when missing; idempotent."""
        await self._asetup()

    async def aclose(self) -> None:
        """Close this loop's clients and the background loop of the sync twins."""
        await self.clients.aclose()
        self._runner.close()

    async def __aenter__(self) -> AsyncS3Saver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def _value(value: T) -> T:
    return value


async def _one(thread: str, ns: str) -> AsyncIterator[tuple[str, str, Entry | None]]:
    yield thread, ns, None


async def _each(items: Sequence[T]) -> AsyncIterator[T]:
    for item in items:
        yield item


def _matches(metadata: Any, filter: dict[str, Any] | None) -> bool:
    if not filter:
        return True
    return isinstance(metadata, dict) and all(metadata.get(k) == v for k, v in filter.items())


def _modified(listed: Sequence[Listed], entry: Entry, nsp: str) -> float:
    """When the latest checkpoint was stored: the cutoff for unreferenced blobs."""
    key = f"{nsp}c/{entry.latest_tail}"
    return next((o.modified for o in listed if o.key == key), 0.0)


class _Missing(Exception):
    """Internal: objects of a checkpoint in the history are gone (see _confirm_missing)."""

    def __init__(self, keys: list[str], checkpoint_id: str, rev: int) -> None:
        super().__init__(", ".join(keys))
        self.keys, self.checkpoint_id, self.rev = keys, checkpoint_id, rev
