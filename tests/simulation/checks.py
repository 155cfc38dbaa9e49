"""The checker: reads of the world by a fresh saver, and the invariants they must meet.

A check runs while the world is frozen (the scheduler releases nothing meanwhile) and
reads through the library itself, on the fakes without a gate: a new saver per read
(cold caches, no faults), one read per distinct raw state of a thread (cached by its
fingerprint). :class:`Checks` is a mixin of :class:`~.harness.World`.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import traceback
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from langgraph_s3.checkpoint.saver import AsyncS3Saver
from langgraph_s3.core.keys import Layout
from langgraph_s3.errors import CheckpointConflictError, CorruptObjectError, S3PersistenceError
from langgraph_s3.manifest import Manifest, deployment_key
from langgraph_s3.manifest.objects import ObjectTable
from langgraph_s3.testing.fakes import (
    MemoryBucket,
    MemoryManifest,
    MemoryObjectStore,
    MemoryTable,
    StoredObject,
)
from langgraph_s3.testing.graphs import norm

from .loop import Process, Scheduler, VirtualClock
from .model import LATEST_MOVERS, REMOVALS, Ckpt, Finding, Model, Op

BUCKET = "sim"
TABLE = "sim-manifest"
DEPLOYMENT = deployment_key(BUCKET, "")
LAYOUT = Layout("")
ROOT_SK = "~"
"""The sort key of a thread's root namespace item."""
WRITES = frozenset({"turn", "fork", "update"})
"""Operations that put checkpoints (LangGraph's own calls)."""
READ_ONLY = frozenset({"read-latest", "read-list", "read-state", "read-id", "export"})
"""Operations that change nothing: checked on their own results only."""
QUIET = frozenset({"update", "flush"})
"""The crowd's puts and the host's flushes: many, small, racing each other; the threads
they touch are read by the next other operation and at the end, not after each."""
MAX_OP_REQUESTS = 400
"""Requests one operation may make: more is unbounded progress (a finding)."""


def plain_saver(bucket: MemoryBucket, table: Any, ttl: int | None) -> AsyncS3Saver:
    """A saver on the fakes with no gate: the checker's (and the base world's)."""
    if getattr(table, "objects", False):  # the manifest in the bucket (manifest="s3")
        store = MemoryObjectStore(bucket, yields=0)
        objects = ObjectTable(store, LAYOUT.manifest(), strip=DEPLOYMENT)
        manifest = Manifest(objects, deployment=DEPLOYMENT, ttl_seconds=ttl)
        return AsyncS3Saver(bucket=BUCKET, object_store=store, manifest=manifest)
    return AsyncS3Saver(
        bucket=BUCKET,
        table=TABLE,
        object_store=MemoryObjectStore(bucket, yields=0),
        manifest=MemoryManifest(table, deployment=DEPLOYMENT, ttl_seconds=ttl, yields=0),
    )


def _latest_id(items: dict[tuple[str, str], dict[str, Any]], thread: str) -> str | None:
    item = items.get((DEPLOYMENT + thread, ROOT_SK)) or {}
    value = item.get("latest_id", {}).get("S")
    return None if value is None else str(value)


@dataclass
class RawState:
    """What the bucket and the table held of one thread at one step."""

    step: int
    time: float
    objects: dict[str, StoredObject]
    items: dict[tuple[str, str], dict[str, Any]]
    key: Hashable


@dataclass
class Watch:
    """The raw states a copy's or an export's source went through while it ran."""

    op: Op
    thread: str
    states: list[RawState] = field(default_factory=list)


class Seen(NamedTuple):
    """A checker's read of one thread."""

    history: list[tuple[str, str | None]]
    """(checkpoint id, parent id), as listed (newest first)."""
    values: dict[str, Any]
    error: BaseException | None

    @property
    def ids(self) -> set[str]:
        return {cid for cid, _ in self.history}


class Checks:
    """Observations and invariants (a mixin: the world provides the attributes)."""

    ttl: int | None
    clock: VirtualClock
    sim: Scheduler
    bucket: MemoryBucket
    table: MemoryTable
    model: Model
    threads: list[str]
    findings: list[Finding]
    checks: Counter[str]
    watches: list[Watch]
    _seen: dict[Hashable, Seen]
    _checked_step: int

    def _find(self, kind: str, message: str) -> None:
        self.findings.append(Finding(kind, self.sim.step, message))

    def _threads_of(self, op: Op) -> list[str]:
        if op.thread != "*":
            return [op.thread] + ([op.args["target"]] if op.kind == "copy" else [])
        return sorted({t for t, _ in self.model.ckpts} | set(self.threads))

    def _must(self, thread: str, step: int) -> list[Ckpt]:
        """The acknowledged checkpoints of ``thread`` that must be readable now."""
        self.model.expire(thread, step, self.clock.time())
        return self.model.must_exist(thread, step)

    # ------------------------------------------------------------ raw states
    def _relates(self, target: str, thread: str) -> bool:
        return target in ("*", thread, "manifest:*", f"manifest:{thread}") or target.startswith(
            (LAYOUT.thread(thread), LAYOUT.packs(thread))
        )

    def _applied(self, proc: Process, request: str, target: str) -> None:
        """After a write: the sources being copied or exported it touched are recorded."""
        for watch in self.watches:
            if self._relates(target, watch.thread):
                self._snapshot(watch)
        manifest = request.startswith("dynamodb.") or target.startswith("manifest:")
        if manifest and self.model.pending:
            self._commits(target.removeprefix("manifest:"))

    def _commits(self, target: str) -> None:
        """After a manifest write: the checkpoints being put that it committed."""
        tips: dict[str, set[str]] = {}
        for c in list(self.model.pending):
            if target not in ("*", c.thread):
                continue
            if c.thread not in tips:
                pk = DEPLOYMENT + c.thread
                tips[c.thread] = {
                    cid
                    for (p, _), item in self.table.items.items()
                    if p == pk
                    for cid in (
                        item.get("latest_id", {}).get("S"),
                        *item.get("heads", {}).get("SS", ()),
                    )
                    if cid
                }
            if c.cid in tips[c.thread]:
                c.committed = self.sim.step
                self.model.pending.discard(c)

    def _stepped(self) -> None:
        """TTL: time alone changes what a thread reads (expiry)."""
        for watch in self.watches:
            self._snapshot(watch)

    def _raw(self, thread: str, *, keep: bool = False) -> RawState:
        """What the bucket and the table hold of ``thread`` now; ``key`` fingerprints it
        (with the clock's second in a TTL world: expiry depends on it)."""
        objects = {
            k: self.bucket.objects[k]
            for prefix in (LAYOUT.thread(thread), LAYOUT.packs(thread))
            for k in self.bucket.keys_after(prefix, None)
        }
        pk = DEPLOYMENT + thread
        items = {k: v for k, v in self.table.items.items() if k[0] == pk}
        now = self.clock.time()
        key = (
            thread,
            tuple((k, o.etag) for k, o in objects.items()),
            repr(sorted(items.items())),
            int(now) if self.ttl else 0,
        )
        return RawState(self.sim.step, now, objects, copy.deepcopy(items) if keep else items, key)

    def _snapshot(self, watch: Watch) -> None:
        state = self._raw(watch.thread, keep=True)
        if not watch.states or watch.states[-1].key != state.key:
            watch.states.append(state)

    # --------------------------------------------------------------- reading
    async def _observe(self, thread: str) -> Seen:
        """The checker's read of ``thread`` now."""
        key = self._raw(thread).key
        hit = self._seen.get(key)
        if hit is None:
            hit = self._seen[key] = await self._read(thread, self.bucket, self.table)
        self.checks["checker reads"] += 1
        return hit

    async def _history_at(self, state: RawState, thread: str) -> Seen:
        """The checker's read of ``thread`` as it was in ``state``."""
        hit = self._seen.get(state.key)
        if hit is None:
            bucket = MemoryBucket(BUCKET, clock=lambda: state.time)
            bucket.objects.update(state.objects)
            table: Any
            if getattr(self.table, "objects", False):
                from .bucket_table import BucketTable, manifest_format

                manifest_format(bucket)
                table = BucketTable(bucket)
            else:
                table = MemoryTable(TABLE, clock=lambda: state.time)
            table.items.update(copy.deepcopy(state.items))
            hit = self._seen[state.key] = await self._read(thread, bucket, table)
        return hit

    async def _read(self, thread: str, bucket: MemoryBucket, table: Any) -> Seen:
        saver = plain_saver(bucket, table, self.ttl)
        history: list[tuple[str, str | None]] = []
        values: dict[str, Any] = {}
        try:
            async for tup in saver.alist({"configurable": {"thread_id": thread}}):
                conf = tup.config["configurable"]
                if conf.get("thread_id") != thread:
                    other = conf.get("thread_id")
                    self._find("foreign-data", f"a read of {thread!r} returned one of {other!r}")
                cid = str(conf["checkpoint_id"])
                parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
                history.append((cid, parent))
                values[cid] = norm(tup.checkpoint["channel_values"])
        except Exception as exc:
            return Seen(history, values, exc)
        return Seen(history, values, None)

    async def _latest(self, thread: str) -> tuple[str | None, Any, BaseException | None]:
        """The checker's ``aget_tuple`` of the latest: (id, values, error)."""
        saver = plain_saver(self.bucket, self.table, self.ttl)
        config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        try:
            tup = await saver.aget_tuple(config)
        except Exception as exc:
            return None, None, exc
        if tup is None:
            return None, None, None
        cid = str(tup.config["configurable"]["checkpoint_id"])
        return cid, norm(tup.checkpoint["channel_values"]), None

    # ----------------------------------------------------- any read, any time
    def _check_thread(self, thread: str, seen: Seen, when: str) -> None:
        """The invariants of any read at any moment: no raw error, nothing foreign, the
        values the puts stored, and every acknowledged checkpoint that must be there."""
        must = self._must(thread, self.sim.step)
        self.checks["reads end without a raw error"] += 1
        err = seen.error
        if err is not None:
            what = f"{when}: reading {thread!r} raised {type(err).__name__}: {err}"
            if not isinstance(err, S3PersistenceError):
                self._find("raw-error", what)
            elif must:
                corrupt = isinstance(err, CorruptObjectError)
                self._find("corrupt-read" if corrupt else "unreadable", f"{what} ({len(must)} ack)")
            return
        for cid, _ in seen.history:
            self.checks["no foreign or unknown checkpoint"] += 1
            if not self.model.belongs(thread, cid):
                self._find("foreign-data", f"{when}: {thread!r} lists {cid}, no put of it")
                continue
            self.checks["values as stored"] += 1
            if seen.values.get(cid) != self.model.values.get(cid):
                self._find(
                    "wrong-data",
                    f"{when}: {thread!r} checkpoint {cid} reads {seen.values.get(cid)!r}, "
                    f"stored {self.model.values.get(cid)!r}",
                )
        ids = seen.ids
        for c in must:
            self.checks["acknowledged checkpoints readable"] += 1
            if c.cid not in ids:
                self._find(
                    "lost",
                    f"{when}: {thread!r} lost acknowledged checkpoint {c.cid} "
                    f"(acknowledged at step {c.acked}, op #{c.acked_by})",
                )

    async def _check_all(self, when: str) -> None:
        for thread in sorted({t for t, _ in self.model.ckpts} | set(self.threads)):
            self._check_thread(thread, await self._observe(thread), when)

    def _paranoid(self) -> bool:
        """Paranoid mode's hook: every thread checked once per step, before the next."""
        if self._checked_step == self.sim.step:
            return False
        self._checked_step = self.sim.step

        async def check() -> None:
            try:
                await self._check_all(f"after step {self.sim.step}")
            finally:
                self.sim.frozen -= 1

        self.sim.frozen += 1
        asyncio.get_running_loop().create_task(check(), context=contextvars.Context())
        return True

    # ------------------------------------------------------- after an operation
    def _judge_outcome(self, op: Op) -> None:
        """Failures: the library's errors only, explained by a fault or a race; the work
        bounded; no write left in flight once the call returned."""
        self.checks["operations end within bounds"] += 1
        name = f"{op.kind} #{op.id} on {op.thread!r}"
        left = [
            r for r in self.sim.pending if r.proc.actor == op.actor and r.write and not r.background
        ]
        if left and op.outcome != "crash":
            flying = ", ".join(f"{r.op} {r.target}" for r in left)
            self._find("outlived", f"{name} ended ({op.outcome}) with writes in flight: {flying}")
        # a dead deleter's lease is waited out, polling: long, and by design
        crashed = any(o.outcome == "crash" for o in self.model.ops if o.start <= (op.end or 0))
        if op.requests > MAX_OP_REQUESTS and not crashed:
            self._find("unbounded", f"{name} made {op.requests} requests")
        if op.outcome != "error":
            return
        err = op.error
        self.checks["failures raise the library's errors"] += 1
        what = f"{type(err).__name__}: {err}"
        if not isinstance(err, S3PersistenceError):
            text = "".join(traceback.format_exception(err)) if err is not None else ""
            self._find("raw-error", f"{name} raised {what}\n{text[-1500:]}")
            return
        if "kept changing" in str(err) or "again and again" in str(err):
            self._find("starvation", f"{name}: {what}")
            return
        if op.injected:
            return
        raced = self.model.overlapping(op, LATEST_MOVERS | REMOVALS)
        legit = isinstance(err, CheckpointConflictError) and (op.kind in WRITES or raced)
        if not legit:
            text = "".join(traceback.format_exception(err)) if err is not None else ""
            self._find(
                "spurious-failure",
                f"{name} failed with no fault injected: {what}\n{text[-1500:]}",
            )
