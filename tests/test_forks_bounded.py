"""Forks of a real graph on moto: past HEADS_INLINE branch heads the manifest item
spills the older ones to tip markers; the history (every fork) and the state stay as
InMemorySaver's, and the item stays small."""

from __future__ import annotations

from typing import Any

import orjson

from helpers import cfg, side_by_side
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.core.held import HELD_BUDGET
from langgraph_s3.manifest import HEADS_INLINE
from langgraph_s3.testing import MotoServer, Names
from langgraph_s3.testing.graphs import ahistory, chat_graph

FORKS = 150  # two spills


async def forks(saver: Any) -> Any:
    graph = chat_graph().compile(checkpointer=saver)
    await graph.ainvoke({"messages": [("user", "hello there")]}, cfg("f"))
    first = [s async for s in graph.aget_state_history(cfg("f"))][-1].config
    for i in range(FORKS):  # each a new branch from the first checkpoint
        await graph.ainvoke({"messages": [("user", f"fork {i}")]}, first)
    history = await ahistory(graph, cfg("f"))
    state = await graph.aget_state(cfg("f"))
    return len(history), history, [str(m.content) for m in state.values["messages"]]


async def test_150_forks_of_a_graph_read_as_in_memory(s3_fresh: MotoServer, names: Names) -> None:
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as saver:
        n, _, said = await side_by_side(forks, saver)
        assert n == 3 + 3 * FORKS and said[-2] == f"fork {FORKS - 1}"
        entry = await saver.manifest.reads.latest("f", "")
        assert entry is not None and entry.spilled and len(entry.heads) <= HEADS_INLINE + 2
        item = await saver.manifest.db.get(saver.manifest.key("f", ""))  # as stored
        assert item is not None
        # what the item holds until its objects land has a bound of its own (held_bytes)
        held = {n for n in item if n.startswith(("inline:", "hw:"))}
        assert int(item["held_bytes"]["N"]) <= HELD_BUDGET
        rest = {n: v for n, v in item.items() if n not in held}
        assert len(orjson.dumps(rest, default=lambda b: "x" * len(b))) < 4_000


async def test_an_item_past_400_kb_is_refused_with_the_fix(
    s3_fresh: MotoServer, names: Names
) -> None:
    import pytest
    from langgraph.checkpoint.base.id import uuid6

    from langgraph_s3.core.records import Fields
    from langgraph_s3.errors import ServiceError

    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as saver:
        graph = chat_graph().compile(checkpointer=saver)
        await graph.ainvoke({"messages": [("user", "hello there")]}, cfg("big"))
        entry = await saver.manifest.reads.latest("big", "")
        assert entry is not None
        heads = {str(uuid6(clock_seq=i)) for i in range(12_000)}  # about 450 KB
        new = Fields(entry.latest_id, entry.latest_tail, entry.floor, False, 0, heads)
        with pytest.raises(ServiceError, match=r"400 KB.*prune the thread"):
            await saver.manifest.upkeep.replace(entry, new)
        assert (await saver.manifest.reads.latest("big", "")) == entry  # nothing was written
