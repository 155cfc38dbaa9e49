"""Reading an export file: every record checked, every value decoded, a thread at a time."""

from __future__ import annotations

import base64
import gzip
import zlib
from collections.abc import Iterable, Iterator
from typing import Any, NoReturn, cast

import orjson

from langgraph_s3.checkpoint.transfer.common import (
    FORMAT,
    VERSION,
    Put,
    PutWrites,
    SaverSide,
    ThreadRecords,
    Versions,
    config_of,
)
from langgraph_s3.checkpoint.transfer.sealed import skipped_of
from langgraph_s3.core.report import Report
from langgraph_s3.errors import (
    CorruptExportError,
    NewerFormatError,
)


class ExportReader:
    """An export's lines as checked threads: every failure a CorruptExportError
    (or NewerFormatError) naming the line, the thread and what to do."""

    def __init__(self, side: SaverSide, name: str) -> None:
        self.name, self.serde, self.versioned = name, side.serde, Versions(side.saver)
        self.line = 0
        self.within = ""  # ", thread 'x'" while a thread's records are read

    def bad(self, reason: str) -> CorruptExportError:
        return CorruptExportError(self.name, reason)

    def threads(self, src: Iterable[bytes]) -> Iterator[ThreadRecords]:
        """Each thread once all its records were read and checked."""
        records = self.records(src)
        first = next(records, None)
        if first is None:
            raise self.bad(f"the file is empty: not a {FORMAT} file")
        self.header(first)
        current: Building | None = None
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
                self.end(rec, counts + skipped_of(src))
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

    def records(self, src: Iterable[bytes]) -> Iterator[dict[str, Any]]:
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

    def thread(self, rec: dict[str, Any], seen: set[str]) -> Building:
        field = RecordFields(self, rec, "thread record")
        tid = field.string("thread_id")
        if tid in seen:
            raise self.bad(f"line {self.line}: thread {tid!r} appears twice in the file")
        seen.add(tid)
        field.where = f"line {self.line} (the thread record of {tid!r})"
        checkpoints, writes = field.count("checkpoints"), field.count("writes")
        if not checkpoints:
            raise self.bad(f"line {self.line}: thread {tid!r} has no checkpoints")
        return Building(self, tid, checkpoints, writes)

    def end(self, rec: dict[str, Any], counts: Report) -> None:
        field = RecordFields(self, rec, "end record")
        said = (field.count("threads"), field.count("checkpoints"), field.count("writes"))
        held = (counts.threads, counts.checkpoints, counts.writes)
        if said != held:
            raise self.bad(
                f"line {self.line}: the end record counts {said[0]} threads, {said[1]} "
                f"checkpoints and {said[2]} writes, the file holds {held[0]}, {held[1]} and "
                f"{held[2]}: whole threads were lost or added; export it again"
            )

    def value(self, field: RecordFields, key: str, what: str) -> Any:
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


class RecordFields:
    """One record's fields, each checked for its type as it is read."""

    def __init__(self, reader: ExportReader, rec: dict[str, Any], what: str) -> None:
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


class Building:
    """A thread's records as they are read: checked, decoded, and turned into the
    calls that will write them (no call is made here)."""

    def __init__(self, reader: ExportReader, thread_id: str, checkpoints: int, writes: int) -> None:
        self.reader, self.thread_id, self.line = reader, thread_id, reader.line
        self.announced = (checkpoints, writes)
        self.calls: list[Put | PutWrites] = []
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
        field = RecordFields(self.reader, rec, f"thread {self.thread_id!r}, a {kind} record")
        if (tid := field.string("thread_id")) != self.thread_id:
            raise self.bad(f"a {kind} record of thread {tid!r} among this thread's records")
        at = (field.string("checkpoint_ns"), field.string("checkpoint_id"))
        if kind == "checkpoint":
            self.checkpoint(field, at)
        else:
            self.write(field, at)

    def checkpoint(self, field: RecordFields, at: tuple[str, str]) -> None:
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
        config = config_of(self.thread_id, ns, parent)
        self.calls.append(Put(config, checkpoint, metadata, new_versions))
        self.versions[at], self.last = mine, at
        self.namespaces.add(ns)
        self.checkpoints += 1

    def write(self, field: RecordFields, at: tuple[str, str]) -> None:
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
            self.calls.append(PutWrites(config_of(self.thread_id, ns, cid), values, task))
        self.tasks = {}

    def finish(self) -> ThreadRecords:
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
        return ThreadRecords(self.thread_id, self.line, self.calls, report)
