"""The two ports with a yield point at every request: the in-memory fakes, each request
held at the scheduler's gate (``Scheduler.request``) until the seed picks it.

The fakes' own logic (conditions, listings, the manifest's decisions) is untouched:
only ``Requester.request``, the one place every fake request passes through, is
replaced, and the public calls name their target (a key, a thread) for the trace.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langgraph_s3.aws.stats import RequestStats
from langgraph_s3.checkpoint.erasure import ERASED
from langgraph_s3.core.keys import decode, parse_checkpoint_tail
from langgraph_s3.core.records import SIGNED_REQUEST_SECONDS, Listed
from langgraph_s3.core.tasks import permit
from langgraph_s3.errors import ServiceError
from langgraph_s3.manifest import Manifest
from langgraph_s3.manifest.conditions import Change, Cond, TxPut, TxWrite
from langgraph_s3.manifest.decide import LATE_MARK
from langgraph_s3.manifest.objects import ObjectTable
from langgraph_s3.manifest.objects import keys as object_keys
from langgraph_s3.manifest.stage_items import STAGE_MARK
from langgraph_s3.manifest.table import Item
from langgraph_s3.testing.fakes import (
    MemoryBucket,
    MemoryManifest,
    MemoryObjectStore,
    MemoryTable,
    MemoryTableClient,
)

from .checks import DEPLOYMENT, LAYOUT
from .loop import Process, Scheduler

WRITES = frozenset(
    {
        "s3.PutObject",
        "s3.CopyObject",
        "s3.DeleteObjects",
        "s3.DeleteObject",
        "dynamodb.UpdateItem",
        "dynamodb.PutItem",
        "dynamodb.DeleteItem",
    }
)
"""Requests that change state: only these may have their answer lost."""

ROOT = LAYOUT.manifest()

_TARGET: contextvars.ContextVar[str] = contextvars.ContextVar("sim_target", default="*")


@contextlib.contextmanager
def _target(name: str) -> Iterator[None]:
    token = _TARGET.set(name)
    try:
        yield
    finally:
        _TARGET.reset(token)


class _Gate:
    """The replacement of ``Requester.request``: permit, count, then the gate."""

    sim: Scheduler
    proc: Process
    stats: RequestStats

    @contextlib.asynccontextmanager
    async def request(self, operation: str, nbytes: int = 0) -> AsyncIterator[None]:
        async with permit():
            attempt = self.stats.sent(operation, nbytes)
            try:
                async with self.sim.request(
                    self.proc, operation, _TARGET.get(), write=operation in WRITES
                ):
                    yield
            finally:
                self.stats.done(attempt)


class SimObjectStore(_Gate, MemoryObjectStore):
    """A :class:`MemoryObjectStore` whose every request is a yield point."""

    def __init__(
        self, bucket: MemoryBucket, sim: Scheduler, proc: Process, *, cache_bytes: int = 0
    ) -> None:
        super().__init__(bucket, cache_bytes=cache_bytes, yields=0)
        self.sim, self.proc = sim, proc

    async def put(self, key: str, body: bytes, **kw: Any) -> str | None:
        with _target(self._name(key)):
            out = await super().put(key, body, **kw)
        if out is None and body != ERASED:
            there = self.data.objects.get(key)
            if there is not None and there.body == ERASED:
                self.sim.tally["a PUT refused by an erasure marker"] += 1
        if out is not None:
            self._another_writers_copy(key)
        if self.sim.on_put is not None:
            self.sim.on_put(self.proc, key, body, out)
        return out

    def _name(self, key: str) -> str:
        """How a request's target shows in the trace and to the checks: its key."""
        return key

    def _another_writers_copy(self, key: str) -> None:
        """Count a checkpoint's object stored by another process than its writer, when
        that writer crashed, froze or was reaped (a held copy it left, settled or
        handed back by a later commit)."""
        parts = key.rsplit("/", 2)
        if len(parts) < 3 or parts[1] != "c":
            return
        try:
            cid = parse_checkpoint_tail(key, parts[2]).checkpoint_id
        except ValueError:
            return
        writer = self.sim.put_by.get(cid)
        if writer is None or writer is self.proc:
            return
        state = "a reaped" if writer.reaped else "a frozen" if writer.asleep else ""
        state = state or ("a crashed" if writer.dead else "")
        if state:
            self.sim.tally[f"stored the copy of {state} writer"] += 1

    async def copy(self, source_key: str, target_key: str, *, if_match: str | None = None) -> None:
        with _target(self._name(target_key)):
            await super().copy(source_key, target_key, if_match=if_match)

    async def delete(self, keys: Sequence[str]) -> int:
        with _target(f"{self._name(keys[0])} (+{len(keys) - 1})" if keys else "-"):
            return await super().delete(keys)

    async def delete_if_match(self, key: str, etag: str) -> bool:
        with _target(self._name(key)):
            return await super().delete_if_match(key, etag)

    async def get_with_etag(self, key: str) -> tuple[bytes | None, str | None]:
        with _target(self._name(key)):
            return await super().get_with_etag(key)

    async def get_range(self, key: str, start: int, length: int) -> bytes | None:
        with _target(self._name(key)):
            return await super().get_range(key, start, length)

    async def list_pages(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[list[Listed]]:
        pages = super().list_pages(prefix, start_after=start_after, page_size=page_size)
        try:
            while True:
                with _target(self._name(prefix)):
                    try:
                        page = await pages.__anext__()
                    except StopAsyncIteration:
                        return
                yield page
        finally:
            aclose = getattr(pages, "aclose", None)
            if aclose is not None:
                await aclose()


class SimTable(_Gate, MemoryTableClient):
    """A :class:`MemoryTableClient` whose every request is a yield point, named by
    the thread its key is of (``*`` for the deployment's listings and run index)."""

    def __init__(self, table: MemoryTable, sim: Scheduler, proc: Process) -> None:
        super().__init__(table, yields=0)
        self.sim, self.proc = sim, proc

    async def get(self, key: Item) -> Item | None:
        with _target(thread_of(key)):
            return await super().get(key)

    async def get_many(self, keys: Sequence[Item]) -> list[Item]:
        with _target(thread_of(keys[0]) if keys else "*"):
            return await super().get_many(keys)

    async def query(self, pk: str) -> AsyncIterator[list[Item]]:
        pages = super().query(pk)
        while True:
            with _target(thread_of({"pk": {"S": pk}})):
                try:
                    page = await pages.__anext__()
                except StopAsyncIteration:
                    return
            yield page

    async def update(
        self, key: Item, change: Change, *, when: Cond | None = None, old: bool = False
    ) -> Item | None:
        with _target(thread_of(key)):
            return await super().update(key, change, when=when, old=old)

    async def put(self, item: Item, *, when: Cond | None = None) -> None:
        with _target(thread_of(item)):
            await super().put(item, when=when)

    async def delete(self, key: Item, *, when: Cond | None = None) -> None:
        with _target(thread_of(key)):
            await super().delete(key, when=when)

    async def transact(self, writes: Sequence[TxWrite]) -> None:
        first = writes[0] if writes else None
        key = {} if first is None else first.item if isinstance(first, TxPut) else first.key
        with _target(thread_of(key)):
            await super().transact(writes)


def thread_of(key: Item) -> str:
    """The raw id of the thread a key is of: its own partition, its import's stage
    or claim, or its late-pass record; ``*`` for the marker and a run's index."""
    pk = str(key.get("pk", {}).get("S", ""))
    if not pk.startswith(DEPLOYMENT):
        return "*"
    rest = pk[len(DEPLOYMENT) :]
    for mark in (STAGE_MARK, LATE_MARK):
        if rest.startswith(mark):
            rest = rest[len(mark) :].split("/", 1)[0]
            break
    if not rest or "/" in rest or rest.startswith("~"):
        return "*"
    return decode(rest)


class SimManifestObjects(SimObjectStore):
    """The object manifest's requests (``manifest="s3"``), each a yield point named
    ``manifest:<thread>`` (``manifest:*`` for the deployment's own items), so the
    checks see a manifest write of a thread as DynamoDB's. One held at the gate (its
    process frozen) longer than S3 accepts a signed request is refused at release, as
    S3 refuses it (403 RequestTimeTooSkewed): nothing applied."""

    @contextlib.asynccontextmanager
    async def request(self, operation: str, nbytes: int = 0) -> AsyncIterator[None]:
        signed = self.sim.clock.time()
        async with super().request(operation, nbytes):
            if self.sim.clock.time() - signed > SIGNED_REQUEST_SECONDS:
                self.sim.tally["a manifest request refused as signed too long ago"] += 1
                self.proc.injected += 1  # the freeze's doing: a failure it may cause
                raise ServiceError(
                    "RequestTimeTooSkewed: the request's signature is too old",
                    code="RequestTimeTooSkewed",
                    status=403,
                )
            yield

    def _name(self, key: str) -> str:
        found = object_keys.split(ROOT, DEPLOYMENT, key)
        if found is None:  # a decision, the format, a listing of the whole manifest
            return "manifest:*"
        return f"manifest:{thread_of({'pk': {'S': found[0]}})}"


def sim_manifest(table: Any, sim: Scheduler, proc: Process, **kw: Any) -> Any:
    """The library's manifest, unchanged, on a :class:`SimTable` of ``proc``; or, in a
    world whose manifest is in the bucket, on its objects through the gate."""
    if getattr(table, "objects", False):
        store = SimManifestObjects(table.bucket, sim, proc)
        objects = ObjectTable(store, ROOT, strip=DEPLOYMENT)
        return Manifest(objects, **kw)
    return MemoryManifest(table, client=SimTable(table, sim, proc), **kw)


class ManifestTally(logging.Handler):
    """Counts the manifest's rare moments from its debug log (contended commits,
    crowded items cleared, imports published, refused or dropped; a listing's page
    listed before its manifest read, listed again) into the tally of
    the world running: they happen inside a role, where no request shows them."""

    EVENTS = frozenset(
        {
            "a contended commit",
            "a crowded item cleared",
            "an import published",
            "an import not published",
            "a dead import's stage dropped",
            "a failed import's stage dropped",
            "a listed page missed a copy that left the item",
            "a listed page predated its latest",
        }
    )

    def __init__(self, sim: Scheduler) -> None:
        super().__init__(logging.DEBUG)
        self.sim = sim

    def emit(self, record: logging.LogRecord) -> None:
        said = record.getMessage().split(":", 1)[0]
        if said in self.EVENTS:
            self.sim.tally[said] += 1


@contextlib.contextmanager
def tallied(sim: Scheduler) -> Iterator[None]:
    """While a world runs: the manifest's debug events go to its tally."""
    logs = [logging.getLogger(f"langgraph_s3.{name}") for name in ("manifest", "listing")]
    handler, levels = ManifestTally(sim), [log.level for log in logs]
    for log in logs:
        log.addHandler(handler)
        log.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        for log, level in zip(logs, levels, strict=True):
            log.removeHandler(handler)
            log.setLevel(level)
