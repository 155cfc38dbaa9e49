"""What export and import share: either side of a transfer as a saver, the records, the file."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import os
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, cast

import orjson
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_s3.checkpoint.transfer.staged import InPlace, Stage, Staged
from langgraph_s3.core.report import Report

FORMAT = "langgraph-checkpoint-export"
VERSION = 1
"""The export format's version: readers of this library read every version up to it."""
EXPORT_ATTEMPTS = 8
"""Reads of one thread before an export gives up on a thread maintenance keeps changing."""
SETTLE_POLL = 0.25
"""Seconds between looks at a deleted thread's items while an old life's call holds
them (``SaverSide.settled``)."""

Target = str | os.PathLike[str] | IO[bytes]
"""A path (``.gz``: gzip) or a binary file object."""


class SaverSide:
    """One saver, through its async methods or, lacking them, its sync ones."""

    def __init__(self, saver: BaseCheckpointSaver[Any]) -> None:
        self.saver = saver
        self.serde: SerializerProtocol = saver.serde

    async def listing(self, config: RunnableConfig | None) -> AsyncGenerator[CheckpointTuple, None]:
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
        reads = getattr(getattr(self.saver, "manifest", None), "reads", None)
        namespaces = getattr(reads, "namespaces", None)
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
        read = getattr(getattr(manifest, "reads", None), "read", None)
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

    def stage(self, thread_id: str, upto: str) -> Stage:
        """Where an import writes a thread (its newest checkpoint id ``upto``). Ours:
        aside, published whole (``Staged``); others: in place, deleted on failure."""
        if getattr(self.saver, "manifest", None) is None:
            return InPlace(self, thread_id)
        return Staged(self.saver, thread_id, upto)

    async def unfinished_deletion(self, thread_id: str) -> bool:
        """Whether a deletion of the thread began and never ended (its process killed
        between its tombstones and its release): the thread reads as absent, but the
        objects of the life it ended may still be there. Ours only (1 GetItem); False
        for other savers."""
        reads = getattr(getattr(self.saver, "manifest", None), "reads", None)
        read = getattr(reads, "read", None)
        if read is None:
            return False
        raw = await read(thread_id, "")
        return raw is not None and raw.tombstone and raw.lease_until > 0

    async def exists(self, thread_id: str) -> bool:
        """Whether the saver has a checkpoint of the thread (its listing closed at once:
        a refused import leaves nothing of it running or unawaited)."""
        async with contextlib.aclosing(
            self.listing({"configurable": {"thread_id": thread_id}})
        ) as listed:
            async for _ in listed:
                return True
        return False


def namespaces_of(thread: ThreadRecords) -> set[str]:
    """The namespaces an export's thread writes."""
    return {str(c.config["configurable"].get("checkpoint_ns", "")) for c in thread.calls}


def typed_field(serde: SerializerProtocol, value: Any) -> dict[str, str]:
    kind, data = serde.dumps_typed(value)
    return {"type": kind, "data": base64.b64encode(data).decode("ascii")}


@dataclass(slots=True)
class Put:
    config: RunnableConfig
    checkpoint: dict[str, Any]
    metadata: dict[str, Any]
    versions: dict[str, Any]


@dataclass(slots=True)
class PutWrites:
    config: RunnableConfig
    writes: list[tuple[str, Any]]
    task_id: str


@dataclass(slots=True)
class ThreadRecords:
    """One thread of an export, checked and decoded whole: the calls that write it."""

    thread_id: str
    line: int
    calls: list[Put | PutWrites]
    report: Report


def ns_of(config: RunnableConfig) -> str:
    return str(config["configurable"].get("checkpoint_ns", ""))


class Versions:
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


def config_of(thread: str, ns: str, cid: str | None) -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if cid is not None:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


class opened:
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


def file_name(file: Target) -> str:
    """How errors name the file: its path, a file object's name, or "the export"."""
    if isinstance(file, (str, os.PathLike)):
        return str(file)
    name = getattr(file, "name", None)
    return name if isinstance(name, str) else "the export"


def json_line(record: dict[str, Any]) -> bytes:
    return orjson.dumps(record) + b"\n"


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def producer_of() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"langgraph-s3 {version('langgraph-s3')}"
    except PackageNotFoundError:
        return "langgraph-s3"
