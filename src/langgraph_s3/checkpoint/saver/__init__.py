"""The LangGraph checkpoint saver protocol on S3 + a DynamoDB manifest: the façade.

The façade holds its parts, one module each: :mod:`.wiring` (clients, ports,
context, setup), :mod:`.contract` (LangGraph's saver contract), :mod:`.threads`
(maintenance of chosen threads), :mod:`.deployment` (the TTL sweep, export, import,
listing); every public call is one of theirs, and :mod:`.twins` makes the sync twins.

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

import copy
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Self

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_s3.aws.clients import Limits
from langgraph_s3.aws.stats import RequestStats
from langgraph_s3.checkpoint.maintenance import Maintenance
from langgraph_s3.checkpoint.saver.contract import Contract
from langgraph_s3.checkpoint.saver.deployment import DeploymentOps
from langgraph_s3.checkpoint.saver.forgetting import Forgetting
from langgraph_s3.checkpoint.saver.sealing import DEFAULT_IDLE_MINUTES, ThreadSealing
from langgraph_s3.checkpoint.saver.threads import ThreadOps
from langgraph_s3.checkpoint.saver.twins import given, twin, twin_iter
from langgraph_s3.checkpoint.saver.wiring import (
    DEFAULT_CACHE_BYTES,
    LEGACY_VERSION_WIDTH,
    VERSION_WIDTH,
    Namespaces,
    Wiring,
    walk_scope,
)
from langgraph_s3.core.ports import KeyVaultPort, ManifestPort, ObjectStorePort
from langgraph_s3.core.records import ThreadInfo
from langgraph_s3.core.report import Progress, Report
from langgraph_s3.core.subject_keys import DEFAULT_TTL
from langgraph_s3.core.subject_policy import SubjectPolicy
from langgraph_s3.errors import S3PersistenceError
from langgraph_s3.manifest.schema import DEFAULT_TABLE
from langgraph_s3.runtime.lifecycle import SAVER_PARAMS, AsyncLifecycle, SweeperLifecycle
from langgraph_s3.runtime.receipts import Receipts
from langgraph_s3.runtime.runner import BackgroundLoop

if TYPE_CHECKING:
    from langgraph_s3.checkpoint.transfer import ImportPlan
    from langgraph_s3.checkpoint.transfer import Target as ExportFile

logger = logging.getLogger("langgraph_s3.saver")

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "DEFAULT_TABLE",
    "LEGACY_VERSION_WIDTH",
    "VERSION_WIDTH",
    "AsyncS3Saver",
    "Namespaces",
    "walk_scope",
]


class _S3SaverBase(SweeperLifecycle, BaseCheckpointSaver[str]):
    """Everything both savers share: the async core and its sync twins, each call
    one of its parts' (see the module).

    Args:
        bucket: the S3 bucket (created by ``setup()`` when missing).
        prefix: key prefix inside the bucket; deployments sharing a bucket and a
            table are kept apart by (bucket, prefix).
        table: the DynamoDB manifest table (default ``langgraph-s3-manifest``).
        endpoint_url, region, session: where and how to reach AWS (moto, MinIO...);
            ``session`` may be an aiobotocore or aioboto3 session.
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
        index_metadata: metadata keys to find threads by in one Query
            (``alist_threads(metadata=...)``): each gets a global secondary index
            ``meta_<key>`` (made by ``setup()`` or the terraform module's
            ``index_metadata``); every root checkpoint's put keeps it current at no
            extra request (one index write per put whose value changed).
        manifest: ``"s3"`` keeps the manifest in the bucket, under
            ``{prefix}/manifest/``, with no DynamoDB table (``?manifest=s3``; conditional
            writes alone: S3, or an S3-compatible store that honours them; see
            docs/object-manifest.md); ``"dynamodb"`` (the default) in ``table``. Tests
            may pass a manifest of their own (``langgraph_s3.testing.fakes``).
        object_store: a stand-in for tests (``langgraph_s3.testing.fakes``).
        subjects: whom a thread belongs to (a metadata key such as ``"user_id"``, or a
            :class:`~langgraph_s3.SubjectPolicy`): each subject's threads are sealed
            with its own data key, and :meth:`aforget` makes them unreadable
            everywhere (docs/subjects.md). None: nothing is sealed, nothing costs more.
        kms_key: the KMS key (id, ARN or alias) wrapping the subjects' data keys
            (required with ``subjects``), or a key vault (``testing.memory_vault``).
        subject_key_seconds: how long a process keeps a subject's key unwrapped (the
            deployment's first process fixes it for all: a forgetting waits it out).
        subject_label: the index of the namespace label naming a store item's subject
            (the store's ``subjects``, for a URL both share); forgetting erases them.
        receipts: where forgetting receipts are kept, ``s3://BUCKET[/PREFIX]`` (a
            compliance bucket, say; default: the deployment's own, ``{prefix}/receipts/``).
        serde: LangGraph serializer (default JsonPlusSerializer).
    """

    _runner: BackgroundLoop

    def __init__(
        self,
        *,
        serde: SerializerProtocol | None = None,
        bucket: str,
        prefix: str = "",
        table: str | None = None,
        endpoint_url: str | None = None,
        region: str | None = None,
        session: Any = None,
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
        index_metadata: Sequence[str] | None = None,
        object_store: ObjectStorePort | None = None,
        manifest: ManifestPort | str | None = None,
        subjects: SubjectPolicy | str | None = None,
        kms_key: str | KeyVaultPort | None = None,
        subject_key_seconds: float = DEFAULT_TTL,
        subject_label: int | None = None,
        receipts: str | None = None,
    ) -> None:
        given = {k: v for k, v in locals().items() if k not in ("self", "serde", "__class__")}
        self._w = Wiring(**given)  # every parameter but the serializer, as given
        super().__init__(serde=serde)  # into the wiring: see ``serde``
        self._assemble()

    def _assemble(self) -> None:
        """The parts over the wiring, and the names the saver has always had for it."""
        w = self._w
        self._contract, self._deployment = Contract(w), DeploymentOps(w)
        self._threads = ThreadOps(w, self._deployment, self._contract)
        self.target, self.layout, self.clients = w.target, w.layout, w.clients
        self.raw_objects, self.manifest, self.objects = w.raw_objects, w.manifest, w.objects
        self._ctx, self._runner = w.ctx, w.runner
        self.refresh_on_read = w.refresh_on_read
        self.sweep_interval_minutes, self._sweeper = w.sweep_interval_minutes, w.sweeper

    @property
    def serde(self) -> SerializerProtocol:
        """The serializer (the wiring's: every part reads it at each call)."""
        return self._w.serde

    @serde.setter
    def serde(self, serde: SerializerProtocol) -> None:
        self._w.serde = serde

    @property
    def concurrency(self) -> int:
        """Requests in flight at most, per call (set it to change the next calls')."""
        return self._w.concurrency

    @concurrency.setter
    def concurrency(self, concurrency: int) -> None:
        self._w.concurrency = concurrency

    def __copy__(self) -> Self:
        """A shallow copy (``with_allowlist``'s) with a serializer of its own: the
        clients, caches, manifest and sweeper stay shared."""
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone._w = copy.copy(self._w)
        clone._assemble()
        return clone

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
        return await self._contract.aget_tuple(config)

    def alist(
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
        return self._contract.alist(config, filter=filter, before=before, limit=limit)

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
        return await self._contract.aput(config, checkpoint, metadata, new_versions)

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
        return await self._contract.aput_writes(config, writes, task_id, task_path)

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
        return self._contract.get_next_version(current, channel)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Rebuild DeltaChannel state: each channel's seed and the writes since.

        Cost: none when ``aget_tuple`` of the latest checkpoint just walked the chain
        (it does for DeltaChannel threads); otherwise the manifest beside one
        checkpoint and one writes page, then the ancestors' envelopes and writes
        together (as deep as the snapshot distance says), then the seed blobs.
        """
        return await self._contract.aget_delta_channel_history(config=config, channels=channels)

    async def asweep_ttl(
        self,
        *,
        progress: Progress | None = None,
        segment: int | None = None,
        total_segments: int | None = None,
    ) -> Report:
        """Delete every thread of this deployment whose TTL passed, objects and all.

        Expired threads are already gone for every reader; this frees their
        storage. A thread someone wrote to since (a new conversation on the id) is
        left to that writer, which sweeps the old life before its first checkpoint.
        Deletions that died before their end are finished, and the late passes of
        deletions now due are run (``Maintenance.late_pass``: what a frozen
        writer's PUTs brought back after a deletion goes).

        Args:
            progress: called after each thread.
            segment: with ``total_segments``, sweep only that shard of the table
                (zero-based; DynamoDB's parallel Scan segment): N workers given
                ``0..N-1`` of N cover every thread once, and their reports add up.

        Returns:
            What was removed (``skipped``: threads that changed meanwhile).

        Cost: a manifest Scan (1 request per 1 MB of the whole table, or of the
        segment), then per expired thread what :meth:`adelete_thread` costs plus
        one conditional UpdateItem. At scale, let the table's stream drive
        ``langgraph_s3.sweeper.handler`` instead of scanning.
        """
        return await self._deployment.asweep_ttl(**given(locals()))

    async def _sweep_once(self) -> int:
        return (await self.asweep_ttl()).threads

    def _sweep_minutes(self, minutes: float | None) -> float:
        return minutes or self._w.sweep_interval_minutes

    async def aexport(
        self,
        thread_ids: Sequence[str] | None,
        file: ExportFile,
        *,
        progress: Progress | None = None,
        segment: int | None = None,
        total_segments: int | None = None,
        sealed: bool = False,
    ) -> Report:
        """Write threads (None: every thread) to ``file`` in the versioned export
        format (:mod:`langgraph_s3.transfer`: JSON Lines, gzip for a ``.gz`` path),
        oldest checkpoint first, with every pending write.

        Args:
            segment: with ``total_segments`` and no ``thread_ids``, only that shard's
                threads (one file per shard; together they hold every thread once).
            sealed: each thread of a subject is written sealed with the subject's key
                (docs/subjects.md): forgetting the subject makes the file's copy of it
                unreadable; an import elsewhere passes ``sealed_by=`` this saver.

        Returns:
            What was written (threads, namespaces, checkpoints, writes, bytes).

        Cost: per thread, what ``alist`` of the whole thread costs; memory stays
        flat (a spool file).
        """
        return await self._deployment.aexport(self, **given(locals()))

    async def aimport(
        self,
        file: ExportFile,
        *,
        replace: bool = False,
        progress: Progress | None = None,
        sealed_by: Any = None,
    ) -> Report:
        """Read an export (of this saver or any other) into this deployment, each
        thread checked whole, then written aside and published at once: a reader sees
        it as it was or wholly imported (see :func:`aimport_threads`).

        Args:
            replace: delete a thread that already exists here before importing it;
                without it, such a thread stops the import with InvalidRequestError.
            sealed_by: the saver (with subjects) of the deployment that made a sealed
                export, when it is not this one: its subjects' keys open the file's
                sealed threads (a forgotten subject's are skipped, counted).

        Returns:
            What was imported.

        Cost: per checkpoint, an ``aput`` (1 round trip), per task an ``aput_writes``;
        per thread, a claim and a publishing (about 7 requests).
        """
        return await self._deployment.aimport(self, **given(locals()))

    async def aplan_import(self, file: ExportFile, *, sealed_by: Any = None) -> ImportPlan:
        """What :meth:`aimport` of ``file`` would do, nothing written: the file read and
        checked whole as the import would, its threads, and those this deployment has
        already (replaced with ``replace``, else refused). Cost: the file read once,
        a Query per thread."""
        return await self._deployment.aplan_import(self, file, sealed_by=sealed_by)

    def aexpired_threads(
        self, *, segment: int | None = None, total_segments: int | None = None
    ) -> AsyncIterator[str]:
        """The ids of this deployment's threads (of one shard) whose TTL passed and
        whose objects :meth:`asweep_ttl` would remove now (what a sweep's dry run shows).

        Cost: one Scan request per 1 MB of the table, as :meth:`asweep_ttl`'s own.
        """
        return self._deployment.aexpired_threads(segment=segment, total_segments=total_segments)

    async def aget_thread(self, thread_id: str) -> ThreadInfo | None:
        """One thread as :meth:`alist_threads` lists it: its live namespaces (root
        first), latest checkpoint, creation, last write and expiry; None when it has
        no live checkpoint.

        Cost: 1 Query (per 1 MB of its namespaces' items), no S3 request.
        """
        return await self._deployment.aget_thread(thread_id)

    def alist_threads(
        self,
        *,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        limit: int | None = None,
        after: str | None = None,
        segment: int | None = None,
        total_segments: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[ThreadInfo]:
        """The deployment's live threads, from the manifest alone (no S3 request).

        Args:
            updated_after: only threads last written after this (timezone-aware).
            updated_before: only threads last written before this (timezone-aware).
            limit: at most this many.
            after: a :attr:`ThreadInfo.cursor` from an earlier listing: go on after
                that thread (paging through millions of threads; a cursor of the
                same shard's listing).
            segment: with ``total_segments``, only that shard of the table
                (zero-based; DynamoDB's parallel Scan segment): N listings given
                ``0..N-1`` of N list every thread once between them.
            metadata: only threads whose latest root checkpoint's metadata holds
                every pair (values: None, booleans, numbers, strings of up to 256
                characters; see :mod:`langgraph_s3.core.meta` for what is recorded).
                A key in the saver's ``index_metadata`` makes it one Query of that
                key's index, then one Query per thread found, in key order.

        Yields:
            Each thread's id, namespaces, latest checkpoint id, creation, last write
            and expiry, in table order (not by time: the table has no time index).

        Cost: one Scan request per 1 MB of the table (about 3,000 namespaces;
        the Scan reads every deployment's items and keeps this one's), stopping at
        the page that reaches ``limit``; with a shard, of that segment only.
        """
        return self._deployment.alist_threads(**given(locals()))

    async def adelete_thread(self, thread_id: str) -> Report:  # type: ignore[override]  # None -> counts
        """Delete a thread: every namespace, checkpoint, write and blob.

        The thread is gone for every reader at the first request (a tombstone per
        namespace); its objects are removed after. A conversation started on the
        same id meanwhile waits for the deletion and begins clean.

        Returns:
            What was removed (one thread, its namespaces, checkpoints, objects, bytes).

        Cost: a Query and one UpdateItem per namespace, one LIST page per 1,000
        objects, DeleteObjects per 1,000, then the tombstones' release; beside the
        lease's renewal, a GetItem and an UpdateItem that record its late pass (the
        next ``asweep_ttl`` 21 minutes on removes what a PUT sent before the deletion
        brought back: docs/guarantees.md).
        """
        return await self._threads.adelete_thread(thread_id)

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
        return await self._threads.adelete_for_runs(run_ids)

    async def aprune(  # type: ignore[override]  # more options, and counts instead of None
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int | None = None,
        older_than: timedelta | datetime | None = None,
        progress: Progress | None = None,
        dry_run: bool = False,
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
            dry_run: remove nothing; count what the rule would remove now (a LIST of
                each namespace's checkpoints and a GET of its latest; with
                ``strategy="delete"``, a Query per thread).

        Returns:
            What was removed (with ``dry_run``: what would be).

        Cost per namespace: a LIST of its checkpoints, a conditional PutItem, LISTs
        of its writes and blobs, and DeleteObjects per 1,000 keys. A thread being
        deleted meanwhile is waited for (a deletion that fails puts it back, and it
        is pruned then): up to its lease, 120 s, if its deleter crashed.
        """
        return await self._threads.aprune(**given(locals()))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> Report:  # type: ignore[override]  # None -> counts
        """Copy a thread's whole history to another thread id (server-side copies).

        A target with a history of its own keeps it beside the copy. Cost: a Query
        of each thread, one LIST page per 1,000 objects, one CopyObject per object,
        a second Query of the source, one conditional write per namespace.

        Returns:
            What was copied.
        """
        return await self._threads.acopy_thread(source_thread_id, target_thread_id)

    async def apack(
        self,
        thread_ids: Sequence[str] | None = None,
        *,
        idle_days: float | None = None,
        progress: Progress | None = None,
        segment: int | None = None,
        total_segments: int | None = None,
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
                least this many days ago whose pack does not already hold their
                last write (the manifest says which: no S3 request for the others).
            progress: called after each thread.
            segment: with ``total_segments`` and no ``thread_ids``, only that shard
                of the table (zero-based): N workers of N pack every idle thread once.

        Returns:
            Threads packed, their checkpoints, and the objects removed (and
            bytes); ``skipped``: threads left as they were (nothing new since
            their pack, or changed meanwhile).

        Cost per thread packed: a Query, a LIST of its objects, a GET per object, one
        PUT of the pack, three UpdateItems (its mark on, the switch, its mark off), a
        LIST and DeleteObjects per 1,000. The idle pass adds a manifest Scan (of the
        segment), nothing per thread already packed.
        """
        return await self._threads.apack(**given(locals()))

    async def aforget(
        self,
        subject: str,
        *,
        dry_run: bool = False,
        wait: bool = True,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Forget a subject (a user, a tenant: ``subjects=``): delete every thread of
        theirs, destroy their data key, and keep a receipt (docs/subjects.md).

        Writers refuse to seal more for the subject from their next read of its record
        (``subject_key_seconds`` at most); this call waits that out (and 60 s for
        clocks), deletes again what was written meanwhile, then destroys the key: what
        remains of the subject anywhere (object versions, backups of the table) opens no
        more. Safe to run again after a crash, or with ``wait=False`` (which returns
        ``state: "forgetting"`` and ``resume_after`` instead of waiting): a run resumes
        where the subject's record says it is, and writes one receipt.

        Returns:
            The receipt (``state: "forgotten"``): the subject's token (never its id),
            its life and key id, when forgetting began and the key was destroyed, what
            was deleted, and what remains readable until when. With ``dry_run``: how
            many threads would be deleted, and nothing changed.

        Cost: a GetItem and a Query of the subject's index per 1 MB; per thread, a
        deletion (``adelete_thread``), twice; an UpdateItem on the subject's record
        at the start and at the end; the receipt's GetItem, PUT and UpdateItem.
        """
        return await Forgetting(self._w).aforget(**given(locals()))

    async def aseal(
        self,
        *,
        dry_run: bool = False,
        idle_minutes: float = DEFAULT_IDLE_MINUTES,
        segment: int | None = None,
        total_segments: int | None = None,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Rewrite sealed the plain threads of the deployment's subjects: those begun
        before it declared ``subjects=`` whose checkpoints name one subject (one naming
        several is ``refused``, and left plain) (docs/subjects.md). Each thread is exported and
        imported again with ``replace`` (a new life, its objects written anew, the plain
        ones deleted), when it has been idle ``idle_minutes`` and is unchanged just
        before; a busy one is left for a later run (``busy``).

        Args:
            segment: with ``total_segments``, only that shard of the threads (N runs of
                N shards rewrite each thread once).

        Returns:
            How many threads (checkpoints, writes) were rewritten, those left busy or
            refused (a subject value of the wrong type), and what plaintext remains
            readable until when (noncurrent object versions, the table's backups). With
            ``dry_run``: how many would be, nothing written.

        Cost: a manifest Scan (of the shard); per thread, a GetItem; per plain thread,
        a listing of its checkpoints (``alist``: whose they are, every one); per thread
        rewritten, its export and import (``aexport``, ``aimport``).
        """
        return await ThreadSealing(self._w).aseal(self, **given(locals()))

    def receipts(self) -> Receipts:
        """The deployment's chain of forgetting receipts (``all()``, ``verify()``,
        ``find(token)``), kept beside its objects. No request."""
        return Forgetting(self._w).receipts()

    @property
    def stats(self) -> RequestStats:
        """Requests, round trips and bytes sent by this saver's clients."""
        return self._w.stats

    def preload(self) -> None:
        """Load the AWS SDK and its service models now (Lambda init phase)."""
        return self._w.preload()

    async def _asetup(self, *, dry_run: bool = False) -> list[str]:
        return await self._w._asetup(dry_run=dry_run)  # its span keeps the name _asetup

    async def averify(self) -> None:
        """Raise :class:`~langgraph_s3.errors.MissingResourceError` naming the bucket or
        the table when either is missing (``setup`` creates both). For tools and health
        checks: every other call finds out at its first request anyway. It needs only
        what the agent's runtime policy grants (s3:ListBucket, dynamodb:GetItem).

        Cost: HeadBucket and a GetItem side by side (1 round trip).
        """
        return await self._w.averify()

    async def aflush(self) -> None:
        """Wait until every checkpoint this saver committed on this event loop is stored
        as its S3 object and no longer held by the manifest (a put returns once the
        manifest holds it: ``inline.py``). Costs the PUTs still in flight and 1
        UpdateItem per namespace whose item held them; ``aclose`` calls it. A checkpoint
        whose PUT failed stays held: the next writer or maintenance stores it."""
        return await self._w.aflush()

    def maintenance(self) -> Maintenance:
        """The whole-thread operations on this saver's objects and manifest (delete,
        sweep, prune, pack, unpack, copy, one thread at a time), for the stream handler
        and tools; the saver's own methods are these, one operation per call. No request."""
        return self._w.maintenance()

    get_tuple = twin(aget_tuple)
    list = twin_iter(alist)
    put = twin(aput)
    put_writes = twin(aput_writes)
    export = twin(aexport)
    import_ = twin(aimport)
    pack = twin(apack)
    sweep_ttl = twin(asweep_ttl)
    expired_threads = twin_iter(aexpired_threads)
    get_thread = twin(aget_thread)
    list_threads = twin_iter(alist_threads)
    flush = twin(aflush)
    forget = twin(aforget)
    seal = twin(aseal)
    get_delta_channel_history = twin(aget_delta_channel_history)

    # the twins of calls that return counts where LangGraph's return None
    delete_thread: Callable[[Self, str], Report] = twin(adelete_thread)  # type: ignore[assignment]
    delete_for_runs: Callable[[Self, Sequence[str]], Report] = twin(adelete_for_runs)  # type: ignore[assignment]
    copy_thread: Callable[[Self, str, str], Report] = twin(acopy_thread)  # type: ignore[assignment]
    prune: Callable[..., Report] = twin(aprune)  # type: ignore[assignment]


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
        """Stop the TTL sweeper, wait for the objects of checkpoints still being
        stored (``aflush``; when that fails, the manifest keeps holding them, and the
        next writer or maintenance stores them), then close the clients."""
        await self.stop_ttl_sweeper()
        try:
            await self.aflush()
        except S3PersistenceError as exc:
            logger.info("aclose: held checkpoints stay in the manifest: %r", exc)
        await super().aclose()
