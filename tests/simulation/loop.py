"""Virtual time and a seeded scheduler: every request is a yield point, and one
``random.Random(seed)`` picks which pending actor's request is applied next.

:class:`SimLoop` is an asyncio loop whose clock is virtual: when no task can run and
no request is waiting, time jumps to the next timer (``asyncio.sleep``, backoffs,
lease polls cost nothing). Executor calls (LangGraph's sync nodes, ``to_thread``) run
inline, so no thread ever makes the order depend on the OS. When every task is blocked,
the loop asks the :class:`Scheduler` to release one pending request: it draws the actor,
the request, the virtual latency and the request's fate (applied, failed before, applied
with its answer lost, timed out, the process killed before or after it).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import selectors
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from langgraph_s3.core.tasks import BACKGROUND
from langgraph_s3.errors import EndpointTimeoutError, EndpointUnreachableError, ServiceError

EPOCH = 1_767_225_600.0
"""Epoch seconds of virtual time zero (2026-01-01T00:00:00Z)."""
REQUEST_TIMEOUT = 25.0
"""A request waiting longer than this (``Limits.request_timeout``) times out unapplied."""


class Crash(BaseException):
    """The process was killed: raised at every request it makes from then on. Not an
    ``Exception``, so no ``except Exception`` in the library or LangGraph absorbs it."""


class SimDeadlock(RuntimeError):
    """Every task waits, no request is pending and no timer is set."""


class VirtualClock:
    """Virtual seconds since :data:`EPOCH`; only the loop and the scheduler move it."""

    def __init__(self, epoch: float = EPOCH) -> None:
        self.epoch = epoch
        self.elapsed = 0.0

    def time(self) -> float:
        """Epoch seconds now (the manifest's and the bucket's clock)."""
        return self.epoch + self.elapsed

    def advance(self, seconds: float) -> None:
        self.elapsed += max(0.0, seconds)


class _Selector(selectors.BaseSelector):
    """Polls the loop's self-pipe without blocking; a wait for a timer moves the clock."""

    def __init__(self, clock: VirtualClock) -> None:
        self._clock = clock
        self._inner = selectors.DefaultSelector()

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.modify(fileobj, events, data)

    def get_map(self) -> Any:
        return self._inner.get_map()

    def close(self) -> None:
        self._inner.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = self._inner.select(0)
        if events or timeout == 0:
            return events
        if timeout is None:
            raise SimDeadlock("every task is blocked: no request pending, no timer set")
        self._clock.advance(timeout)
        return []


class SimLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time that calls ``idle`` whenever nothing can run."""

    def __init__(self, clock: VirtualClock, idle: Callable[[], None]) -> None:
        self._virtual = clock
        self._idle = idle
        super().__init__(_Selector(clock))

    def time(self) -> float:
        return self._virtual.elapsed

    def run_in_executor(self, executor: Any, func: Callable[..., Any], *args: Any) -> Any:  # type: ignore[override]
        """Run ``func`` now, inline: a thread would make the order depend on the OS."""
        fut = self.create_future()
        try:
            fut.set_result(func(*args))
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            fut.set_exception(exc)
        return fut

    def _due(self) -> bool:
        scheduled: list[asyncio.TimerHandle] = self._scheduled  # type: ignore[attr-defined]
        return bool(scheduled) and scheduled[0].when() <= self.time() + self._clock_resolution  # type: ignore[attr-defined]

    def _run_once(self) -> None:
        if not self._ready and not self._stopping and not self._due():  # type: ignore[attr-defined]
            self._idle()
        super()._run_once()  # type: ignore[misc]


@dataclass(eq=False)
class Process:
    """One Lambda: its own saver, caches and clock; killed by a crash, never revived."""

    name: str
    actor: str
    skew: float = 0.0
    """Seconds its clock (``time.time``, LangGraph's uuid6 ids) is ahead of true time."""
    faults: bool = True
    dead: bool = False
    last_v6: int | None = None
    """LangGraph's uuid6 monotonic guard: one per process, as in separate Lambdas."""
    requests: int = 0
    saver: Any = None
    """Its saver (the harness's ``SimSaver``)."""
    items: Any = None
    """Its store items, where a world writes some (the forgetting world's)."""
    injected: int = 0
    """Faults, timeouts and crashes its requests met."""
    asleep: bool = False
    """Frozen (a Lambda after its answer): its requests wait, none is released."""
    froze: int | None = None
    """Step of its last freeze (None: never frozen)."""
    thawed: int | None = None
    """Step it last resumed at after a freeze."""
    reaped: bool = False
    """Killed while frozen: it never resumed."""
    late: set[str] = field(default_factory=set)
    """Keys of the PUTs it had sent when it froze, sent again at its thaw (late)."""


class Fate(NamedTuple):
    kind: str
    """ok, fail (not applied), lost (applied, answer lost), timeout (not applied),
    crash (killed before it is applied), crash-after (applied, then killed), killed."""
    error: Exception | None = None


class Step(NamedTuple):
    n: int
    process: str
    request: str
    target: str
    fate: str


@dataclass(eq=False)
class _Request:
    seq: int
    proc: Process
    op: str
    target: str
    write: bool
    sent: float
    fut: asyncio.Future[Fate]
    background: bool = False
    """Sent by a task that stores a held checkpoint's object (``inline.BACKGROUND``):
    it may outlive the call that began it."""


@dataclass
class Profile:
    """How hostile one seed's world is."""

    fault_rate: float = 0.0
    lost_share: float = 0.5
    crash_rate: float = 0.0
    jump_rate: float = 0.0
    jump: tuple[float, float] = (5.0, 150.0)
    latency: tuple[float, float] = (0.001, 0.02)
    weights: dict[str, float] = field(default_factory=dict)
    """Actor -> how often it is picked among the pending (PCT-like priorities)."""


class Scheduler:
    """Holds every request at its gate; releases one at a time, as the seed says."""

    def __init__(self, seed: int, clock: VirtualClock, profile: Profile, max_steps: int) -> None:
        self.rng = random.Random(f"{seed}/schedule")
        self.clock = clock
        self.profile = profile
        self.max_steps = max_steps
        self.pending: list[_Request] = []
        self.trace: list[Step] = []
        self.step = 0
        self.frozen = 0
        """Checks in progress: nothing is released meanwhile."""
        self.exhausted = False
        self.processes: list[Process] = []
        self.on_applied: Callable[[Process, str, str], None] | None = None
        """Called after a write request was applied (the world's snapshot hook)."""
        self.tally: Counter[str] = Counter()
        """Rare interleavings reached (the ports and the world count them)."""
        self.put_by: dict[str, Process] = {}
        """Checkpoint id -> the process that last began its put."""
        self.on_put: Callable[[Process, str, bytes, str | None], None] | None = None
        """Called after each PUT's answer (the world counts late ones)."""
        self.on_step: Callable[[], None] | None = None
        """Called at each step once the clock moved, before the request is answered."""
        self.before_release: Callable[[], bool] | None = None
        """Called when idle; True: it started a check, release nothing now."""
        self._seq = 0

    # -- the loop's hook --------------------------------------------------------
    def idle(self) -> None:
        if self.frozen or not self.pending:
            return
        if self.before_release is not None and self.before_release():
            return
        if self.step >= self.max_steps:
            self.exhausted = True
            for proc in list(self.processes):
                self.kill(proc)
            return
        self._release()

    def _release(self) -> None:
        p = self.profile
        awake = [r for r in self.pending if not r.proc.asleep]
        if not awake:  # only frozen processes wait: a timer (a thaw) moves the clock
            return
        actors = sorted({r.proc.actor for r in awake})
        weights = [p.weights.get(a, 1.0) for a in actors]
        actor = self.rng.choices(actors, weights=weights)[0]
        mine = [r for r in awake if r.proc.actor == actor]
        req = mine[self.rng.randrange(len(mine))]
        self.pending.remove(req)
        self.step += 1
        if p.jump_rate and self.rng.random() < p.jump_rate:
            jump = self.rng.uniform(*p.jump)
            self.clock.advance(jump)
            self.trace.append(Step(self.step, "clock", f"jump {jump:.1f}s", "", "ok"))
        self.clock.advance(self.rng.uniform(*p.latency))
        if self.on_step is not None:
            self.on_step()
        fate = self._fate(req)
        req.proc.requests += 1
        req.proc.injected += fate.kind != "ok"
        self.trace.append(Step(self.step, req.proc.name, req.op, req.target, fate.kind))
        req.fut.set_result(fate)

    def _fate(self, req: _Request) -> Fate:
        p, rng = self.profile, self.rng
        where = f"{req.op} {req.target!r} (step {self.step})"
        if self.clock.elapsed - req.sent > REQUEST_TIMEOUT:
            return Fate("timeout", EndpointTimeoutError(f"{where}: timed out after its deadline"))
        if not req.proc.faults:
            return Fate("ok")
        if p.crash_rate and rng.random() < p.crash_rate:
            return Fate("crash" if rng.random() < 0.5 else "crash-after")
        if p.fault_rate and rng.random() < p.fault_rate:
            if req.write and rng.random() < p.lost_share:
                return Fate("lost", EndpointTimeoutError(f"{where}: applied, its answer lost"))
            if rng.random() < 0.5:
                return Fate(
                    "fail", ServiceError(f"{where}: 503 SlowDown", code="SlowDown", status=503)
                )
            return Fate("fail", EndpointUnreachableError(f"{where}: connection reset"))
        return Fate("ok")

    # -- processes ------------------------------------------------------------------
    def spawn(self, name: str, actor: str, *, skew: float = 0.0, faults: bool = True) -> Process:
        proc = Process(name, actor, skew, faults)
        self.processes.append(proc)
        return proc

    def freeze(self, proc: Process) -> None:
        """The process is frozen: nothing it sent or sends is released until :meth:`thaw`."""
        proc.asleep, proc.froze = True, self.step
        self.trace.append(Step(self.step, proc.name, "frozen", "", "op"))

    def thaw(self, proc: Process) -> None:
        """It resumes: what it had sent goes out now (its deadlines start again)."""
        if proc.dead or not proc.asleep:
            return
        self.step += 1  # time passed: a step of its own (expiry is judged by steps)
        proc.asleep, proc.thawed = False, self.step
        for req in self.pending:
            if req.proc is proc:
                req.sent = self.clock.elapsed
                if req.op == "s3.PutObject":
                    proc.late.add(req.target)
        self.trace.append(Step(self.step, proc.name, "thawed", "", "op"))

    def reap(self, proc: Process) -> None:
        """The host kills the frozen process: what it had sent is never applied."""
        self.step += 1
        proc.reaped = True
        self.kill(proc)

    def kill(self, proc: Process) -> None:
        """The process dies: its pending requests are never applied."""
        if proc.dead:
            return
        proc.dead, proc.asleep = True, False
        if proc in self.processes:
            self.processes.remove(proc)
        self.trace.append(Step(self.step, proc.name, "killed", "", "crash"))
        for req in [r for r in self.pending if r.proc is proc]:
            self.pending.remove(req)
            if not req.fut.done():
                req.fut.set_result(Fate("killed"))

    # -- the ports' side ------------------------------------------------------------
    async def _gate(self, proc: Process, op: str, target: str, write: bool) -> Fate:
        if proc.dead:
            raise Crash(proc.name)
        fut: asyncio.Future[Fate] = asyncio.get_running_loop().create_future()
        req = _Request(
            self._seq, proc, op, target, write, self.clock.elapsed, fut, BACKGROUND.get()
        )
        self._seq += 1
        self.pending.append(req)
        try:
            return await fut
        except asyncio.CancelledError:
            with contextlib.suppress(ValueError):
                self.pending.remove(req)
            raise

    @contextlib.asynccontextmanager
    async def request(
        self, proc: Process, op: str, target: str, *, write: bool
    ) -> AsyncIterator[None]:
        """One request: wait for its turn, then fail, apply (the body), or crash."""
        fate = await self._gate(proc, op, target, write)
        if fate.kind in ("crash", "killed"):
            self.kill(proc)
            raise Crash(proc.name)
        if fate.kind in ("fail", "timeout"):
            assert fate.error is not None
            raise fate.error
        try:
            yield
        except Exception:
            if fate.kind == "crash-after":
                self.kill(proc)
                raise Crash(proc.name) from None
            raise
        if write and self.on_applied is not None:
            self.on_applied(proc, op, target)
        if fate.kind == "crash-after":
            self.kill(proc)
            raise Crash(proc.name)
        if fate.kind == "lost":
            assert fate.error is not None
            raise fate.error
