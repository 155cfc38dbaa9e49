"""The reference model: every checkpoint a put was asked for, which were acknowledged,
and every operation's interval, so a check at any step knows what must be readable.

Time is the scheduler's step count: a request's effect happens at its release. An
acknowledged checkpoint (its ``aput`` returned) must stay readable unless a removal
(delete, prune, delete_for_runs, an import's replace, a TTL expiry) that could take it
ran after it: until that removal ends it may or may not be there; at the removal's end
the check reads the thread and what survived must stay readable again, while what is
gone counts as removed by it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

REMOVALS = frozenset({"delete", "prune", "delete_for_runs", "import"})
"""Operations that may legitimately remove acknowledged checkpoints."""
LATEST_MOVERS = frozenset({"turn", "fork", "update", "delete", "delete_for_runs", "import"})
"""Operations that may change which checkpoint is a thread's latest."""


@dataclass(eq=False)
class Ckpt:
    """One checkpoint of one thread, as its put was asked for."""

    thread: str
    cid: str
    parent: str | None
    values: Any
    """``norm(checkpoint["channel_values"])``: what a read of it must return."""
    run: str | None
    op: int
    started: float
    """Epoch seconds (true virtual time) when its put was called."""
    acked: int | None = None
    """Step of its last acknowledgement (its put returned)."""
    called: int = 0
    """Step at which that acknowledged put was called."""
    committed: int | None = None
    """Step of the manifest write that committed its latest put, as the table showed
    it (None: not seen, a replay of a committed one): the put took effect there,
    though its object's PUT may land later."""
    acked_by: int = 0
    removed: int | None = None
    """Step at whose removal's end it was found gone."""
    survived: set[int] = field(default_factory=set)
    """Removals whose end found it still there."""


@dataclass(eq=False)
class Op:
    """One operation of one actor: its interval and outcome."""

    id: int
    actor: str
    kind: str
    thread: str
    start: int
    args: dict[str, Any] = field(default_factory=dict)
    end: int | None = None
    outcome: str = "running"
    """running, ok, error, crash."""
    error: BaseException | None = None
    injected: int = 0
    """Faults, timeouts and crashes its process met during it."""
    requests: int = 0
    puts: list[Ckpt] = field(default_factory=list)
    """The checkpoints its puts were asked for, in order."""

    def overlaps(self, other: Op) -> bool:
        end = self.end if self.end is not None else 1 << 62
        oend = other.end if other.end is not None else 1 << 62
        return other is not self and other.start <= end and self.start <= oend

    def may_remove(self, c: Ckpt) -> bool:
        """Whether this operation could have removed ``c`` (ignoring when)."""
        if self.kind == "delete_for_runs":
            return c.run is not None and c.run in self.args["runs"]
        if self.kind not in REMOVALS or c.thread != self.thread:
            return False
        if self.kind == "import":  # what it wrote itself stays, unless it failed
            return not (self.outcome == "ok" and c.acked_by == self.id)
        return True


@dataclass
class Finding:
    """An invariant that did not hold."""

    kind: str
    step: int
    message: str

    def __str__(self) -> str:
        return f"[{self.kind}] step {self.step}: {self.message}"


class Model:
    """Checkpoints by (thread, id), operations, and which thread came from which."""

    def __init__(self, ttl: int | None) -> None:
        self.ttl = ttl
        self.ckpts: dict[tuple[str, str], Ckpt] = {}
        self.values: dict[str, Any] = {}
        """Checkpoint id -> its values (a copy or an import has the same ids)."""
        self.ops: list[Op] = []
        self.lineage: dict[str, set[str]] = {}
        """Thread -> the threads whose checkpoints it may hold (itself, copy sources)."""
        self.live_until: dict[str, float] = {}
        """TTL: epoch seconds before which the thread surely has not expired."""
        self.ttl_lost: dict[str, int] = {}
        """TTL: checkpoints acknowledged before this step may have expired."""
        self.runs: list[str] = []
        self.pending: set[Ckpt] = set()
        """Checkpoints being put whose commit the table has not shown yet."""

    # -- puts -----------------------------------------------------------------------
    def attempt(
        self,
        thread: str,
        cid: str,
        parent: str | None,
        values: Any,
        run: str | None,
        op: Op | None,
        now: float,
    ) -> Ckpt:
        c = self.ckpts.get((thread, cid))
        if c is None:
            c = self.ckpts[thread, cid] = Ckpt(
                thread, cid, parent, values, run, op.id if op else 0, now
            )
            self.lineage.setdefault(thread, {thread})
        self.values.setdefault(cid, values)
        if op is not None:
            op.puts.append(c)
            c.committed = None
            self.pending.add(c)
        return c

    def ack(
        self, c: Ckpt, step: int, op: Op | None, now: float, started: float, called: int
    ) -> None:
        self.expire(c.thread, step, now)
        c.acked, c.acked_by, c.started, c.called = step, op.id if op else 0, started, called
        self.pending.discard(c)
        if c.run is not None and c.run not in self.runs:
            self.runs.append(c.run)
        if self.ttl:
            # the put's commit landed after it was called: the thread lives that long
            self.live_until[c.thread] = max(
                self.live_until.get(c.thread, 0.0), started - 2.0 + self.ttl
            )

    def adopt(
        self,
        thread: str,
        source: str,
        cids: list[tuple[str, str | None]],
        step: int,
        op: Op,
        started: float,
    ) -> None:
        """A copy succeeded: ``thread`` holds these checkpoints of ``source``, acknowledged now."""
        self.lineage.setdefault(thread, {thread}).update(self.lineage.get(source, {source}))
        for cid, parent in cids:
            c = self.attempt(thread, cid, parent, self.values.get(cid), None, None, started)
            src = self.ckpts.get((source, cid))
            c.run = src.run if src is not None else c.run
            self.ack(c, step, op, started, started, step)
            c.committed = step

    def expire(self, thread: str, step: int, now: float) -> None:
        """TTL: once the clock passed what the thread surely lives, what it held may be gone."""
        if self.ttl and now >= self.live_until.get(thread, float("inf")):
            self.ttl_lost[thread] = step

    # -- what must be there ---------------------------------------------------------
    def removals(self, thread: str) -> list[Op]:
        return [
            o
            for o in self.ops
            if o.kind in REMOVALS and (o.thread == thread or o.kind == "delete_for_runs")
        ]

    def may_be_gone(self, c: Ckpt, step: int, removals: list[Op] | None = None) -> bool:
        """Whether ``c`` may legitimately be unreadable at ``step``."""
        if c.acked is None:
            return True
        if c.removed is not None and c.removed >= c.acked:
            return True
        if self.ttl_lost.get(c.thread, -1) > c.acked:
            return True
        for r in removals if removals is not None else self.removals(c.thread):
            if (
                r.start < step
                # the put took effect at its commit, maybe before the removal ended
                # (its object's PUT landing after): the removal may take it
                and (c.committed if c.committed is not None else c.called)
                <= (r.end if r.end is not None else step)
                and r.id not in c.survived
                and r.may_remove(c)
            ):
                return True
        return False

    def must_exist(self, thread: str, step: int) -> list[Ckpt]:
        removals = self.removals(thread)
        return [
            c
            for (t, _), c in self.ckpts.items()
            if t == thread and not self.may_be_gone(c, step, removals)
        ]

    def settle_removal(self, op: Op, visible: dict[str, set[str]]) -> None:
        """At a removal's end: what it could have taken and is still there survived it;
        what is gone was removed (``visible``: thread -> the ids a check read)."""
        assert op.end is not None
        for c in self.ckpts.values():
            if c.acked is None or c.acked > op.end or not op.may_remove(c):
                continue
            seen = visible.get(c.thread)
            if seen is None:
                continue
            if c.cid in seen:
                c.survived.add(op.id)
            elif c.removed is None or c.removed < c.acked:
                c.removed = op.end

    def belongs(self, thread: str, cid: str) -> bool:
        """Whether a read of ``thread`` may return checkpoint ``cid`` at all."""
        return any((t, cid) in self.ckpts for t in self.lineage.get(thread, {thread}))

    def line(self, thread: str, cid: str) -> list[str]:
        """``cid`` and its ancestors, newest first, as the puts named them."""
        out: list[str] = []
        seen: set[str] = set()
        at: str | None = cid
        while at is not None and at not in seen:
            seen.add(at)
            out.append(at)
            c = next(
                (
                    self.ckpts[(t, at)]
                    for t in self.lineage.get(thread, {thread})
                    if (t, at) in self.ckpts
                ),
                None,
            )
            at = c.parent if c is not None else None
        return out

    def overlapping(self, op: Op, kinds: frozenset[str]) -> list[Op]:
        """Other operations of ``kinds`` on ``op``'s thread (any thread for
        delete_for_runs) whose interval overlaps ``op``'s."""
        return [
            o
            for o in self.ops
            if o.kind in kinds
            and (o.thread == op.thread or o.kind == "delete_for_runs")
            and op.overlaps(o)
        ]
