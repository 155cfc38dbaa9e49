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
and imports a thread only once all its records were read and checked, every value
decoded included: a truncated or damaged file imports the whole threads before the
damage, never half a thread (:class:`~langgraph_s3.errors.CorruptExportError`
names the line, the thread and the threads imported).

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
import zlib
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, NoReturn, cast

import orjson
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_s3.checkpoint.writing import ROOTS
from langgraph_s3.core.report import Progress, Report
from langgraph_s3.errors import (
    ConflictError,
    CorruptExportError,
    NewerFormatError,
    ThreadExistsError,
)

__all__ = ["FORMAT", "VERSION", "aexport_threads", "aimport_threads", "amigrate"]

FORMAT = "langgraph-checkpoint-export"
VERSION = 1
"""The export format's version: readers of this library read every version up to it."""
EXPORT_ATTEMPTS = 8
"""Reads of one thread before an export gives up on a thread maintenance keeps changing."""
SETTLE_POLL = 0.25
"""Seconds between looks at a deleted thread's items while an old life's call holds
them (``_Saver.settled``)."""

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

    async def layout_of(self, thread_id: str) -> object:
        """What decides which objects a thread's history is made of, for a saver that
        can tell (ours: each namespace's life, floor, removals, pack and count of
        packings and unpackings, one Query); None for others. Equal before and after a
        read: the read is of one moment (a pack and an unpack between leave the pack
        as it was, not the count)."""
        manifest = getattr(self.saver, "manifest", None)
        namespaces = getattr(manifest, "namespaces", None)
        if namespaces is None:
            return None
        entries = await namespaces(thread_id)
        return sorted(
            (e.checkpoint_ns, e.life, e.floor, sorted(e.gone), e.pack, e.packings) for e in entries
        )

    async def settled(self, thread_id: str, namespaces: set[str]) -> None:
        """After a deletion, before writing the thread again under the same keys (an
        import's replace reuses its ids): wait while a call begun in the old life may
        still delete or write objects there (a prune's, a packing's or an unpacking's
        mark on a tombstone: a new life's commit waits for it, but the objects of its
        puts go out beside that commit). Ours only (1 GetItem per namespace, and per
        poll while held); nothing for other savers."""
        manifest = getattr(self.saver, "manifest", None)
        read = getattr(manifest, "read", None)
        if read is None or manifest is None:
            return
        for ns in sorted(namespaces | {""}):
            while True:
                raw = await read(thread_id, ns)
                now = manifest.now()
                until = raw.held_until(now) if raw is not None and raw.tombstone else 0.0
                if until <= now:
                    break
                await asyncio.sleep(min(until - now, SETTLE_POLL))

    async def exists(self, thread_id: str) -> bool:
        async for _ in self.listing({"configurable": {"thread_id": thread_id}}):
            return True
        return False


def _namespaces(thread: _Thread) -> set[str]:
    """The namespaces an export's thread writes."""
    return {str(c.config["configurable"].get("checkpoint_ns", "")) for c in thread.calls}


def _typed(serde: SerializerProtocol, value: Any) -> dict[str, str]:
    kind, data = serde.dumps_typed(value)
    return {"type": kind, "data": base64.b64encode(data).decode("ascii")}


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
    """One thread's records, as its history stood at one moment: a maintenance call
    that removes or moves its objects while it is read (a rollback, a prune, a
    packing) makes it read the thread again, from the start."""
    for _ in range(EXPORT_ATTEMPTS):
        before = await side.layout_of(thread)
        with tempfile.SpooledTemporaryFile(max_size=32 * 1024 * 1024) as spool:
            index = await _spool_thread(side, thread, spool)
            if before == await side.layout_of(thread):
                return _write_thread(thread, index, spool, out)
    raise ConflictError(
        f"thread {thread!r} was pruned, rolled back or packed again and again while it was "
        f"exported ({EXPORT_ATTEMPTS} times): export it again"
    )


async def _spool_thread(
    side: _Saver, thread: str, spool: IO[bytes]
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
    return index


def _write_thread(
    thread: str, index: list[tuple[str, str, int, int, int]], spool: IO[bytes], out: _Counted
) -> Report:
    """A spooled thread to the export: its header, then its records, oldest first."""
    if not index:
        return Report(skipped=1)
    index.sort(key=lambda e: (e[0] != "", e[0], e[1]))  # root first; oldest first
    writes = sum(e[4] for e in index)
    out.write(
        _line({"kind": "thread", "thread_id": thread, "checkpoints": len(index), "writes": writes})
    )
    for _, _, start, length, _ in index:
        spool.seek(start)
        out.write(spool.read(length))
    return Report(
        threads=1, namespaces=len({e[0] for e in index}), checkpoints=len(index), writes=writes
    )


# ------------------------------------------------------------------- import
@dataclass(slots=True)
class _Put:
    config: RunnableConfig
    checkpoint: dict[str, Any]
    metadata: dict[str, Any]
    versions: dict[str, Any]


@dataclass(slots=True)
class _PutWrites:
    config: RunnableConfig
    writes: list[tuple[str, Any]]
    task_id: str


@dataclass(slots=True)
class _Thread:
    """One thread of an export, checked and decoded whole: the calls that write it."""

    thread_id: str
    line: int
    calls: list[_Put | _PutWrites]
    report: Report


async def aimport_threads(
    saver: BaseCheckpointSaver[Any],
    file: Target,
    *,
    replace: bool = False,
    progress: Progress | None = None,
) -> Report:
    """Read an export into ``saver``, thread by thread, each all or nothing.

    A thread is read and checked whole before its first write: its structure, the
    type of every field, and every value decoded by ``saver``'s serializer as the
    writes will use it (one thread's decoded values are held in memory; the file is
    streamed). A failure while writing a thread (an AWS error after some of its
    puts) deletes what was written of it before the error propagates (a note on
    the exception says so, or that the removal failed too). Threads earlier in the
    file stay imported: every error names them (``imported`` on our errors, a note
    on others). Cost: the target's reads to tell whether each thread exists, then
    one ``put`` per checkpoint and one ``put_writes`` per task of each checkpoint.

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
    side = _Saver(saver)
    name = _name(file)
    total = Report()
    imported: list[str] = []
    try:
        with _opened(file, "rb") as src:
            for thread in _Reader(side, name).threads(src):
                replaced = False
                if await side.exists(thread.thread_id):
                    if not replace:
                        raise ThreadExistsError(
                            thread.thread_id, name, line=thread.line, imported=(*imported,)
                        )
                    await side.call("delete_thread", thread.thread_id)
                    await side.settled(thread.thread_id, _namespaces(thread))
                    replaced = True
                total = total + await _write(side, thread, replaced)
                imported.append(thread.thread_id)
                if progress is not None:
                    progress(total, len(imported), len(imported))
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


async def _write(side: _Saver, thread: _Thread, replaced: bool) -> Report:
    """Write a checked thread; on a failure, delete what was written of it.

    A checkpoint whose parent is not in the file (a pruned thread's oldest) begins the
    imported life: the saver keeps its parent id, as a pruned thread's floor does."""
    puts = [c for c in thread.calls if isinstance(c, _Put)]
    inside = {(_ns_of(c.config), str(c.checkpoint["id"])) for c in puts}
    roots = frozenset(
        str(c.checkpoint["id"])
        for c in puts
        if (parent := c.config["configurable"].get("checkpoint_id"))
        and (_ns_of(c.config), str(parent)) not in inside
    )
    token = ROOTS.set(roots)
    try:
        for call in thread.calls:
            if isinstance(call, _Put):
                await side.call("put", call.config, call.checkpoint, call.metadata, call.versions)
            else:
                await side.call("put_writes", call.config, call.writes, call.task_id)
    except Exception as exc:
        tid = thread.thread_id
        earlier = " (its earlier copy was deleted: replace)" if replaced else ""
        try:
            await side.call("delete_thread", tid)
        except Exception as again:
            exc.add_note(
                f"thread {tid!r} may be partly written{earlier}, and removing it failed too "
                f"({type(again).__name__}: {again}): import it again with replace"
            )
        else:
            exc.add_note(f"what was written of thread {tid!r} was removed{earlier}")
        raise
    finally:
        ROOTS.reset(token)
    return thread.report


def _ns_of(config: RunnableConfig) -> str:
    return str(config["configurable"].get("checkpoint_ns", ""))


class _Reader:
    """An export's lines as checked threads: every failure a CorruptExportError
    (or NewerFormatError) naming the line, the thread and what to do."""

    def __init__(self, side: _Saver, name: str) -> None:
        self.name, self.serde, self.versioned = name, side.serde, _Versions(side.saver)
        self.line = 0
        self.within = ""  # ", thread 'x'" while a thread's records are read

    def bad(self, reason: str) -> CorruptExportError:
        return CorruptExportError(self.name, reason)

    def threads(self, src: IO[bytes]) -> Iterator[_Thread]:
        """Each thread once all its records were read and checked."""
        records = self.records(src)
        first = next(records, None)
        if first is None:
            raise self.bad(f"the file is empty: not a {FORMAT} file")
        self.header(first)
        current: _Building | None = None
        seen: set[str] = set()
        counts = Report()
        for rec in records:
            kind = rec.get("kind")
            last = None
            if kind in ("thread", "end") and current is not None:
                last = current.finish()  # the thread before is whole
                counts = counts + last.report
                current = None
            if kind == "thread":
                if last is not None:
                    yield last
                current = self.thread(rec, seen)
                self.within = f", thread {current.thread_id!r}"
            elif kind == "end":  # the last thread waits for the counts and gzip's checksum
                self.end(rec, counts)
                for _ in records:  # blank lines only
                    raise self.bad(f"line {self.line}: a record after the end record")
                if last is not None:
                    yield last
                return
            elif kind in ("checkpoint", "write") and current is not None:
                current.add(rec, kind)
            elif kind in ("checkpoint", "write"):
                raise self.bad(f"line {self.line}: a {kind} record before any thread record")
            else:
                raise self.bad(f"line {self.line}: unknown record kind {kind!r}")
        where = f" inside thread {current.thread_id!r}" if current is not None else ""
        raise self.bad(
            f"the file ends after line {self.line}{where} without its end record: it was cut "
            "off (an interrupted export or copy): export or copy it again whole"
        )

    def records(self, src: IO[bytes]) -> Iterator[dict[str, Any]]:
        """The non-blank lines as JSON objects; gzip's failures named."""
        lines = iter(src)
        while True:
            try:
                raw = next(lines, None)
            except EOFError as exc:  # gzip: the stream stops before its end marker
                raise self.bad(
                    f"the file is cut off inside its gzip data (after line {self.line}"
                    f"{self.within}): export or copy it again whole"
                ) from exc
            except (gzip.BadGzipFile, zlib.error) as exc:
                if self.line == 0 and "Not a gzipped file" in str(exc):
                    raise self.bad(
                        f"it is not gzip-compressed ({exc}) though its name ends in .gz: "
                        "rename it without .gz"
                    ) from exc
                raise self.bad(
                    f"its gzip data is damaged after line {self.line}{self.within} ({exc}): "
                    "export or copy it again"
                ) from exc
            if raw is None:
                return
            self.line += 1
            if raw.strip():
                yield self.record(raw)

    def record(self, raw: bytes) -> dict[str, Any]:
        n, at = self.line, f"line {self.line}{self.within}"
        try:
            rec = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            if n == 1 and raw.startswith(b"\x1f\x8b"):
                raise self.bad(
                    "it is gzip-compressed: name it .gz, or decompress it (gunzip)"
                ) from exc
            if not raw.endswith(b"\n"):
                raise self.bad(
                    f"the file is cut off in its last line ({at}): export or copy it again whole"
                ) from exc
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as bad:
                raise self.bad(
                    f"{at}: not UTF-8 (byte {raw[bad.start]:#04x} at column "
                    f"{bad.start + 1}): the file is damaged or not an export"
                ) from exc
            raise self.bad(
                f"{at}: not JSON ({exc.msg} at column {exc.pos + 1}): the file is damaged"
            ) from exc
        if not isinstance(rec, dict):
            raise self.bad(f"{at}: a JSON {type(rec).__name__}, not an object (a record)")
        return rec

    def header(self, rec: dict[str, Any]) -> None:
        if rec.get("format") != FORMAT:
            raise self.bad(f"not a {FORMAT} file (its first line is {str(rec)[:80]})")
        version = rec.get("version")
        if type(version) is not int:  # True is an int to isinstance
            raise self.bad(f'line 1: the header\'s "version" is {version!r}, not an integer')
        if version > VERSION:
            raise NewerFormatError(self.name, f"{FORMAT} {version!r}", VERSION)
        if version < 1:
            raise self.bad(f"line 1: version {version} is no version of {FORMAT}")

    def thread(self, rec: dict[str, Any], seen: set[str]) -> _Building:
        field = _Fields(self, rec, "thread record")
        tid = field.string("thread_id")
        if tid in seen:
            raise self.bad(f"line {self.line}: thread {tid!r} appears twice in the file")
        seen.add(tid)
        field.where = f"line {self.line} (the thread record of {tid!r})"
        checkpoints, writes = field.count("checkpoints"), field.count("writes")
        if not checkpoints:
            raise self.bad(f"line {self.line}: thread {tid!r} has no checkpoints")
        return _Building(self, tid, checkpoints, writes)

    def end(self, rec: dict[str, Any], counts: Report) -> None:
        field = _Fields(self, rec, "end record")
        said = (field.count("threads"), field.count("checkpoints"), field.count("writes"))
        held = (counts.threads, counts.checkpoints, counts.writes)
        if said != held:
            raise self.bad(
                f"line {self.line}: the end record counts {said[0]} threads, {said[1]} "
                f"checkpoints and {said[2]} writes, the file holds {held[0]}, {held[1]} and "
                f"{held[2]}: whole threads were lost or added; export it again"
            )

    def value(self, field: _Fields, key: str, what: str) -> Any:
        """A ``{"type", "data"}`` value decoded by the target's serializer, as its
        write will hand it over."""
        value = field.get(key)
        kind = value.get("type") if isinstance(value, dict) else None
        data = value.get("data") if isinstance(value, dict) else None
        if not isinstance(kind, str) or not isinstance(data, str):
            field.wrong(key, value, 'a {"type": str, "data": base64} object')
        try:
            raw = base64.b64decode(data, validate=True)
        except ValueError as exc:
            raise self.bad(f"{field.where}: {what} is not base64 ({exc})") from exc
        try:
            return self.serde.loads_typed((kind, raw))
        except Exception as exc:  # a serializer raises what its decoder raises
            raise self.bad(
                f"{field.where}: {what} cannot be decoded by the target's serializer "
                f"({type(exc).__name__}: {str(exc)[:120]}): the file is damaged, or was "
                "written with a serializer the target lacks (encryption, custom types)"
            ) from exc


class _Fields:
    """One record's fields, each checked for its type as it is read."""

    def __init__(self, reader: _Reader, rec: dict[str, Any], what: str) -> None:
        self.reader, self.rec = reader, rec
        self.where = f"line {reader.line} ({what})"

    def get(self, key: str) -> Any:
        if key not in self.rec:
            raise self.reader.bad(f"{self.where}: the field {key!r} is missing")
        return self.rec[key]

    def wrong(self, key: str, value: Any, wanted: str) -> NoReturn:
        raise self.reader.bad(f"{self.where}: {key!r} is {repr(value)[:40]}, not {wanted}")

    def text(self, key: str, *, optional: bool = False) -> str | None:
        value = self.get(key)
        if not isinstance(value, str) and not (optional and value is None):
            self.wrong(key, value, "a string" + (" or null" if optional else ""))
        return value

    def string(self, key: str) -> str:
        return cast(str, self.text(key))

    def count(self, key: str) -> int:
        value = self.get(key)
        if type(value) is not int or value < 0:  # True is no count, nor is "0"
            self.wrong(key, value, "an integer from 0 up")
        return value


class _Building:
    """A thread's records as they are read: checked, decoded, and turned into the
    calls that will write them (no call is made here)."""

    def __init__(self, reader: _Reader, thread_id: str, checkpoints: int, writes: int) -> None:
        self.reader, self.thread_id, self.line = reader, thread_id, reader.line
        self.announced = (checkpoints, writes)
        self.calls: list[_Put | _PutWrites] = []
        self.versions: dict[tuple[str, str], dict[str, Any]] = {}  # of each checkpoint read
        self.children: dict[tuple[str, str], int] = {}  # a parent not read yet: its child's line
        self.last: tuple[str, str] | None = None
        self.tasks: dict[str, dict[int, tuple[str, Any]]] = {}  # the last checkpoint's writes
        self.namespaces: set[str] = set()
        self.checkpoints = self.writes = 0
        self.gap: str | None = None

    def bad(self, reason: str) -> CorruptExportError:
        return self.reader.bad(f"line {self.reader.line}, thread {self.thread_id!r}: {reason}")

    def add(self, rec: dict[str, Any], kind: str) -> None:
        field = _Fields(self.reader, rec, f"thread {self.thread_id!r}, a {kind} record")
        if (tid := field.string("thread_id")) != self.thread_id:
            raise self.bad(f"a {kind} record of thread {tid!r} among this thread's records")
        at = (field.string("checkpoint_ns"), field.string("checkpoint_id"))
        if kind == "checkpoint":
            self.checkpoint(field, at)
        else:
            self.write(field, at)

    def checkpoint(self, field: _Fields, at: tuple[str, str]) -> None:
        self.flush()
        ns, cid = at
        if self.checkpoints == self.announced[0]:
            raise self.bad(f"more checkpoints than the {self.announced[0]} its thread record says")
        if at in self.versions:
            raise self.bad(f"checkpoint {cid} appears twice")
        if at in self.children:
            raise self.bad(f"checkpoint {cid} comes after its child (line {self.children[at]})")
        parent = field.text("parent_checkpoint_id", optional=True)
        checkpoint = self.reader.value(field, "checkpoint", f"checkpoint {cid}")
        metadata = self.reader.value(field, "metadata", f"the metadata of checkpoint {cid}")
        if not isinstance(checkpoint, dict) or checkpoint.get("id") != cid:
            got = (
                f"checkpoint {str(checkpoint.get('id'))[:40]}"
                if isinstance(checkpoint, dict)
                else f"a {type(checkpoint).__name__}"
            )
            raise self.bad(f"the record of checkpoint {cid} holds {got}, not that checkpoint")
        for key in ("channel_values", "channel_versions", "versions_seen"):
            if not isinstance(checkpoint.get(key), dict):
                raise self.bad(f"checkpoint {cid} has no {key!r} mapping")
        if not all(isinstance(seen, dict) for seen in checkpoint["versions_seen"].values()):
            raise self.bad(f"checkpoint {cid}'s 'versions_seen' is not a mapping of mappings")
        if not isinstance(metadata, dict):
            raise self.bad(f"the metadata of checkpoint {cid} is a {type(metadata).__name__}")
        checkpoint = self.reader.versioned.checkpoint(checkpoint)
        mine = dict(checkpoint["channel_versions"])
        before: dict[str, Any] = {}
        if parent is not None:
            before = self.versions.get((ns, parent), {})
            if (ns, parent) not in self.versions:  # pruned away, or (an error) later
                self.children.setdefault((ns, parent), self.reader.line)
        new_versions = {ch: v for ch, v in mine.items() if before.get(ch) != v}
        config = _config(self.thread_id, ns, parent)
        self.calls.append(_Put(config, checkpoint, metadata, new_versions))
        self.versions[at], self.last = mine, at
        self.namespaces.add(ns)
        self.checkpoints += 1

    def write(self, field: _Fields, at: tuple[str, str]) -> None:
        if at != self.last:
            raise self.bad(
                f"a write of checkpoint {at[1]} is out of place: a checkpoint's writes "
                "follow its own record"
            )
        if self.writes == self.announced[1]:
            raise self.bad(f"more writes than the {self.announced[1]} its thread record says")
        task, index = field.string("task_id"), field.count("index")
        channel = field.string("channel")
        slots = self.tasks.setdefault(task, {})
        if index in slots:
            raise self.bad(f"write {index} of task {task!r} on checkpoint {at[1]} is repeated")
        value = self.reader.value(field, "value", f"write {index} of task {task!r}")
        slots[index] = (channel, value)
        self.writes += 1

    def flush(self) -> None:
        """The last checkpoint's writes, whole, as one ``put_writes`` per task."""
        if self.last is None:
            return
        ns, cid = self.last
        for task, slots in self.tasks.items():
            if sorted(slots) != list(range(len(slots))) and self.gap is None:
                self.gap = (  # told at the end: a write out of place explains it better
                    f"the writes of task {task!r} on checkpoint {cid} are numbered "
                    f"{sorted(slots)[:10]}, not from 0 on: some were lost"
                )
            values = [slots[i] for i in sorted(slots)]
            self.calls.append(_PutWrites(_config(self.thread_id, ns, cid), values, task))
        self.tasks = {}

    def finish(self) -> _Thread:
        self.flush()
        if self.gap is not None:
            raise self.reader.bad(f"thread {self.thread_id!r} (from line {self.line}): {self.gap}")
        if (self.checkpoints, self.writes) != self.announced:
            raise self.reader.bad(
                f"thread {self.thread_id!r} (from line {self.line}) has {self.checkpoints} "
                f"checkpoints and {self.writes} writes, its thread record says "
                f"{self.announced[0]} and {self.announced[1]}: records were lost; export it again"
            )
        report = Report(
            threads=1,
            namespaces=len(self.namespaces),
            checkpoints=self.checkpoints,
            writes=self.writes,
        )
        return _Thread(self.thread_id, self.line, self.calls, report)


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


def _name(file: Target) -> str:
    """How errors name the file: its path, a file object's name, or "the export"."""
    if isinstance(file, (str, os.PathLike)):
        return str(file)
    name = getattr(file, "name", None)
    return name if isinstance(name, str) else "the export"


def _line(record: dict[str, Any]) -> bytes:
    return orjson.dumps(record) + b"\n"


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _producer() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"langgraph-s3 {version('langgraph-s3')}"
    except PackageNotFoundError:
        return "langgraph-s3"
