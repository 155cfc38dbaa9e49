"""The promises of each kind of operation, checked when it ends (a mixin of
:class:`~.harness.World`, beside :class:`~.checks.Checks`): a turn no one raced is the
latest, a prune keeps what its rule keeps, a copy or an export is its source at one
moment, a removal is whole or nothing, a read returns what was stored."""

from __future__ import annotations

from typing import Any

import orjson

from langgraph_s3.errors import CorruptObjectError, S3PersistenceError
from langgraph_s3.testing.graphs import norm

from .checks import QUIET, READ_ONLY, WRITES, Checks, Seen, _latest_id
from .model import LATEST_MOVERS, REMOVALS, Op


class Promises(Checks):
    """What each operation promised, checked at its end."""

    async def _after(self, op: Op, result: Any) -> None:
        """The checks of one ended operation: its own promise, then the threads it touched."""
        when = f"after {op.kind} #{op.id} ({op.outcome})"
        self._judge_outcome(op)
        threads = [] if op.kind in READ_ONLY | QUIET else self._threads_of(op)
        seen = {t: await self._observe(t) for t in threads}
        if op.kind in REMOVALS:
            self.model.settle_removal(op, {t: s.ids for t, s in seen.items() if s.error is None})
        kind = op.kind
        if kind in WRITES and op.outcome == "ok":
            await self._check_turn(op, when)
        elif kind == "prune":
            await self._check_prune(op, seen[op.thread], when)
        elif kind == "copy":
            await self._check_copy(op, seen[op.args["target"]], when)
        elif kind == "export" and op.outcome == "ok":
            await self._check_export(op, when)
        elif kind in REMOVALS:
            self._check_removal(op, seen, when)
        elif kind.startswith("read-"):
            self._check_read(op, result, when)
        for thread, s in seen.items():
            self._check_thread(thread, s, when)
        if op.kind == "sweep":
            await self._check_all(when)

    async def _check_turn(self, op: Op, when: str) -> None:
        """A turn no one raced is the thread's latest: its last checkpoint, its values."""
        if not op.puts or self.model.overlapping(op, LATEST_MOVERS):
            return
        if self.model.ttl_lost.get(op.thread, -1) >= op.start:
            return
        cid, values, err = await self._latest(op.thread)
        self.checks["a turn no one raced is the latest"] += 1
        want = op.puts[-1]
        if err is None and cid != want.cid:
            self._find(
                "turn-dropped",
                f"{when}: {op.thread!r} reads latest {cid}, but the turn's last checkpoint "
                f"{want.cid} was acknowledged and no one raced it",
            )
        elif err is None and values != want.values:
            self._find("wrong-data", f"{when}: {op.thread!r} latest reads {values!r}")

    async def _check_prune(self, op: Op, seen: Seen, when: str) -> None:
        """The latest's line keeps its newest ``keep`` checkpoints (success or not)."""
        if seen.error is not None:
            return
        cid, _, err = await self._latest(op.thread)
        if err is not None or cid is None:
            return
        others = [r for r in self.model.removals(op.thread) if r is not op]
        keep = op.args["keep"]
        for at in self.model.line(op.thread, cid)[:keep]:
            c = self.model.ckpts.get((op.thread, at))
            if c is None or c.acked is None:
                continue
            self.checks["prune keeps what its rule keeps"] += 1
            if at not in seen.ids and not self.model.may_be_gone(c, self.sim.step, others):
                self._find("prune-lost", f"{when}: {op.thread!r} lost {at}, of its {keep} newest")

    async def _snapshot_match(
        self, op: Op, history: list[tuple[str, str | None]], latest: str | None
    ) -> bool:
        """Whether ``history`` is the source's at one of the raw states it went through
        while ``op`` ran (those whose latest is ``latest`` are read first)."""
        watch = next(w for w in self.watches if w.op is op)
        self._snapshot(watch)  # the state at its end
        want = sorted(history)
        states = sorted(
            watch.states,
            key=lambda st: (
                latest is None or _latest_id(st.items, watch.thread) != latest,
                st.step,
            ),
        )
        for state in states:
            seen = await self._history_at(state, watch.thread)
            if seen.error is None and sorted(seen.history) == want:
                return True
        return False

    async def _check_copy(self, op: Op, target: Seen, when: str) -> None:
        """A copy that succeeded is its source's history at one moment of the copy; one
        that failed left nothing readable, or such a copy."""
        dst = op.args["target"]
        self.checks["a copy is a snapshot of its source"] += 1
        if target.error is not None:
            err = target.error
            if isinstance(err, S3PersistenceError):  # a raw error is found by _check_thread
                self._find(
                    "copy-unreadable",
                    f"{when}: {dst!r} (copy of {op.thread!r}) raises {type(err).__name__}: {err}",
                )
            return
        if op.outcome != "ok" and not target.history:
            return
        if await self._snapshot_match(op, target.history, _latest_id(self.table.items, dst)):
            if op.outcome == "ok":
                now = self.clock.time()
                self.model.adopt(dst, op.thread, target.history, self.sim.step, op, now)
                self.threads.append(dst)
            return
        got = f"{len(target.history)} checkpoints" if target.history else "an empty history"
        what = "reported success" if op.outcome == "ok" else f"failed ({op.outcome})"
        self._find(
            "copy-not-snapshot",
            f"{when}: copy {op.thread!r} -> {dst!r} {what} and reads {got}, "
            "no state its source was in during the copy",
        )

    async def _check_export(self, op: Op, when: str) -> None:
        """An export holds its thread's history at one moment of the export."""
        lines = op.args["file"].getvalue().splitlines()
        records = [orjson.loads(line) for line in lines if line.strip()]
        history = [
            (str(r["checkpoint_id"]), r.get("parent_checkpoint_id"))
            for r in records
            if r.get("kind") == "checkpoint"
        ]
        op.args["history"] = history
        self.checks["an export is a snapshot of its source"] += 1
        newest = max((cid for cid, _ in history), default=None)
        if not await self._snapshot_match(op, history, newest):
            self._find(
                "export-not-snapshot",
                f"{when}: the export of {op.thread!r} holds {len(history)} checkpoints, "
                "no state the thread was in during the export",
            )

    def _check_removal(self, op: Op, seen: dict[str, Seen], when: str) -> None:
        """Success: what it removes is gone (an import: its export is all there). A
        failure with no other operation racing it: all of it or none of it."""
        before: dict[str, set[str]] = op.args["before"]
        for thread, s in seen.items():
            if s.error is not None:
                continue
            doomed = before.get(thread, set())
            if op.kind == "delete_for_runs":
                runs = op.args["runs"]
                doomed = {cid for cid in doomed if self.model.ckpts[(thread, cid)].run in runs}
            if op.kind == "import":
                exported = {cid for cid, _ in op.args["export"].args.get("history", [])}
                if op.outcome == "ok":
                    self.checks["an import holds its export"] += 1
                    must = {c.cid for c in self._must(thread, self.sim.step)}
                    missing = (exported & must) - s.ids
                    if missing:
                        self._find("import-lost", f"{when}: {thread!r} misses {len(missing)}")
                    continue
                doomed = exported
            # a checkpoint written again since the removal began (an import) is new
            doomed = {
                cid for cid in doomed if (self.model.ckpts[(thread, cid)].acked or 0) <= op.start
            }
            left = doomed & s.ids
            if op.outcome == "ok" and op.kind != "import":
                self.checks["a removal removes what it says"] += 1
                if left:
                    self._find(
                        "removal-left",
                        f"{when}: {op.kind} reported success, {thread!r} still reads "
                        f"{len(left)} of the checkpoints it removes",
                    )
            elif op.outcome == "error" and doomed and not self._raced(op, thread):
                # (a crash cannot clean up after itself: only failures are held to this)
                self.checks["a failed removal is all or nothing"] += 1
                if left and left != doomed:
                    self._find(
                        "half-done",
                        f"{when}: {op.kind} failed and left {len(left)} of {len(doomed)} "
                        f"checkpoints of {thread!r}",
                    )

    def _raced(self, op: Op, thread: str) -> bool:
        """Whether another operation that moves or removes checkpoints of ``thread`` ran
        beside ``op`` (an import: beside its export too)."""
        first = op.args["export"] if op.kind == "import" else op
        return any(
            o is not op
            and o is not first
            and o.thread in (thread, "*")
            and o.kind in LATEST_MOVERS | REMOVALS
            and (first.overlaps(o) or op.overlaps(o))
            for o in self.model.ops
        )

    def _check_read(self, op: Op, result: Any, when: str) -> None:
        """A read racing anything: the library's errors only, nothing foreign, what was
        stored; with no removal beside it, every acknowledged checkpoint is found."""
        thread = op.thread
        steady = not any(r.overlaps(op) for r in self.model.removals(thread))
        steady = steady and self.model.ttl_lost.get(thread, -1) < op.start
        must = [c for c in self._must(thread, self.sim.step) if (c.acked or 0) <= op.start]
        if op.outcome == "error":
            if isinstance(op.error, CorruptObjectError) and steady and must:
                self._find("corrupt-read", f"{when}: {op.kind} of {thread!r} raised {op.error}")
            return
        if op.outcome != "ok":
            return
        tuples: list[tuple[str, Any]] = []
        if op.kind in ("read-latest", "read-id") and result is not None:
            conf = result.config["configurable"]
            tuples = [(str(conf["checkpoint_id"]), norm(result.checkpoint["channel_values"]))]
        elif op.kind == "read-list":
            tuples = [
                (
                    str(t.config["configurable"]["checkpoint_id"]),
                    norm(t.checkpoint["channel_values"]),
                )
                for t in result
            ]
        elif op.kind == "read-state" and result is not None and result.config:
            cid = result.config["configurable"].get("checkpoint_id")
            if cid is not None:
                stored = (self.model.values.get(str(cid)) or {}).get("messages") or []
                got = norm(result.values.get("messages")) or []
                self.checks["values as stored"] += 1
                if got[: len(stored)] != stored:  # a snapshot applies the pending writes
                    self._find("wrong-data", f"{when}: aget_state of {thread!r} at {cid}")
                tuples = [(str(cid), None)]
        for cid, values in tuples:
            self.checks["no foreign or unknown checkpoint"] += 1
            if not self.model.belongs(thread, cid):
                self._find("foreign-data", f"{when}: {op.kind} of {thread!r} returned {cid}")
            elif values is not None and values != self.model.values.get(cid):
                self._find("wrong-data", f"{when}: {op.kind} of {thread!r}: values of {cid}")
        if not steady or not must:
            return
        self.checks["reads find what must be there"] += 1
        if op.kind in ("read-latest", "read-state") and not tuples:
            self._find("read-empty", f"{when}: {op.kind} of {thread!r} returned nothing")
        got_id = tuples[0][0] if tuples else None
        if op.kind == "read-id" and got_id != op.args["cid"]:
            self._find("read-empty", f"{when}: {thread!r} at {op.args['cid']} read {got_id}")
        if op.kind == "read-list":
            ids = {cid for cid, _ in tuples}
            lost = [c.cid for c in must if c.cid not in ids]
            if lost:
                self._find("lost", f"{when}: alist of {thread!r} misses {len(lost)} acknowledged")
