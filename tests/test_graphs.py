"""Real graphs, side by side: our saver must give the same states and history as InMemorySaver."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from helpers import cfg, side_by_side
from langgraph_s3 import AsyncS3Saver, S3Saver
from langgraph_s3.testing import MotoServer, Names, unique_names
from langgraph_s3.testing.graphs import (
    CHAT_TURNS,
    ahistory,
    approval_graph,
    chat_graph,
    delta_graph,
    fanout_graph,
    history,
    nested_graph,
    norm,
    norm_snapshot,
)

pytestmark = pytest.mark.engines  # also on SeaweedFS and ministack (conftest)


# --------------------------------------------------------------------- chats
async def chat_async(saver: Any) -> Any:
    graph = chat_graph().compile(checkpointer=saver)
    outs = [norm(await graph.ainvoke({"messages": [("user", t)]}, cfg())) for t in CHAT_TURNS]
    return outs, norm_snapshot(await graph.aget_state(cfg())), await ahistory(graph, cfg())


@pytest.fixture
def s3_saver(saver_of_kind: AsyncS3Saver) -> AsyncS3Saver:
    """Every graph on both manifests: a DynamoDB table, and the bucket alone."""
    return saver_of_kind


@pytest.fixture
def s3_saver_sync(sync_saver_of_kind: S3Saver) -> S3Saver:
    return sync_saver_of_kind


async def test_chat_ainvoke_matches_in_memory(s3_saver: AsyncS3Saver) -> None:
    _outs, final, hist = await side_by_side(chat_async, s3_saver)
    assert len(final["values"]["messages"]) == 2 * len(CHAT_TURNS) + 2  # + tool call/result
    assert len(hist) > 3 * len(CHAT_TURNS)


def chat_sync(saver: Any) -> Any:
    graph = chat_graph().compile(checkpointer=saver)
    outs = [norm(graph.invoke({"messages": [("user", t)]}, cfg())) for t in CHAT_TURNS]
    return outs, norm_snapshot(graph.get_state(cfg())), history(graph, cfg())


def test_chat_sync_invoke_matches_in_memory(s3_saver_sync: S3Saver) -> None:
    assert chat_sync(s3_saver_sync) == chat_sync(InMemorySaver())


def test_sync_stream_with_async_saver(s3_fresh: MotoServer, names: Names) -> None:
    """graph.invoke calls an AsyncS3Saver's sync methods from worker threads."""
    saver = AsyncS3Saver(endpoint_url=s3_fresh.url, **names)  # set up, with no loop yet
    try:
        assert chat_sync(saver) == chat_sync(InMemorySaver())
    finally:
        asyncio.run(saver.aclose())  # no loop of ours: closes the background loop's clients


# ------------------------------------------------------------ interrupts
async def approval(saver: Any) -> Any:
    graph = approval_graph().compile(checkpointer=saver)
    first = await graph.ainvoke({"request": "post #1", "log": []}, cfg())
    paused = norm_snapshot(await graph.aget_state(cfg()))
    done = await graph.ainvoke(Command(resume="approved"), cfg())
    return norm(first), paused, norm(done), await ahistory(graph, cfg())


async def test_interrupt_and_resume(s3_saver: AsyncS3Saver) -> None:
    first, paused, done, _ = await side_by_side(approval, s3_saver)
    assert first["__interrupt__"][0] == ("interrupt", {"question": "approve post #1?"})
    assert paused["next"] == ("review",)
    assert done["log"][-1] == "published (approved)"


async def nested(saver: Any) -> Any:
    graph = nested_graph().compile(checkpointer=saver)
    first = await graph.ainvoke({"trail": []}, cfg())
    state = await graph.aget_state(cfg(), subgraphs=True)
    sub = state.tasks[0].state
    inner = sub.tasks[0].state if sub is not None and not isinstance(sub, dict) else None
    paused = (
        norm_snapshot(state),
        norm_snapshot(sub) if sub is not None and not isinstance(sub, dict) else None,
        norm_snapshot(inner) if inner is not None and not isinstance(inner, dict) else None,
    )
    done = await graph.ainvoke(Command(resume="42"), cfg())
    return norm(first), paused, norm(done), await ahistory(graph, cfg())


async def test_interrupt_inside_nested_subgraph(s3_saver: AsyncS3Saver) -> None:
    first, paused, done, _ = await side_by_side(nested, s3_saver)
    assert first["__interrupt__"][0] == ("interrupt", "inner needs input")
    _outer, middle, inner = paused
    assert middle is not None and inner is not None
    assert inner["ns"] == "middle:*|inner:*"
    assert "inner got 42" in done["trail"]
    assert done["trail"][-2:] == ["middle after", "outer end"]


# ------------------------------------------------------- time travel
async def fork(saver: Any) -> Any:
    graph = chat_graph().compile(checkpointer=saver)
    for t in CHAT_TURNS[:3]:
        await graph.ainvoke({"messages": [("user", t)]}, cfg())
    past = [s async for s in graph.aget_state_history(cfg())]
    # fork from the checkpoint after the first turn's reply
    target = next(s for s in reversed(past) if s.metadata and s.metadata.get("step") == 1)
    forked = await graph.aupdate_state(target.config, {"messages": [("user", "edited turn")]})
    out = await graph.ainvoke(None, forked)
    replay = await graph.ainvoke(None, target.config)  # replaying a past checkpoint
    return norm(out), norm(replay), await ahistory(graph, cfg())


async def test_update_state_and_fork(s3_saver: AsyncS3Saver) -> None:
    out, _, hist = await side_by_side(fork, s3_saver)
    assert out["messages"][-1][1] == "edited turn"
    assert len(out["messages"]) == 3  # the fork dropped the later turns
    assert any(h["metadata"].get("source") == "update" for h in hist)


# ----------------------------------------------------------- fan-out
async def fanout(saver: Any) -> Any:
    graph = fanout_graph().compile(checkpointer=saver)
    out = await graph.ainvoke({"items": list(range(12)), "results": []}, cfg())
    out["results"] = sorted(out["results"])
    hist = await ahistory(graph, cfg())
    for h in hist:
        h["values"]["results"] = sorted(h["values"].get("results", []))
    return norm(out), hist


async def test_parallel_send_fan_out(s3_saver: AsyncS3Saver) -> None:
    out, _ = await side_by_side(fanout, s3_saver)
    assert out["results"] == sorted(i * i for i in range(12))


# -------------------------------------------------------- durability
@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_durability_modes(s3_saver: AsyncS3Saver, durability: str) -> None:
    async def run(saver: Any) -> Any:
        graph = chat_graph().compile(checkpointer=saver)
        for t in CHAT_TURNS[:3]:
            await graph.ainvoke({"messages": [("user", t)]}, cfg(), durability=durability)
        return norm_snapshot(await graph.aget_state(cfg())), await ahistory(graph, cfg())

    final, hist = await side_by_side(run, s3_saver)
    assert len(final["values"]["messages"]) == 8
    if durability == "exit":
        assert len(hist) == 3  # one checkpoint per invocation


# --------------------------------------------------------- DeltaChannel
async def delta(saver: Any) -> Any:
    graph = delta_graph().compile(checkpointer=saver)
    outs = [
        norm(await graph.ainvoke({"messages": [("user", f"turn {i}")]}, cfg())) for i in range(10)
    ]
    return outs, norm_snapshot(await graph.aget_state(cfg())), await ahistory(graph, cfg())


async def test_delta_channel_graph(s3_saver: AsyncS3Saver) -> None:
    _outs, final, hist = await side_by_side(delta, s3_saver)
    assert len(final["values"]["messages"]) == 20
    assert final["values"]["messages"][-1][1] == "#19: turn 9"
    # every historical state reconstructs (the walk works from any checkpoint)
    assert [len(h["values"].get("messages", [])) for h in hist][:3] == [20, 19, 18]


# ------------------------------------------------- a new process resumes
async def test_fresh_saver_resumes_thread(s3_fresh: MotoServer) -> None:
    names = unique_names()

    async def two_processes(first: Any, second: Any) -> Any:
        await (
            chat_graph()
            .compile(checkpointer=first)
            .ainvoke({"messages": [("user", "hello")]}, cfg())
        )
        graph = chat_graph().compile(checkpointer=second)
        out = await graph.ainvoke({"messages": [("user", "weather?")]}, cfg())
        return norm(out), await ahistory(graph, cfg())

    memory = InMemorySaver()
    expected = await two_processes(memory, memory)
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as a:
        await a.setup()
        async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as b:
            actual = await two_processes(a, b)
    assert actual == expected
    assert len(actual[0]["messages"]) == 6  # the second turn calls the tool
