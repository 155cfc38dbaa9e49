"""Whole-thread maintenance through the saver: each call one operation."""

from __future__ import annotations

from collections.abc import (
    Awaitable,
    Callable,
    Sequence,
)
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from langgraph_s3.checkpoint.saver.deployment import DeploymentOps
from langgraph_s3.checkpoint.saver.wiring import Wiring
from langgraph_s3.core.keys import id_list
from langgraph_s3.core.report import Progress, Report
from langgraph_s3.core.shards import shard_of
from langgraph_s3.core.tasks import bounded_map
from langgraph_s3.errors import InvalidRequestError, S3PersistenceError
from langgraph_s3.runtime.operations import operation

if TYPE_CHECKING:
    from langgraph_s3.checkpoint.saver.contract import Contract


class ThreadOps:
    """Maintenance of chosen threads: delete, delete_for_runs, prune, copy, pack."""

    def __init__(self, w: Wiring, deployment: DeploymentOps, contract: Contract) -> None:
        self.w = w
        self.clients = w.clients
        self.deployment = deployment
        self.contract = contract  # its listing counts what a deletion would remove

    @property
    def concurrency(self) -> int:
        """Requests in flight per call (the saver's, read at each call)."""
        return self.w.concurrency

    @operation
    async def adelete_thread(self, thread_id: str) -> Report:
        """``AsyncS3Saver.adelete_thread``."""
        return await self.w.maintenance().delete_thread(str(thread_id))

    @operation
    async def adelete_for_runs(self, run_ids: Sequence[str]) -> Report:
        """``AsyncS3Saver.adelete_for_runs``."""
        return await self.w.maintenance().delete_for_runs(id_list(run_ids, "run_ids"))

    @operation
    async def aprune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int | None = None,
        older_than: timedelta | datetime | None = None,
        progress: Progress | None = None,
        dry_run: bool = False,
    ) -> Report:
        """``AsyncS3Saver.aprune``."""
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
            return await self._each(threads, self.w.maintenance().delete_thread, progress)
        rule = self.w.maintenance().rule(keep_last, older_than)
        maintenance = self.w.maintenance()
        act = maintenance.prune_plan if dry_run else maintenance.prune_thread
        return await self._each(threads, lambda t: act(t, rule), progress)

    async def _deletion_plan(self, thread: str) -> Report:
        """What deleting ``thread`` would remove: its namespaces and every checkpoint of
        their history, as ``alist`` lists them (a prune's plan would not do: it keeps a
        DeltaChannel's seeds). Cost: a Query, and ``alist``'s reads of the thread."""
        info = await self.w.manifest.reads.thread(thread)
        if info is None:
            return Report(skipped=1)
        listed = self.contract.alist({"configurable": {"thread_id": thread}})
        count = sum([1 async for _ in listed])
        return Report(threads=1, namespaces=len(info.namespaces), checkpoints=count)

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
    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> Report:
        """``AsyncS3Saver.acopy_thread``."""
        return await self.w.maintenance().copy_thread(str(source_thread_id), str(target_thread_id))

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
        """``AsyncS3Saver.apack``."""
        shard = shard_of(segment, total_segments)
        if thread_ids is not None and shard is not None:
            raise InvalidRequestError("apack takes thread_ids or a segment, not both")
        if thread_ids is None:
            if idle_days is None or not idle_days >= 0:
                raise InvalidRequestError(
                    "apack needs thread_ids, or idle_days (>= 0) to pack the idle threads"
                )
            cutoff = datetime.fromtimestamp(self.w.manifest.now() - idle_days * 86400, UTC)
            listing = self.deployment.alist_threads(
                updated_before=cutoff, segment=segment, total_segments=total_segments
            )
            thread_ids = [t.thread_id async for t in listing if not t.packed]
        maintenance = self.w.maintenance()
        return await self._each(
            id_list(thread_ids, "thread_ids"), maintenance.pack_thread, progress
        )
