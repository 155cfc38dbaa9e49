"""Upkeep across the deployment: the TTL sweep and its sweeper, export, import, threads."""

from __future__ import annotations

import asyncio
from collections.abc import (
    AsyncIterator,
    Mapping,
    Sequence,
)
from datetime import datetime
from typing import TYPE_CHECKING, Any

from langgraph_s3.core.keys import id_list
from langgraph_s3.core.meta import wanted
from langgraph_s3.core.records import ThreadInfo
from langgraph_s3.core.report import Progress, Report
from langgraph_s3.core.shards import shard_of
from langgraph_s3.errors import InvalidRequestError
from langgraph_s3.runtime.operations import operation, operation_iter

if TYPE_CHECKING:
    from langgraph_s3.checkpoint.transfer import ImportPlan
    from langgraph_s3.checkpoint.transfer import Target as ExportFile

from langgraph_s3.checkpoint.saver.wiring import (
    SaverWiring,
)


class DeploymentOps(SaverWiring):
    """The whole deployment's upkeep: the TTL sweep, export and import, listing threads."""

    @operation
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
        return await self.maintenance().sweep(progress, shard_of(segment, total_segments))

    @property
    def ttl_sweeper(self) -> asyncio.Task[None] | None:
        """The task of the TTL sweeper :meth:`start_ttl_sweeper` started, until
        :meth:`stop_ttl_sweeper` (None: none was started, or it was stopped)."""
        return self._sweeper.task

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

    async def aexport(
        self,
        thread_ids: Sequence[str] | None,
        file: ExportFile,
        *,
        progress: Progress | None = None,
        segment: int | None = None,
        total_segments: int | None = None,
    ) -> Report:
        """Write threads (None: every thread) to ``file`` in the versioned export
        format (:mod:`langgraph_s3.transfer`: JSON Lines, gzip for a ``.gz`` path),
        oldest checkpoint first, with every pending write.

        Args:
            segment: with ``total_segments`` and no ``thread_ids``, only that shard's
                threads (one file per shard; together they hold every thread once).

        Returns:
            What was written (threads, namespaces, checkpoints, writes, bytes).

        Cost: per thread, what ``alist`` of the whole thread costs; memory stays
        flat (a spool file).
        """
        from langgraph_s3.checkpoint.transfer import aexport_threads

        shard = shard_of(segment, total_segments)
        if thread_ids is not None and shard is not None:
            raise InvalidRequestError("aexport takes thread_ids or a segment, not both")
        ids = id_list(thread_ids, "thread_ids") if thread_ids is not None else None
        if shard is not None:
            ids = [
                t.thread_id
                async for t in self.alist_threads(segment=shard.segment, total_segments=shard.total)
            ]
        return await aexport_threads(self, ids, file, progress=progress)

    async def aimport(
        self,
        file: ExportFile,
        *,
        replace: bool = False,
        progress: Progress | None = None,
    ) -> Report:
        """Read an export (of this saver or any other) into this deployment, each
        thread checked whole, then written aside and published at once: a reader sees
        it as it was or wholly imported (see :func:`aimport_threads`).

        Args:
            replace: delete a thread that already exists here before importing it;
                without it, such a thread stops the import with InvalidRequestError.

        Returns:
            What was imported.

        Cost: per checkpoint, an ``aput`` (1 round trip), per task an ``aput_writes``;
        per thread, a claim and a publishing (about 7 requests).
        """
        from langgraph_s3.checkpoint.transfer import aimport_threads

        return await aimport_threads(self, file, replace=replace, progress=progress)

    @operation
    async def aplan_import(self, file: ExportFile) -> ImportPlan:
        """What :meth:`aimport` of ``file`` would do, nothing written: the file read and
        checked whole as the import would, its threads, and those this deployment has
        already (replaced with ``replace``, else refused). Cost: the file read once,
        a Query per thread."""
        from langgraph_s3.checkpoint.transfer import aplan_import

        return await aplan_import(self, file)

    @operation_iter
    async def aexpired_threads(
        self, *, segment: int | None = None, total_segments: int | None = None
    ) -> AsyncIterator[str]:
        """The ids of this deployment's threads (of one shard) whose TTL passed and
        whose objects :meth:`asweep_ttl` would remove now (what a sweep's dry run shows).

        Cost: one Scan request per 1 MB of the table, as :meth:`asweep_ttl`'s own.
        """
        async for page in self.manifest.reads.expired(shard=shard_of(segment, total_segments)):
            for expiry in page:
                if expiry.late is None:  # a deletion's late pass deletes no thread
                    yield expiry.thread_id

    @operation
    async def aget_thread(self, thread_id: str) -> ThreadInfo | None:
        """One thread as :meth:`alist_threads` lists it: its live namespaces (root
        first), latest checkpoint, creation, last write and expiry; None when it has
        no live checkpoint.

        Cost: 1 Query (per 1 MB of its namespaces' items), no S3 request.
        """
        if not isinstance(thread_id, str) or not thread_id:
            raise InvalidRequestError(f"thread_id must be a non-empty string, got {thread_id!r}")
        return await self.manifest.reads.thread(thread_id)

    @operation_iter
    async def alist_threads(
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
        shard = shard_of(segment, total_segments)
        want = wanted(metadata) if metadata is not None else None
        for name, when in (("updated_after", updated_after), ("updated_before", updated_before)):
            if when is not None and (not isinstance(when, datetime) or when.tzinfo is None):
                raise InvalidRequestError(f"{name} must be a timezone-aware datetime, got {when!r}")
        if limit is not None and limit <= 0:
            return
        left = limit
        pages = (
            self.manifest.reads.threads(after, shard=shard)
            if want is None
            else self.manifest.reads.matching(want, shard=shard, after=after)
        )
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
