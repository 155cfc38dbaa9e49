"""Export and import of threads, and migration between any two checkpoint savers.

The export format (``langgraph-checkpoint-export``, version 1) is JSON Lines
(UTF-8, one object per line; a path ending in ``.gz`` is gzip-compressed):

1. a header: ``{"format": "langgraph-checkpoint-export", "version": 1,
   "created_at": ISO-8601, "producer": "langgraph-s3 <version>"}``;
2. per thread, a ``{"kind": "thread", "thread_id", "checkpoints": n, "writes": m}``
   record, then its ``n`` checkpoint records and ``m`` write records, each
   checkpoint's writes right after it; namespaces root first, then by name;
   checkpoints oldest first, so a parent always comes before its children:

   * ``{"kind": "checkpoint", "thread_id", "checkpoint_ns", "checkpoint_id",
     "parent_checkpoint_id": id | null, "checkpoint": V, "metadata": V}``
   * ``{"kind": "write", "thread_id", "checkpoint_ns", "checkpoint_id",
     "task_id", "index", "channel", "value": V}`` (``index``: its position
     among the task's writes on that checkpoint)

   where ``V`` is ``{"type": <the serializer's type tag>, "data": base64}``:
   the bytes a LangGraph serializer (``dumps_typed``) made, not a re-encoding;
3. a trailer: ``{"kind": "end", "threads", "checkpoints", "writes"}``.

A reader refuses a newer version (:class:`~langgraph_s3.errors.NewerFormatError`)
and imports a thread only once all its records were read: a truncated file
imports the whole threads before the cut, never half a thread.

Any ``BaseCheckpointSaver`` is a source or a target (InMemorySaver, SqliteSaver,
PostgresSaver, this library's): its async methods are used, or its sync ones
on a worker thread when it has no async ones (``SqliteSaver``).
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import os
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, cast

import orjson
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from .errors import CorruptObjectError, InvalidRequestError, NewerFormatError
from .report import Progress, Report

__all__ = ["FORMAT", "VERSION", "aexport_threads", "aimport_threads", "amigrate"]

FORMAT = "langgraph-checkpoint-export"
VERSION = 1
"""The export format's version: readers of this library read every version up to it."""

Target = str | os.PathLike[str] | IO[bytes]
"""A path (``.gz``: gzip) or a binary file object."""


# ------------------------------------------------------------ a saver, either way
class _Saver:
    """One saver, through its async methods or, lacking them, its sync ones."""

    def __init__(self, saver: BaseCheckpointSaver[Any]) -> None:
        self.saver = saver
        self.serde: SerializerProtocol = saver.serde

    async def listing(self, config: RunnableConfig | None) -> AsyncIterator[CheckpointTuple]:
        try:
            async for tup in self.saver.alist(config):
                yield tup
            return
        except NotImplementedError:
            pass
        it: Iterator[CheckpointTuple] = iter(self.saver.list(config))

        def step() -> CheckpointTuple | None:
            return next(it, None)

        while (got := await asyncio.to_thread(step)) is not None:
            yield got

    async def call(self, name: str, *args: Any) -> Any:
        try:
            return await getattr(self.saver, f"a{name}")(*args)
        except NotImplementedError:
            return await asyncio.to_thread(getattr(self.saver, name), *args)

    async def threads(self) -> list[str]:
        """Every thread id of the saver: its own list when it has one, else a listing."""
        listing = getattr(self.saver, "alist_threads", None)
        if listing is not None:
            return [t.thread_id async for t in listing()]
        seen: dict[str, None] = {}
        async for tup in self.listing(None):
            seen.setdefault(str(tup.config["configurable"]["thread_id"]), None)
        return list(seen)

    async def exists(self, thread_id: str) -> bool:
        async for _ in self.listing({"configurable": {"thread_id": thread_id}}):
            return True
        return False


def _typed(serde: SerializerProtocol, value: Any) -> dict[str, str]:
    kind, data = serde.dumps_typed(value)
    return {"type": kind, "data": base64.b64encode(data).decode("ascii")}


def _untyped(serde: SerializerProtocol, value: Any, where: str) -> Any:
    try:
        return serde.loads_typed((str(value["type"]), base64.b64decode(value["data"])))
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptObjectError(where, f"not a serialized value: {exc}") from exc


# ------------------------------------------------------------------- export
async def aexport_threads(
    saver: BaseCheckpointSaver[Any],
    thread_ids: Sequence[str] | None,
    file: Target,
    *,
    progress: Progress | None = None,
) -> Report:
    """Write threads (None: every thread) of ``saver`` to ``file``.

    Each thread's records are gathered in a spool file (memory up to 32 MiB,
    then disk) and written oldest first, so memory stays flat however long
    the history.

    Returns:
        What was written: threads, namespaces, checkpoints, writes, bytes.
    """
    side = _Saver(saver)
    threads = list(thread_ids) if thread_ids is not None else await side.threads()
    total = Report()
    with _opened(file, "wb") as handle:
        out = _Counted(handle)
        out.write(
            _line(
                {
                    "format": FORMAT,
                    "version": VERSION,
                    "created_at": _now(),
                    "producer": _producer(),
                }
            )
        )
        for done, thread in enumerate(threads, 1):
            total = total + await _export_thread(side, str(thread), out)
            if progress is not None:
                progress(total, done, len(threads))
        trailer = {"kind": "end", "threads": total.threads, "checkpoints": total.checkpoints}
        out.write(_line({**trailer, "writes": total.writes}))
        total.bytes = out.count
    return total


class _Counted:
    """A binary file that counts the bytes written to it (stdout cannot tell)."""

    def __init__(self, file: IO[bytes]) -> None:
        self.file, self.count = file, 0

    def write(self, data: bytes) -> None:
        self.file.write(data)
        self.count += len(data)


async def _export_thread(side: _Saver, thread: str, out: _Counted) -> Report:
    index: list[tuple[str, str, int, int, int]] = []  # (ns, id, offset, length, writes)
    with tempfile.SpooledTemporaryFile(max_size=32 * 1024 * 1024) as spool:
        async for tup in side.listing({"configurable": {"thread_id": thread}}):
            conf = tup.config["configurable"]
            ns, cid = str(conf.get("checkpoint_ns", "")), str(conf["checkpoint_id"])
            parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
            head = {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": cid}
            start = spool.tell()
            spool.write(
                _line(
                    {
                        "kind": "checkpoint",
                        **head,
                        "parent_checkpoint_id": parent,
                        "checkpoint": _typed(side.serde, tup.checkpoint),
                        "metadata": _typed(side.serde, tup.metadata),
                    }
                )
            )
            slots: dict[str, int] = {}
            for task_id, channel, value in tup.pending_writes or ():
                i = slots[task_id] = slots.get(task_id, -1) + 1
                spool.write(
                    _line(
                        {
                            "kind": "write",
                            **head,
                            "task_id": task_id,
                            "index": i,
                            "channel": channel,
                            "value": _typed(side.serde, value),
                        }
                    )
                )
            index.append((ns, cid, start, spool.tell() - start, len(tup.pending_writes or ())))
        if not index:
            return Report(skipped=1)
        index.sort(key=lambda e: (e[0] != "", e[0], e[1]))  # root first; oldest first
        writes = sum(e[4] for e in index)
        out.write(
            _line(
                {"kind": "thread", "thread_id": thread, "checkpoints": len(index), "writes": writes}
            )
        )
        for _, _, start, length, _ in index:
            spool.seek(start)
            out.write(spool.read(length))
    return Report(
        threads=1, namespaces=len({e[0] for e in index}), checkpoints=len(index), writes=writes
    )


# ------------------------------------------------------------------- import
@dataclass
class _Thread:
    thread_id: str
    checkpoints: int
    writes: int
    records: list[dict[str, Any]]


async def aimport_threads(
    saver: BaseCheckpointSaver[Any],
    file: Target,
    *,
    replace: bool = False,
    progress: Progress | None = None,
) -> Report:
    """Read an export into ``saver``, thread by thread.

    Args:
        replace: a thread that already has checkpoints in ``saver`` is deleted
            first; without it such a thread stops the import (nothing of it is
            written) with :class:`~langgraph_s3.errors.InvalidRequestError`.

    Returns:
        What was imported.

    Raises:
        NewerFormatError: the file is of a newer format version.
        CorruptObjectError: not an export, a damaged record, or a cut-off file
            (the threads before the cut are imported).
    """
    side = _Saver(saver)
    total = Report()
    done = 0
    with _opened(file, "rb") as src:
        for thread in _threads(src, str(getattr(src, "name", "the export"))):
            if await side.exists(thread.thread_id):
                if not replace:
                    raise InvalidRequestError(
                        f"thread {thread.thread_id!r} already has checkpoints in the target: "
                        "delete it first, or import with replace=True (which deletes it)"
                    )
                await side.call("delete_thread", thread.thread_id)
            total = total + await _import_thread(side, thread)
            done += 1
            if progress is not None:
                progress(total, done, done)
    return total


def _threads(src: IO[bytes], name: str) -> Iterator[_Thread]:
    """The export's threads, each once all its records were read."""
    lines = iter(src)
    header = _record(next(lines, b""), name, 1)
    if header.get("format") != FORMAT:
        raise CorruptObjectError(
            name, f"not a {FORMAT} file (its first line is {str(header)[:80]})"
        )
    version = header.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise NewerFormatError(name, f"{FORMAT} {version!r}", VERSION)
    current: _Thread | None = None
    ended = False
    for n, raw in enumerate(lines, 2):
        if not raw.strip():
            continue
        rec = _record(raw, name, n)
        kind = rec.get("kind")
        if ended:
            raise CorruptObjectError(name, f"line {n}: records after the end")
        if kind in ("thread", "end"):
            if current is not None:  # the thread before is whole: check it, then hand it out
                yield _checked(current, name, n)
                current = None
            if kind == "end":
                ended = True
                continue
            try:
                counts = int(rec["checkpoints"]), int(rec["writes"])
                current = _Thread(str(rec["thread_id"]), *counts, [])
            except (KeyError, TypeError, ValueError) as exc:
                raise CorruptObjectError(name, f"line {n}: a damaged thread record") from exc
        elif kind in ("checkpoint", "write") and current is not None:
            needed = ("checkpoint_ns", "checkpoint_id") + (
                ("checkpoint", "metadata")
                if kind == "checkpoint"
                else ("task_id", "index", "channel", "value")
            )
            if rec.get("thread_id") != current.thread_id or any(k not in rec for k in needed):
                raise CorruptObjectError(name, f"line {n}: a damaged {kind} record")
            current.records.append(rec)
        else:
            raise CorruptObjectError(name, f"line {n}: unexpected record kind {kind!r}")
    if not ended:
        what = f"thread {current.thread_id!r} is incomplete" if current else "the end is missing"
        raise CorruptObjectError(name, f"the file is cut off: {what}")


def _checked(thread: _Thread, name: str, n: int) -> _Thread:
    """A thread's records, checked whole before any of it is imported: the counts its
    header announced, each checkpoint once, each write once and right after its own
    checkpoint."""
    where = f"thread {thread.thread_id!r} (before line {n})"
    cks = [r for r in thread.records if r["kind"] == "checkpoint"]
    writes = len(thread.records) - len(cks)
    if (len(cks), writes) != (thread.checkpoints, thread.writes):
        raise CorruptObjectError(
            name,
            f"{where} has {len(cks)} checkpoints and {writes} writes, its header says "
            f"{thread.checkpoints} and {thread.writes}: the file is cut off or damaged",
        )
    seen: set[tuple[str, str]] = set()
    slots: set[tuple[str, str, str, int]] = set()
    last: tuple[str, str] | None = None
    for r in thread.records:
        at = (str(r["checkpoint_ns"]), str(r["checkpoint_id"]))
        if r["kind"] == "checkpoint":
            if at in seen:
                raise CorruptObjectError(name, f"{where}: checkpoint {at[1]} appears twice")
            seen.add(at)
            last = at
            continue
        slot = (*at, str(r["task_id"]), int(r["index"]))
        if at != last or slot in slots:
            raise CorruptObjectError(
                name, f"{where}: a write of checkpoint {at[1]} is out of place or repeated"
            )
        slots.add(slot)
    return thread


class _Versions:
    """Channel versions rewritten in the target saver's own form.

    Savers pad the counter of a version differently (LangGraph's own and this library
    to 32 digits, this library before 0.1 to 12, InMemorySaver's and others' ints) and
    LangGraph compares versions as strings: a thread carried over as
    it was would have its next version sort below the ones it holds, and its graph
    would never run a node again. Every version is rewritten with the target's padding.
    """

    def __init__(self, saver: BaseCheckpointSaver[Any]) -> None:
        sample = saver.get_next_version(None, None)
        self.as_int = isinstance(sample, int)
        counter = str(sample).split(".", 1)[0]
        self.width = len(counter) if counter.isdigit() else 0

    def one(self, version: Any) -> Any:
        if isinstance(version, bool) or not isinstance(version, (str, int, float)):
            return version
        text = str(version)
        counter, dot, rest = text.partition(".")
        if not counter.isdigit():
            return version
        if self.as_int:
            return int(counter)
        if isinstance(version, (int, float)):
            return f"{int(counter):0{self.width}}" if self.width else str(int(counter))
        return f"{int(counter):0{self.width}}{dot}{rest}" if self.width else text

    def checkpoint(self, checkpoint: dict[str, Any]) -> dict[str, Any]:
        out = dict(checkpoint)
        out["channel_versions"] = {
            ch: self.one(v) for ch, v in (checkpoint.get("channel_versions") or {}).items()
        }
        out["versions_seen"] = {
            node: {ch: self.one(v) for ch, v in seen.items()}
            for node, seen in (checkpoint.get("versions_seen") or {}).items()
        }
        return out


async def _import_thread(side: _Saver, thread: _Thread) -> Report:
    serde = side.serde
    versioned = _Versions(side.saver)
    versions: dict[tuple[str, str], dict[str, Any]] = {}
    namespaces: set[str] = set()
    checkpoints = writes = 0
    pending: list[dict[str, Any]] = []

    async def flush() -> None:
        nonlocal writes
        while pending:  # all of one checkpoint (checked): grouped by task
            first = pending[0]
            task = [w for w in pending if w["task_id"] == first["task_id"]]
            for w in task:
                pending.remove(w)
            task.sort(key=lambda w: int(w["index"]))
            config = _config(thread.thread_id, first["checkpoint_ns"], first["checkpoint_id"])
            values = [
                (
                    str(w["channel"]),
                    _untyped(serde, w["value"], f"a write of {first['checkpoint_id']}"),
                )
                for w in task
            ]
            await side.call("put_writes", config, values, str(first["task_id"]))
            writes += len(values)

    for rec in thread.records:
        if rec["kind"] == "write":
            pending.append(rec)
            continue
        await flush()
        ns, cid = str(rec["checkpoint_ns"]), str(rec["checkpoint_id"])
        where = f"checkpoint {cid} of thread {thread.thread_id!r}"
        checkpoint = _untyped(serde, rec["checkpoint"], where)
        metadata = _untyped(serde, rec["metadata"], where)
        if not isinstance(checkpoint, dict) or checkpoint.get("id") != cid:
            raise CorruptObjectError(where, "its checkpoint record does not hold that checkpoint")
        checkpoint = versioned.checkpoint(checkpoint)
        parent = rec.get("parent_checkpoint_id")
        mine = dict(checkpoint.get("channel_versions") or {})
        before = versions.get((ns, str(parent)), {}) if parent is not None else {}
        new_versions = {ch: v for ch, v in mine.items() if before.get(ch) != v}
        await side.call(
            "put", _config(thread.thread_id, ns, parent), checkpoint, metadata, new_versions
        )
        versions[(ns, cid)] = mine
        namespaces.add(ns)
        checkpoints += 1
    await flush()
    return Report(threads=1, namespaces=len(namespaces), checkpoints=checkpoints, writes=writes)


def _config(thread: str, ns: str, cid: str | None) -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if cid is not None:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


# ------------------------------------------------------------------ migration
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


# --------------------------------------------------------------------- files
class _opened:
    """A path opened (gzip for ``.gz``) and closed, or a file object used as it is."""

    def __init__(self, file: Target, mode: str) -> None:
        self.file, self.mode, self.own = file, mode, False

    def __enter__(self) -> IO[bytes]:
        if isinstance(self.file, (str, os.PathLike)):
            path = Path(self.file)
            self.own = True
            self.handle = cast(
                IO[bytes],
                gzip.open(path, self.mode) if path.suffix == ".gz" else open(path, self.mode),
            )
            return self.handle
        return self.file

    def __exit__(self, *exc: object) -> None:
        if self.own:
            self.handle.close()


def _line(record: dict[str, Any]) -> bytes:
    return orjson.dumps(record) + b"\n"


def _record(raw: bytes, name: str, n: int) -> dict[str, Any]:
    try:
        rec = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise CorruptObjectError(name, f"line {n} is not JSON: {exc}") from exc
    if not isinstance(rec, dict):
        raise CorruptObjectError(name, f"line {n} is not a record")
    return rec


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _producer() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"langgraph-s3 {version('langgraph-s3')}"
    except PackageNotFoundError:
        return "langgraph-s3"
