"""DeltaChannel logs (logs.py): each checkpoint carries its history, side by side with
InMemorySaver through real graphs: forks, update_state, one process per turn, a
writer without a cache, interrupts resumed elsewhere, every durability, large writes,
checkpoints stored without a log (read by walking), damaged logs and maintenance."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.pregel._algo import task_path_str

from helpers import cfg, side_by_side
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.core import codec
from langgraph_s3.core.values import INLINE_MAX
from langgraph_s3.errors import CorruptObjectError, ServiceError
from langgraph_s3.testing import MotoServer
from langgraph_s3.testing.graphs import _fold_messages, ahistory, delta_graph, norm, norm_snapshot


def turn(i: int, size: int = 0) -> dict[str, Any]:
    return {"messages": [("user", f"turn {i}" + "x" * size)]}


async def envelopes(saver: AsyncS3Saver, thread: str) -> list[codec.CheckpointEnvelope]:
    """Every checkpoint envelope of the thread's root namespace, newest first."""
    keys = saver.layout.namespace(thread, "")
    listed = await saver.objects.list_all(keys.checkpoints)
    bodies = await saver.objects.get_many([o.key for o in listed])
    return [codec.load_checkpoint(b) for b in bodies if b is not None]


def logged(env: codec.CheckpointEnvelope) -> bool:
    return "messages" in env.logs or "messages" in env.present


async def test_forks_and_update_state_match_in_memory(s3_saver: AsyncS3Saver) -> None:
    """A fork from an old checkpoint continues that checkpoint's log, not the latest's;
    update_state appends its write like any task's."""

    async def scenario(saver: Any) -> Any:
        graph = delta_graph(100).compile(checkpointer=saver)
        for i in range(6):
            await graph.ainvoke(turn(i), cfg())
        history = [s async for s in graph.aget_state_history(cfg())]
        old = history[7].config  # a checkpoint of turn 4, not a snapshot
        await graph.ainvoke(turn(100), old)  # the thread now follows the fork
        await graph.aupdate_state(cfg(), {"messages": [AIMessage("edited")]}, as_node="agent")
        await graph.ainvoke(turn(101), cfg())
        return norm_snapshot(await graph.aget_state(cfg())), await ahistory(graph, cfg())

    final, hist = await side_by_side(scenario, s3_saver)
    assert final["values"]["messages"][-3][1] == "edited"
    assert len(hist) > 20
    assert all(logged(e) for e in await envelopes(s3_saver, "t"))


async def test_one_process_per_turn_keeps_the_log(
    s3_fresh: MotoServer, s3_saver: AsyncS3Saver
) -> None:
    """Lambda: a new saver (and cache) per turn. Its reads give the next put the log to
    continue, so every checkpoint has one and a cold read stays 3 round trips."""
    t = s3_saver.target
    kw: dict[str, Any] = {"endpoint_url": s3_fresh.url, "bucket": t.bucket, "table": t.table}
    memory = delta_graph(100).compile(checkpointer=InMemorySaver())
    for i in range(12):
        async with AsyncS3Saver(**kw, cache_bytes=0) as saver:
            graph = delta_graph(100).compile(checkpointer=saver)
            out = await graph.ainvoke(turn(i), cfg())
        assert norm(out) == norm(await memory.ainvoke(turn(i), cfg()))
    envs = await envelopes(s3_saver, "t")
    assert len(envs) == 36 and all(logged(e) for e in envs)
    async with AsyncS3Saver(**kw, cache_bytes=0) as cold:
        graph = delta_graph(100).compile(checkpointer=cold)
        state = await graph.aget_state(cfg())
        assert cold.stats.round_trips == 3
        assert norm(state.values) == norm((await memory.aget_state(cfg())).values)


async def test_interrupt_resumed_by_another_process(
    s3_fresh: MotoServer, s3_saver: AsyncS3Saver
) -> None:
    """The resuming process learns the interrupted checkpoint's writes by reading it."""
    t = s3_saver.target
    kw: dict[str, Any] = {"endpoint_url": s3_fresh.url, "bucket": t.bucket, "table": t.table}

    async def scenario(first: Any, second: Any) -> Any:
        for i in range(3):
            g1 = delta_graph(100).compile(checkpointer=first, interrupt_before=["agent"])
            await g1.ainvoke(turn(i), cfg())
            g2 = delta_graph(100).compile(checkpointer=second)
            await g2.ainvoke(None, cfg())
        return norm_snapshot(await g2.aget_state(cfg())), await ahistory(g2, cfg())

    mem = InMemorySaver()
    expected = await scenario(mem, mem)
    async with AsyncS3Saver(**kw) as a, AsyncS3Saver(**kw) as b:
        assert await scenario(a, b) == expected
    assert all(logged(e) for e in await envelopes(s3_saver, "t"))


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_every_durability(s3_saver: AsyncS3Saver, durability: Any) -> None:
    async def scenario(saver: Any) -> Any:
        graph = delta_graph(5).compile(checkpointer=saver)
        for i in range(8):
            await graph.ainvoke(turn(i), cfg(), durability=durability)
        return norm_snapshot(await graph.aget_state(cfg())), await ahistory(graph, cfg())

    final, _ = await side_by_side(scenario, s3_saver)
    assert len(final["values"]["messages"]) == 16


async def test_a_writer_without_a_cache_fetches_the_runs_it_merges(
    s3_fresh: MotoServer, s3_saver: AsyncS3Saver
) -> None:
    t = s3_saver.target
    kw: dict[str, Any] = {"endpoint_url": s3_fresh.url, "bucket": t.bucket, "table": t.table}

    async def scenario(saver: Any) -> Any:
        graph = delta_graph(100).compile(checkpointer=saver)
        for i in range(9):
            await graph.ainvoke(turn(i), cfg())
        return norm_snapshot(await graph.aget_state(cfg()))

    async with AsyncS3Saver(**kw, cache_bytes=0) as uncached:
        await side_by_side(scenario, uncached)
    envs = await envelopes(s3_saver, "t")
    assert all(logged(e) for e in envs)
    # merged runs climbed levels: the latest's log is a few runs, not one per write
    top = envs[0].logs["messages"].runs
    assert top.count == 18 and len(top.refs) <= 2 and max(r.level for r in top.refs) >= 3


async def test_large_writes_go_to_log_blobs(s3_saver: AsyncS3Saver) -> None:
    """A run over 256 KiB is a blob of its own, kept by prune, read back whole."""

    async def scenario(saver: Any) -> Any:
        graph = delta_graph(100).compile(checkpointer=saver)
        for i in range(3):
            await graph.ainvoke(turn(i, INLINE_MAX // 2), cfg())
        if isinstance(saver, AsyncS3Saver):
            await saver.aprune(["t"])
        return norm_snapshot(await graph.aget_state(cfg()))

    await side_by_side(scenario, s3_saver)
    keys = s3_saver.layout.namespace("t", "")
    blobs = [o.key for o in await s3_saver.objects.list_all(keys.blobs)]
    assert any(".log." in k for k in blobs), blobs
    async with AsyncS3Saver(
        endpoint_url=s3_saver.clients.endpoint_url,
        bucket=s3_saver.target.bucket,
        table=s3_saver.target.table,
        cache_bytes=0,
    ) as cold:
        state = await delta_graph(100).compile(checkpointer=cold).aget_state(cfg())
        assert len(state.values["messages"]) == 6


async def test_checkpoints_without_a_log_are_walked(
    s3_saver: AsyncS3Saver, s3_fresh: MotoServer
) -> None:
    """Checkpoints stored before logs existed (here: rewritten without theirs) are read
    by walking their ancestors; puts continuing them store none until a snapshot starts
    a log afresh; every state matches InMemorySaver's throughout."""
    memory = delta_graph(7).compile(checkpointer=InMemorySaver())
    graph = delta_graph(7).compile(checkpointer=s3_saver)
    for i in range(5):
        for g in (graph, memory):
            await g.ainvoke(turn(i), cfg())
    await s3_saver.aflush()  # stored, none held by the manifest: rewritten below
    keys = s3_saver.layout.namespace("t", "")
    objects = s3_saver.objects
    for o in await objects.list_all(keys.checkpoints):
        body = await objects.get(o.key)
        assert body is not None
        env = codec.load_checkpoint(body)
        fields = {f: getattr(env, f) for f in env.__dataclass_fields__}
        old = codec.CheckpointEnvelope(**{**fields, "logs": {}})
        await objects.put(o.key, codec.dump_checkpoint(old))
    t = s3_saver.target
    kw: dict[str, Any] = {"endpoint_url": s3_fresh.url, "bucket": t.bucket, "table": t.table}
    for i in range(5, 9):
        async with AsyncS3Saver(**kw, cache_bytes=0) as saver:
            g = delta_graph(7).compile(checkpointer=saver)
            assert norm(await g.ainvoke(turn(i), cfg())) == norm(
                await memory.ainvoke(turn(i), cfg())
            )
            assert await ahistory(g, cfg()) == await ahistory(memory, cfg())
    envs = await envelopes(s3_saver, "t")
    assert not logged(envs[-1]) and logged(envs[0])  # a snapshot started a new log


async def test_a_damaged_log_is_named(s3_saver: AsyncS3Saver, s3_fresh: MotoServer) -> None:
    graph = delta_graph(100).compile(checkpointer=s3_saver)
    for i in range(6):
        await graph.ainvoke(turn(i), cfg())
    env = (await envelopes(s3_saver, "t"))[0]
    holder = s3_saver.layout.namespace("t", "").prefix + env.logs["messages"].runs.refs[0].key
    s3 = await s3_saver.clients.client("s3")
    await s3.delete_object(Bucket=s3_saver.target.bucket, Key=holder)
    async with AsyncS3Saver(
        endpoint_url=s3_fresh.url,
        bucket=s3_saver.target.bucket,
        table=s3_saver.target.table,
        cache_bytes=0,
    ) as cold:
        with pytest.raises(CorruptObjectError, match="missing"):
            await delta_graph(100).compile(checkpointer=cold).aget_state(cfg())


# ------------------------------------------------------- writes that lost or failed
def _cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def answering(answer: Any) -> StateGraph:
    """One agent node on a DeltaChannel; ``answer()`` is awaited for its reply."""
    ch = DeltaChannel(_fold_messages, snapshot_frequency=100)
    S = TypedDict("S", {"messages": Annotated[list[BaseMessage], ch]})  # type: ignore[misc]  # noqa: UP013 - built per call

    async def agent(s: Any) -> dict[str, Any]:
        return {"messages": [AIMessage(content=await answer())]}

    b = StateGraph(S)
    b.add_node("agent", agent)
    b.add_edge(START, "agent")
    b.add_edge("agent", END)
    return b


def kw(saver: AsyncS3Saver, srv: MotoServer) -> dict[str, Any]:
    return {"endpoint_url": srv.url, "bucket": saver.target.bucket, "table": saver.target.table}


async def strip_logs(saver: AsyncS3Saver, thread: str = "t") -> None:
    keys = saver.layout.namespace(thread, "")
    objects = saver.objects
    for o in await objects.list_all(keys.checkpoints):
        env = codec.load_checkpoint(await objects.get(o.key))
        await objects.put(o.key, codec.dump_checkpoint(dataclasses.replace(env, logs={})))


async def cold_state(k: dict[str, Any], g: StateGraph) -> Any:
    async with AsyncS3Saver(**k, cache_bytes=0) as cold:
        return norm((await g.compile(checkpointer=cold).aget_state(_cfg())).values)


async def test_a_write_that_lost_first_write_wins_is_not_logged(
    s3_saver: AsyncS3Saver, s3_fresh: MotoServer
) -> None:
    """Process B stores task T's write first; A's put_writes of T loses (first write
    wins): A's log for the child holds B's value, the one stored."""
    k = kw(s3_saver, s3_fresh)
    race: dict[str, Any] = {}

    async def answer() -> str:
        if "go" in race:
            await race.pop("go")()
        return "reply by A"

    async def scenario(a: Any, b: Any) -> None:
        g = answering(answer).compile(checkpointer=a, interrupt_before=["agent"])
        await g.ainvoke(turn(0), _cfg())
        st = await g.aget_state(_cfg())
        task = st.tasks[0]

        async def b_wins() -> None:
            await b.aput_writes(
                st.config,
                [("messages", [AIMessage("reply by B")])],
                task.id,
                task_path_str(task.path),
            )

        race["go"] = b_wins
        await g.ainvoke(None, _cfg())

    mem = InMemorySaver()
    await scenario(mem, mem)
    expected = norm((await answering(answer).compile(checkpointer=mem).aget_state(_cfg())).values)
    async with AsyncS3Saver(**k) as a, AsyncS3Saver(**k) as b:
        await scenario(a, b)
    via_log = await cold_state(k, answering(answer))
    await strip_logs(s3_saver)
    via_walk = await cold_state(k, answering(answer))
    assert via_walk == expected  # the store holds B's reply
    assert via_log == expected, via_log


@pytest.mark.usefixtures("writes_in_s3")
async def test_a_write_that_failed_is_not_logged(
    s3_saver: AsyncS3Saver, s3_fresh: MotoServer
) -> None:
    """A put_writes that fails (a 503 from our object-store port, before any request)
    records nothing; the retried task's answer is the one logged."""
    k = kw(s3_saver, s3_fresh)
    n = {"n": 0}

    async def answer() -> str:
        n["n"] += 1
        return f"attempt {n['n']}"

    async with AsyncS3Saver(**k) as a:
        objects = a.objects
        real = objects.put
        failed: list[str] = []

        async def put(key: str, body: bytes, **kw_: Any) -> Any:
            if "/w/" in key and b"attempt" in bytes(body) and not failed:
                failed.append(key)
                raise ServiceError("injected 503", code="SlowDown", status=503)
            return await real(key, body, **kw_)

        objects.put = put  # type: ignore[method-assign]
        g = answering(answer).compile(checkpointer=a)
        # the input's own writes come first in LangGraph; fail the agent's
        with pytest.raises(ServiceError):
            await g.ainvoke(turn(0), _cfg())
        await g.ainvoke(None, _cfg())  # retried: the task runs again, "attempt 2" is stored
    via_log = await cold_state(k, answering(answer))
    await strip_logs(s3_saver)
    via_walk = await cold_state(k, answering(answer))
    assert failed
    assert via_walk["messages"][-1][1] == "attempt 2"
    assert via_log == via_walk, via_log


async def test_a_log_holding_more_writes_than_it_names_is_corrupt(
    s3_saver: AsyncS3Saver, s3_fresh: MotoServer
) -> None:
    """logs[ch].runs.count one less than the elements its runs hold (msgpack decoders
    ignore bytes after a complete array): named, not served short."""
    graph = delta_graph(100).compile(checkpointer=s3_saver)
    for i in range(4):
        await graph.ainvoke(turn(i), _cfg())
    await s3_saver.aflush()  # stored: read from S3, not from the manifest's copies
    keys = s3_saver.layout.namespace("t", "")
    entry = await s3_saver.manifest.reads.latest("t", "")
    key = keys.checkpoint_at(entry.latest_tail)
    env = codec.load_checkpoint(await s3_saver.objects.get(key))
    log = env.logs["messages"]
    bad = dataclasses.replace(log, runs=dataclasses.replace(log.runs, count=log.runs.count - 1))
    await s3_saver.objects.put(
        key, codec.dump_checkpoint(dataclasses.replace(env, logs={"messages": bad}))
    )
    with pytest.raises(CorruptObjectError, match="elements"):
        await cold_state(kw(s3_saver, s3_fresh), delta_graph(100))


async def test_delete_for_runs_keeps_later_states_as_they_were(
    s3_saver: AsyncS3Saver, s3_fresh: MotoServer
) -> None:
    """Deleting a middle run removes its checkpoints and writes; a later checkpoint keeps
    its state (its log holds the writes that made it), as for any other channel. Without
    logs (objects of an older release) the walk cannot rebuild it and names the gap."""
    graph = delta_graph(100).compile(checkpointer=s3_saver)
    runs = [f"00000000-0000-0000-0000-00000000000{i}" for i in range(3)]
    for i, run in enumerate(runs):
        await graph.ainvoke(turn(i), {"configurable": {"thread_id": "t", "run_id": run}})
    before = norm((await graph.aget_state(_cfg())).values)
    await s3_saver.adelete_for_runs([runs[1]])
    k = kw(s3_saver, s3_fresh)
    assert await cold_state(k, delta_graph(100)) == before
    await strip_logs(s3_saver)
    with pytest.raises(CorruptObjectError, match="DeltaChannel"):
        await cold_state(k, delta_graph(100))


# ------------------------------------------------- carried writes (CheckpointEnvelope.carried)
async def test_a_carried_write_is_used_only_in_the_version_listed(
    s3_saver: AsyncS3Saver, s3_fresh: MotoServer
) -> None:
    """A child carries its parent's write objects as its put knew them. Writes added to
    the parent afterwards (a new task's object; a new index merged into an existing
    object, which changes its ETag) are read from the store: every read sees them."""
    from langgraph.checkpoint.base import empty_checkpoint

    parent = await s3_saver.aput(cfg("c"), empty_checkpoint(), {"step": 0}, {})
    await s3_saver.aput_writes(parent, [("a", 1)], "task-1")
    child = await s3_saver.aput(parent, empty_checkpoint(), {"step": 1}, {})
    await s3_saver.aflush()  # its object stored
    keys = s3_saver.layout.namespace("c", "")
    listed = await s3_saver.objects.list_all(keys.checkpoints)
    body = await s3_saver.objects.get(listed[0].key)
    assert body is not None and len(codec.load_checkpoint(body).carried) == 1
    t = s3_saver.target
    kw: dict[str, Any] = {"endpoint_url": s3_fresh.url, "bucket": t.bucket, "table": t.table}
    async with AsyncS3Saver(**kw) as other:
        await other.aput_writes(parent, [("a", 1), ("b", 2)], "task-1")  # idx 1 merged
        await other.aput_writes(parent, [("c", 3)], "task-2")  # a new object
    async with AsyncS3Saver(**kw, cache_bytes=0) as cold:
        tuples = [t async for t in cold.alist(cfg("c"))]
    assert (
        tuples[0].config["configurable"]["checkpoint_id"] == child["configurable"]["checkpoint_id"]
    )
    assert sorted(w[1:] for w in tuples[1].pending_writes) == [("a", 1), ("b", 2), ("c", 3)]
