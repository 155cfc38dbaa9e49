"""One simulated world per seed: LangGraph writers and maintenance racing each other on
shared threads, several savers (processes) on one bucket and one table, checked
against the reference model (``model.py``) after every completed operation (and, in
paranoid mode, after every step), then settled and held to conservation
(``conservation.py``). What each role does, the Lambda host's freezes and reaps
included, is in ``actors.py``.

``run_seed(seed)`` is a pure function of ``seed``: the world's shape (actors, threads,
faults, clock skew, TTL), every choice of every actor, the interleaving and the faults
all come from it, so a failing seed replays exactly (``Result.trace``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import dataclasses
import functools
import gc
import hashlib
import random
import traceback
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import get_checkpoint_metadata

from langgraph_s3.checkpoint.saver import AsyncS3Saver
from langgraph_s3.testing.fakes import MemoryBucket, MemoryTable, StoredObject
from langgraph_s3.testing.graphs import chat_graph, norm

from .actors import CROWD, Actors, Spec
from .bucket_table import BucketTable, manifest_format
from .checks import BUCKET, DEPLOYMENT, TABLE, Checks, Seen, Watch, plain_saver
from .conservation import Conservation
from .loop import (
    EPOCH,
    Crash,
    Process,
    Profile,
    Scheduler,
    SimDeadlock,
    SimLoop,
    Step,
    VirtualClock,
)
from .model import REMOVALS, Ckpt, Finding, Model, Op
from .ports import SimObjectStore, sim_manifest, tallied
from .promises import Promises
from .shims import PROCESS, Deterministic

BASE_THREADS = ("t0", "t1")
TTL_SECONDS = 30
MAX_STEPS = 6000
"""Steps (released requests) a world may take: more is a livelock (a finding)."""

OP: contextvars.ContextVar[Op | None] = contextvars.ContextVar("sim_op", default=None)
"""The operation whose code is running (its puts are recorded against it)."""


# ------------------------------------------------------------------------ savers
class SimSaver(AsyncS3Saver):
    """The library's saver; its ``aput`` tells the model what was asked and acknowledged."""

    world: World | None = None
    proc: Process | None = None

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        world, proc = self.world, self.proc
        if world is None or proc is None:
            return await super().aput(config, checkpoint, metadata, new_versions)
        conf = config["configurable"]
        world.sim.put_by[str(checkpoint["id"])] = proc
        run = get_checkpoint_metadata(config, metadata).get("run_id")
        started, called = world.clock.time(), world.sim.step
        c = world.model.attempt(
            str(conf["thread_id"]),
            str(checkpoint["id"]),
            conf.get("checkpoint_id"),
            norm(checkpoint["channel_values"]),
            None if run is None else str(run),
            OP.get(),
            started,
        )
        out = await super().aput(config, checkpoint, metadata, new_versions)
        if not proc.dead:
            world.model.ack(c, world.sim.step, OP.get(), world.clock.time(), started, called)
        return out


# --------------------------------------------------------------------- the world
@dataclass
class Base:
    """The threads every world starts from (built once per TTL setting)."""

    objects: dict[str, StoredObject]
    items: dict[tuple[str, str], dict[str, Any]]
    ckpts: list[Ckpt]
    runs: list[str]


@functools.cache
def base_world(ttl: int | None, manifest: str = "dynamodb") -> Base:
    """Two threads with one chat turn each, written just before virtual time zero (the
    manifest in a table, or in the bucket: then the objects hold it and ``items`` is
    empty)."""
    clock = VirtualClock(EPOCH - 10.0)
    bucket = MemoryBucket(BUCKET, clock=clock.time)
    table: Any = MemoryTable(TABLE, clock=clock.time)
    if manifest == "s3":
        manifest_format(bucket)
        table = BucketTable(bucket)
    model = Model(ttl)
    with Deterministic(clock, 0):
        loop = SimLoop(clock, idle=lambda: None)
        try:
            saver = plain_saver(bucket, table, ttl)
            graph = chat_graph().compile(checkpointer=saver)

            async def build() -> None:
                for n, thread in enumerate(BASE_THREADS):
                    run = str(uuid.UUID(int=n + 1, version=4))
                    conf = {"thread_id": thread, "checkpoint_ns": "", "run_id": run}
                    await graph.ainvoke(
                        {"messages": [HumanMessage(f"setup {n}")]}, {"configurable": conf}
                    )
                    clock.advance(1.0)
                await saver.aflush()  # the base holds no copies: its objects are stored

            loop.run_until_complete(build())
            loop.run_until_complete(_record_base(saver, model, clock))
            gc.collect()  # once: LangGraph's generators in cycles finalize on this loop
            loop.run_until_complete(loop.shutdown_asyncgens())
            for _ in range(3):
                loop.run_until_complete(asyncio.sleep(0))
        finally:
            loop.close()
    items = {} if manifest == "s3" else copy.deepcopy(table.items)
    return Base(dict(bucket.objects), items, list(model.ckpts.values()), model.runs)


async def _record_base(saver: AsyncS3Saver, model: Model, clock: VirtualClock) -> None:
    for thread in BASE_THREADS:
        async for tup in saver.alist({"configurable": {"thread_id": thread}}):
            conf = tup.config["configurable"]
            parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
            run = (tup.metadata or {}).get("run_id")
            c = model.attempt(
                thread,
                conf["checkpoint_id"],
                parent,
                norm(tup.checkpoint["channel_values"]),
                run,
                None,
                clock.time(),
            )
            model.ack(c, 0, None, clock.time(), clock.time() - 4.0, 0)


@functools.cache
def _chat() -> Any:
    """``chat_graph`` compiled once; each process gets a copy bound to its saver."""
    return chat_graph().compile()


@dataclass
class Result:
    """What one seed did and found."""

    seed: int
    trace: list[Step]
    findings: list[Finding]
    checks: Counter[str]
    ops: list[Op]
    shape: str
    tally: Counter[str] = dataclasses.field(default_factory=Counter)
    """The rare interleavings the seed reached (``Scheduler.tally``)."""

    def digest(self) -> str:
        """A short fingerprint of the trace."""
        return hashlib.sha256(repr(self.trace).encode()).hexdigest()[:16]


class World(Actors, Conservation, Promises, Checks):
    """Everything one seed builds, runs and checks."""

    def __init__(self, seed: int, *, paranoid: bool = False) -> None:
        self.seed = seed
        self.paranoid = paranoid
        rng = random.Random(f"{seed}/world")
        self.ttl = TTL_SECONDS if rng.random() < 0.25 else None
        profile = self._mood(rng)
        self.skew = -2.0 if rng.random() < 0.2 else 0.0
        # a third of the seeds keep the manifest in the bucket (manifest="s3"): drawn
        # apart, so the other draws of a seed are those it always had
        kept = random.Random(f"{seed}/manifest")
        self.manifest_kind = "s3" if kept.random() < 1 / 3 else "dynamodb"
        # on the bucket's manifest, half the worlds freeze writers for over an hour
        # (past when old versions are freed: the fence's case) and run a collector
        self.long_freezes = self.manifest_kind == "s3" and kept.random() < 0.5
        kinds = ["forker", "packer", "copier", "pruner", "deleter", "importer", "reader", "crowd"]
        if self.ttl:
            kinds.append("sweeper")
            profile.jump_rate = max(profile.jump_rate, 0.01)
        picked = rng.sample(kinds, rng.randint(2, 3))
        self.specs = [
            Spec("w1", "writer", rng.randint(1, 2)),
            Spec("w2", "writer", rng.randint(1, 2)),
        ]
        self.specs += [
            Spec(k, k, rng.randint(*CROWD) if k == "crowd" else rng.randint(1, 2))
            for k in sorted(picked)
        ]
        host = rng.random()
        self.host = "lambda" if host < 0.4 else "freezer" if host < 0.65 else ""
        """How the writers' host ends a call: ``lambda``, its post-response flush and
        maybe a freeze; ``freezer``, maybe a freeze right after the answer."""
        # half the worlds: the writers take turns on t0, one after the other (a user's
        # messages reaching two Lambdas in turn), the other half they run as they come
        self.alternate: list[str] = []
        if rng.random() < 0.5:
            slots = [s.name for s in self.specs[:2] for _ in range(s.ops)]
            rng.shuffle(slots)
            self.alternate = slots
        profile.weights = {s.name: rng.choice((0.3, 1.0, 1.0, 3.0)) for s in self.specs}
        if self.long_freezes:
            self.specs.append(Spec("collector", "collector", kept.randint(2, 4)))
        self.shape = (
            f"{self.mood}, manifest={self.manifest_kind}"
            + (" (long freezes)" if self.long_freezes else "")
            + f", ttl={self.ttl}, skew={self.skew}, "
            + ("writers in turn, " if self.alternate else "")
            + (f"{self.host} host, " if self.host else "")
            + ", ".join(f"{s.name}x{s.ops}" for s in self.specs)
        )
        self.clock = VirtualClock()
        self.sim = Scheduler(seed, self.clock, profile, MAX_STEPS)
        self.sim.on_applied = self._applied
        self.sim.on_put = self._put_landed
        if self.ttl:
            self.sim.on_step = self._stepped
        if paranoid:
            self.sim.before_release = self._paranoid
        base = base_world(self.ttl, self.manifest_kind)
        self.bucket = MemoryBucket(BUCKET, clock=self.clock.time)
        self.bucket.objects.update(base.objects)
        self.table: Any = MemoryTable(TABLE, clock=self.clock.time)
        if self.manifest_kind == "s3":
            self.table = BucketTable(self.bucket)
        self.table.items.update(copy.deepcopy(base.items))
        self.model = Model(self.ttl)
        for c in base.ckpts:
            self.model.ckpts[c.thread, c.cid] = dataclasses.replace(c, survived=set())
            self.model.values[c.cid] = c.values
            self.model.lineage.setdefault(c.thread, {c.thread})
            if self.ttl:
                self.model.live_until[c.thread] = max(
                    self.model.live_until.get(c.thread, 0.0), c.started - 2.0 + self.ttl
                )
        self.model.runs = list(base.runs)
        self.threads = list(BASE_THREADS)
        self.findings: list[Finding] = []
        self.checks: Counter[str] = Counter()
        self.watches: list[Watch] = []
        self._ops = 0
        self._copies = 0
        self._checked_step = -1
        self._graphs: dict[int, Any] = {}
        self._slot = 0
        self._slot_changed: asyncio.Condition | None = None
        self.procs: list[Process] = []
        """Every process the world spawned."""
        self._seen: dict[Hashable, Seen] = {}
        """Raw-state fingerprint -> the checker's read of it."""

    def _mood(self, rng: random.Random) -> Profile:
        """How hostile the world is: calm, faults, crashes or clock jumps."""
        mood = rng.random()
        profile = Profile()
        if mood < 0.45:
            self.mood = "calm"
        elif mood < 0.7:
            self.mood, profile.fault_rate = "faults", 0.04
        elif mood < 0.9:
            self.mood, profile.fault_rate, profile.crash_rate = "crashes", 0.01, 0.012
        else:
            self.mood, profile.jump_rate = "clock-jumps", 0.01
        return profile

    # -------------------------------------------------------------- running
    def run(self) -> Result:
        loop = SimLoop(self.clock, self.sim.idle)
        loop.set_exception_handler(self._loop_error)
        with Deterministic(self.clock, self.seed), tallied(self.sim):
            try:
                loop.run_until_complete(self._main())
            except SimDeadlock as exc:
                self._find("deadlock", f"{exc} (pending: {len(self.sim.pending)})")
            finally:
                self._shutdown(loop)
        if self.sim.exhausted:
            self._find("livelock", f"the world took {MAX_STEPS} steps without ending")
        return Result(
            self.seed,
            self.sim.trace,
            self.findings,
            self.checks,
            self.model.ops,
            self.shape,
            self.sim.tally,
        )

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """An error no one retrieved (a task that outlived its call, a lost exception)."""
        exc = context.get("exception")
        what = f"{type(exc).__name__}: {exc}" if exc is not None else ""
        self._find("loop-error", f"{context.get('message')} {what}"[:600])

    def _shutdown(self, loop: SimLoop) -> None:
        for proc in list(self.sim.processes):
            self.sim.kill(proc)
        tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in tasks:
            t.cancel()
        with contextlib.suppress(BaseException):
            if tasks:
                loop.run_until_complete(asyncio.wait(tasks))
            loop.run_until_complete(loop.shutdown_asyncgens())
            for _ in range(3):  # the aclose() of generators dropped just now
                loop.run_until_complete(asyncio.sleep(0))
        loop.close()

    async def _main(self) -> None:
        tasks = [asyncio.create_task(self._actor(spec), name=spec.name) for spec in self.specs]
        await asyncio.wait(tasks)
        for t in tasks:
            exc = t.exception()
            if exc is not None:
                self._find("harness", "".join(traceback.format_exception(exc))[-2000:])
        async with self._frozen():
            await self._check_all("end")
        if self.findings or self.sim.exhausted:
            return
        await self._settle()
        async with self._frozen():
            await self._check_all("settled")
            self._conservation()
        if self.ttl and not self.findings:
            await self._sweep_all()
            async with self._frozen():
                await self._check_all("swept")
                self._expired_lives()

    def _event(self, proc: Process, text: str) -> None:
        self.sim.trace.append(Step(self.sim.step, proc.name, text, "", "op"))

    @contextlib.asynccontextmanager
    async def _frozen(self) -> AsyncIterator[None]:
        """Nothing is released while a check reads the world; it reads as no process."""
        self.sim.frozen += 1
        token = PROCESS.set(None)
        try:
            yield
        finally:
            PROCESS.reset(token)
            self.sim.frozen -= 1

    # -------------------------------------------------------------- processes
    def _spawn(self, spec: Spec, n: int, *, actor: str | None = None) -> Process:
        skew = self.skew if spec.name == "w2" else 0.0
        name = actor or (f"{spec.name}#{n}" if n else spec.name)
        proc = self.sim.spawn(name, actor or spec.name, skew=skew)
        self.procs.append(proc)
        rng = random.Random(f"{self.seed}/{proc.name}/cache")
        store = SimObjectStore(self.bucket, self.sim, proc, cache_bytes=rng.choice((0, 1 << 20)))
        manifest = sim_manifest(
            self.table, self.sim, proc, deployment=DEPLOYMENT, ttl_seconds=self.ttl
        )
        table = {} if self.manifest_kind == "s3" else {"table": TABLE}
        saver = SimSaver(bucket=BUCKET, object_store=store, manifest=manifest, **table)
        store.stats = manifest.stats = saver.stats
        saver.world, saver.proc = self, proc
        proc.saver = saver
        return proc

    def _graph(self, proc: Process) -> Any:
        graph = self._graphs.get(id(proc))
        if graph is None:
            graph = self._graphs[id(proc)] = _chat().copy({"checkpointer": proc.saver})
        return graph

    # ----------------------------------------------------------- operations
    async def _op(
        self,
        proc: Process,
        kind: str,
        thread: str,
        args: dict[str, Any],
        body: Callable[[], Awaitable[Any]],
    ) -> Op:
        self._ops += 1
        op = Op(self._ops, proc.actor, kind, thread, self.sim.step, args)
        self.model.ops.append(op)
        injected, requests = proc.injected, proc.requests
        if kind == "copy":
            target = args["target"]
            self.model.lineage.setdefault(target, {target}).update(
                self.model.lineage.get(thread, {thread})
            )
        if kind in ("copy", "export"):
            watch = Watch(op, thread)
            self.watches.append(watch)
            self._snapshot(watch)
        if kind in REMOVALS:
            args["before"] = {
                t: {c.cid for c in self._must(t, self.sim.step)} for t in self._threads_of(op)
            }
        self._event(proc, f"start {kind} #{op.id} {thread} {self._show(args)}")
        token = OP.set(op)
        result: Any = None
        try:
            result = await body()
            op.outcome = "ok"
        except Crash as exc:
            op.outcome, op.error = "crash", exc
        except Exception as exc:
            op.outcome, op.error = "error", exc
        finally:
            OP.reset(token)
        if proc.dead:
            op.outcome = "crash"
        op.end = self.sim.step
        op.injected = proc.injected - injected
        op.requests = proc.requests - requests
        failed = "" if op.error is None else f" {type(op.error).__name__}"
        self._event(proc, f"end {kind} #{op.id}: {op.outcome}{failed}")
        async with self._frozen():
            try:
                await self._after(op, result)
            except Exception:
                self._find("harness", traceback.format_exc()[-2000:])
        self.watches = [w for w in self.watches if w.op is not op]
        return op

    @staticmethod
    def _show(args: dict[str, Any]) -> str:
        return ", ".join(
            f"{k}={sorted(v) if isinstance(v, set) else v}"
            for k, v in args.items()
            if k not in ("file", "export", "before")
        )


def run_seed(seed: int, *, paranoid: bool = False) -> Result:
    """Build, run and check the world of ``seed``."""
    return World(seed, paranoid=paranoid).run()


def format_trace(result: Result, *, last: int | None = None, only: set[str] | None = None) -> str:
    """The trace, one step a line (``only``: those processes' steps and events)."""
    steps = [s for s in result.trace if only is None or s.process.split("#")[0] in only]
    if last is not None:
        steps = steps[-last:]
    return "\n".join(
        f"{s.n:5} {s.process:<10} {s.request:<22} {s.target} [{s.fate}]"
        if s.fate != "op"
        else f"{s.n:5} {s.process:<10} -- {s.request}"
        for s in steps
    )
