"""A deletion's late pass and the write license against what races them: an import's
replace of every kind of history, maintenance after it, healthy graphs whose steps
outlast the license in every durability, clocks that disagree, two deletions, a pass
that fails midway, a busy thread met by the stream sweeper, an evicted sighting, and
the listings the late records must stay out of."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from langgraph.types import Command
from unit_helpers import FrozenWrites, HeldStep, frozen_turn

from langgraph_s3.checkpoint.erasure import ERASED, late_pass_seconds
from langgraph_s3.errors import ServiceError
from langgraph_s3.manifest.decide import LATE_SK
from langgraph_s3.testing.fakes import MemoryBucket, MemoryTable, memory_saver
from langgraph_s3.testing.graphs import (
    approval_graph,
    chat_graph,
    delta_graph,
    fanout_graph,
    nested_graph,
)

pytestmark = pytest.mark.unit
CFG: Any = {"configurable": {"thread_id": "t"}}


def clocked() -> tuple[list[float], MemoryBucket, MemoryTable]:
    now = [time.time()]
    return now, MemoryBucket(clock=lambda: now[0]), MemoryTable(clock=lambda: now[0])


def late_records(table: MemoryTable) -> list[Any]:
    return [i for i in table.items.values() if i["sk"]["S"] == LATE_SK]


def live_keys(bucket: MemoryBucket, part: str = "/t/") -> set[str]:
    return {k for k, o in bucket.objects.items() if part in k and o.body != ERASED}


async def snapshot(saver: Any, cfg: Any) -> list[Any]:
    """Every checkpoint of the thread (all namespaces reachable through alist) with
    its pending writes: what a reader sees."""
    out = []
    async for t in saver.alist(cfg):
        out.append(
            (
                t.config["configurable"].get("checkpoint_ns", ""),
                t.config["configurable"]["checkpoint_id"],
                sorted((w[0], w[1]) for w in t.pending_writes or []),
            )
        )
    return out


# ----------------------------------------------------------------- import replace


def run_cfg(run: str, thread: str = "t") -> Any:
    return {"configurable": {"thread_id": thread, "run_id": run}}


async def full_view(saver: Any, thread: str = "t") -> dict[str, Any]:
    """What a reader sees: every namespace's checkpoints, each with its pending writes
    and its parent, and each namespace's state."""
    out: dict[str, Any] = {}
    for e in await saver.manifest.reads.namespaces(thread):
        cfg = {"configurable": {"thread_id": thread, "checkpoint_ns": e.checkpoint_ns}}
        rows = []
        async for t in saver.alist(cfg):
            rows.append(
                (
                    t.config["configurable"]["checkpoint_id"],
                    sorted((w[0], w[1], repr(w[2])) for w in t.pending_writes or []),
                )
            )
        out[e.checkpoint_ns] = rows
    return out


async def build(kind: str, saver: Any) -> None:
    if kind == "chat":
        g = chat_graph().compile(checkpointer=saver)
        for i, text in enumerate(["hi", "what is the weather?", "ok"]):
            await g.ainvoke({"messages": [("user", text)]}, run_cfg(f"r{i}"))
    elif kind == "fork":
        g = chat_graph().compile(checkpointer=saver)
        for i, text in enumerate(["hi", "what is the weather?", "ok"]):
            await g.ainvoke({"messages": [("user", text)]}, run_cfg(f"r{i}"))
        hist = [s async for s in g.aget_state_history(CFG)]
        old = hist[-3].config
        forked = await g.aupdate_state(old, {"messages": [("user", "forked")]})
        await g.ainvoke(None, forked)
        # a second fork from an old checkpoint, not continued
        await g.aupdate_state(hist[-2].config, {"messages": [("user", "fork 2")]})
    elif kind == "nested":
        g = nested_graph().compile(checkpointer=saver)
        await g.ainvoke({"trail": []}, run_cfg("r0"))  # interrupts in inner
    elif kind == "nested_done":
        g = nested_graph().compile(checkpointer=saver)
        await g.ainvoke({"trail": []}, run_cfg("r0"))
        await g.ainvoke(Command(resume="yes"), run_cfg("r1"))
    elif kind == "approval":
        g = approval_graph().compile(checkpointer=saver)
        await g.ainvoke({"request": "x", "log": []}, run_cfg("r0"))
    elif kind == "fanout":
        g = fanout_graph().compile(checkpointer=saver)
        await g.ainvoke({"items": [1, 2, 3], "results": []}, run_cfg("r0"))
    elif kind == "delta":
        g = delta_graph().compile(checkpointer=saver)
        for i in range(6):
            await g.ainvoke({"messages": [("user", f"m{i}")]}, run_cfg(f"r{i}"))
    elif kind == "pruned":
        await build("chat", saver)
        await saver.aprune(["t"], keep_last=2)
    elif kind == "packed":
        await build("fork", saver)
        await saver.aflush()
        await saver.apack(["t"])
    elif kind == "rolled_back":
        await build("chat", saver)
        await saver.adelete_for_runs(["r1"])
    elif kind == "spilled":
        g = chat_graph().compile(checkpointer=saver)
        await g.ainvoke({"messages": [("user", "hi")]}, run_cfg("r0"))
        await g.ainvoke({"messages": [("user", "again")]}, run_cfg("r1"))
        hist = [s async for s in g.aget_state_history(CFG)]
        for i in range(70):
            await g.aupdate_state(hist[-2].config, {"messages": [("user", f"f{i}")]})
    else:
        raise AssertionError(kind)
    await saver.aflush()


KINDS = [
    "chat",
    "fork",
    "nested",
    "nested_done",
    "approval",
    "fanout",
    "delta",
    "pruned",
    "packed",
    "rolled_back",
    "spilled",
]


@pytest.mark.parametrize("kind", KINDS)
async def test_late_pass_after_import_replace_keeps_the_imported_life(
    kind: str, tmp_path: Any
) -> None:
    now, bucket, table = clocked()
    writer = memory_saver(bucket=bucket, table=table)
    await build(kind, writer)
    export = tmp_path / "t.jsonl"
    admin = memory_saver(bucket=bucket, table=table)
    await admin.aexport(["t"], export)
    await admin.aimport(export, replace=True)
    await admin.aflush()
    reader = memory_saver(bucket=bucket, table=table)
    before = await full_view(reader)
    keys_before = live_keys(bucket)
    now[0] += late_pass_seconds(admin.clients.limits.request_timeout) + 1
    await admin.asweep_ttl()
    assert late_records(table) == []
    gone = keys_before - live_keys(bucket)
    after = await full_view(memory_saver(bucket=bucket, table=table))
    assert after == before, f"{kind}: the reader's view changed; removed {sorted(gone)}"
    assert gone == set(), f"{kind}: removed {sorted(gone)}"


SECRET = "my card number is 4111"


@pytest.mark.parametrize("size", [8, 4096])
async def test_an_evicted_sighting_still_asks_the_item(
    monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    """``sighted`` is an LRU of HOLDERS_SIZE (4096) namespaces: once a busy process has
    seen that many others since, a task's put_writes finds no sighting; its checkpoint
    is not one made here lately, so it asks the item and stores nothing for a thread
    deleted meanwhile (before: taken for "never seen here", its PUT went out). Shown
    with the LRU at 8 (monkeypatched) and the license at 0."""
    from langgraph_s3.checkpoint import context, pending

    monkeypatch.setattr(context, "HOLDERS_SIZE", size)
    monkeypatch.setattr(pending, "WRITE_LICENSE", 0.0)
    now, bucket, table = clocked()
    writer = memory_saver(bucket=bucket, table=table)
    held = HeldStep(f"about {SECRET}")
    graph = held.graph(writer)
    turn = asyncio.ensure_future(graph.ainvoke({"messages": [("user", SECRET)]}, CFG))
    await held.started.wait()
    other = chat_graph().compile(checkpointer=writer)  # the same process serves others
    for i in range(10):
        await other.ainvoke(
            {"messages": [("user", "hi")]}, {"configurable": {"thread_id": f"o{i}"}}
        )
    admin = memory_saver(bucket=bucket, table=table)
    await admin.adelete_thread("t")
    now[0] += late_pass_seconds(admin.clients.limits.request_timeout) + 1
    await admin.asweep_ttl()
    before = {k for k in live_keys(bucket) if "/w/" in k}
    held.go.set()
    await asyncio.gather(turn, return_exceptions=True)
    await writer.aflush()
    stored = {k for k in live_keys(bucket) if "/w/" in k} - before
    assert stored == set(), f"the task's writes were stored after the deletion: {stored}"


# ----------------------------------------------------------- false conflicts
@pytest.mark.parametrize("durability", ["async", "sync", "exit"])
@pytest.mark.parametrize("kind", ["approval", "nested", "fanout", "delta", "fork"])
async def test_no_false_conflict_past_the_license(
    monkeypatch: pytest.MonkeyPatch, kind: str, durability: str
) -> None:
    """Every put_writes past its license (as after a >5-minute task or a resume after
    5 minutes) on a healthy thread must go through."""
    from langgraph_s3.checkpoint import pending

    monkeypatch.setattr(pending, "WRITE_LICENSE", -1.0)
    bucket, table = MemoryBucket(), MemoryTable()
    saver = memory_saver(bucket=bucket, table=table)
    if kind == "approval":
        g = approval_graph().compile(checkpointer=saver)
        await g.ainvoke({"request": "x", "log": []}, CFG, durability=durability)
        await g.ainvoke(Command(resume="ok"), CFG, durability=durability)
    elif kind == "nested":
        g = nested_graph().compile(checkpointer=saver)
        await g.ainvoke({"trail": []}, CFG, durability=durability)
        await g.ainvoke(Command(resume="yes"), CFG, durability=durability)
    elif kind == "fanout":
        g = fanout_graph().compile(checkpointer=saver)
        await g.ainvoke({"items": [1, 2, 3], "results": []}, CFG, durability=durability)
    elif kind == "delta":
        g = delta_graph().compile(checkpointer=saver)
        for i in range(6):
            await g.ainvoke({"messages": [("user", f"m{i}")]}, CFG, durability=durability)
    else:
        g = chat_graph().compile(checkpointer=saver)
        for t in ["hi", "what is the weather?"]:
            await g.ainvoke({"messages": [("user", t)]}, CFG, durability=durability)
        hist = [s async for s in g.aget_state_history(CFG)]
        forked = await g.aupdate_state(hist[-2].config, {"messages": [("user", "f")]})
        await g.ainvoke(None, forked, durability=durability)


class Later:
    """time.time() and the loop's clock as pending.py sees them, ``offset`` seconds on."""

    def __init__(self) -> None:
        self.offset = 0.0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import types

        from langgraph_s3.checkpoint import pending

        me = self

        class Loop:
            def time(self) -> float:
                return asyncio.get_running_loop().time() + me.offset

            def __getattr__(self, name: str) -> Any:
                return getattr(asyncio.get_running_loop(), name)

        monkeypatch.setattr(
            pending, "time", types.SimpleNamespace(time=lambda: time.time() + me.offset)
        )
        monkeypatch.setattr(
            pending, "asyncio", types.SimpleNamespace(get_running_loop=lambda: Loop())
        )
        if getattr(self, "held_too", False):
            from langgraph_s3.checkpoint import inline

            shim = types.SimpleNamespace(
                **{n: getattr(asyncio, n) for n in dir(asyncio) if not n.startswith("__")}
            )
            shim.get_running_loop = lambda: Loop()
            monkeypatch.setattr(inline, "asyncio", shim)


@pytest.mark.parametrize("durability", ["async", "sync", "exit"])
@pytest.mark.parametrize("stale", ["deleted_here", "read_long_ago", "never"])
async def test_a_long_last_step_on_a_new_conversation(
    monkeypatch: pytest.MonkeyPatch, durability: str, stale: str
) -> None:
    """A new conversation whose step runs 400 s and then interrupts; this process
    deleted the thread's earlier life itself, or read it long ago (and another process
    deleted it), or never saw it."""
    from langgraph.graph import StateGraph
    from langgraph.types import interrupt

    later = Later()
    later.install(monkeypatch)
    bucket, table = MemoryBucket(), MemoryTable()
    saver = memory_saver(bucket=bucket, table=table)
    other = memory_saver(bucket=bucket, table=table)
    if stale != "never":
        await chat_graph().compile(checkpointer=saver).ainvoke({"messages": [("user", "old")]}, CFG)
        await (saver if stale == "deleted_here" else other).adelete_thread("t")

    async def slow(state: Any) -> dict[str, Any]:
        await asyncio.sleep(0.3)  # real time for the background put to commit
        later.offset += 400  # the step outlasts the license
        answer = interrupt("go on?")
        return {"log": [answer]}

    from langgraph_s3.testing.graphs import ApprovalState

    b = StateGraph(ApprovalState)
    b.add_node("slow", slow)
    b.set_entry_point("slow")
    g = b.compile(checkpointer=saver)
    await g.ainvoke({"request": "x", "log": []}, CFG, durability=durability)
    await saver.aflush()
    state = await g.aget_state(CFG)
    assert state.interrupts, "the interrupt was stored"


@pytest.mark.usefixtures("writes_in_s3")
@pytest.mark.parametrize("skew", [0, 30])
async def test_late_writes_of_a_writer_ahead_of_the_deleter_go_from_a_thread_that_lives_again(
    skew: int,
) -> None:
    """The deleter's clock is 30 s behind the writer's (inside LATE_MARGIN's 60 s for
    clocks). The writer's turn is in flight at the deletion: its first checkpoint's commit
    not made (then refused), its writes' PUTs sent. The deletion's upto is its own now
    (or the newest id it listed), older than that checkpoint's id. A new conversation
    begins on the id; the late pass removes the frozen writes (before: its upto had no
    margin for clocks, the writes were newer, and the deleted conversation's secret
    stayed in S3 for good)."""
    now = [time.time() - skew]  # the deleter's (and DynamoDB's) clock; ids use the writer's
    bucket, table = MemoryBucket(clock=lambda: now[0]), MemoryTable(clock=lambda: now[0])
    writer = memory_saver(bucket=bucket, table=table)
    graph = chat_graph().compile(checkpointer=writer)
    await graph.ainvoke({"messages": [("user", "hello")]}, CFG)
    frozen = FrozenWrites(writer)
    real = writer.manifest.commits.advance
    gate = asyncio.Event()

    async def advance(*a: Any, **kw: Any) -> Any:
        await gate.wait()  # the commit not made before the deletion
        return await real(*a, **kw)

    writer.manifest.commits.advance = advance  # type: ignore[method-assign]
    turn = asyncio.ensure_future(graph.ainvoke({"messages": [("user", SECRET)]}, CFG))
    await frozen.sent.wait()
    admin = memory_saver(bucket=bucket, table=table)
    now[0] = time.time() - skew  # the deleter's clock at the deletion
    await admin.adelete_thread("t")
    assert len(late_records(table)) == 1
    frozen.gate.set()
    gate.set()
    await asyncio.gather(turn, return_exceptions=True)
    await writer.aflush()
    fresh = chat_graph().compile(checkpointer=memory_saver(bucket=bucket, table=table))
    await fresh.ainvoke({"messages": [("user", "a new conversation")]}, CFG)
    now[0] += late_pass_seconds(admin.clients.limits.request_timeout) + 1
    assert (await admin.asweep_ttl()).threads == 1
    left = [k for k in frozen.keys if k in live_keys(bucket)]
    assert left == [], f"the deleted conversation's writes survive its late pass: {left}"


# ----------------------------------------------------------- retries


class Outage(ServiceError):
    pass


@pytest.mark.usefixtures("writes_in_s3")
@pytest.mark.parametrize("then", ["deleted", "begun again"])
async def test_a_late_pass_that_fails_midway_is_retried(then: str) -> None:
    now, bucket, table = clocked()
    _writer, _graph, frozen, turn = await frozen_turn(bucket, table, SECRET, CFG)
    admin = memory_saver(bucket=bucket, table=table)
    now[0] = time.time()
    await admin.adelete_thread("t")
    if then == "begun again":
        fresh = chat_graph().compile(checkpointer=memory_saver(bucket=bucket, table=table))
        await fresh.ainvoke({"messages": [("user", "new")]}, CFG)
    frozen.gate.set()
    await asyncio.gather(turn, return_exceptions=True)
    assert [k for k in frozen.keys if k in live_keys(bucket)]
    now[0] += late_pass_seconds(admin.clients.limits.request_timeout) + 1
    real = admin.raw_objects.delete

    async def failing(keys: Any) -> Any:
        raise Outage("503")

    admin.raw_objects.delete = failing  # type: ignore[method-assign]
    with pytest.raises(Outage):
        await admin.asweep_ttl()
    admin.raw_objects.delete = real  # type: ignore[method-assign]
    assert len(late_records(table)) == 1, "the record is kept for the next sweep"
    now[0] += 300  # a lease the failed pass took runs out
    await admin.asweep_ttl()
    # a resweep of the died pass records one more
    now[0] += late_pass_seconds(admin.clients.limits.request_timeout) + 1
    await admin.asweep_ttl()
    assert [k for k in frozen.keys if k in live_keys(bucket)] == []
    assert late_records(table) == []


@pytest.mark.usefixtures("writes_in_s3")
@pytest.mark.parametrize("skew2", [0, 60])
async def test_a_second_deletion_by_a_deleter_behind_still_raises_the_records_upto(
    skew2: int,
) -> None:
    """Deletion 1 (accurate clock), a new life, its writer's turn in flight, deletion 2
    30 s later by a deleter 60 s behind: note_late keeps deletion 1's (later) due but
    raises the upto to deletion 2's, so once the id lives a third time the pass removes
    the second life's late writes (before: both kept from deletion 1)."""
    now, bucket, table = clocked()
    admin = memory_saver(bucket=bucket, table=table)
    await chat_graph().compile(checkpointer=admin).ainvoke({"messages": [("user", "one")]}, CFG)
    now[0] = time.time()
    await admin.adelete_thread("t")
    await asyncio.sleep(1.0)  # life 2's ids are newer than deletion 1's upto
    writer, _, frozen, turn = await frozen_turn(bucket, table, SECRET, CFG, first="two")
    now[0] = time.time() - skew2
    first = dict(late_records(table)[0])
    await admin.adelete_thread("t")
    (second,) = late_records(table)
    assert second["late_upto"]["S"] >= first["late_upto"]["S"]  # never lowered
    frozen.gate.set()
    await asyncio.gather(turn, return_exceptions=True)
    await writer.aflush()
    fresh = chat_graph().compile(checkpointer=memory_saver(bucket=bucket, table=table))
    await fresh.ainvoke({"messages": [("user", "three")]}, CFG)
    now[0] = time.time() + late_pass_seconds(admin.clients.limits.request_timeout) + 120
    await admin.asweep_ttl()
    left = [k for k in frozen.keys if k in live_keys(bucket)]
    assert left == [], f"life 2's late writes survive: {left}"


async def test_late_records_stay_out_of_listings(tmp_path: Any) -> None:
    now, bucket, table = clocked()
    s = memory_saver(bucket=bucket, table=table)
    g = chat_graph().compile(checkpointer=s)
    for t in ("a", "b", "c"):
        await g.ainvoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": t}})
    await s.adelete_thread("a")
    await s.adelete_thread("never-existed")
    await s.adelete_thread("b")
    await g.ainvoke({"messages": [("user", "again")]}, {"configurable": {"thread_id": "b"}})
    assert len(late_records(table)) == 3
    assert sorted([t.thread_id async for t in s.alist_threads()]) == ["b", "c"]
    assert {c.config["configurable"]["thread_id"] async for c in s.alist(None)} == {"b", "c"}
    assert await s.aget_thread("a") is None
    assert [t async for t in s.aexpired_threads()] == []
    out = tmp_path / "all.jsonl"
    rep = await s.aexport(None, out)
    assert rep.threads == 2, rep
    now[0] += late_pass_seconds(s.clients.limits.request_timeout) + 1
    assert [t async for t in s.aexpired_threads()] == []
    await s.asweep_ttl()
    assert late_records(table) == []
    assert sorted([t.thread_id async for t in s.alist_threads()]) == ["b", "c"]


@pytest.mark.usefixtures("writes_in_s3")
async def test_the_stream_sweepers_late_pass_on_a_busy_thread_comes_again() -> None:
    """The stream sweeper runs a late pass when DynamoDB's TTL removes its record; a
    pass skipped (the thread's entries changed during each of its max_conflicts
    listings) records the pass again, a retry later (before: reported as done, the
    record gone, nothing ran it again)."""
    from langgraph_s3.ops.handlers import sweeper

    now, bucket, table = clocked()
    _writer, _graph, frozen, turn = await frozen_turn(bucket, table, SECRET, CFG)
    admin = memory_saver(bucket=bucket, table=table, max_conflicts=2)
    now[0] = time.time()
    await admin.adelete_thread("t")
    g2 = chat_graph().compile(checkpointer=memory_saver(bucket=bucket, table=table))
    await g2.ainvoke({"messages": [("user", "new")]}, CFG)
    frozen.gate.set()
    await asyncio.gather(turn, return_exceptions=True)
    (item,) = late_records(table)
    # DynamoDB's TTL removes the record a day after it is due
    del table.items[next(k for k, v in table.items.items() if v is item)]
    real = admin.raw_objects.list_all

    async def busy_list(prefix: str) -> Any:  # a turn commits during each listing
        out = await real(prefix)
        if "/packs/" not in prefix and "packs" not in prefix:
            await g2.ainvoke({"messages": [("user", "busy")]}, CFG)
        return out

    admin.raw_objects.list_all = busy_list  # type: ignore[method-assign]
    key = (bucket.name, "", admin.manifest.table)
    sweeper._savers[key] = admin
    record = {
        "eventName": "REMOVE",
        "eventSourceARN": f"arn:aws:dynamodb:r:1:table/{admin.manifest.table}/stream/x",
        "dynamodb": {
            "SequenceNumber": "7",
            "OldImage": item,
            "ApproximateCreationDateTime": float(item["expires_at"]["N"]) + 60,
        },
    }
    try:
        assert await sweeper.ahandle([record]) == {"batchItemFailures": []}
    finally:
        sweeper._savers.pop(key, None)
    admin.raw_objects.list_all = real  # type: ignore[method-assign]
    left = [k for k in frozen.keys if k in live_keys(bucket)]
    assert left == [] or late_records(table), f"pass skipped, record gone: {left} stay for good"


async def test_copy_into_a_thread_whose_task_runs_here() -> None:
    """This process copies another thread into t while a task of t runs here (forget):
    the task's writes ask the item (cost) and must go through."""
    bucket, table = MemoryBucket(), MemoryTable()
    saver = memory_saver(bucket=bucket, table=table)
    held = HeldStep()
    graph = held.graph(saver)
    await (
        chat_graph()
        .compile(checkpointer=saver)
        .ainvoke({"messages": [("user", "src")]}, {"configurable": {"thread_id": "src"}})
    )
    await chat_graph().compile(checkpointer=saver).ainvoke({"messages": [("user", "t")]}, CFG)
    turn = asyncio.ensure_future(graph.ainvoke({"messages": [("user", "x")]}, CFG))
    await held.started.wait()
    assert (await saver.acopy_thread("src", "t")).threads == 1
    held.go.set()
    outcome = await asyncio.gather(turn, return_exceptions=True)
    assert not isinstance(outcome[0], BaseException), outcome  # no false conflict


@pytest.mark.parametrize(
    "post", ["fork_old", "prune", "pack", "rollback", "resume_nested", "unpack"]
)
async def test_late_pass_after_import_and_maintenance(post: str, tmp_path: Any) -> None:
    now, bucket, table = clocked()
    writer = memory_saver(bucket=bucket, table=table)
    await build("nested" if post == "resume_nested" else "fork", writer)
    export = tmp_path / "t.jsonl"
    admin = memory_saver(bucket=bucket, table=table)
    await admin.aexport(["t"], export)
    await admin.aimport(export, replace=True)
    s = memory_saver(bucket=bucket, table=table)
    if post == "fork_old":
        g = chat_graph().compile(checkpointer=s)
        hist = [x async for x in g.aget_state_history(CFG)]
        f = await g.aupdate_state(hist[-2].config, {"messages": [("user", "post fork")]})
        await g.ainvoke(None, f)
    elif post == "prune":
        await s.aprune(["t"], keep_last=3)
    elif post in ("pack", "unpack"):
        await s.apack(["t"])
        if post == "unpack":  # a turn on a packed thread
            g = chat_graph().compile(checkpointer=s)
            await g.ainvoke({"messages": [("user", "after pack")]}, CFG)
    elif post == "rollback":
        await s.adelete_for_runs(["r1"])
    elif post == "resume_nested":
        g = nested_graph().compile(checkpointer=s)
        await g.ainvoke(Command(resume="yes"), run_cfg("r9"))
    await s.aflush()
    before = await full_view(memory_saver(bucket=bucket, table=table))
    keys_before = live_keys(bucket)
    now[0] += late_pass_seconds(admin.clients.limits.request_timeout) + 1
    await admin.asweep_ttl()
    gone = keys_before - live_keys(bucket)
    after = await full_view(memory_saver(bucket=bucket, table=table))
    assert after == before, f"{post}: removed {sorted(gone)}"


async def test_a_step_that_outlasts_the_late_pass_stores_no_writes_for_its_next_checkpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Async durability. Step k's task runs from before the deletion until after its late
    pass (25 min). LangGraph then makes checkpoint k+1 (its put refused: the thread is
    deleted) and runs step k+1, whose put_writes waits for that put of its own (its
    license long run out), and stores nothing (before: "made lately, after the last
    sighting", it skipped the license and its PUT was begun after the late pass)."""
    from langgraph.graph import MessagesState, StateGraph

    from langgraph_s3.checkpoint import pending

    later = Later()
    later.held_too = True  # type: ignore[attr-defined]
    later.install(monkeypatch)
    bump = [float("inf")]
    real_made = pending.uuid6_time
    monkeypatch.setattr(
        pending,
        "uuid6_time",
        lambda cid: (m + later.offset) if (m := real_made(cid)) is not None and m > bump[0] else m,
    )
    now, bucket, table = clocked()
    writer = memory_saver(bucket=bucket, table=table)
    started, go = asyncio.Event(), asyncio.Event()

    async def slow(state: Any) -> dict[str, Any]:
        started.set()
        await go.wait()
        return {"messages": [("ai", "thinking done")]}

    async def reply(state: Any) -> dict[str, Any]:
        return {"messages": [("ai", f"about {SECRET}")]}

    b = StateGraph(MessagesState)
    b.add_node("slow", slow)
    b.add_node("reply", reply)
    b.set_entry_point("slow")
    b.add_edge("slow", "reply")
    graph = b.compile(checkpointer=writer)
    await chat_graph().compile(checkpointer=writer).ainvoke({"messages": [("user", "hi")]}, CFG)
    turn = asyncio.ensure_future(graph.ainvoke({"messages": [("user", SECRET)]}, CFG))
    await started.wait()
    await asyncio.sleep(0.1)
    admin = memory_saver(bucket=bucket, table=table)
    now[0] = time.time()
    await admin.adelete_thread("t")
    now[0] += 1500  # 25 minutes on: the late pass ran
    await admin.asweep_ttl()
    assert late_records(table) == [] and live_keys(bucket) == set()
    bump[0] = time.time()
    later.offset = 1500
    go.set()
    await asyncio.gather(turn, return_exceptions=True)
    await writer.aflush()
    assert await memory_saver(bucket=bucket, table=table).aget_tuple(CFG) is None
    stored = {k for k in live_keys(bucket) if "/w/" in k}
    # (a c/ object of that refused checkpoint is stored too, by its held copy's PUT:
    # the same class, older than this change)
    assert stored == set(), f"writes stored after the deletion's late pass: {stored}"
