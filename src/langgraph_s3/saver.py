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
from .errors import CheckpointConflictError, InvalidIdError, InvalidRequestError
from .history import (
    DeltaWalk,
    WritesCursor,
    channels_to_replay,
    first_page,
    pending_writes,
    snapshot_depth,
)
from .keys import CheckpointKey, Layout, encode, invert_id
from .manifest import Entry, Manifest
from .objects import ObjectStore, bounded_map
from .runner import BackgroundLoop

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_TABLE = "langgraph-s3-manifest"
DEFAULT_CACHE_BYTES = 64 * 1024 * 1024
CAS_ATTEMPTS = 8
FILTER_BATCH = 50
UNLIMITED_BATCH = 100
DELTA_MEMO_SIZE = 64


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
        self.manifest = Manifest(self.clients, self.target.table or DEFAULT_TABLE, ttl_seconds=ttl)
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

    # ---------------------------------------------------------------- reading
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread, ns, cid = _ids(config)
        nsp = self.layout.namespace(thread, ns)
        if cid is not None:
            found, wkeys = await asyncio.gather(
                self.objects.list_all(self.layout.checkpoint_id_prefix(nsp, cid)),
                self.objects.list_all(self.layout.writes_of(nsp, cid)),
            )
            matches = self.layout.listed_checkpoints(nsp, (o.key for o in found))
            if not matches:
                return None
            ck = matches[0]
            writes: dict[str, list[str]] | None = {invert_id(cid): [w.key for w in wkeys]}
        else:
            entry = await self.manifest.latest(thread, ns)
            if entry is None:
                return None
            ck = self.layout.parse_checkpoint(nsp, f"{nsp}c/{entry.latest_tail}")
            if entry.uses_delta:
                return await self._get_latest_with_delta(thread, ns, nsp, ck)
            writes = None
        (tup,) = await self._load(thread, ns, nsp, [ck], writes)
        return tup

    async def _load(
        self,
        thread: str,
        ns: str,
        nsp: str,
        cks: Sequence[CheckpointKey],
        writes: dict[str, list[str]] | None,
        envelopes: Sequence[bytes | None] | None = None,
    ) -> list[CheckpointTuple | None]:
        """Materialize checkpoints in at most two round trips.

        ``writes`` maps inverted checkpoint id to its write keys; None means
        "not listed yet" (listed alongside the checkpoint GETs).
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

        decoded: list[tuple[codec.CheckpointEnvelope, dict[str, Any]] | None] = []
        blob_keys: dict[str, None] = {}
        for ck, body in zip(cks, envs, strict=True):
            if body is None:
                decoded.append(None)
                continue
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

        out: list[CheckpointTuple | None] = []
        for ck, item in zip(cks, decoded, strict=True):
            if item is None:
                out.append(None)
                continue
            env, cp = item
            versions = cp["channel_versions"]
            values: dict[str, Any] = {}
            complete = True
            for ch in env.present:
                bkey = self.layout.blob(nsp, ch, versions[ch])
                body = blobs[bkey]
                if body is None:
                    if ch in env.written:
                        complete = False
                    continue
                with codec.reading(bkey):
                    values[ch] = serde.loads_typed(codec.load_blob(body))
            if not complete:
                logger.warning(
                    "skipping checkpoint %s of thread %r: a blob its put wrote is missing "
                    "(the writer crashed mid-put)",
                    ck.checkpoint_id,
                    thread,
                )
                out.append(None)
                continue
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
                targets: AsyncIterator[tuple[str, str]] = _one(thread, str(conf["checkpoint_ns"]))
            else:
                targets = self._thread_namespaces(thread)
        else:
            targets = self._all_namespaces()
        remaining = limit
        async for thread, ns in targets:
            async for tup in self._list_namespace(
                thread, ns, only_id=only_id, before_id=before_id, filter=filter, limit=remaining
            ):
                yield tup
                if remaining is not None:
                    remaining -= 1
                    if remaining <= 0:
                        return

    async def _thread_namespaces(self, thread: str) -> AsyncIterator[tuple[str, str]]:
        entries = await self.manifest.namespaces(thread)
        for ns in sorted(e.checkpoint_ns for e in entries):
            yield thread, ns

    async def _all_namespaces(self) -> AsyncIterator[tuple[str, str]]:
        entries: list[Entry] = []
        async for page in self.manifest.scan():
            entries.extend(page)
        for e in sorted(entries, key=lambda e: (e.thread_id, e.checkpoint_ns)):
            yield e.thread_id, e.checkpoint_ns

    async def _list_namespace(
        self,
        thread: str,
        ns: str,
        *,
        only_id: str | None,
        before_id: str | None,
        filter: dict[str, Any] | None,
        limit: int | None,
    ) -> AsyncIterator[CheckpointTuple]:
        nsp = self.layout.namespace(thread, ns)
        if only_id is not None:
            if before_id is not None and only_id >= before_id:
                return
            prefix = self.layout.checkpoint_id_prefix(nsp, only_id)
            start, wstart = None, None
        else:
            prefix = self.layout.checkpoints(nsp)
            start = self.layout.older_than(nsp, before_id) if before_id else None
            wstart = self.layout.writes_older_than(nsp, before_id) if before_id else None
        if filter:
            batch = FILTER_BATCH  # envelopes are read to filter: keep batches small
        else:
            batch = min(limit, 1000) if limit is not None else UNLIMITED_BATCH
        ckpt_pages = self.objects.list_pages(prefix, start_after=start, page_size=min(batch, 1000))
        wprefix = self.layout.writes_of(nsp, only_id) if only_id else self.layout.writes(nsp)
        cursor = WritesCursor(
            self.objects.list_pages(wprefix, start_after=wstart), self.layout, nsp
        )
        # the first checkpoint page and the first writes page go out together
        first, _ = await asyncio.gather(first_page(ckpt_pages), cursor.upto(""))
        page = first
        seen: set[str] = set()
        while page:
            cks = []
            for ck in self.layout.listed_checkpoints(nsp, (item.key for item in page)):
                if ck.checkpoint_id not in seen:  # one id stored twice: first wins
                    seen.add(ck.checkpoint_id)
                    cks.append(ck)
            for i in range(0, len(cks), batch):
                chunk = cks[i : i + batch]
                async for tup in self._load_chunk(thread, ns, nsp, chunk, cursor, filter):
                    yield tup
                    if limit is not None:
                        limit -= 1
                        if limit <= 0:
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
    ) -> AsyncIterator[CheckpointTuple]:
        last_inv = invert_id(cks[-1].checkpoint_id)
        envelopes: list[bytes | None] | None = None
        if filter:
            # metadata decides which checkpoints are wanted: read envelopes first
            bodies, _ = await asyncio.gather(
                self.objects.get_many([c.key for c in cks], cache=True), cursor.upto(last_inv)
            )
            keep: list[tuple[CheckpointKey, bytes]] = []
            for ck, body in zip(cks, bodies, strict=True):
                with codec.reading(ck.key):
                    md = (
                        self.serde.loads_typed(codec.load_checkpoint(body).metadata)
                        if body
                        else None
                    )
                if md is not None and all(md.get(k) == v for k, v in filter.items()):
                    keep.append((ck, cast(bytes, body)))
                else:
                    cursor.take(invert_id(ck.checkpoint_id))  # drop unwanted writes
            if not keep:
                return
            cks = [ck for ck, _ in keep]
            envelopes = [body for _, body in keep]
        else:
            await cursor.upto(last_inv)
        writes = {invert_id(c.checkpoint_id): cursor.take(invert_id(c.checkpoint_id)) for c in cks}
        for tup in await self._load(thread, ns, nsp, cks, writes, envelopes):
            if tup is not None:
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

        results = await asyncio.gather(
            self._put_immutable(key, body),
            *(self.objects.put(k, b, if_none_match=True, cache=True) for k, b in blobs),
            return_exceptions=True,
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            if results[0] is True:
                # never leave a checkpoint whose blobs are not all stored; but only
                # undo what this call created: a replay found it already stored
                try:
                    await self.objects.delete([key])
                except Exception:  # pragma: no cover - the crash path keeps the check on read
                    logger.exception("could not remove incomplete checkpoint %s", key)
            raise errors[0]
        uses_delta = bool(md.get("counters_since_delta_snapshot"))
        await self.manifest.advance(thread, ns, cid, tail, uses_delta=uses_delta)
        return _config(thread, ns, cid)

    async def _put_immutable(self, key: str, body: bytes) -> bool:
        """Write once. True: this call created it; False: it was already stored."""
        if await self.objects.put(key, body, if_none_match=True, cache=True):
            return True
        # 412: our own earlier attempt (answer lost) or a replay; compare before failing
        existing = await self.objects.get(key)
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
        if cid is None:
            entry, _ = await asyncio.gather(self.manifest.latest(thread, ns), walk.prime())
            if entry is None:
                return {ch: {"writes": []} for ch in channels}
            cid = entry.latest_id
        else:
            await walk.prime()
        target = await walk.find(cid)
        cache = self.objects.cache
        cached = cache.get(target.key) if (cache is not None and target is not None) else None
        depth = snapshot_depth(self.serde, cached, channels, target.key if target else "")
        return await walk.history(target, channels, depth)

    async def _get_latest_with_delta(
        self, thread: str, ns: str, nsp: str, ck: CheckpointKey
    ) -> CheckpointTuple | None:
        """Latest checkpoint of a DeltaChannel thread: 4 round trips in all.

        (1) manifest (done); (2) the checkpoint beside the namespace's first
        checkpoint and writes pages; (3) its blobs and writes beside the
        ancestors' envelopes and writes; (4) the seed blobs. The history is
        kept for the ``aget_delta_channel_history`` call LangGraph makes next.
        """
        walk = DeltaWalk(self.objects, self.layout, self.serde, nsp, ck.checkpoint_id)
        body, _ = await asyncio.gather(self.objects.get(ck.key, cache=True), walk.prime())
        inv = invert_id(ck.checkpoint_id)
        await walk.cursor.upto(inv)
        writes = {inv: walk.cursor.take(inv)}
        channels = channels_to_replay(self.serde, body, ck.key) if body is not None else []
        if not channels:
            (plain,) = await self._load(thread, ns, nsp, [ck], writes, [body])
            return plain
        depth = snapshot_depth(self.serde, body, channels, ck.key)
        loaded, hist = await asyncio.gather(
            self._load(thread, ns, nsp, [ck], writes, [body]),
            walk.history(ck, channels, depth),
        )
        self._delta_memo[(nsp, ck.checkpoint_id)] = hist
        while len(self._delta_memo) > DELTA_MEMO_SIZE:
            self._delta_memo.popitem(last=False)
        tup: CheckpointTuple | None = loaded[0]
        return tup

    # --------------------------------------------------------------- deleting
    async def adelete_thread(self, thread_id: str) -> None:
        thread = str(thread_id)
        entries = await self.manifest.namespaces(thread)
        if entries:
            await self.manifest.forget(entries)  # invisible first, then removed
        prefix = self.layout.thread(thread)
        listed = await self.objects.list_all(prefix)
        await self.objects.delete([o.key for o in listed])
        if self.objects.cache is not None:
            self.objects.cache.evict_prefix(prefix)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        tokens = {encode(str(r), "run_id") for r in run_ids}
        if not tokens:
            return
        entries: list[Entry] = []
        async for page in self.manifest.scan():
            entries.extend(page)
        await bounded_map(lambda e: self._delete_runs_in(e, tokens), entries, self.concurrency)

    async def _delete_runs_in(self, entry: Entry, tokens: set[str]) -> None:
        nsp = self.layout.namespace(entry.thread_id, entry.checkpoint_ns)
        listed = await self.objects.list_all(self.layout.checkpoints(nsp))
        cks = self.layout.listed_checkpoints(nsp, (o.key for o in listed))
        doomed = [ck for ck in cks if ck.run_token in tokens]
        if not doomed:
            return
        keep = [ck for ck in cks if ck.run_token not in tokens]
        await self._drop_checkpoints(entry, nsp, doomed, keep)

    async def _drop_checkpoints(
        self, entry: Entry, nsp: str, doomed: list[CheckpointKey], keep: list[CheckpointKey]
    ) -> None:
        """Delete checkpoints, their writes, and blobs no kept checkpoint refers to."""
        kept_ids = {ck.checkpoint_id for ck in keep}
        # an id under both (a stray key copying a kept one's id) keeps its writes
        doomed_ids = {ck.checkpoint_id for ck in doomed} - kept_ids
        if entry.latest_id in doomed_ids:
            newest = keep[0] if keep else None  # listings are newest-first
            await self.manifest.repoint(
                entry.thread_id,
                entry.checkpoint_ns,
                entry.latest_id,
                (newest.checkpoint_id, newest.key[len(nsp) + 2 :]) if newest else None,
            )
        wlisted, blisted, envs = await asyncio.gather(
            self.objects.list_all(self.layout.writes(nsp)),
            self.objects.list_all(self.layout.blobs(nsp)),
            self.objects.get_many([ck.key for ck in keep], cache=True),
        )
        doomed_inv = {invert_id(i) for i in doomed_ids}
        referenced: set[str] = set()
        for ck, body in zip(keep, envs, strict=True):
            if body is None:
                continue
            with codec.reading(ck.key):
                env = codec.load_checkpoint(body)
                versions = self.serde.loads_typed(env.checkpoint)["channel_versions"]
            referenced.update(self.layout.blob(nsp, ch, versions[ch]) for ch in env.present)
        drop = [ck.key for ck in doomed]
        drop += [
            o.key for o in wlisted if self.layout.checkpoint_of_write(nsp, o.key) in doomed_inv
        ]
        drop += [o.key for o in blisted if o.key not in referenced]
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
        """Keep the latest checkpoint and, for DeltaChannel state, its chain to a seed."""
        nsp = self.layout.namespace(entry.thread_id, entry.checkpoint_ns)
        listed = await self.objects.list_all(self.layout.checkpoints(nsp))
        cks = self.layout.listed_checkpoints(nsp, (o.key for o in listed))
        by_id = {ck.checkpoint_id: ck for ck in cks}
        latest = by_id.get(entry.latest_id)
        if latest is None:
            return
        keep = [latest]
        body = await self.objects.get(latest.key, cache=True)
        if body is not None:
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
        kept = {ck.checkpoint_id for ck in keep}
        doomed = [ck for ck in cks if ck.checkpoint_id not in kept]
        keep_sorted = [ck for ck in cks if ck.checkpoint_id in kept]
        await self._drop_checkpoints(entry, nsp, doomed, keep_sorted)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        src, dst = str(source_thread_id), str(target_thread_id)
        entries = await self.manifest.namespaces(src)
        if not entries:
            return
        sprefix, dprefix = self.layout.thread(src), self.layout.thread(dst)
        listed = await self.objects.list_all(sprefix)
        await bounded_map(
            lambda o: self.objects.copy(o.key, dprefix + o.key[len(sprefix) :]),
            listed,
            self.concurrency,
        )
        await bounded_map(
            lambda e: self.manifest.advance(dst, e.checkpoint_ns, e.latest_id, e.latest_tail),
            entries,
            self.concurrency,
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


async def _one(thread: str, ns: str) -> AsyncIterator[tuple[str, str]]:
    yield thread, ns
