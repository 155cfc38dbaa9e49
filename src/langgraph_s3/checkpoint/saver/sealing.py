"""Sealing an existing deployment: its subjects' plain threads rewritten sealed, each as
a new life the way an import's replace makes one (docs/subjects.md).

A deployment that declares subjects seals every thread begun after; a thread begun
plain stays plain (the manifest, not a body, says whether a thread is sealed). This
rewrites such a thread whose checkpoints name one subject (a thread keeps one: one whose
checkpoints name several is refused, and left plain): it is exported (to a
spool file), then imported with ``replace`` (checked whole, staged, published at once),
so that every checkpoint, write and held copy of it is stored again sealed, under the
same ids; the plain objects are deleted with the old life.

An import's replace deletes the thread before it publishes the new life, so a turn
written meanwhile would be lost: only threads idle for ``idle_minutes`` are rewritten,
each checked unchanged (its latest checkpoint) just before, and a thread that fails is
left as the import leaves it, its export kept (the error names the file: import it
with ``replace``). Sharded like the archiver: N runs of ``segment`` 0..N-1 of N
rewrite each thread once.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path
from typing import Any

from langgraph_s3.checkpoint.saver.wiring import Wiring
from langgraph_s3.core.keys import encode
from langgraph_s3.core.records import ThreadInfo
from langgraph_s3.core.report import Progress, Report
from langgraph_s3.errors import InvalidRequestError
from langgraph_s3.runtime.remains import iso, table_copies, versions
from langgraph_s3.runtime.thread_seals import PLAIN, ThreadSeals

__all__ = ["DEFAULT_IDLE_MINUTES", "ThreadSealing"]

DEFAULT_IDLE_MINUTES = 60.0
"""Minutes a thread must have been idle before it is rewritten."""


class ThreadSealing:
    """``AsyncS3Saver.aseal``: the subjects' plain threads rewritten sealed."""

    def __init__(self, w: Wiring) -> None:
        self.w = w

    def _seals(self) -> ThreadSeals:
        if self.w.seals is None:
            raise InvalidRequestError(
                "this saver declares no subjects: pass subjects= (a metadata key such as "
                "'user_id') and kms_key= to seal a subject's threads"
            )
        return self.w.seals

    async def aseal(
        self,
        saver: Any,
        *,
        dry_run: bool = False,
        idle_minutes: float = DEFAULT_IDLE_MINUTES,
        segment: int | None = None,
        total_segments: int | None = None,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """``AsyncS3Saver.aseal``."""
        if not idle_minutes >= 0:
            raise InvalidRequestError(f"idle_minutes must be 0 or more, got {idle_minutes!r}")
        todo, busy, refused = await self._plain(saver, idle_minutes, segment, total_segments)
        if dry_run:
            return {
                "state": "dry-run",
                "threads": len(todo),
                "busy": busy,
                "refused": refused,
            }
        done, changed = Report(), []
        began = self.w.manifest.now()
        with tempfile.TemporaryDirectory(prefix="langgraph-s3-seal-") as spool:
            for at, (info, token) in enumerate(todo):
                report = await self._rewrite(saver, info, token, Path(spool) / f"{at}.jsonl")
                if report is None:
                    changed.append(info.thread_id)
                else:
                    done = done + report
                if progress is not None:
                    progress(done, at + 1, len(todo))
        return {
            "state": "sealed",
            "threads": done.threads,
            "checkpoints": done.checkpoints,
            "writes": done.writes,
            "busy": busy + changed,
            "refused": refused,
            "began": iso(began),
            "remains": await self._remains(began) if done.threads else [],
        }

    async def _plain(
        self, saver: Any, idle_minutes: float, segment: int | None, total: int | None
    ) -> tuple[list[tuple[ThreadInfo, str]], list[str], list[str]]:
        """The plain threads of one subject each (idle ones to rewrite, with the subject's
        token; busy ones), and those the policy refuses: a subject value of the wrong
        type, or checkpoints naming several subjects (a thread keeps one)."""
        seals = self._seals()
        idle_since = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=idle_minutes)
        todo: list[tuple[ThreadInfo, str]] = []
        busy: list[str] = []
        refused: list[str] = []
        async for info in saver.alist_threads(segment=segment, total_segments=total):
            if await seals.state(encode(info.thread_id, "thread_id"), fresh=True) != PLAIN:
                continue  # sealed already (or gone since the listing)
            try:
                subjects = {
                    subject
                    async for tup in saver.alist({"configurable": {"thread_id": info.thread_id}})
                    if (subject := seals.policy.thread_subject(tup.metadata)) is not None
                }
            except InvalidRequestError:  # a value of the wrong type: said, left as it is
                refused.append(info.thread_id)
                continue
            if not subjects:
                continue  # nobody's: it stays plain, as it would be begun now
            if len(subjects) > 1:
                refused.append(info.thread_id)
            elif info.updated_at > idle_since:
                busy.append(info.thread_id)
            else:
                todo.append((info, await seals.subjects.token(subjects.pop())))
        return todo, busy, refused

    async def _rewrite(
        self, saver: Any, info: ThreadInfo, token: str, spool: Path
    ) -> Report | None:
        """Export the thread, check it did not change, import it with ``replace`` for
        its subject; None when it changed (it is left for a later run)."""
        await saver.aexport([info.thread_id], str(spool))
        fresh = await saver.aget_tuple({"configurable": {"thread_id": info.thread_id}})
        if fresh is None or fresh.config["configurable"]["checkpoint_id"] != info.latest_id:
            return None
        seals = self._seals()
        seals.expect(info.thread_id, token)
        try:
            report: Report = await saver.aimport(str(spool), replace=True)
            return report
        except Exception as exc:
            kept = spool.with_name(f"kept-{info.thread_id.encode().hex()[:64]}.jsonl")
            keep = Path(tempfile.gettempdir()) / kept.name
            spool.replace(keep)
            exc.add_note(
                f"the thread's export is kept at {keep}: import it with replace "
                f"(langgraph-s3 import {keep} --replace)"
            )
            raise
        finally:
            seals.expect(info.thread_id, None)

    async def _remains(self, began: float) -> list[dict[str, Any]]:
        """The plaintext the rewrite could not reach, and until when."""
        out = await versions(
            self.w.clients,
            self.w.target.bucket,
            began,
            "the plain objects of the threads rewritten (noncurrent versions)",
        )
        if getattr(self.w.manifest, "clients", None) is not None:
            out += await table_copies(
                self.w.clients,
                self.w.target.table or "",
                began,
                "the threads' items as they were: held copies and metadata in plain",
            )
        return out
