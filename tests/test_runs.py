"""Lists stored as runs (runs.py), side by side with InMemorySaver, on moto.

Every scenario runs the same graph on AsyncS3Saver and on InMemorySaver and
compares the whole state history; a second saver with no cache then reads it all
from S3 again, so the runs are rebuilt from their objects, not from memory.
"""

from __future__ import annotations

import operator
import uuid
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages

from helpers import cfg
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.core import codec
from langgraph_s3.core.runs import FANOUT, WHOLE
from langgraph_s3.testing.graphs import ahistory, chat_graph, norm


class State(TypedDict, total=False):
    messages: Annotated[list[Any], add_messages]
    log: Annotated[list[int], operator.add]
    count: int
    notes: list[str]


def mixed_graph(*, edits: bool = True) -> StateGraph[Any]:
    """Append-only lists (messages, log), a counter and, with ``edits``: a list replaced
    wholesale whose first element changes every other step (its prefix changes: it is
    never runs of its parent's), and every third step the first message edited in place."""

    def step(state: State) -> dict[str, Any]:
        n = state.get("count", 0) + 1
        out: dict[str, Any] = {
            "messages": [AIMessage(content=f"answer {n} " + "text " * 150, id=f"a{n}")],
            "log": [n],
            "count": n,
        }
        if edits:
            if n % 3 == 0:
                state["messages"][0].content = f"edited in place at {n}"
            out["notes"] = [f"head {n // 2}", *[f"note {i}" for i in range(n)]]
        return out

    b = StateGraph(State)
    b.add_node("step", step)
    b.add_edge(START, "step")
    return b


async def both(builder: Any, s3: AsyncS3Saver, script: Any) -> tuple[Any, Any]:
    mem = InMemorySaver()
    graphs = (builder().compile(checkpointer=s3), builder().compile(checkpointer=mem))
    for g in graphs:
        await script(g)
    return graphs


async def same_everywhere(s3_saver: AsyncS3Saver, builder: Any, graphs: Any, thread: str) -> None:
    ours, ref = graphs
    expected = await ahistory(ref, cfg(thread))
    assert await ahistory(ours, cfg(thread)) == expected
    t = s3_saver.target
    async with AsyncS3Saver(
        endpoint_url=s3_saver.clients.endpoint_url, bucket=t.bucket, table=t.table, cache_bytes=0
    ) as cold:
        assert await ahistory(builder().compile(checkpointer=cold), cfg(thread)) == expected


async def test_messages_remove_replace_fork_and_update_state(s3_saver: AsyncS3Saver) -> None:
    async def script(g: Any) -> None:
        c = cfg("t")
        for text in ("hi", "what is the weather", "thanks", "more", "and more", "bye"):
            await g.ainvoke({"messages": [HumanMessage(content=text, id=f"h-{text}")]}, c)
        state = await g.aget_state(c)
        third = state.values["messages"][2]
        await g.aupdate_state(c, {"messages": [RemoveMessage(id=third.id)]})
        await g.aupdate_state(c, {"messages": [HumanMessage(content="replaced", id="h-hi")]})
        await g.ainvoke({"messages": [HumanMessage(content="after", id="h-after")]}, c)
        # a fork from an old checkpoint, continued
        old = [s async for s in g.aget_state_history(c)][-4]
        forked = await g.aupdate_state(
            old.config, {"messages": [HumanMessage(content="fork", id="h-fork")]}
        )
        await g.ainvoke(None, forked)
        await g.ainvoke({"messages": [HumanMessage(content="on the fork", id="h-f2")]}, c)

    graphs = await both(chat_graph, s3_saver, script)
    await same_everywhere(s3_saver, chat_graph, graphs, "t")


async def test_lists_counters_prefix_changes_and_edits_in_place(s3_saver: AsyncS3Saver) -> None:
    async def script(g: Any) -> None:
        c = cfg("m")
        await g.ainvoke({"messages": [HumanMessage(content="start", id="h0")]}, c)
        for _ in range(3 * FANOUT + 2):  # enough appends for runs to merge twice
            await g.ainvoke({}, c)

    graphs = await both(mixed_graph, s3_saver, script)
    await same_everywhere(s3_saver, mixed_graph, graphs, "m")


async def test_an_appended_list_uploads_its_new_elements_only(s3_saver: AsyncS3Saver) -> None:
    """Bytes uploaded per step stay flat as the lists grow (about 1 KB more each step);
    the runs merge into levels, so a read needs few objects."""
    graph = mixed_graph(edits=False).compile(checkpointer=s3_saver)
    await graph.ainvoke({"messages": [HumanMessage(content="start", id="h0")]}, cfg("g"))
    sizes = []
    for _ in range(70):
        s3_saver.stats.reset()
        await graph.ainvoke({}, cfg("g"))
        sizes.append(s3_saver.stats.bytes_sent)
    early, late = sum(sizes[:10]) / 10, sum(sizes[-10:]) / 10
    assert late <= 2 * early, (early, late)  # whole lists: about 7 times as much
    entry = await s3_saver.manifest.reads.latest("g", "")
    assert entry is not None
    nsp = s3_saver.layout.namespace("g", "")
    env = codec.load_checkpoint(await s3_saver.objects.get(nsp.checkpoint_at(entry.latest_tail)))
    msgs = env.runs["messages"]
    assert msgs.count == 72
    assert [r.level for r in msgs.refs][:1] == [WHOLE]  # the first list, stored whole
    assert WHOLE not in [r.level for r in msgs.refs[1:]]
    # 71 appends = 64 (merged twice: one run of level 2) + 7 of level 0 (6 + its own)
    assert [r.level for r in msgs.refs[1:]] == [2] + [0] * (FANOUT - 2)
    assert msgs.level == 0 and msgs.own is not None


async def test_delete_for_runs_moves_the_holders_out_of_the_history(
    s3_saver: AsyncS3Saver,
) -> None:
    """delete_for_runs of the first run: its checkpoints hold the first messages of every
    later state, so their objects are moved out of the listing (h/), not deleted. The
    history is the other runs' checkpoints, each read whole by a cold reader."""
    runs = [str(uuid.uuid4()) for _ in range(3)]
    graph = chat_graph().compile(checkpointer=s3_saver)
    for i, run in enumerate(runs):
        text = f"turn {i} " + "words " * 150
        await graph.ainvoke(
            {"messages": [HumanMessage(content=text, id=f"h{i}")]},
            {"configurable": {"thread_id": "r", "run_id": run}},
        )

    def seen(tuples: list[Any]) -> list[tuple[str, Any]]:
        return [(t.checkpoint["id"], norm(t.checkpoint["channel_values"])) for t in tuples]

    before = [t async for t in s3_saver.alist(cfg("r"))]
    expected = seen([t for t in before if t.metadata.get("run_id") != runs[0]])
    await s3_saver.adelete_for_runs([runs[0]])
    t = s3_saver.target
    async with AsyncS3Saver(
        endpoint_url=s3_saver.clients.endpoint_url, bucket=t.bucket, table=t.table, cache_bytes=0
    ) as cold:
        assert seen([x async for x in cold.alist(cfg("r"))]) == expected
        state = await chat_graph().compile(checkpointer=cold).aget_state(cfg("r"))
        assert len(state.values["messages"]) == 6  # the first turn's messages included
    nsp = s3_saver.layout.namespace("r", "")
    moved = await s3_saver.objects.list_all(nsp.moved)
    listed = nsp.listed_checkpoints(o.key for o in await s3_saver.objects.list_all(nsp.checkpoints))
    assert moved and all(ck.run_token != runs[0] for ck in listed)
