"""Crash sweep: kill the writer before every request of a turn, and after
every one that writes (after a read, the crash is the same as before it).

A proxy between the writer and moto stops answering from the k-th request of a
turn on: "before k" resets request k and every later one (k is never applied);
"after k" applies request k upstream, loses its answer and resets every later one.
The writer runs with one attempt per request and small timeouts, so it dies at once.

For every k of a tool-calling chat turn and of a DeltaChannel turn (a new thread id
per crash point, one moto server for all), a fresh saver talking straight to moto
must then read the thread (``alist``, ``graph.aget_state``,
``graph.aget_state_history``, and ``aget_tuple`` by id for every checkpoint the
writer named but never saw stored) exactly as an InMemorySaver given the saver
calls the writer saw return, in order: no phantom step, no duplicate step. The one
other outcome allowed is that prefix plus whole calls that were in flight when the
writer died and some of whose requests reached moto, each applied entirely or not at
all (each request carries a header naming its call, so the proxy knows whose it is;
a put_writes may be in flight beside the next put); both outcomes are counted. Then
the fresh saver finishes the turn as a retry would, and the thread must hold the
messages of a clean run (ids aside), with a history whose steps strictly decrease
along the latest's parents and whose ids are unique.

Run with ``-s`` to see each sweep's summary line; the counts are asserted and also
recorded as test properties (``--junitxml``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import itertools
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiobotocore.session import get_session
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import StateGraph
from langgraph.types import StateSnapshot

from faults import CrashPlan, fault_proxy
from helpers import cfg
from killing import sweep_endpoint as own_endpoint
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.manifest.objects.writes import CARRIED
from langgraph_s3.testing import unique_names
from langgraph_s3.testing.graphs import CHAT_TURNS, chat_graph, delta_graph, norm

pytestmark = pytest.mark.sweep

# small limits: a reset connection fails at once, a stalled one within seconds
FAST = {"max_attempts": 1, "connect_timeout": 1, "read_timeout": 2, "request_timeout": 3}


# ------------------------------------------------------------------ turn kinds
@dataclass(frozen=True)
class TurnKind:
    name: str
    builder: Callable[[], StateGraph[Any]]
    before: tuple[str, ...]
    """Turns run (cleanly, straight to moto) before the swept one."""
    turn: str
    """The swept turn's user message."""


KINDS = {
    # CHAT_TURNS[1] makes the scripted model call the weather tool:
    # input -> agent (tool call) -> tools -> agent (answer)
    "tool": TurnKind("tool", chat_graph, tuple(CHAT_TURNS[:1]), CHAT_TURNS[1]),
    # the second turn: its writer starts from a checkpoint without a DeltaChannel
    # snapshot (so it walks the delta history), writes deltas, then a snapshot
    "delta": TurnKind("delta", lambda: delta_graph(snapshot_every=4), ("one",), "two"),
}


def user(text: str) -> dict[str, Any]:
    return {"messages": [("user", text)]}


# ------------------------------------------------------------- recording saver
@dataclass
class Call:
    method: str  # "aput" | "aput_writes"
    args: tuple[Any, ...]
    tag: str = ""
    """Sent in a header with each of its requests: the proxy tells whose they are."""
    status: str = "started"  # -> "returned" | "failed"
    requests: list[int] = field(default_factory=list)
    """The numbers of its requests through the crashing proxy."""
    last: str = ""
    """What its last request was."""
    lost: bool = False
    """Its request was the one applied whose answer was lost."""

    @property
    def checkpoint_id(self) -> str:
        """The checkpoint it stores, or the one its writes belong to."""
        if self.method == "aput":
            return str(self.args[1]["id"])
        return str(self.args[0]["configurable"]["checkpoint_id"])

    def describe(self) -> str:
        conf = self.args[0]["configurable"]
        if self.method == "aput":
            what = f"checkpoint {self.args[1]['id']} step={self.args[2].get('step')}"
        else:
            what = f"writes {[c for c, _ in self.args[1]]} task={self.args[2][:8]}"
        sent = f" requests {self.requests} last {self.last}" if self.requests else ""
        return f"{self.method}({what} on {conf.get('checkpoint_id')}) {self.status}{sent}"


CURRENT_CALL: contextvars.ContextVar[Call | None] = contextvars.ContextVar(
    "CURRENT_CALL", default=None
)


def tag_request(request: Any, **_: Any) -> None:
    """botocore ``before-send``: name the saver calls this request belongs to (an object
    manifest's version may carry the writes of several: ``objects/writes.py``)."""
    calls = [CURRENT_CALL.get(), *(c.get(CURRENT_CALL) for c in CARRIED.get())]
    tags = sorted({call.tag for call in calls if call is not None})
    if tags:
        request.headers[CrashPlan.tag_header] = ",".join(tags)


def _plain_config(config: Any) -> dict[str, Any]:
    """What a saver keeps of a config: the ids, and the scalars copied into metadata."""

    def scalars(d: Any) -> dict[str, Any]:
        return {
            k: v
            for k, v in (d or {}).items()
            if not k.startswith("__") and isinstance(v, (str, int, float, bool, type(None)))
        }

    out = {"configurable": scalars(config.get("configurable"))}
    if config.get("metadata"):
        out["metadata"] = scalars(config["metadata"])
    return out


class RecordingSaver(AsyncS3Saver):
    """Logs every aput / aput_writes (args deep-copied at call time) and its fate,
    per thread."""

    def __init__(self, logs: defaultdict[str, list[Call]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.logs = logs

    async def _record(self, call: Call, run: Any) -> Any:
        log = self.logs[call.args[0]["configurable"]["thread_id"]]
        call.tag = f"{call.args[0]['configurable']['thread_id']}#{len(log)}"
        log.append(call)
        token = CURRENT_CALL.set(call)  # seen by tag_request, in this task and its children
        try:
            out = await run
        except BaseException:
            call.status = "failed"
            raise
        finally:
            CURRENT_CALL.reset(token)
        call.status = "returned"
        return out

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        args = copy.deepcopy((_plain_config(config), checkpoint, metadata, new_versions))
        run = super().aput(config, checkpoint, metadata, new_versions)
        return await self._record(Call("aput", args), run)

    async def aput_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        args = copy.deepcopy((_plain_config(config), list(writes), task_id, task_path))
        run = super().aput_writes(config, writes, task_id, task_path)
        await self._record(Call("aput_writes", args), run)


async def replay(calls: Sequence[Call]) -> InMemorySaver:
    memory = InMemorySaver()
    for call in calls:
        if call.method == "aput":
            await memory.aput(*copy.deepcopy(call.args))
        else:
            await memory.aput_writes(*copy.deepcopy(call.args))
    return memory


# ----------------------------------------------------------------- observation
def _tuple(t: CheckpointTuple, present: dict[str, set[str]] | None = None) -> tuple[Any, ...]:
    checkpoint = t.checkpoint
    if present is not None:
        # InMemorySaver answers every channel version with the blob stored under it,
        # so a checkpoint whose DeltaChannel did not change (and so gave no value to
        # put) gets the snapshot an earlier checkpoint stored under that version. A
        # saver answers with what was put: compare with that.
        kept = present[checkpoint["id"]]
        values = {k: v for k, v in checkpoint["channel_values"].items() if k in kept}
        checkpoint = {**checkpoint, "channel_values": values}
    return (
        t.config,
        t.parent_config,
        t.metadata,
        checkpoint,
        sorted(t.pending_writes or [], key=lambda w: (w[0], w[1], repr(w[2]))),
    )


def _no_ids(value: Any) -> Any:
    """Messages without their ids: LangGraph gives an input message its id when the
    input's pending writes are applied, so every read of such a state makes a new one
    (the stored writes themselves are compared, ids included, through alist)."""
    if isinstance(value, BaseMessage):
        return value.model_copy(update={"id": None})
    if isinstance(value, dict):
        return {k: _no_ids(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_no_ids(v) for v in value]
    return value


def _snapshot(s: StateSnapshot) -> tuple[Any, ...]:
    tasks = [(t.id, t.name, t.path, t.error, t.interrupts, _no_ids(t.result)) for t in s.tasks]
    return (_no_ids(s.values), s.next, s.config, s.metadata, s.created_at, s.parent_config, tasks)


async def observe(
    builder: Callable[[], StateGraph[Any]],
    saver: Any,
    thread: str,
    probe: Sequence[str] = (),
    present: dict[str, set[str]] | None = None,
) -> Any:
    """Everything a reader can see of a thread: saver.alist, graph state and history,
    and the checkpoints ``probe`` asked for by id."""
    graph = builder().compile(checkpointer=saver)
    listed = [_tuple(t, present) async for t in saver.alist(cfg(thread, ns=None))]
    state = _snapshot(await graph.aget_state(cfg(thread)))
    hist = [_snapshot(s) async for s in graph.aget_state_history(cfg(thread))]
    by_id = []
    for cid in probe:
        conf = {"configurable": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": cid}}
        got = await saver.aget_tuple(conf)
        by_id.append(None if got is None else _tuple(got, present))
    return {"alist": listed, "state": state, "history": hist, "by_id": by_id}


def first_difference(a: Any, b: Any, path: str = "") -> str:
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} {a!r:.300} != {type(b).__name__} {b!r:.300}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b), key=repr):
            if a.get(k) != b.get(k):
                return first_difference(a.get(k), b.get(k), f"{path}[{k!r}]")
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return first_difference(x, y, f"{path}[{i}]")
    return f"{path}: {a!r:.400} != {b!r:.400}"


def linear_history(listed: list[tuple[Any, ...]]) -> str | None:
    """None when ids are unique and steps strictly decrease along the latest's parents."""
    ids = [t[0]["configurable"]["checkpoint_id"] for t in listed]
    if len(ids) != len(set(ids)):
        return f"duplicate checkpoint ids: {[i for i, n in Counter(ids).items() if n > 1]}"
    by_id = {t[0]["configurable"]["checkpoint_id"]: t for t in listed}
    node: Any = listed[0] if listed else None
    chain, last_step = 0, None
    while node is not None:
        step = node[2]["step"]
        if last_step is not None and step >= last_step:
            return f"step {step} follows step {last_step} along the parent chain"
        last_step, chain = step, chain + 1
        parent = node[1]
        node = by_id.get(parent["configurable"]["checkpoint_id"]) if parent else None
    if chain != len(listed):
        return f"{len(listed) - chain} listed checkpoints are off the latest's parent chain"
    return None


# ------------------------------------------------------------------- the sweep
@dataclass
class Lane:
    """Where one crash point at a time runs: a proxy with its own plan, and a bucket
    of its own (moto lists a prefix by scanning its whole bucket)."""

    proxy: str
    plan: CrashPlan
    names: dict[str, str]
    direct: AsyncS3Saver | None = None
    """Prepares threads straight to moto."""


@dataclass
class Sweep:
    kind: TurnKind
    moto: str
    session: Any = field(default_factory=get_session)
    """One botocore session for every saver: its service models load once (the
    savers share nothing else: each has its own clients, connections and cache)."""
    logs: defaultdict[str, list[Call]] = field(default_factory=lambda: defaultdict(list))
    clean_messages: Any = None
    outcomes: Counter[str] = field(default_factory=Counter)
    committed: Counter[str] = field(default_factory=Counter)
    """The in-flight calls found applied, by kind."""
    hit: Counter[str] = field(default_factory=Counter)
    """The requests crashed at, by mode and kind."""
    requests: int = 0
    """Requests of one clean turn."""
    tried: int = 0
    """Crash points run: before every request, after every one that writes."""
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)

    def saver(self, url: str, names: dict[str, str], **kw: Any) -> RecordingSaver:
        return RecordingSaver(self.logs, endpoint_url=url, session=self.session, **names, **kw)

    def fresh(self, lane: Lane) -> AsyncS3Saver:
        """A new saver straight to moto: nothing of the writer's clients or cache."""
        return AsyncS3Saver(endpoint_url=self.moto, session=self.session, **lane.names)

    async def prepare(self, lane: Lane, thread: str) -> int:
        """The turns before the swept one, straight to moto; returns the last step."""
        graph = self.kind.builder().compile(checkpointer=lane.direct)
        for text in self.kind.before:
            await graph.ainvoke(user(text), cfg(thread))
        return max(c.args[2]["step"] for c in self.logs[thread] if c.method == "aput")

    async def turn(self, lane: Lane, thread: str) -> BaseException | None:
        """The swept turn, by a new writer through the proxy (a process that may die)."""
        async with self.saver(lane.proxy, lane.names, **FAST) as writer:
            writer.clients.add_hook("before-send", tag_request)
            graph = self.kind.builder().compile(checkpointer=writer)
            try:
                await graph.ainvoke(user(self.kind.turn), cfg(thread))
            except Exception as exc:
                return exc
        return None

    async def clean_count(self, lane: Lane) -> int:
        """Requests of one clean turn, through the proxy. (Should a turn make more or
        fewer another time, the sweep would report a point that did not crash.)"""
        thread = f"{self.kind.name}-clean"
        await self.prepare(lane, thread)
        lane.plan.arm(0)
        error = await self.turn(lane, thread)
        assert error is None, error
        count = lane.plan.seen
        # the reference run: same turns on an InMemorySaver
        memory = self.kind.builder().compile(checkpointer=InMemorySaver())
        for text in (*self.kind.before, self.kind.turn):
            await memory.ainvoke(user(text), cfg("m"))
        self.clean_messages = norm((await memory.aget_state(cfg("m"))).values["messages"])
        async with self.fresh(lane) as reader:
            graph = self.kind.builder().compile(checkpointer=reader)
            state = await graph.aget_state(cfg(thread))
            assert norm(state.values["messages"]) == self.clean_messages
        assert all(c.status == "returned" for c in self.logs[thread])
        return count

    async def crash_point(self, lane: Lane, k: int, after: bool) -> None:
        label = f"{self.kind.name} {'after' if after else 'before'} {k}"
        thread = f"{self.kind.name}-{'a' if after else 'b'}{k}"
        log = self.logs[thread]
        last_step = await self.prepare(lane, thread)
        lane.plan.arm(k, after=after)
        crashed = await self.turn(lane, thread)
        lane.plan.dead.add(thread)  # its requests still on their way never land
        targets, tags = list(lane.plan.targets), list(lane.plan.tags)
        for call in log:
            call.requests = [
                n for n, tag in enumerate(tags, 1) if tag and call.tag in tag.split(",")
            ]
            call.last = targets[call.requests[-1] - 1] if call.requests else ""
            call.lost = after and k in call.requests
        # the in-flight calls that may have committed: some request of theirs applied (a
        # put's object and manifest update go out together: both may land while a later
        # request of the call never leaves). The read must then equal the prefix plus
        # that whole call, exactly, so a partial commit still fails the sweep.
        complete = [
            c
            for c in log
            if c.status == "failed" and c.requests and any(map(lane.plan.applied, c.requests))
        ]
        lane.plan.arm(0)  # the writer is closed; a request of it still on its way is reset (dead)
        if k <= len(targets):
            self.hit[f"{'after' if after else 'before'} {targets[k - 1]}"] += 1
        where = f"{label} (request {k} = {targets[k - 1] if k <= len(targets) else '?'})"
        if crashed is None:
            # the turn outlived the crash point: the requests from k on were PUTs of
            # checkpoints a manifest item holds (they go on after their put returns), or
            # this run made fewer requests; every call returned, so a fresh saver must
            # read all of them
            self.outcomes["completed"] += 1
            crashed = RuntimeError(f"no crash: the turn completed ({len(targets)} requests)")
        if any(c.status == "started" for c in log):
            self.failures.append(f"{where}: a saver call never finished: {log}")
            return
        try:
            outcome = await self.check(lane, thread, where, crashed, last_step, complete)
        except Exception as exc:  # report it with the crash point, and go on sweeping
            outcome = None
            self.failures.append(f"{where}: {type(exc).__name__}: {exc}")
        if outcome is not None:
            self.outcomes[f"{'after' if after else 'before'}:{outcome}"] += 1

    async def check(
        self,
        lane: Lane,
        thread: str,
        where: str,
        crashed: BaseException,
        last_step: int,
        in_flight: list[Call],
    ) -> str | None:
        """Compare what a fresh saver reads with the references, then resume."""
        log = self.logs[thread]
        acked = [c for c in log if c.status == "returned"]
        # looked up by id too: every checkpoint the writer named but never saw stored
        # (its put failed or never started), a phantom step's most direct way in
        stored = {c.args[1]["id"] for c in acked if c.method == "aput"}
        probe = sorted({c.checkpoint_id for c in log} - stored)
        present = {
            c.args[1]["id"]: set(c.args[1]["channel_values"]) for c in log if c.method == "aput"
        }
        async with self.fresh(lane) as fresh:
            actual = await observe(self.kind.builder, fresh, thread, probe)
            memory = await replay(acked)
            expected = await observe(self.kind.builder, memory, thread, probe, present)
            outcome = "acked" if actual == expected else None
            against: list[str] = []  # how each in-flight replay differs, for the message
            # each in-flight call whose requests reached moto applied whole or not at
            # all: one of them, or (several in flight at once: a put_writes beside the
            # next put) several together
            subsets = [
                list(group)
                for size in range(1, len(in_flight) + 1)
                for group in itertools.combinations(in_flight, size)
            ]
            for group in subsets if outcome is None else ():
                memory = await replay([c for c in log if c in acked or c in group])
                replayed = await observe(self.kind.builder, memory, thread, probe, present)
                names = " + ".join(c.describe() for c in group)
                against.append(f"{names}: {first_difference(actual, replayed)}")
                if actual == replayed:
                    outcome = "in-flight"
                    for call in group:
                        lost = "its answer lost" if call.lost else "answered, the caller cancelled"
                        self.committed[f"{call.method}, last request {call.last} ({lost})"] += 1
                    break
            if outcome is None:
                self.failures.append(
                    f"{where}: the thread read after the crash is neither the acknowledged "
                    f"prefix nor the prefix plus whole in-flight calls whose requests "
                    f"reached moto ({[c.describe() for c in in_flight]})\n"
                    f"  crash: {type(crashed).__name__}: {str(crashed)[:200]}\n"
                    f"  calls: {[c.describe() for c in log]}\n"
                    f"  first difference from the acknowledged prefix: "
                    f"{first_difference(actual, expected)}\n"
                    f"  from the prefix plus each in-flight call: {against}"
                )
                return None

            # resume with the fresh saver, as a retried invocation would: the turn's
            # input checkpoint committed -> continue from the latest; else run it again
            graph = self.kind.builder().compile(checkpointer=fresh)
            latest = await fresh.aget_tuple(cfg(thread))
            assert latest is not None
            if latest.metadata["step"] > last_step:
                await graph.ainvoke(None, cfg(thread))
            else:
                await graph.ainvoke(user(self.kind.turn), cfg(thread))
            final = await graph.aget_state(cfg(thread))
            listed = [_tuple(t) async for t in fresh.alist(cfg(thread, ns=None))]
        problem = linear_history(listed)
        if problem is None and final.next:
            problem = f"next={final.next}"
        if problem is None and norm(final.values["messages"]) != self.clean_messages:
            problem = f"messages {norm(final.values['messages'])} != {self.clean_messages}"
        if problem:
            self.failures.append(f"{where} ({outcome}), after resuming: {problem}")
            return None
        return outcome


LANES = 3
"""Crash points swept at once (each lane with its own proxy and bucket)."""

READS = frozenset({"GET-s3", "HEAD-s3", "GetItem", "Query", "Scan", "DescribeTable"})
"""Requests that change nothing upstream (as the proxy names them)."""


@pytest.fixture(scope="module")
def sweep_endpoint() -> Iterator[str]:
    """One moto server for the whole sweep, in a process of its own: moto's CPU then
    runs beside the sweep's instead of sharing its GIL (``killing.sweep_endpoint``)."""
    with own_endpoint() as url:
        yield url


async def run_sweep(kind: str, endpoint: str, manifest: str = "dynamodb") -> Sweep:
    """Count a clean turn's requests, then crash it at each, LANES crash points at once
    (``manifest``: the deployment's, a DynamoDB table or the bucket alone)."""
    started = time.monotonic()
    sweep = Sweep(KINDS[kind], endpoint)
    table = unique_names()["table"]
    async with contextlib.AsyncExitStack() as stack:
        lanes = []
        for _ in range(LANES):
            plan = CrashPlan(every=10**9)
            names = {"bucket": unique_names()["bucket"]}
            names.update({"manifest": "s3"} if manifest == "s3" else {"table": table})
            lane = Lane(stack.enter_context(fault_proxy(endpoint, plan)), plan, names)
            lane.direct = await stack.enter_async_context(sweep.saver(endpoint, names))
            await lane.direct.setup()
            lanes.append(lane)
        sweep.requests = await sweep.clean_count(lanes[0])
        clean = list(lanes[0].plan.targets)  # what each request of the clean turn was
        # "after k" applies request k and loses its answer; for a read that changes
        # nothing upstream, and the writer sees the same reset: it is "before k" again.
        points = [(k, False) for k in range(1, sweep.requests + 1)]
        points += [(k, True) for k in range(1, sweep.requests + 1) if clean[k - 1] not in READS]
        sweep.tried = len(points)

        async def run(lane: Lane) -> None:
            while points:
                k, after = points.pop(0)
                await sweep.crash_point(lane, k, after)

        await asyncio.gather(*(run(lane) for lane in lanes))
    sweep.seconds = time.monotonic() - started
    return sweep


@contextlib.contextmanager
def quiet_proxy_resets() -> Iterator[None]:
    """The proxy logs a reset of a connection its client already dropped: noise here."""
    logger = logging.getLogger("aiohttp.server")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


# One sweep per test, in the test's own process: the work is CPU-bound (botocore,
# LangGraph, the proxies), and pytest-xdist runs the two sweeps on two workers (two
# cores) beside the rest of the suite, without a child interpreter to start per sweep.
@pytest.mark.parametrize(
    ("kind", "manifest"), [("delta", "dynamodb"), ("tool", "dynamodb"), ("tool", "s3")]
)
def test_crash_sweep(
    kind: str,
    manifest: str,
    sweep_endpoint: str,
    record_property: Callable[[str, object], None],
) -> None:
    cpu = time.process_time()
    with quiet_proxy_resets():
        sweep = asyncio.run(run_sweep(kind, sweep_endpoint, manifest))
    cpu_seconds = time.process_time() - cpu
    n = sweep.requests
    tried = sweep.tried
    out = sweep.outcomes
    acked = out["before:acked"] + out["after:acked"]
    in_flight = out["before:in-flight"] + out["after:in-flight"]
    summary = (
        f"crash sweep [{kind}, manifest {manifest}]: {n} requests per turn, {tried} crash points "
        f"(before every k=1..{n}, after each of the {tried - n} writes); "
        f"identical to the acknowledged prefix: {acked} "
        f"(before {out['before:acked']}, after {out['after:acked']}); to the prefix plus the "
        f"in-flight call: {in_flight} (before {out['before:in-flight']}, after "
        f"{out['after:in-flight']}: {dict(sweep.committed)}); the turn completed past the "
        f"crash point (held checkpoints stored later): {out['completed']}; "
        f"failures: {len(sweep.failures)}; "
        f"{sweep.seconds:.1f}s ({cpu_seconds:.1f} CPU-s of this process); "
        f"crashed at: {dict(sorted(sweep.hit.items()))}"
    )
    print("\n" + summary)
    for name, value in (("crash_points", tried), ("acked", acked), ("in_flight", in_flight)):
        record_property(f"{kind}_{manifest}_{name}", value)
    assert not sweep.failures, "\n".join(sweep.failures)
    assert acked + in_flight == tried, summary
    assert n < tried < 2 * n, summary  # some reads, some writes
    assert n >= 8, summary  # the turn really was swept request by request
    # a put whose manifest update was applied but unanswered shows up as committed
    assert out["after:in-flight"] > 0, summary
