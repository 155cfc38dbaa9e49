"""Export: threads of a saver to the JSON Lines file, each one as one snapshot."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from typing import IO, Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from langgraph_s3.checkpoint.transfer.common import (
    EXPORT_ATTEMPTS,
    FORMAT,
    VERSION,
    SaverSide,
    Target,
    json_line,
    now_iso,
    opened,
    producer_of,
    typed_field,
)
from langgraph_s3.checkpoint.transfer.sealed import SealFor, sealed_line
from langgraph_s3.core.report import Progress, Report
from langgraph_s3.errors import (
    ConflictError,
)


async def aexport_threads(
    saver: BaseCheckpointSaver[Any],
    thread_ids: Sequence[str] | None,
    file: Target,
    *,
    progress: Progress | None = None,
    seal_for: SealFor | None = None,
) -> Report:
    """Write threads (None: every thread) of ``saver`` to ``file``.

    Each thread's records are gathered in a spool file (memory up to 32 MiB,
    then disk) and written oldest first, so memory stays flat however long
    the history. ``seal_for``: a thread of a subject is written sealed with the
    subject's key (:mod:`.sealed`; that thread is held in memory whole).

    Returns:
        What was written: threads, namespaces, checkpoints, writes, bytes.
    """
    side = SaverSide(saver)
    threads = list(thread_ids) if thread_ids is not None else await side.threads()
    total = Report()
    with opened(file, "wb") as handle:
        out = _Counted(handle)
        out.write(
            json_line(
                {
                    "format": FORMAT,
                    "version": VERSION,
                    "created_at": now_iso(),
                    "producer": producer_of(),
                }
            )
        )
        for done, thread in enumerate(threads, 1):
            total = total + await _export_thread(side, str(thread), out, seal_for)
            if progress is not None:
                progress(total, done, len(threads))
        trailer = {"kind": "end", "threads": total.threads, "checkpoints": total.checkpoints}
        out.write(json_line({**trailer, "writes": total.writes}))
        total.bytes = out.count
    return total


class _Buffer:
    """The lines of one thread, gathered to be sealed as one."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.count = 0

    def write(self, data: bytes) -> None:
        self.parts.append(data)
        self.count += len(data)

    def take(self) -> bytes:
        out, self.parts = b"".join(self.parts), []
        return out


class _Counted:
    """A binary file that counts the bytes written to it (stdout cannot tell)."""

    def __init__(self, file: IO[bytes]) -> None:
        self.file, self.count = file, 0

    def write(self, data: bytes) -> None:
        self.file.write(data)
        self.count += len(data)


async def _export_thread(
    side: SaverSide, thread: str, out: _Counted, seal_for: SealFor | None
) -> Report:
    """One thread's records, as its history stood at one moment: a maintenance call
    that removes or moves its objects while it is read (a rollback, a prune, a
    packing) makes it read the thread again, from the start."""
    for _ in range(EXPORT_ATTEMPTS):
        before = await side.layout_of(thread)
        with tempfile.SpooledTemporaryFile(max_size=32 * 1024 * 1024) as spool:
            index = await _spool_thread(side, thread, spool)
            if before == await side.layout_of(thread):
                sealed = await seal_for(thread) if seal_for is not None else None
                if sealed is None:
                    return _write_thread(thread, index, spool, out)
                buffer = _Buffer()
                counts = _write_thread(thread, index, spool, buffer)
                if counts.threads:
                    out.write(sealed_line(thread, *sealed, buffer.take(), counts))
                return counts
    raise ConflictError(
        f"thread {thread!r} was pruned, rolled back or packed again and again while it was "
        f"exported ({EXPORT_ATTEMPTS} times): export it again"
    )


async def _spool_thread(
    side: SaverSide, thread: str, spool: IO[bytes]
) -> list[tuple[str, str, int, int, int]]:
    """The thread's records into ``spool``; their index (ns, id, offset, length, writes)."""
    index: list[tuple[str, str, int, int, int]] = []
    async for tup in side.listing({"configurable": {"thread_id": thread}}):
        conf = tup.config["configurable"]
        ns, cid = str(conf.get("checkpoint_ns", "")), str(conf["checkpoint_id"])
        parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        head = {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": cid}
        start = spool.tell()
        spool.write(
            json_line(
                {
                    "kind": "checkpoint",
                    **head,
                    "parent_checkpoint_id": parent,
                    "checkpoint": typed_field(side.serde, tup.checkpoint),
                    "metadata": typed_field(side.serde, tup.metadata),
                }
            )
        )
        slots: dict[str, int] = {}
        for task_id, channel, value in tup.pending_writes or ():
            i = slots[task_id] = slots.get(task_id, -1) + 1
            spool.write(
                json_line(
                    {
                        "kind": "write",
                        **head,
                        "task_id": task_id,
                        "index": i,
                        "channel": channel,
                        "value": typed_field(side.serde, value),
                    }
                )
            )
        index.append((ns, cid, start, spool.tell() - start, len(tup.pending_writes or ())))
    return index


def _write_thread(
    thread: str,
    index: list[tuple[str, str, int, int, int]],
    spool: IO[bytes],
    out: _Counted | _Buffer,
) -> Report:
    """A spooled thread to the export: its header, then its records, oldest first."""
    if not index:
        return Report(skipped=1)
    index.sort(key=lambda e: (e[0] != "", e[0], e[1]))  # root first; oldest first
    writes = sum(e[4] for e in index)
    out.write(
        json_line(
            {"kind": "thread", "thread_id": thread, "checkpoints": len(index), "writes": writes}
        )
    )
    for _, _, start, length, _ in index:
        spool.seek(start)
        out.write(spool.read(length))
    return Report(
        threads=1, namespaces=len({e[0] for e in index}), checkpoints=len(index), writes=writes
    )
