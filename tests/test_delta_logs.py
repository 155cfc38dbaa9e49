"""DeltaChannel logs (logs.py): each checkpoint carries its history, side by side with
InMemorySaver through real graphs: forks, update_state, one process per turn, a
writer without a cache, interrupts resumed elsewhere, every durability, large writes,
checkpoints stored without a log (read by walking), damaged logs and maintenance."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from helpers import cfg
from langgraph_s3 import AsyncS3Saver, codec
from langgraph_s3.errors import CorruptObjectError
from langgraph_s3.graphs import ahistory, delta_graph, norm, norm_snapshot
from langgraph_s3.testing import MotoServer
from langgraph_s3.values import INLINE_MAX


def turn(i: int, size: int = 0) -> dict[str, Any]:
    return {"messages": [("user", f"turn {i}" + "x" * size)]}


async def envelopes(saver: AsyncS3Saver, thread: str) -> list[codec.CheckpointEnvelope]:
    """Every checkpoint envelope of the thread's root namespace, newest first."""
    keys = saver.layout.namespace(thread, "")
    listed = await saver._ctx.objects.list_all(keys.checkpoints)
    bodies = await saver._ctx.objects.get_many([o.key for o in listed])
    return [codec.load_checkpoint(b) for b in bodies if b is not None]


def logged(env: codec.CheckpointEnvelope) -> bool:
    return "messages" in env.logs or "messages" in env.present


async def same_as_memory(scenario: Any, saver: AsyncS3Saver) -> Any:
    expected = await scenario(InMemorySaver())
    actual = await scenario(saver)
    assert actual == expected
    return actual


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

    final, hist = await same_as_memory(scenario, s3_saver)
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

    final, _ = await same_as_memory(scenario, s3_saver)
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
        await same_as_memory(scenario, uncached)
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

    await same_as_memory(scenario, s3_saver)
    keys = s3_saver.layout.namespace("t", "")
    blobs = [o.key for o in await s3_saver._ctx.objects.list_all(keys.blobs)]
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
    keys = s3_saver.layout.namespace("t", "")
    objects = s3_saver._ctx.objects
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
