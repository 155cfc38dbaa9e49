"""Sync twins: each runs its async method on the saver's background loop."""

from __future__ import annotations

from collections.abc import (
    Iterator,
    Mapping,
    Sequence,
)
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from langgraph_s3.core.records import ThreadInfo
from langgraph_s3.core.report import Progress, Report

if TYPE_CHECKING:
    from langgraph_s3.checkpoint.transfer import Target as ExportFile

from langgraph_s3.checkpoint.saver.contract import Contract
from langgraph_s3.checkpoint.saver.threads import ThreadOps


class SyncTwins(Contract, ThreadOps):
    """The sync twin of every async method: the same call, run on the background loop."""

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
        dry_run: bool = False,
    ) -> Report:
        """Sync twin of :meth:`aprune` (same cost), on the background loop."""
        return self._runner.run(
            self.aprune(
                thread_ids,
                strategy=strategy,
                keep_last=keep_last,
                older_than=older_than,
                progress=progress,
                dry_run=dry_run,
            )
        )

    def export(
        self,
        thread_ids: Sequence[str] | None,
        file: ExportFile,
        *,
        progress: Progress | None = None,
        segment: int | None = None,
        total_segments: int | None = None,
    ) -> Report:
        """Sync twin of :meth:`aexport`, on the background loop."""
        return self._runner.run(
            self.aexport(
                thread_ids,
                file,
                progress=progress,
                segment=segment,
                total_segments=total_segments,
            )
        )

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
        segment: int | None = None,
        total_segments: int | None = None,
    ) -> Report:
        """Sync twin of :meth:`apack` (same cost), on the background loop."""
        return self._runner.run(
            self.apack(
                thread_ids,
                idle_days=idle_days,
                progress=progress,
                segment=segment,
                total_segments=total_segments,
            )
        )

    def sweep_ttl(
        self,
        *,
        progress: Progress | None = None,
        segment: int | None = None,
        total_segments: int | None = None,
    ) -> Report:
        """Sync twin of :meth:`asweep_ttl` (same cost), on the background loop."""
        return self._runner.run(
            self.asweep_ttl(progress=progress, segment=segment, total_segments=total_segments)
        )

    def expired_threads(
        self, *, segment: int | None = None, total_segments: int | None = None
    ) -> Iterator[str]:
        """Sync twin of :meth:`aexpired_threads` (same cost), on the background loop."""
        return self._runner.iterate(
            self.aexpired_threads(segment=segment, total_segments=total_segments)
        )

    def get_thread(self, thread_id: str) -> ThreadInfo | None:
        """Sync twin of :meth:`aget_thread` (same cost), on the background loop."""
        return self._runner.run(self.aget_thread(thread_id))

    def list_threads(
        self,
        *,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        limit: int | None = None,
        after: str | None = None,
        segment: int | None = None,
        total_segments: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Iterator[ThreadInfo]:
        """Sync twin of :meth:`alist_threads` (same cost), on the background loop."""
        return self._runner.iterate(
            self.alist_threads(
                updated_after=updated_after,
                updated_before=updated_before,
                limit=limit,
                after=after,
                segment=segment,
                total_segments=total_segments,
                metadata=metadata,
            )
        )

    def flush(self) -> None:
        """Sync twin of :meth:`aflush`, on the background loop."""
        self._runner.run(self.aflush())

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Sync twin of :meth:`aget_delta_channel_history` (same cost), on the background loop."""
        return self._runner.run(self.aget_delta_channel_history(config=config, channels=channels))
