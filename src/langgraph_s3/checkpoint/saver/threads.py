"""Whole-thread maintenance through the saver: each call one operation."""

from __future__ import annotations

from collections.abc import (
    Awaitable,
    Callable,
    Sequence,
)
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from langgraph_s3.core.keys import id_list
from langgraph_s3.core.report import Progress, Report
from langgraph_s3.core.shards import shard_of
from langgraph_s3.core.tasks import bounded_map
from langgraph_s3.errors import InvalidRequestError, S3PersistenceError
from langgraph_s3.runtime.operations import operation

if TYPE_CHECKING:
    pass

from langgraph_s3.checkpoint.saver.deployment import DeploymentOps


class ThreadOps(DeploymentOps):
    """Maintenance of chosen threads: delete, delete_for_runs, prune, copy, pack."""

    @operation
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
        return await self.maintenance().delete_thread(str(thread_id))

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
        return await self.maintenance().delete_for_runs(id_list(run_ids, "run_ids"))

    @operation
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
            if dry_run:
                return await self._each(threads, self._deletion_plan, progress)
            return await self._each(threads, self.maintenance().delete_thread, progress)
        rule = self.maintenance().rule(keep_last, older_than)
        maintenance = self.maintenance()
        act = maintenance.prune_plan if dry_run else maintenance.prune_thread
        return await self._each(threads, lambda t: act(t, rule), progress)

    async def _deletion_plan(self, thread: str) -> Report:
        """What deleting ``thread`` would remove, by the manifest (1 Query)."""
        info = await self.manifest.reads.thread(thread)
        if info is None:
            return Report(skipped=1)
        return Report(threads=1, namespaces=len(info.namespaces))

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
        return await self.maintenance().copy_thread(str(source_thread_id), str(target_thread_id))

    @operation
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
        shard = shard_of(segment, total_segments)
        if thread_ids is not None and shard is not None:
            raise InvalidRequestError("apack takes thread_ids or a segment, not both")
        if thread_ids is None:
            if idle_days is None or not idle_days >= 0:
                raise InvalidRequestError(
                    "apack needs thread_ids, or idle_days (>= 0) to pack the idle threads"
                )
            cutoff = datetime.fromtimestamp(self.manifest.now() - idle_days * 86400, UTC)
            listing = self.alist_threads(
                updated_before=cutoff, segment=segment, total_segments=total_segments
            )
            thread_ids = [t.thread_id async for t in listing if not t.packed]
        maintenance = self.maintenance()
        return await self._each(
            id_list(thread_ids, "thread_ids"), maintenance.pack_thread, progress
        )
