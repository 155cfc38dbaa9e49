"""The end of a world: a settling phase with no faults, then conservation (a mixin of
:class:`~.harness.World`).

Settling: every frozen process resumes, every live one flushes (``aflush``), and a
maintenance process settles every thread's items (``Settling``: the held copies are
stored and taken out). Then, over the whole bucket and table:

* nothing lies under a deleted, expired or replaced life: no object of a checkpoint
  a removal that ended well took (erasure markers aside);
* every other checkpoint object belongs to a live thread's history, or is the
  leftover of a put that never committed (a writer that crashed or failed);
* no item holds a copy whose object is stored.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

from langgraph_s3.checkpoint.erasure import ERASED, late_pass_seconds
from langgraph_s3.checkpoint.maintenance.settling import Settling
from langgraph_s3.core.keys import Layout
from langgraph_s3.core.records import Late
from langgraph_s3.manifest.decide import (
    LATE_DUE,
    LATE_MARK,
    LATE_SK,
    LATE_UPTO,
    TOMBSTONE_SECONDS,
)
from langgraph_s3.manifest.schema import TTL_ATTRIBUTE, inline_copies
from langgraph_s3.manifest.stage_items import (
    STAGE_MARK,
)
from langgraph_s3.testing.fakes import MemoryBucket, MemoryTable

from .actors import Spec
from .checks import DEPLOYMENT, LAYOUT, ROOT_SK, Seen
from .loop import Process, Scheduler
from .model import REMOVALS, Ckpt, Finding, Model, Op
from .ports import SimObjectStore, sim_manifest
from .shims import PROCESS

ENDINGS = frozenset({"delete", "import"})
"""Operations that end a thread's life (a replace begins another). A TTL sweep ends
only the lives that expired: an expired thread's objects are not held to this."""
SETTLE_WAIT = 1.0
"""Virtual seconds the settling phase lets pass first: the PUTs of the resumed land
(nothing else is pending: each is released at once)."""
EXPIRE_WAIT = 400.0
"""A TTL world's last phase: every thread has expired and every lease ran out; the
sweep, then DynamoDB's TTL and the stream handler a week later (``ops/sweeper.py``)."""


class Conservation:
    """The settling phase and the conservation invariant."""

    sim: Scheduler
    model: Model
    bucket: MemoryBucket
    table: MemoryTable
    threads: list[str]
    procs: list[Process]
    findings: list[Finding]
    checks: Counter[str]
    ttl: int | None
    _seen: dict[Any, Seen]
    _observe: Callable[..., Any]
    _find: Callable[[str, str], None]

    # ------------------------------------------------------------ late PUTs
    def _put_landed(self, proc: Process, key: str, body: bytes, out: str | None) -> None:
        """A PUT answered: one a process had sent when it froze, landing after a
        removal of its thread began, is counted (stored: an erasure marker did not stop
        it; the end's conservation tells whether it lies under an ended life)."""
        if key not in proc.late or proc.froze is None or body == ERASED:
            return
        proc.late.discard(key)
        thread = self._thread_of(key)
        if thread is None:
            return
        for op in self.model.ops:
            if op.kind in ENDINGS and op.thread in (thread, "*") and op.start >= proc.froze:
                what = "a deletion" if op.kind != "import" else "an import replace"
                self.sim.tally[f"a late PUT after {what}"] += 1
                if out is not None:
                    self.sim.tally[f"a late PUT after {what}, stored"] += 1
                return

    def _all_threads(self) -> list[str]:
        return sorted({t for t, _ in self.model.ckpts} | set(self.threads))

    def _thread_of(self, key: str) -> str | None:
        for thread in self._all_threads():
            if key.startswith((LAYOUT.thread(thread), LAYOUT.packs(thread))):
                return thread
        return None

    # ------------------------------------------------------------ settling
    async def _settle(self) -> None:
        """No faults from here: the frozen resume, the live flush, maintenance settles."""
        p = self.sim.profile
        p.fault_rate = p.crash_rate = p.jump_rate = 0.0
        live = [proc for proc in self.procs if not proc.dead]
        for proc in live:
            proc.faults = False
            self.sim.thaw(proc)
        await asyncio.sleep(SETTLE_WAIT)  # the PUTs they had sent land (or are refused)
        self.sim.step += 1
        for proc in live:
            if proc.dead or proc.saver is None:
                continue
            token = PROCESS.set(proc)
            try:
                await proc.saver.aflush()
            except Exception as exc:
                self._find("settle", f"{proc.name}'s flush failed: {type(exc).__name__}: {exc}")
            finally:
                PROCESS.reset(token)
        proc = self.sim.spawn("settler", "settler", faults=False)
        self.procs.append(proc)
        token = PROCESS.set(proc)
        try:
            manifest = sim_manifest(
                self.table, self.sim, proc, deployment=DEPLOYMENT, ttl_seconds=self.ttl
            )
            settling = Settling(manifest, SimObjectStore(self.bucket, self.sim, proc), LAYOUT)
            for thread in self._all_threads():
                await settling.reads.namespaces(thread)
        except Exception as exc:
            self._find("settle", f"settling failed: {type(exc).__name__}: {exc}")
        finally:
            PROCESS.reset(token)
        await self._late_passes()

    async def _late_passes(self) -> None:
        """Once every deletion's late pass is due, a sweep with no faults runs them
        (what the writes a frozen writer sent before a deletion brought back goes)."""
        proc = self._spawn(Spec("sweeper-late", "sweeper", 1), 0)  # type: ignore[attr-defined]
        proc.faults = False
        await asyncio.sleep(late_pass_seconds(proc.saver.clients.limits.request_timeout) + 1.0)
        self.sim.step += 1
        token = PROCESS.set(proc)
        writes = {k for k in self.bucket.objects if "/w/" in k}
        try:
            await proc.saver.asweep_ttl()
            if not self.ttl:  # (a TTL world's sweep removes expired threads' writes too)
                gone = writes - set(self.bucket.objects)
                self.sim.tally["a late pass removed late writes"] += bool(gone)
        except Exception as exc:
            self._find("settle", f"the late passes failed: {type(exc).__name__}: {exc}")
        finally:
            PROCESS.reset(token)

    async def _sweep_all(self) -> None:
        """A TTL world's end: once every thread expired, a sweep with no faults."""
        await asyncio.sleep(EXPIRE_WAIT)
        self.sim.step += 1
        proc = self._spawn(Spec("sweeper-last", "sweeper", 1), 0)  # type: ignore[attr-defined]
        proc.faults = False
        token = PROCESS.set(proc)
        try:
            await proc.saver.asweep_ttl()
            # a week on, DynamoDB's TTL removes the tombstones and the items the sweep
            # left; the stream handler sweeps what each removal names
            await asyncio.sleep(TOMBSTONE_SECONDS + 1.0)
            self.sim.step += 1
            if getattr(self.table, "objects", False):  # no TTL service: the next sweep
                await proc.saver.asweep_ttl()
                return
            for thread, expired_at, late in self._ttl_removals():
                if late is not None:  # a late-pass record: the stream handler runs it
                    await proc.saver.maintenance().late_pass(thread, late)
                else:
                    await proc.saver.maintenance().sweep_removed(thread, expired_at)
        except Exception as exc:
            self._find("settle", f"the last sweep failed: {type(exc).__name__}: {exc}")
        finally:
            PROCESS.reset(token)

    def _ttl_removals(self) -> list[tuple[str, float, Late | None]]:
        """DynamoDB's TTL: every item past its ``expires_at`` goes; (thread, when, None)
        of each root item removed, and (thread, when, due) of each late-pass record,
        as the stream handler reads them (``ops/sweeper.py``)."""
        now = self.sim.clock.time()
        out: list[tuple[str, float, Late | None]] = []
        lates = DEPLOYMENT + LATE_MARK
        for (pk, sk), item in sorted(self.table.items.items()):
            at = item.get(TTL_ATTRIBUTE, {}).get("N")
            if at is None or float(at) > now:
                continue
            del self.table.items[pk, sk]
            if sk == LATE_SK and pk.startswith(lates):
                late = Late(int(item[LATE_DUE]["N"]), item[LATE_UPTO]["S"])
                out.append((item["thread_id"]["S"], float(at), late))
            elif sk == ROOT_SK and pk.startswith(DEPLOYMENT):
                out.append((pk[len(DEPLOYMENT) :], float(at), None))
        return out

    def _expired_lives(self) -> None:
        """After the last sweep: nothing of an expired life is left (markers, and the
        leftovers of puts that never committed, aside)."""
        self.checks["conservation: TTL worlds swept to the end"] += 1
        for thread in self._all_threads():
            for prefix in (LAYOUT.thread(thread), LAYOUT.packs(thread)):
                for key in list(self.bucket.keys_after(prefix, None)):
                    if self.bucket.objects[key].body == ERASED:
                        continue
                    c = self._ckpt(thread, LAYOUT.checkpoint_id_of(thread, key))
                    if prefix == LAYOUT.thread(thread) and (c is None or c.acked is None):
                        self.checks["conservation: uncommitted leftovers"] += 1
                        continue
                    stray = c is not None and c.thread != thread
                    self._find(
                        "conservation-copy-left" if stray else "conservation-expired-life",
                        f"{thread!r}: {key} is left after its life expired and was swept",
                    )
        for (pk, _), item in self.table.items.items():
            if inline_copies(item):
                self._find("conservation-held-stored", f"{pk} holds copies after the sweep")

    # ------------------------------------------------------------ the invariant
    def _conservation(self) -> None:
        """Nothing under an ended life, nothing unaccounted for, nothing held twice, no
        import's stage left (each import ended; the sweep dropped those that died)."""
        self._held_twice()
        for pk, _ in self.table.items:
            if STAGE_MARK in pk:
                self._find("conservation-stage-left", f"{pk}: an import's stage is left")
        for thread in self._all_threads():
            seen = self._seen.get(self._raw(thread).key)  # type: ignore[attr-defined]
            if seen is None or seen.error is not None:
                continue
            prefix = LAYOUT.thread(thread)
            for key in list(self.bucket.keys_after(prefix, None)):
                self._conserved(thread, prefix, key, seen)

    def _conserved(self, thread: str, prefix: str, key: str, seen: Seen) -> None:
        obj = self.bucket.objects[key]
        found = Layout.kind_in_thread(prefix, key)
        cid = LAYOUT.checkpoint_id_of(thread, key)
        if found is None or cid is None:
            return
        self.checks["conservation: objects accounted for"] += 1
        if obj.body == ERASED:
            self.checks["conservation: erasure markers"] += 1
            return
        if cid in seen.ids:
            return
        c = self._ckpt(thread, cid)
        what = f"{found[1]} object {key}"
        if c is not None and c.thread != thread:
            # a copy took it from its source before (or without) its commit there: in
            # the target no commit ever named it (an uncommitted stray the copy carried)
            copies = [o for o in self.model.ops if o.args.get("target") == thread]
            if seen.ids or any(o.outcome != "ok" for o in copies):
                self.checks["conservation: strays a copy carried"] += 1
                return
            if self._failed_removal(thread):
                # a removal that failed after it dropped or tombstoned the target, before
                # it removed what was left: the failed call promised nothing
                self.checks["conservation: what a failed removal left"] += 1
                return
            if self.ttl and {thread, c.thread} & set(self.model.ttl_lost):
                # the copy took its source's expiry: it reads as nothing now, and the
                # last sweep must take it (``_expired_lives``)
                self.checks["conservation: an expired life's, awaiting its sweep"] += 1
                return
            self._find(
                "conservation-copy-left",
                f"{thread!r}: {what}: the copy into it ended well and committed nothing, "
                "and left it (no item names the thread: nothing will ever remove it)",
            )
            return
        if c is None:
            if found[1] == "w":  # LangGraph stores a step's writes before its checkpoint
                self.checks["conservation: uncommitted leftovers"] += 1
                return
            self._find("conservation-foreign", f"{thread!r}: {what} of no put")
            return
        at = c.committed if c.committed is not None else c.called if c.acked else None
        ender = None if at is None else self._ended(thread, at)
        if ender is not None:
            self._find(
                "conservation-ended-life",
                f"{thread!r}: {what} lies under the life {ender.kind} #{ender.id} ended "
                f"(steps {ender.start}-{ender.end})",
            )
            return
        if c.acked is None:  # its put failed or its writer died (committed or not)
            self.checks["conservation: uncommitted leftovers"] += 1
            return
        if self.ttl and thread in self.model.ttl_lost:
            self.checks["conservation: an expired life's, awaiting its sweep"] += 1
            return
        if self._removed(thread):
            self.checks["conservation: garbage a removal left"] += 1
            return
        self._find("conservation-orphan", f"{thread!r}: {what}, committed, read by no one")

    def _ckpt(self, thread: str, cid: str | None) -> Ckpt | None:
        """The put of ``cid`` a read of ``thread`` may return (its own, or a source's)."""
        if cid is None:
            return None
        ckpts = self.model.ckpts
        lineage = [thread, *sorted(self.model.lineage.get(thread, {thread}) - {thread})]
        return next((ckpts[t, cid] for t in lineage if (t, cid) in ckpts), None)

    def _ended(self, thread: str, committed: int) -> Op | None:
        """A removal that ended well and ended the life a put committed at step
        ``committed`` was in (it began after that commit)."""
        for op in self.model.ops:
            ok = op.outcome == "ok" and op.start > committed
            if ok and op.kind in ENDINGS and op.thread in (thread, "*") and _replaced(op):
                return op
        return None

    def _removed(self, thread: str) -> bool:
        """Whether a removal ran on ``thread`` or a thread it was copied from (what one
        raced, or cut short, may leave unread: garbage, not a life's content)."""
        lineage = self.model.lineage.get(thread, {thread})
        return any(
            op.kind in REMOVALS | ENDINGS and (op.thread in lineage or op.thread == "*")
            for op in self.model.ops
        )

    def _failed_removal(self, thread: str) -> bool:
        """Whether a removal that reached ``thread`` (a rollback, a prune, a deletion, an
        import's replace or its clean-up) failed or died."""
        return any(
            op.kind in ("delete_for_runs", "prune", "delete", "import")
            and op.thread in (thread, "*")
            and op.outcome in ("error", "crash")
            for op in self.model.ops
        )

    def _held_twice(self) -> None:
        """No item holds a copy whose object is stored."""
        for (pk, sk), item in self.table.items.items():
            copies = inline_copies(item)
            if not copies:
                continue
            self.checks["conservation: copies left held"] += len(copies)
            if sk != ROOT_SK or not pk.startswith(DEPLOYMENT):
                continue
            thread = pk[len(DEPLOYMENT) :]
            if self.ttl and self.sim.clock.time() >= self.model.live_until.get(thread, 0.0):
                continue  # expired: its sweep takes the item and the objects
            if self._failed_deletion(thread, item):
                # a delete_thread that raised after its tombstone, its undo failing too:
                # the thread reads as deleted, not erased, until its caller calls again
                # (the error's note says so); no promise was made
                self.checks["conservation: a failed deletion's tombstone"] += 1
                continue
            ns = LAYOUT.namespace(thread, "")
            for c in copies:
                obj = self.bucket.objects.get(ns.checkpoint_at(c.tail))
                if obj is not None and obj.body == c.body:
                    self._find("conservation-held-stored", f"{pk} holds {c.checkpoint_id}, stored")

    def _failed_deletion(self, thread: str, item: dict[str, Any]) -> bool:
        """Whether ``item`` is the tombstone of a delete_thread of ``thread`` (its own, or
        an import's replace) that failed or whose process died, and did not put the thread
        back (revivable: its lease running or run out)."""
        if not item.get("deleted", {}).get("BOOL") or not item.get("revivable", {}).get("BOOL"):
            return False
        return any(
            o.kind in ("delete", "import")
            and o.thread == thread
            and o.outcome in ("error", "crash")
            for o in self.model.ops
        )


def _replaced(op: Op) -> bool:
    """A deletion ends its thread's life; an import only when its file held the thread."""
    return op.kind != "import" or bool(op.args["export"].args.get("history"))
