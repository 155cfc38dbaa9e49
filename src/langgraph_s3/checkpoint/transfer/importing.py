"""Import (and migration): a file's threads into a saver, each whole or not at all."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from langgraph_s3.checkpoint.transfer.common import (
    Put,
    SaverSide,
    Target,
    ThreadRecords,
    file_name,
    namespaces_of,
    ns_of,
    opened,
)
from langgraph_s3.checkpoint.transfer.exporting import aexport_threads
from langgraph_s3.checkpoint.transfer.parsing import ExportReader
from langgraph_s3.checkpoint.transfer.sealed import KeyFor, skipped_of, unsealed
from langgraph_s3.checkpoint.writing import ROOTS
from langgraph_s3.core.report import Progress, Report
from langgraph_s3.errors import (
    CorruptExportError,
    NewerFormatError,
    ThreadExistsError,
)


async def aimport_threads(
    saver: BaseCheckpointSaver[Any],
    file: Target,
    *,
    replace: bool = False,
    progress: Progress | None = None,
    key_for: KeyFor | None = None,
) -> Report:
    """Read an export into ``saver``, thread by thread, each all or nothing.

    A thread sealed for its subject (:mod:`.sealed`) is opened with ``key_for``'s key;
    one whose subject was forgotten is skipped (counted in ``skipped``).

    A thread is read and checked whole before its first write: its structure, the
    type of every field, and every value decoded by ``saver``'s serializer as the
    writes will use it (one thread's decoded values are held in memory; the file is
    streamed). Into our saver, a thread is then written aside and published whole
    at its end (``core.staging``): no reader sees a part of it, and a failure or a
    killed process leaves the thread as it was (deleted, with ``replace``). Into
    another saver it is written in place and deleted on a failure. A failure's note
    says what became of the thread; what a failed import wrote is removed at once or,
    if that fails too, by the next sweep. Threads earlier in the file stay imported:
    every error names them (``imported`` on our errors, a note on others). A thread
    whose deletion was killed before its end (it reads as absent) has that deletion
    finished first. Cost: the target's reads to tell whether each thread exists (and,
    for ours, 1 GetItem for one that does not), then one ``put`` per checkpoint and
    one ``put_writes`` per task of each checkpoint; for ours, per thread, a claim
    (2 GetItems, 1 PutItem), 1 UpdateItem a minute, the held copies stored, and a
    publishing (1 GetItem, 2 Queries, 1 TransactWriteItems per 49 namespaces).

    Args:
        replace: a thread that already has checkpoints in ``saver`` is deleted
            (once the file's copy of it is checked) and written again; without it
            such a thread stops the import with
            :class:`~langgraph_s3.errors.ThreadExistsError` (an ``InvalidRequestError``).

    Returns:
        What was imported.

    Raises:
        NewerFormatError: the file is of a newer format version.
        CorruptExportError: not an export, a cut-off or damaged file, a record of
            the wrong shape, or a value the serializer cannot decode; nothing of the
            thread it is in was written.
        ThreadExistsError: a thread exists in ``saver`` and ``replace`` is False.
    """
    side = SaverSide(saver)
    name = file_name(file)
    total = Report()
    imported: list[str] = []
    try:
        with opened(file, "rb") as src:
            lines = await unsealed(src, key_for, name)
            for thread in ExportReader(side, name).threads(lines):
                replaced = False
                if await side.exists(thread.thread_id):
                    if not replace:
                        raise ThreadExistsError(
                            thread.thread_id, name, line=thread.line, imported=(*imported,)
                        )
                    await side.call("delete_thread", thread.thread_id)
                    await side.settled(thread.thread_id, namespaces_of(thread))
                    replaced = True
                elif await side.unfinished_deletion(thread.thread_id):
                    # a deletion killed before its end (a replace's, or anyone's): end
                    # it, or the objects of the life it ended stay beside the import
                    await side.call("delete_thread", thread.thread_id)
                    await side.settled(thread.thread_id, namespaces_of(thread))
                total = total + await _write(side, thread, replaced)
                imported.append(thread.thread_id)
                if progress is not None:
                    progress(total, len(imported), len(imported))
            total.skipped += skipped_of(lines).threads
    except CorruptExportError as exc:
        if not imported:
            raise
        raise CorruptExportError(exc.file, exc.reason, imported=(*imported,)) from exc.__cause__
    except (ThreadExistsError, NewerFormatError):
        raise
    except Exception as exc:  # the target's, or the file system's: its type is kept
        exc.add_note(_imported_note(imported))
        raise
    return total


def _imported_note(imported: list[str]) -> str:
    if not imported:
        return "no thread of the file was imported before this failure"
    shown = ", ".join(repr(t) for t in imported[:5])
    more = f", ... {imported[-1]!r} ({len(imported)} in all)" if len(imported) > 5 else ""
    return f"imported before this failure: {shown}{more}"


@dataclass
class ImportPlan:
    """What an import of a file would do (``aplan_import``): nothing is written."""

    threads: list[str] = field(default_factory=list)
    """The file's threads, in its order."""
    existing: list[str] = field(default_factory=list)
    """Those the target has already: replaced with ``replace``, else refused."""
    report: Report = field(default_factory=Report)
    """What the file holds: threads, namespaces, checkpoints, writes."""


async def aplan_import(
    saver: BaseCheckpointSaver[Any], file: Target, *, key_for: KeyFor | None = None
) -> ImportPlan:
    """Read and check a whole export as :func:`aimport_threads` would (every record,
    every value decoded), and say which of its threads the target has already;
    nothing is written. Cost: the file read once, and the target's reads to tell
    whether each thread exists.

    Raises:
        CorruptExportError, NewerFormatError: as the import would, before any write.
    """
    side = SaverSide(saver)
    plan = ImportPlan()
    with opened(file, "rb") as src:
        lines = await unsealed(src, key_for, file_name(file))
        for thread in ExportReader(side, file_name(file)).threads(lines):
            plan.threads.append(thread.thread_id)
            plan.report = plan.report + thread.report
            if await side.exists(thread.thread_id):
                plan.existing.append(thread.thread_id)
    return plan


async def _write(side: SaverSide, thread: ThreadRecords, replaced: bool) -> Report:
    """Write a checked thread where no reader sees it, then make it the thread at once;
    on a failure, remove what was written (none of it was seen).

    A checkpoint whose parent is not in the file (a pruned thread's oldest) begins the
    imported life: the saver keeps its parent id, as a pruned thread's floor does."""
    puts = [c for c in thread.calls if isinstance(c, Put)]
    inside = {(ns_of(c.config), str(c.checkpoint["id"])) for c in puts}
    roots = frozenset(
        str(c.checkpoint["id"])
        for c in puts
        if (parent := c.config["configurable"].get("checkpoint_id"))
        and (ns_of(c.config), str(parent)) not in inside
    )
    tid = thread.thread_id
    stage = side.stage(tid, max((str(c.checkpoint["id"]) for c in puts), default=""))
    await stage.begin()
    token = ROOTS.set(roots)
    try:
        with stage.writing():
            for call in thread.calls:
                await stage.keep()
                if isinstance(call, Put):
                    args = (call.config, call.checkpoint, call.metadata, call.versions)
                    await side.call("put", *args)
                else:
                    await side.call("put_writes", call.config, call.writes, call.task_id)
        await stage.publish()
    except Exception as exc:
        earlier = " (its earlier copy was deleted: replace)" if replaced else ""
        try:
            await stage.abandon()
        except Exception as again:
            exc.add_note(
                f"nothing of thread {tid!r} was published{earlier}; removing what was "
                f"written failed too ({type(again).__name__}: {again}): no reader sees it, "
                "and the next sweep removes it once the import's hold ran out (2 minutes; "
                "an import of the thread waits until then)"
            )
        else:
            exc.add_note(f"nothing of thread {tid!r} was published{earlier}")
        raise
    finally:
        ROOTS.reset(token)
    return thread.report


async def amigrate(
    source: BaseCheckpointSaver[Any],
    target: BaseCheckpointSaver[Any],
    thread_ids: Sequence[str] | None = None,
    *,
    replace: bool = False,
    progress: Progress | None = None,
) -> Report:
    """Copy threads (None: every thread) from one saver to another, through the
    export format (a spool file: memory stays flat).

    Returns:
        What was imported into ``target``.
    """
    with tempfile.TemporaryFile() as spool:
        await aexport_threads(source, thread_ids, spool)
        spool.seek(0)
        return await aimport_threads(target, spool, replace=replace, progress=progress)
