"""The LangGraph checkpoint saver protocol on S3 + a DynamoDB manifest: the façade.

``AsyncS3Saver`` is the one async core; ``S3Saver`` (sync.py) and the sync
methods here drive it from a private background loop. The work is done by
parts named for their job, each built per call around the shared context:
``reading`` (get_tuple, list), ``writing`` (put, put_writes), ``delta``
(DeltaChannel history) and ``maintenance`` (delete, prune, copy).

Costs, in round trips (the longest chain of requests, each sent after the one
before it answered):

* ``aput``: one object (the checkpoint, its small changed values inline;
  ``If-None-Match: *``) beside one conditional manifest update: 1 (2 when a
  value over 256 KiB is a blob, stored first).
* ``aget_tuple`` latest: manifest GetItem beside the newest writes LIST; the
  checkpoint GET; the GETs of the older objects holding its other values (and
  of its writes): 3 cold, 1 warm, whatever the history length.
* ``alist(limit=k)``: manifest + one checkpoint LIST page + one writes LIST
  page; envelope and write GETs; the objects holding older values: 3.

Every call is one operation: at most ``concurrency`` of its requests are in
flight at once (tasks.py).
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import aclosing
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_s3.aws.clients import (
    ClientFactory,
    Limits,
    Target,
    check_bucket_name,
    check_table_name,
)
from langgraph_s3.aws.s3 import ObjectStore, check_conditions
from langgraph_s3.aws.stats import RequestStats
from langgraph_s3.checkpoint.context import Address, SaverContext
from langgraph_s3.checkpoint.delta import DeltaReader
from langgraph_s3.checkpoint.maintenance import Maintenance
from langgraph_s3.checkpoint.packs import PackedObjects
from langgraph_s3.checkpoint.reading import Reader, matches
from langgraph_s3.checkpoint.writing import Writer
from langgraph_s3.core.keys import Layout, NamespaceKeys, id_list
from langgraph_s3.core.ports import ManifestPort, ObjectStorePort
from langgraph_s3.core.records import Entry, ThreadInfo
from langgraph_s3.core.report import Progress, Report
from langgraph_s3.core.tasks import bounded_map, gather_all
from langgraph_s3.errors import InvalidIdError, InvalidRequestError, S3PersistenceError
from langgraph_s3.manifest import Manifest, deployment_key
from langgraph_s3.runtime.lifecycle import SAVER_PARAMS, AsyncLifecycle
from langgraph_s3.runtime.operations import operation, operation_iter
from langgraph_s3.runtime.periodic import PeriodicSweep
from langgraph_s3.runtime.runner import BackgroundLoop

if TYPE_CHECKING:
    from langgraph_s3.checkpoint.transfer import Target as ExportFile

DEFAULT_TABLE = "langgraph-s3-manifest"
DEFAULT_CACHE_BYTES = 64 * 1024 * 1024

Namespaces = AsyncGenerator[tuple[str, str, Entry | Awaitable[Entry | None] | None], None]
"""(thread, namespace, its manifest entry: known, still on its way, or to be read)."""


_GENERIC_WALK = BaseCheckpointSaver.aget_delta_channel_history.__code__


def walk_scope(ctx: SaverContext) -> int | None:
    """The run of LangGraph's generic DeltaChannel walk this read is a step of, if any.

    LangGraph's Agent Server wraps the saver in an adapter that inherits
    ``BaseCheckpointSaver.aget_delta_channel_history`` instead of forwarding ours: that
    walk reads the ancestors one ``aget_tuple`` by id at a time. Found on the stack,
    the walk's reads share one listing (``Listed``); its first read starts afresh.
    """
    try:
        frame = sys._getframe(2)
    except ValueError:  # the bottom of a thread's stack: no walk above it
        return None
    for _ in range(12):
        if frame is None:
            return None
        if frame.f_code is _GENERIC_WALK:
            scope = id(frame)
            if "target_tuple" not in frame.f_locals:  # the walk's first read
                for k in [k for k in ctx.listed if k[0] == scope]:
                    ctx.listed.pop(k, None)
            return scope
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _refuse_inverted_versions(thread_id: str, checkpoint: Checkpoint) -> None:
    """Refuse a checkpoint whose newer versions sort below older ones as strings.

    LangGraph compares versions as strings. A thread begun with 12-digit counters and
    continued by a saver padding to 32 (LangGraph's Agent Server's adapter does,
    whatever the saver says) gets new versions that sort below the old ones: its
    graph silently skips the input. Said here, before anything is stored. (Cost: a
    glance at the widths; a sort only when they differ.)
    """
    versions = checkpoint.get("channel_versions") or {}
    found: list[tuple[int, str, str]] = []
    for ch, v in versions.items():
        if isinstance(v, str) and (head := v.split(".", 1)[0]).isdigit():
            found.append((int(head), v, str(ch)))
    if len({len(v.split(".", 1)[0]) for _, v, _ in found}) < 2:
        return
    found.sort()
    above: tuple[int, str, str] | None = None  # the largest string of smaller counters
    for n, v, ch in found:
        if above is not None and above[0] < n and v < above[1]:
            raise InvalidRequestError(
                f"thread {thread_id!r} holds channel versions of two widths: {above[2]!r} "
                f"is at {above[1]!r} and {ch!r}, newer, at {v!r}, which sorts below it, so "
                "LangGraph would not see this step as new (an input skipped; a resume's "
                "writes, already stored, never applied). The thread was begun with 12-digit "
                "versions (langgraph-s3 before 0.1) and is continued by something padding "
                "to 32 (LangGraph's Agent Server). Continue it directly, or carry it over "
                "once: `langgraph-s3 export THREAD -o t.jsonl` then "
                "`langgraph-s3 import t.jsonl --replace` (which rewrites them)."
            )
        if above is None or v > above[1]:
            above = (n, v, ch)


VERSION_WIDTH = 32
"""Digits of a channel version's counter: LangGraph's own width (see get_next_version)."""
LEGACY_VERSION_WIDTH = 12
"""The width threads written before 0.1 use, kept when they are continued."""


class _S3SaverBase(BaseCheckpointSaver[str]):
    """Everything both savers share: the async core and its sync twins.

    Args:
        bucket: the S3 bucket (created by ``setup()`` when missing).
        prefix: key prefix inside the bucket; deployments sharing a bucket and a
            table are kept apart by (bucket, prefix).
        table: the DynamoDB manifest table (default ``langgraph-s3-manifest``).
        endpoint_url, region, session: where and how to reach AWS (moto, MinIO...);
            ``session`` may be an aiobotocore or aioboto3 session.
        serde: LangGraph serializer (default JsonPlusSerializer).
        cache_bytes: in-process cache of immutable objects (checkpoints, blobs).
        concurrency: requests in flight at most, per call.
        thread_ttl_days: a thread expires this long (days, or a ``timedelta``) after
            its last write to its root namespace: it is gone for every reader at
            once, and :meth:`asweep_ttl` (or the stream handler,
            ``langgraph_s3.sweeper``) removes its objects.
        thread_ttl_refresh_on_read: reads of a thread (get_tuple, list) refresh its
            TTL too (one UpdateItem beside them, no round trip).
        sweep_interval_minutes: the pause between two sweeps of
            :meth:`start_ttl_sweeper` (default 60).
        max_attempts, connect_timeout, read_timeout, request_timeout: per request
            (see ``clients.Limits``); max_conflicts: compare-and-swap rounds.
        object_store, manifest: stand-ins for tests (``langgraph_s3.testing.fakes``).
    """

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
        thread_ttl_days: float | timedelta | None = None,
        thread_ttl_refresh_on_read: bool = False,
        sweep_interval_minutes: float = 60.0,
        max_attempts: int = Limits.max_attempts,
        connect_timeout: float = Limits.connect_timeout,
        read_timeout: float = Limits.read_timeout,
        request_timeout: float = Limits.request_timeout,
        max_conflicts: int = Limits.max_conflicts,
        object_store: ObjectStorePort | None = None,
        manifest: ManifestPort | None = None,
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
            limits=Limits(
                connect_timeout, read_timeout, max_attempts, request_timeout, max_conflicts
            ),
        )
        self.raw_objects: ObjectStorePort = (
            ObjectStore(self.clients, bucket, concurrency=concurrency, cache_bytes=cache_bytes)
            if object_store is None
            else object_store
        )
        """The bucket's objects as S3 lists them (a packed thread's are in its pack)."""
        ttl = _ttl_seconds(thread_ttl_days)
        self.manifest: ManifestPort = (
            Manifest(
                self.clients,
                self.target.table or DEFAULT_TABLE,
                deployment=deployment_key(bucket, prefix),
                ttl_seconds=ttl,
            )
            if manifest is None
            else manifest
        )
        self.objects = PackedObjects(
            self.raw_objects, self.layout.threads(), lookup=self.manifest.pack_of
        )
        """The objects as every part of the saver sees them: packed threads' keys too."""
        self.concurrency = concurrency
        self.refresh_on_read = thread_ttl_refresh_on_read
        if not sweep_interval_minutes > 0:
            raise InvalidRequestError(
                f"sweep_interval_minutes must be positive, got {sweep_interval_minutes!r}"
            )
        self.sweep_interval_minutes = sweep_interval_minutes
        self._sweeper = PeriodicSweep()
        self._runner = BackgroundLoop(self.clients.aclose_running)
        # shared (like the clients and the cache) with the copies with_allowlist makes
        self._ctx = SaverContext(self.objects, self.manifest, self.layout, self.clients.limits)

    @property
    def stats(self) -> RequestStats:
        """Requests, round trips and bytes sent by this saver's clients."""
        return self.clients.stats

    def preload(self) -> None:
        """Load the AWS SDK and its service models now (Lambda init phase)."""
        self.clients.preload()

    # ------------------------------------------------------------------ parts
    def _reader(self) -> Reader:
        return Reader(self._ctx, self.serde)

    # ------------------------------------------------------------------ setup
    @operation
    async def _asetup(self) -> None:
        if not await self.objects.bucket_exists():
            await self.objects.create_bucket()
        await check_conditions(self.raw_objects, self.layout.root, deletes=False)
        if not await self.manifest.exists():
            await self.manifest.create()
        if not await self.manifest.migrated():
            await Maintenance(self._ctx, self.serde).migrate()
            await self.manifest.mark_migrated()

    # ---------------------------------------------------------------- reading
    @operation
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint the config names (its ``checkpoint_id``), or the latest one.

        Args:
            config: ``{"configurable": {"thread_id", "checkpoint_ns"?, "checkpoint_id"?}}``.

        Returns:
            The checkpoint with its pending writes, or None when the thread (or that
            checkpoint) has none in its history.

        Cost: latest: 3 requests + one per older object holding a value and per
        write, in 3 round trips (1 when they are cached). A
        DeltaChannel thread's history is walked beside it: 4 round trips when a seed
        is near (snapshot every 7 steps), one more per further 32 ancestors' objects
        (6 at turn 20 with the default snapshot every 100). By id: 3 round trips for a
        tip, one more for an older checkpoint (found in a listing from the top).
        """
        at = Address.of(config)
        walk = walk_scope(self._ctx)  # every read: a walk's first one starts it afresh
        read = self._reader().get_tuple(
            at.keys(self.layout),
            at.checkpoint_id,
            walk=walk if at.checkpoint_id is not None else None,
        )
        if not self._refreshing():
            return await read
        tup: CheckpointTuple | None
        tup, _ = await gather_all(read, self.manifest.touch(at.thread_id))
        return tup

    def _refreshing(self) -> bool:
        return self.refresh_on_read and bool(self.manifest.ttl_seconds)

    @operation_iter
    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints newest first: of one namespace, of a thread, or of every thread.

        Args:
            config: the thread (and namespace) to list; None lists every thread of
                the deployment (a manifest Scan).
            filter: metadata keys and the values they must have.
            before: only checkpoints older than this config's checkpoint.
            limit: at most this many.

        Cost: per namespace, the manifest GetItem beside one checkpoint LIST page and
        one writes LIST page, then envelope and write GETs, then the older objects
        holding their values: 3 round trips per chunk of up to ``limit`` (100
        unlimited, 50 with a filter, whose envelopes are read first).
        """
        if limit is not None and limit <= 0:
            return
        before_id = get_checkpoint_id(before) if before else None
        only_id: str | None = None
        touched: asyncio.Future[bool] | None = None
        if config is not None:
            at = Address.of(config)
            if self._refreshing():
                touched = asyncio.ensure_future(self.manifest.touch(at.thread_id))
            only_id = at.checkpoint_id
            conf = config.get("configurable") or {}
            if conf.get("checkpoint_ns") is not None:
                targets: Namespaces = _one(at.thread_id, str(conf["checkpoint_ns"]))
            else:
                targets = self._thread_namespaces(at.thread_id, early_root=only_id is None)
        else:
            targets = self._all_namespaces()
        try:
            async with aclosing(self._list(targets, only_id, before_id, filter, limit)) as tuples:
                async for tup in tuples:
                    yield tup
        finally:
            if touched is not None:
                await touched

    async def _list(
        self,
        targets: Namespaces,
        only_id: str | None,
        before_id: str | None,
        filter: dict[str, Any] | None,
        limit: int | None,
    ) -> AsyncGenerator[CheckpointTuple, None]:
        reader = self._reader()
        remaining = limit
        async with aclosing(targets):  # its Query is cancelled when we stop early
            async for thread, ns, entry in targets:
                keys = self.layout.namespace(thread, ns)
                if only_id is not None:
                    listing: AsyncIterator[CheckpointTuple] = self._one(
                        reader, keys, only_id, before_id, filter
                    )
                else:
                    listing = reader.list_namespace(
                        keys, entry, before_id=before_id, filter=filter, limit=remaining
                    )
                async for tup in listing:
                    yield tup
                    if remaining is not None:
                        remaining -= 1
                        if remaining <= 0:
                            return

    async def _one(
        self,
        reader: Reader,
        keys: NamespaceKeys,
        cid: str,
        before_id: str | None,
        filter: dict[str, Any] | None,
    ) -> AsyncIterator[CheckpointTuple]:
        if before_id is not None and cid >= before_id:
            return
        tup = await reader.get_tuple(keys, cid)
        if tup is not None and matches(tup.metadata, filter):
            yield tup

    async def _thread_namespaces(self, thread: str, *, early_root: bool = False) -> Namespaces:
        """The thread's namespaces, root first, from one manifest Query.

        ``early_root``: the root namespace is handed out before the Query answers,
        with its entry still on its way, so that its first listing pages go out
        beside the Query (a round trip saved: most threads have only the root).
        """
        query = asyncio.ensure_future(self.manifest.namespaces(thread))
        try:
            if early_root:

                async def root() -> Entry | None:
                    entries = await asyncio.shield(query)
                    return next((e for e in entries if not e.checkpoint_ns), None)

                yield thread, "", root()
            for e in sorted(await query, key=lambda e: e.checkpoint_ns):
                if e.checkpoint_ns or not early_root:
                    yield thread, e.checkpoint_ns, e
        finally:
            query.cancel()  # a consumer that stopped early: the Query may still run

    async def _all_namespaces(self) -> Namespaces:
        entries: list[Entry] = []
        async for page in self.manifest.scan():
            entries.extend(page)
        for e in sorted(entries, key=lambda e: (e.thread_id, e.checkpoint_ns)):
            yield e.thread_id, e.checkpoint_ns, e

    # ---------------------------------------------------------------- writing
    @operation
    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint and make it the thread's latest (or a new branch head).

        Only channels in ``new_versions`` are uploaded: an unchanged channel's blob is
        already stored under its (channel, version) key.

        Returns:
            The config of the stored checkpoint.

        Raises:
            CheckpointConflictError: its parent was deleted, pruned or rolled back
                while the run was writing (nothing is committed).

        Cost: one PUT (the checkpoint with its small changed values) beside one
        conditional UpdateItem: 1 round trip, no reads; a value over 256 KiB is a
        blob PUT before them (2 round trips).
        """
        at = Address.of(config)
        _refuse_inverted_versions(at.thread_id, checkpoint)
        keys = at.keys(self.layout)
        writer = Writer(self._ctx, self.serde)
        await writer.put(keys, at.checkpoint_id, config, checkpoint, metadata, new_versions)
        return {
            "configurable": {
                "thread_id": at.thread_id,
                "checkpoint_ns": at.checkpoint_ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    @operation
    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes against the config's checkpoint.

        Regular writes are first-write-wins per index (a replay changes nothing);
        special writes (errors, interrupts) are last-write-wins.

        Cost: one PUT per task plus one per special write, together: 1 round trip
        (a second writer of the same task adds a GET and a conditional PUT).
        """
        at = Address.of(config)
        if at.checkpoint_id is None:
            raise InvalidIdError("put_writes needs config['configurable']['checkpoint_id']")
        writer = Writer(self._ctx, self.serde)
        await writer.put_writes(
            at.keys(self.layout), at.checkpoint_id, list(writes), task_id, task_path
        )

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Zero-padded counter plus a random fraction: sortable and never reused.

        The random part matters here: blobs are addressed by (channel, version),
        so a fork must never produce a version an earlier branch already used.

        The counter is padded as LangGraph's own savers and its Agent Server's
        adapter pad it (32 digits), since LangGraph compares versions as strings and
        a thread may be continued by either. A thread begun with this library's
        former 12 digits keeps them (the width of ``current``): its versions stay
        comparable among themselves.
        """
        width = VERSION_WIDTH
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            counter = str(current).split(".")[0]
            current_v = int(counter)
            if counter.isdigit() and len(counter) < VERSION_WIDTH:
                width = max(len(counter), LEGACY_VERSION_WIDTH)
        return f"{current_v + 1:0{width}}.{random.getrandbits(48):012x}"

    # ------------------------------------------------------ delta channel walk
    @operation
    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Rebuild DeltaChannel state: each channel's seed and the writes since.

        Cost: none when ``aget_tuple`` of the latest checkpoint just walked the chain
        (it does for DeltaChannel threads); otherwise the manifest beside one
        checkpoint and one writes page, then the ancestors' envelopes and writes
        together (as deep as the snapshot distance says), then the seed blobs.
        """
        at = Address.of(config)
        delta = DeltaReader(self._ctx, self.serde)
        return await delta.history(at.keys(self.layout), at.checkpoint_id, channels)

    # ------------------------------------------------------------ maintenance
    def _maintenance(self) -> Maintenance:
        return Maintenance(self._ctx, self.serde)

    @operation
    async def adelete_thread(self, thread_id: str) -> Report:  # type: ignore[override]  # None -> counts
        """Delete a thread: every namespace, checkpoint, write and blob.

        The thread is gone for every reader at the first request (a tombstone per
        namespace); its objects are removed after. A conversation started on the
        same id meanwhile waits for the deletion and begins clean.

        Returns:
            What was removed (one thread, its namespaces, checkpoints, objects, bytes).

        Cost: a Query and one UpdateItem per namespace, one LIST page per 1,000
        objects, DeleteObjects per 1,000, then the tombstones' release.
        """
        return await self._maintenance().delete_thread(str(thread_id))

    @operation
    async def adelete_for_runs(self, run_ids: Sequence[str]) -> Report:  # type: ignore[override]  # None -> counts
        """Roll back runs: remove every checkpoint they wrote, in every thread.

        A thread's latest moves back to what is left; a run still writing gets
        CheckpointConflictError. A thread being deleted meanwhile is waited for (a
        deletion that fails puts it back, and it is rolled back then): up to its
        lease, 120 s, if its deleter crashed. Cost: a manifest Scan, then per
        namespace a LIST of its checkpoints and, where a run wrote, a conditional
        write and deletes.

        Returns:
            What was removed.
        """
        return await self._maintenance().delete_for_runs(id_list(run_ids, "run_ids"))

    @operation
    async def aprune(  # type: ignore[override]  # more options, and counts instead of None
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int | None = None,
        older_than: timedelta | datetime | None = None,
        progress: Progress | None = None,
    ) -> Report:
        """Shrink threads to what a retention rule keeps.

        Each namespace keeps its latest checkpoint's line: the newest ``keep_last``
        checkpoints of it and those written after ``older_than`` (both given: a
        checkpoint either keeps stays), plus, for DeltaChannel state, the chain back
        to each seed. Other branches go. LangGraph's ``strategy="keep_latest"`` is
        ``keep_last=1``; ``strategy="delete"`` deletes the threads.

        Args:
            thread_ids: the threads.
            strategy: ``"keep_latest"`` (the default rule) or ``"delete"``.
            keep_last: how many of the newest checkpoints each namespace keeps (>= 1).
            older_than: checkpoints older than this (an age, or a moment) go; the
                latest always stays.
            progress: called after each thread (see :data:`~langgraph_s3.core.report.Progress`).

        Returns:
            What was removed.

        Cost per namespace: a LIST of its checkpoints, a conditional PutItem, LISTs
        of its writes and blobs, and DeleteObjects per 1,000 keys. A thread being
        deleted meanwhile is waited for (a deletion that fails puts it back, and it
        is pruned then): up to its lease, 120 s, if its deleter crashed.
        """
        if strategy not in ("keep_latest", "delete"):
            raise InvalidRequestError(
                f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'"
            )
        if keep_last is not None and (
            isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1
        ):
            raise InvalidRequestError(
                "keep_last must be a whole number >= 1 (the latest always stays), "
                f"got {keep_last!r}"
            )
        if older_than is not None and not isinstance(older_than, (timedelta, datetime)):
            raise InvalidRequestError(
                f"older_than must be a timedelta (an age) or a datetime, got {older_than!r}"
            )
        if isinstance(older_than, datetime) and older_than.tzinfo is None:
            raise InvalidRequestError(
                "older_than is a naive datetime: give it a timezone (datetime.now(UTC) - ...)"
            )
        threads = id_list(thread_ids, "thread_ids")
        if strategy == "delete":
            if keep_last is not None or older_than is not None:
                raise InvalidRequestError(
                    "strategy='delete' deletes whole threads: keep_last and older_than "
                    "belong to the default strategy"
                )
            return await self._each(threads, self._maintenance().delete_thread, progress)
        rule = self._maintenance().rule(keep_last, older_than)
        maintenance = self._maintenance()
        return await self._each(threads, lambda t: maintenance.prune_thread(t, rule), progress)

    async def _each(
        self,
        threads: list[str],
        act: Callable[[str], Awaitable[Report]],
        progress: Progress | None,
    ) -> Report:
        """``act`` on each thread, concurrently. The first failure cancels the others
        (each is safe to cut at any request, as a crash would) and is raised with a
        note of what was done before it: a rerun finishes the job."""
        total = Report()
        done = 0

        async def one(thread: str) -> Report:
            nonlocal total, done
            report = await act(thread)
            total, done = total + report, done + 1
            if progress is not None:
                progress(total, done, len(threads))
            return report

        try:
            await bounded_map(one, threads)
        except S3PersistenceError as exc:
            exc.add_note(f"done before this failure, on {done} of {len(threads)} threads: {total}")
            raise
        return total

    @operation
    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> Report:  # type: ignore[override]  # None -> counts
        """Copy a thread's whole history to another thread id (server-side copies).

        A target with a history of its own keeps it beside the copy. Cost: a Query
        of each thread, one LIST page per 1,000 objects, one CopyObject per object,
        a second Query of the source, one conditional write per namespace.

        Returns:
            What was copied.
        """
        return await self._maintenance().copy_thread(str(source_thread_id), str(target_thread_id))

    # ------------------------------------------------------------- packing
    @operation
    async def apack(
        self,
        thread_ids: Sequence[str] | None = None,
        *,
        idle_days: float | None = None,
        progress: Progress | None = None,
    ) -> Report:
        """Archive threads: all of a thread's objects go into one pack object (see
        :mod:`langgraph_s3.checkpoint.packs`), which the ``packs/`` lifecycle rule can move to
        Standard-IA and Glacier Instant Retrieval; the small objects are removed.

        Reads stay transparent (one round trip more, the first time a process
        meets the pack); new turns go to plain objects again and a later
        ``apack`` folds them in. Prune, copy and rollback unpack a thread first.

        Args:
            thread_ids: the threads to pack; None: every thread idle ``idle_days``.
            idle_days: with no ``thread_ids``, pack the threads last written at
                least this many days ago.
            progress: called after each thread.

        Returns:
            Threads packed, their checkpoints, and the objects removed (and
            bytes); ``skipped``: threads left as they were (nothing new since
            their pack, or changed meanwhile).

        Cost per thread: a Query, a LIST of its objects, a GET per object, one PUT
        of the pack, one conditional UpdateItem, a LIST and DeleteObjects per 1,000.
        """
        if thread_ids is None:
            if idle_days is None or not idle_days >= 0:
                raise InvalidRequestError(
                    "apack needs thread_ids, or idle_days (>= 0) to pack the idle threads"
                )
            cutoff = datetime.fromtimestamp(self.manifest.now() - idle_days * 86400, UTC)
            thread_ids = [t.thread_id async for t in self.alist_threads(updated_before=cutoff)]
        maintenance = self._maintenance()
        return await self._each(
            id_list(thread_ids, "thread_ids"), maintenance.pack_thread, progress
        )

    # ---------------------------------------------------------- thread TTL
    @operation
    async def asweep_ttl(self, *, progress: Progress | None = None) -> Report:
        """Delete every thread of this deployment whose TTL passed, objects and all.

        Expired threads are already gone for every reader; this frees their
        storage. A thread someone wrote to since (a new conversation on the id) is
        left to that writer, which sweeps the old life before its first checkpoint.

        Returns:
            What was removed (``skipped``: threads that changed meanwhile).

        Cost: a manifest Scan (1 request per 1 MB of the whole table), then per
        expired thread what :meth:`adelete_thread` costs plus one conditional
        UpdateItem. At scale, let the table's stream drive
        ``langgraph_s3.sweeper.handler`` instead of scanning.
        """
        return await self._maintenance().sweep(progress)

    async def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> asyncio.Task[None]:
        """Sweep (:meth:`asweep_ttl`) every few minutes on the running loop until stopped.

        Args:
            sweep_interval_minutes: defaults to the saver's ``sweep_interval_minutes``.

        Returns:
            The sweeper task (the running one, if the sweeper was started before).
        """
        minutes = sweep_interval_minutes or self.sweep_interval_minutes
        if not minutes > 0:
            raise InvalidRequestError(f"sweep_interval_minutes must be positive, got {minutes!r}")
        sweep = self.asweep_ttl

        async def once() -> int:
            return (await sweep()).threads

        return self._sweeper.start(once, minutes)

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper, wherever it runs; no request.

        Returns:
            True when it stopped within ``timeout`` seconds (None: no limit).
        """
        return await self._sweeper.stop(timeout)

    async def _stop_sweeper(
        self, timeout: float | None, *, blocked: asyncio.AbstractEventLoop | None = None
    ) -> bool:
        return await self._sweeper.stop(timeout, blocked=blocked)

    # ------------------------------------------------------- export, import
    async def aexport(
        self,
        thread_ids: Sequence[str] | None,
        file: ExportFile,
        *,
        progress: Progress | None = None,
    ) -> Report:
        """Write threads (None: every thread) to ``file`` in the versioned export
        format (:mod:`langgraph_s3.transfer`: JSON Lines, gzip for a ``.gz`` path),
        oldest checkpoint first, with every pending write.

        Returns:
            What was written (threads, namespaces, checkpoints, writes, bytes).

        Cost: per thread, what ``alist`` of the whole thread costs; memory stays
        flat (a spool file).
        """
        from langgraph_s3.checkpoint.transfer import aexport_threads

        ids = id_list(thread_ids, "thread_ids") if thread_ids is not None else None
        return await aexport_threads(self, ids, file, progress=progress)

    async def aimport(
        self,
        file: ExportFile,
        *,
        replace: bool = False,
        progress: Progress | None = None,
    ) -> Report:
        """Read an export (of this saver or any other) into this deployment.

        Args:
            replace: delete a thread that already exists here before importing it;
                without it, such a thread stops the import with InvalidRequestError.

        Returns:
            What was imported.

        Cost: per checkpoint, an ``aput`` (1 round trip), per task an ``aput_writes``.
        """
        from langgraph_s3.checkpoint.transfer import aimport_threads

        return await aimport_threads(self, file, replace=replace, progress=progress)

    # ------------------------------------------------------------- threads
    @operation_iter
    async def alist_threads(
        self,
        *,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> AsyncIterator[ThreadInfo]:
        """The deployment's live threads, from the manifest alone (no S3 request).

        Args:
            updated_after, updated_before: only threads last written in that range.
            limit: at most this many.
            after: a :attr:`ThreadInfo.cursor` from an earlier listing: go on after
                that thread (paging through millions of threads).

        Yields:
            Each thread's id, namespaces, latest checkpoint id, creation, last write
            and expiry, in table order (not by time: the table has no time index).

        Cost: one Scan request per 1 MB of the table (about 3,000 namespaces;
        the Scan reads every deployment's items and keeps this one's), stopping at
        the page that reaches ``limit``.
        """
        for name, when in (("updated_after", updated_after), ("updated_before", updated_before)):
            if when is not None and (not isinstance(when, datetime) or when.tzinfo is None):
                raise InvalidRequestError(f"{name} must be a timezone-aware datetime, got {when!r}")
        if limit is not None and limit <= 0:
            return
        left = limit
        pages = self.manifest.threads(after)
        try:
            async for page in pages:
                for info in page:
                    if updated_after is not None and info.updated_at <= updated_after:
                        continue
                    if updated_before is not None and info.updated_at >= updated_before:
                        continue
                    yield info
                    if left is not None:
                        left -= 1
                        if left <= 0:
                            return
        finally:
            aclose = getattr(pages, "aclose", None)
            if aclose is not None:
                await aclose()

    # ----------------------------------------------------------- sync twins
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Sync twin of :meth:`aget_tuple` (same cost), on the background loop."""
        return self._runner.run(self.aget_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Sync twin of :meth:`alist` (same cost), on the background loop."""
        return self._runner.iterate(self.alist(config, filter=filter, before=before, limit=limit))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Sync twin of :meth:`aput` (same cost), on the background loop."""
        return self._runner.run(self.aput(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Sync twin of :meth:`aput_writes` (same cost), on the background loop."""
        self._runner.run(self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> Report:  # type: ignore[override]  # None -> counts
        """Sync twin of :meth:`adelete_thread` (same cost), on the background loop."""
        return self._runner.run(self.adelete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> Report:  # type: ignore[override]  # None -> counts
        """Sync twin of :meth:`adelete_for_runs` (same cost), on the background loop."""
        return self._runner.run(self.adelete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> Report:  # type: ignore[override]  # None -> counts
        """Sync twin of :meth:`acopy_thread` (same cost), on the background loop."""
        return self._runner.run(self.acopy_thread(source_thread_id, target_thread_id))

    def prune(  # type: ignore[override]  # more options, and counts instead of None
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int | None = None,
        older_than: timedelta | datetime | None = None,
        progress: Progress | None = None,
    ) -> Report:
        """Sync twin of :meth:`aprune` (same cost), on the background loop."""
        return self._runner.run(
            self.aprune(
                thread_ids,
                strategy=strategy,
                keep_last=keep_last,
                older_than=older_than,
                progress=progress,
            )
        )

    def export(
        self,
        thread_ids: Sequence[str] | None,
        file: ExportFile,
        *,
        progress: Progress | None = None,
    ) -> Report:
        """Sync twin of :meth:`aexport`, on the background loop."""
        return self._runner.run(self.aexport(thread_ids, file, progress=progress))

    def import_(
        self,
        file: ExportFile,
        *,
        replace: bool = False,
        progress: Progress | None = None,
    ) -> Report:
        """Sync twin of :meth:`aimport` (``import`` is a Python keyword)."""
        return self._runner.run(self.aimport(file, replace=replace, progress=progress))

    def pack(
        self,
        thread_ids: Sequence[str] | None = None,
        *,
        idle_days: float | None = None,
        progress: Progress | None = None,
    ) -> Report:
        """Sync twin of :meth:`apack` (same cost), on the background loop."""
        return self._runner.run(self.apack(thread_ids, idle_days=idle_days, progress=progress))

    def sweep_ttl(self, *, progress: Progress | None = None) -> Report:
        """Sync twin of :meth:`asweep_ttl` (same cost), on the background loop."""
        return self._runner.run(self.asweep_ttl(progress=progress))

    def list_threads(
        self,
        *,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> Iterator[ThreadInfo]:
        """Sync twin of :meth:`alist_threads` (same cost), on the background loop."""
        return self._runner.iterate(
            self.alist_threads(
                updated_after=updated_after, updated_before=updated_before, limit=limit, after=after
            )
        )

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Sync twin of :meth:`aget_delta_channel_history` (same cost), on the background loop."""
        return self._runner.run(self.aget_delta_channel_history(config=config, channels=channels))


class AsyncS3Saver(AsyncLifecycle, _S3SaverBase):
    """Async LangGraph checkpointer on S3 with a DynamoDB manifest.

    Safe to build at import time, outside any event loop: clients are created
    per loop on first use, so a warm Lambda calling ``asyncio.run`` per
    invocation keeps working.

    Example::

        async with AsyncS3Saver.from_conn_string("s3://my-bucket/agents?table=t") as saver:
            await saver.setup()  # once per deployment: bucket, table, migration
            graph = builder.compile(checkpointer=saver)
            await graph.ainvoke(inputs, {"configurable": {"thread_id": "42"}})
    """

    CONN_STRING = "s3://BUCKET/PREFIX?table=TABLE[&region=R][&endpoint_url=URL]"
    CONN_PARAMS = SAVER_PARAMS

    async def aclose(self) -> None:
        """Stop the TTL sweeper, then close the clients; no request."""
        await self.stop_ttl_sweeper()
        await super().aclose()


def _ttl_seconds(ttl: float | timedelta | None) -> int | None:
    """``thread_ttl_days`` in whole seconds (None: threads never expire)."""
    if ttl is None:
        return None
    seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else float(ttl) * 86400
    if isinstance(ttl, bool) or not seconds > 0:
        raise InvalidRequestError(
            f"thread_ttl_days must be positive (days, or a timedelta), got {ttl!r}; "
            "None keeps threads forever"
        )
    return max(1, round(seconds))


async def _one(thread: str, ns: str) -> Namespaces:
    yield thread, ns, None
