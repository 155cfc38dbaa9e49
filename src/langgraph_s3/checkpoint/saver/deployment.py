"""Upkeep across the deployment: the TTL sweep and its sweeper, export, import, threads."""

from __future__ import annotations

from collections.abc import (
    AsyncIterator,
    Mapping,
    Sequence,
)
from datetime import datetime
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from langgraph_s3.checkpoint.saver.export_keys import export_sealer, import_keys, note_exports
from langgraph_s3.checkpoint.transfer.sealed import KeyFor
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
    Wiring,
)


class DeploymentOps:
    """The whole deployment's upkeep: the TTL sweep, export and import, listing threads."""

    def __init__(self, w: Wiring) -> None:
        self.w = w
        self.clients = w.clients

    @property
    def concurrency(self) -> int:
        """Requests in flight per call (the saver's, read at each call)."""
        return self.w.concurrency

    @operation
    async def asweep_ttl(
        self,
        *,
        progress: Progress | None = None,
        segment: int | None = None,
        total_segments: int | None = None,
    ) -> Report:
        """``AsyncS3Saver.asweep_ttl``; on a manifest in the bucket, shard 0 (or the
        whole sweep) also frees the manifest's superseded versions."""
        shard = shard_of(segment, total_segments)
        report = await self.w.maintenance().sweep(progress, shard)
        table = self.w.object_table
        if table is not None and (shard is None or shard.segment == 0):
            await table.collect()
        return report

    async def aexport(
        self,
        saver: BaseCheckpointSaver[Any],
        thread_ids: Sequence[str] | None,
        file: ExportFile,
        *,
        progress: Progress | None = None,
        segment: int | None = None,
        total_segments: int | None = None,
        sealed: bool = False,
    ) -> Report:
        """``AsyncS3Saver.aexport``."""
        from langgraph_s3.checkpoint.transfer import aexport_threads

        shard = shard_of(segment, total_segments)
        if thread_ids is not None and shard is not None:
            raise InvalidRequestError("aexport takes thread_ids or a segment, not both")
        seals = self.w.seals
        if sealed and seals is None:
            raise InvalidRequestError(
                "a sealed export needs the deployment's subjects: pass subjects= and kms_key="
            )
        ids = id_list(thread_ids, "thread_ids") if thread_ids is not None else None
        if shard is not None:
            ids = [
                t.thread_id
                async for t in self.alist_threads(segment=shard.segment, total_segments=shard.total)
            ]
        noted: dict[tuple[str, int], bool] = {}
        sealer = export_sealer(seals, noted, sealed) if seals is not None else None
        report = await aexport_threads(saver, ids, file, progress=progress, seal_for=sealer)
        if seals is not None:
            await note_exports(seals, noted, sealed=sealed)
        return report

    async def aimport(
        self,
        saver: BaseCheckpointSaver[Any],
        file: ExportFile,
        *,
        replace: bool = False,
        progress: Progress | None = None,
        sealed_by: Any = None,
    ) -> Report:
        """``AsyncS3Saver.aimport``."""
        from langgraph_s3.checkpoint.transfer import aimport_threads

        key_for = self._keys(sealed_by)
        return await aimport_threads(
            saver, file, replace=replace, progress=progress, key_for=key_for
        )

    def _keys(self, sealed_by: Any) -> KeyFor | None:
        """Where a sealed export's keys come from: the saver of the deployment that made
        it, else this one's subjects (None: neither declares any)."""
        seals = self.w.seals if sealed_by is None else getattr(sealed_by, "_w", None)
        if sealed_by is not None:
            seals = getattr(seals, "seals", None)
            if seals is None:
                raise InvalidRequestError(
                    "sealed_by= is the saver of the deployment that made the export, with "
                    "its subjects declared (subjects=, kms_key=)"
                )
        return import_keys(seals) if seals is not None else None

    @operation
    async def aplan_import(
        self, saver: BaseCheckpointSaver[Any], file: ExportFile, *, sealed_by: Any = None
    ) -> ImportPlan:
        """``AsyncS3Saver.aplan_import``."""
        from langgraph_s3.checkpoint.transfer import aplan_import

        return await aplan_import(saver, file, key_for=self._keys(sealed_by))

    @operation_iter
    async def aexpired_threads(
        self, *, segment: int | None = None, total_segments: int | None = None
    ) -> AsyncIterator[str]:
        """``AsyncS3Saver.aexpired_threads``."""
        async for page in self.w.manifest.reads.expired(shard=shard_of(segment, total_segments)):
            for expiry in page:
                if expiry.late is None:  # a deletion's late pass deletes no thread
                    yield expiry.thread_id

    @operation
    async def aget_thread(self, thread_id: str) -> ThreadInfo | None:
        """``AsyncS3Saver.aget_thread``."""
        if not isinstance(thread_id, str) or not thread_id:
            raise InvalidRequestError(f"thread_id must be a non-empty string, got {thread_id!r}")
        return await self.w.manifest.reads.thread(thread_id)

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
        """``AsyncS3Saver.alist_threads``."""
        shard = shard_of(segment, total_segments)
        want = wanted(metadata) if metadata is not None else None
        for name, when in (("updated_after", updated_after), ("updated_before", updated_before)):
            if when is not None and (not isinstance(when, datetime) or when.tzinfo is None):
                raise InvalidRequestError(f"{name} must be a timezone-aware datetime, got {when!r}")
        if limit is not None and limit <= 0:
            return
        left = limit
        pages = (
            self.w.manifest.reads.threads(after, shard=shard)
            if want is None
            else self.w.manifest.reads.matching(want, shard=shard, after=after)
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
