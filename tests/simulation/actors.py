"""The actors of a world: what each role does, one operation at a time (a mixin of
:class:`~.harness.World`).

Beside the writers and maintenance, the Lambda host's own moves: after a put answered,
the post-response phase (``aflush``, sometimes cut by a crash), then a freeze (its
requests and background PUTs held) for a long virtual time, ending in a reap (killed,
never resumed) or a thaw (its PUTs land late, maybe after a deletion or an import's
replace of its thread); and a crowd: a dozen one-put processes on one thread, each
frozen or reaped after its put.
"""

from __future__ import annotations

import asyncio
import io
import random
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from langchain_core.messages import HumanMessage

from .loop import Process, Scheduler
from .model import Ckpt, Model, Op
from .shims import PROCESS

FREEZE = (30.0, 300.0)
LONG_FREEZE = (3_700.0, 7_500.0)
"""A bucket-manifest world's freezes: longer than the fence's bound and GC's hour."""
"""Virtual seconds a frozen process sleeps before it is reaped or resumed."""
REAP_SHARE = 0.4
"""Frozen processes the host kills rather than resumes."""
CROWD = (8, 14)
"""One-put processes of a crowd."""
THAW_AFTER = {"delete": "a deletion", "sweep": "a TTL sweep", "import": "an import replace"}


class Spec(NamedTuple):
    """One actor: its name, its role, how many operations it performs (a crowd: how
    many one-put processes it starts)."""

    name: str
    kind: str
    ops: int


class Actors:
    """The roles (a mixin: the world provides the attributes and ``_op``)."""

    seed: int
    sim: Scheduler
    model: Model
    threads: list[str]
    alternate: list[str]
    host: str
    _copies: int
    _slot: int
    _slot_changed: asyncio.Condition | None
    _spawn: Callable[..., Process]
    _graph: Callable[[Process], Any]
    _op: Callable[..., Awaitable[Op]]
    _must: Callable[[str, int], list[Ckpt]]
    _event: Callable[[Process, str], None]

    @property
    def tally(self) -> Counter[str]:
        return self.sim.tally

    async def _actor(self, spec: Spec) -> None:
        if spec.kind == "crowd":
            await self._crowd(spec)
            return
        rng = random.Random(f"{self.seed}/{spec.name}")
        lives = 0
        proc = self._spawn(spec, lives)
        PROCESS.set(proc)
        export: list[Any] = []
        for n in range(spec.ops):
            await asyncio.sleep(rng.uniform(0.0, 0.05))
            if proc.dead:  # a new Lambda: cold caches, the same role
                lives += 1
                proc = self._spawn(spec, lives)
                PROCESS.set(proc)
            thread = await self._one(spec, proc, rng, n, export)
            if self.host and spec.kind in ("writer", "forker") and not proc.dead:
                flush = 0.8 if self.host == "lambda" else 0.0
                await self._host(proc, rng, thread, flush=flush, freeze=0.3)

    def _pick_thread(self, rng: random.Random) -> str:
        return self.threads[0] if rng.random() < 0.6 else rng.choice(self.threads)

    # ------------------------------------------------------------ the host
    async def _host(
        self, proc: Process, rng: random.Random, thread: str, *, flush: float, freeze: float
    ) -> None:
        """After an answer: ``flush`` of the time the post-response flush (sometimes cut
        short: the host kills the process, or freezes it for a long while), then
        ``freeze`` of the time a long freeze."""
        if rng.random() < flush:
            cut = None
            if rng.random() < 0.3:
                delay = rng.uniform(0.0, 0.03)
                how = rng.choice(("crash", "freeze"))
                sleep, reap = rng.uniform(*self._freeze_range()), rng.random() < REAP_SHARE
                cut = asyncio.get_running_loop().call_later(
                    delay, self._cut, proc, how, sleep, reap, thread
                )
            saver = proc.saver
            await self._op(proc, "flush", thread, {}, lambda: saver.aflush())
            if cut is not None:
                cut.cancel()
        if not proc.dead and not proc.asleep and rng.random() < freeze:
            await self._freeze(proc, rng, thread)

    def _cut(self, proc: Process, how: str, sleep: float, reap: bool, thread: str) -> None:
        """The host's deadline cuts a post-response flush: killed, or frozen (then
        reaped or resumed ``sleep`` seconds later)."""
        if proc.dead or proc.asleep:
            return
        self.tally[f"a post-response flush cut by a {how}"] += 1
        if how == "crash":
            self.sim.kill(proc)
            return
        began = self._frozen_now(proc)
        loop = asyncio.get_running_loop()
        loop.call_later(sleep, self._wake, proc, reap, thread, began)

    def _freeze_range(self) -> tuple[float, float]:
        """How long a freeze lasts: past the hour after which superseded manifest
        versions are freed, in a world that says so (``long_freezes``)."""
        return LONG_FREEZE if getattr(self, "long_freezes", False) else FREEZE

    def _frozen_now(self, proc: Process) -> int:
        self.sim.freeze(proc)
        self.tally["a writer frozen after its answer"] += 1
        if any(r.proc is proc and r.background for r in self.sim.pending):
            self.tally["a writer frozen with its PUTs in flight"] += 1
        return self.sim.step

    def _wake(self, proc: Process, reap: bool, thread: str, began: int) -> None:
        """The end of a freeze: the host reaps the process, or it resumes."""
        if proc.dead:
            return
        if reap:
            self.tally["a frozen writer reaped"] += 1
            self._event(proc, "reaped")
            self.sim.reap(proc)
            return
        for kind in sorted(
            {
                o.kind
                for o in self.model.ops
                if o.kind in THAW_AFTER
                and o.thread in (thread, "*")
                and (o.end is None or o.end >= began)
                and o.outcome in ("ok", "running")
            }
        ):
            self.tally[f"a thaw after {THAW_AFTER[kind]}"] += 1
        self.tally["a frozen writer resumed"] += 1
        self.sim.thaw(proc)

    async def _freeze(self, proc: Process, rng: random.Random, thread: str) -> None:
        """Frozen for a long while with what it sent held; then reaped or resumed."""
        began = self._frozen_now(proc)
        await asyncio.sleep(rng.uniform(*self._freeze_range()))
        self._wake(proc, rng.random() < REAP_SHARE, thread, began)

    # ------------------------------------------------------------ the crowd
    async def _crowd(self, spec: Spec) -> None:
        """A dozen one-put processes on one thread, each frozen or reaped after its put."""
        rng = random.Random(f"{self.seed}/{spec.name}")
        thread = self._pick_thread(rng)
        big = rng.random() < 0.5  # updates of 3 KB: a dozen fill an item's budget
        members = [
            asyncio.create_task(self._member(spec, i, thread, big), name=f"{spec.name}.{i}")
            for i in range(spec.ops)
        ]
        await asyncio.wait(members)
        for t in members:
            exc = t.exception()
            if exc is not None:
                raise exc

    async def _member(self, spec: Spec, i: int, thread: str, big: bool) -> None:
        rng = random.Random(f"{self.seed}/{spec.name}.{i}")
        proc = self._spawn(spec, i, actor=f"{spec.name}.{i}")
        PROCESS.set(proc)
        await asyncio.sleep(rng.uniform(0.0, 0.3) + (i * 0.3 if big else 0.0))  # big: in turn
        graph = self._graph(proc)
        config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        text = f"{proc.name} update" + (
            " " + rng.randbytes(rng.randint(4000, 7000)).hex() if big else ""
        )
        await self._op(
            proc,
            "update",
            thread,
            {},
            lambda: graph.aupdate_state(
                config, {"messages": [HumanMessage(text)]}, as_node="agent"
            ),
        )
        if not proc.dead:
            await self._host(proc, rng, thread, flush=0.2 if big else 0.5, freeze=0.9)

    # ------------------------------------------------------------ one operation
    async def _one(
        self, spec: Spec, proc: Process, rng: random.Random, n: int, export: list[Any]
    ) -> str:
        """One operation of ``spec``'s role; the thread it worked on."""
        thread = self._pick_thread(rng)
        kind = spec.kind
        if kind == "writer" and self.alternate:
            await self._in_turn(spec, proc, rng, n)
            return "t0"
        if kind in ("writer", "forker"):
            await self._turn(proc, rng, thread, n, fork=kind == "forker")
        elif kind == "copier":
            self._copies += 1
            target = f"c{self._copies}{spec.name[0]}{n}"
            saver = proc.saver
            await self._op(
                proc, "copy", thread, {"target": target}, lambda: saver.acopy_thread(thread, target)
            )
        elif kind == "reader":
            await self._reading(proc, rng, thread)
        else:
            await self._maintain(kind, proc, rng, thread)
        return thread

    async def _in_turn(self, spec: Spec, proc: Process, rng: random.Random, n: int) -> None:
        """The writers take turns on t0 (a user's messages reaching two Lambdas)."""
        if self._slot_changed is None:
            self._slot_changed = asyncio.Condition()
        async with self._slot_changed:
            await self._slot_changed.wait_for(
                lambda: (
                    self.alternate[self._slot] == spec.name
                    and self.alternate[: self._slot].count(spec.name) == n
                )
            )
        try:
            await self._turn(proc, rng, "t0", n, fork=False)
        finally:
            async with self._slot_changed:
                self._slot += 1
                self._slot_changed.notify_all()

    async def _maintain(self, kind: str, proc: Process, rng: random.Random, thread: str) -> None:
        saver = proc.saver
        if self.host and kind in ("deleter", "importer") and rng.random() < 0.5:
            await asyncio.sleep(rng.uniform(5.0, 60.0))  # while a writer is frozen
        if kind == "packer":
            await self._op(proc, "pack", thread, {}, lambda: saver.apack([thread]))
            if rng.random() < 0.5:
                await self._op(
                    proc, "unpack", thread, {}, lambda: saver.maintenance().unpack_thread(thread)
                )
        elif kind == "pruner":
            keep = rng.choice((1, 1, 2, 3))
            await self._op(
                proc,
                "prune",
                thread,
                {"keep": keep},
                lambda: saver.aprune([thread], keep_last=keep),
            )
        elif kind == "deleter":
            if rng.random() < 0.5 and self.model.runs:
                runs = rng.sample(self.model.runs, min(len(self.model.runs), rng.randint(1, 2)))
                await self._op(
                    proc,
                    "delete_for_runs",
                    "*",
                    {"runs": set(runs)},
                    lambda: saver.adelete_for_runs(runs),
                )
            else:
                await self._op(proc, "delete", thread, {}, lambda: saver.adelete_thread(thread))
        elif kind == "importer":
            buf = io.BytesIO()
            op = await self._op(
                proc, "export", thread, {"file": buf}, lambda: saver.aexport([thread], buf)
            )
            if op.outcome == "ok" and not proc.dead:
                data = io.BytesIO(buf.getvalue())
                await self._op(
                    proc,
                    "import",
                    thread,
                    {"file": data, "export": op},
                    lambda: saver.aimport(data, replace=True),
                )
        elif kind == "sweeper":
            await asyncio.sleep(rng.uniform(0.0, 0.3))
            await self._op(proc, "sweep", "*", {}, lambda: saver.asweep_ttl())
        elif kind == "collector":  # the manifest's superseded versions, freed
            table = saver._w.object_table
            assert table is not None
            await asyncio.sleep(rng.uniform(600.0, 5_000.0))
            await self._op(proc, "collect", "*", {}, lambda: table.collect())
        else:  # pragma: no cover - a spec the harness does not know
            raise AssertionError(kind)

    async def _turn(
        self, proc: Process, rng: random.Random, thread: str, n: int, *, fork: bool
    ) -> None:
        graph = self._graph(proc)
        run = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        say = "what is the weather?" if rng.random() < 0.15 else "hello"
        conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": "", "run_id": run}
        kind = "turn"
        if fork:
            older = [c for c in self._must(thread, self.sim.step) if c.acked is not None]
            if older:
                conf["checkpoint_id"] = rng.choice(sorted(older, key=lambda c: c.cid)).cid
                kind = "fork"
        text = f"{proc.actor} {say} #{n}"
        await self._op(
            proc,
            kind,
            thread,
            {"run": run, "from": conf.get("checkpoint_id")},
            lambda: graph.ainvoke({"messages": [HumanMessage(text)]}, {"configurable": conf}),
        )

    async def _reading(self, proc: Process, rng: random.Random, thread: str) -> None:
        saver = proc.saver
        config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        how = rng.choice(("latest", "list", "state", "id"))
        if how == "id":
            known = self._must(thread, self.sim.step)
            if known:
                cid = rng.choice(sorted(c.cid for c in known))
                by_id: Any = {"configurable": {**config["configurable"], "checkpoint_id": cid}}
                await self._op(
                    proc, "read-id", thread, {"cid": cid}, lambda: saver.aget_tuple(by_id)
                )
                return
            how = "latest"
        if how == "latest":
            await self._op(proc, "read-latest", thread, {}, lambda: saver.aget_tuple(config))
        elif how == "list":

            async def listing() -> list[Any]:
                return [t async for t in saver.alist(config)]

            await self._op(proc, "read-list", thread, {}, listing)
        else:
            graph = self._graph(proc)
            await self._op(proc, "read-state", thread, {}, lambda: graph.aget_state(config))
