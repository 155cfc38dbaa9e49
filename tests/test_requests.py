"""Exact request counts and sequential round trips, where the protocol fixes them.

Readers are built with ``cache_bytes=0`` so that every count is a cold read.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.graphs import delta_graph
from langgraph_s3.objects import bounded_map
from langgraph_s3.testing import MotoServer


def cfg(thread: str, cid: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if cid:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


async def fill(saver: AsyncS3Saver, thread: str, n: int, concurrency: int = 32) -> list[str]:
    """n chained checkpoints; channel a changes every time, b only once."""
    cps = [
        generate_checkpoint(
            channel_values={"a": i, "b": "constant"}, channel_versions={"a": i + 1, "b": 1}
        )
        for i in range(n)
    ]
    # uuid6 ids made within one clock tick need not sort in the order they were made:
    # hand them out sorted, so the chain's order is the ids' order by construction
    for cp, cid in zip(cps, sorted(c["id"] for c in cps), strict=True):
        cp["id"] = cid

    async def put(i: int) -> None:
        await saver.aput(
            cfg(thread, cps[i - 1]["id"] if i else None),
            cps[i],
            generate_metadata(step=i),
            {"a": i + 1, "b": 1} if i == 0 else {"a": i + 1},
        )

    await put(0)  # the first commit starts the thread's life; the rest may race
    await bounded_map(put, range(1, n), concurrency)
    return [c["id"] for c in cps]


@pytest.fixture
async def reader(s3_saver: AsyncS3Saver, s3_fresh: MotoServer) -> Any:
    t = s3_saver.target
    async with AsyncS3Saver(
        endpoint_url=s3_fresh.url, bucket=t.bucket, table=t.table, cache_bytes=0
    ) as r:
        yield r


async def test_get_latest_costs_the_same_for_1_and_1000_checkpoints(
    s3_saver: AsyncS3Saver, reader: AsyncS3Saver
) -> None:
    await fill(s3_saver, "short", 1)
    ids = await fill(s3_saver, "long", 1000)
    counts = {}
    for thread in ("short", "long"):
        reader.stats.reset()
        tup = await reader.aget_tuple({"configurable": {"thread_id": thread}})
        assert tup is not None
        counts[thread] = reader.stats.snapshot()
    assert tup.checkpoint["id"] == ids[-1]
    assert tup.checkpoint["channel_values"] == {"a": 999, "b": "constant"}
    expected = {
        "dynamodb.GetItem": 1,  # manifest: which checkpoint is latest
        "s3.GetObject": 3,  # checkpoint + blobs a and b
        "s3.ListObjectsV2": 1,  # its pending writes
    }
    assert counts["short"]["by_operation"] == expected
    assert counts["long"]["by_operation"] == expected
    assert counts["short"]["round_trips"] == counts["long"]["round_trips"] == 3


async def test_put_makes_no_reads_and_two_round_trips(s3_saver: AsyncS3Saver) -> None:
    await fill(s3_saver, "t", 2)
    latest = await s3_saver.aget_tuple({"configurable": {"thread_id": "t"}})
    assert latest is not None
    s3_saver.stats.reset()
    cp = generate_checkpoint(
        channel_values={"a": "new", "b": "constant", "c": [1, 2]},
        channel_versions={"a": 99, "b": 1, "c": 1},
    )
    await s3_saver.aput(latest.config, cp, generate_metadata(step=2), {"a": 99, "c": 1})
    snap = s3_saver.stats.snapshot()
    # one object per changed channel (a, c) + the checkpoint; b is unchanged: not uploaded
    assert snap["by_operation"] == {"s3.PutObject": 3, "dynamodb.UpdateItem": 1}
    assert snap["round_trips"] == 2


async def test_put_writes_is_one_request_per_call(s3_saver: AsyncS3Saver) -> None:
    (cid,) = await fill(s3_saver, "t", 1)
    s3_saver.stats.reset()
    await s3_saver.aput_writes(cfg("t", cid), [("a", 1), ("b", 2), ("c", 3)], "task-1")
    assert s3_saver.stats.snapshot()["by_operation"] == {"s3.PutObject": 1}
    assert s3_saver.stats.round_trips == 1


async def test_list_limit_10_is_three_round_trips_whatever_the_history(
    s3_saver: AsyncS3Saver, reader: AsyncS3Saver
) -> None:
    short = await fill(s3_saver, "short", 12)
    long = await fill(s3_saver, "long", 400)
    snaps = []
    for thread, ids in (("short", short), ("long", long)):
        reader.stats.reset()
        got = [t.checkpoint["id"] async for t in reader.alist(cfg(thread), limit=10)]
        assert got == ids[::-1][:10]
        snaps.append(reader.stats.snapshot())
    for snap in snaps:
        assert snap["round_trips"] == 3
        assert snap["by_operation"] == {
            "dynamodb.GetItem": 1,  # the manifest's tips, beside the first pages
            "s3.ListObjectsV2": 2,  # one checkpoint page, one writes page
            "s3.GetObject": 10 + 11,  # 10 checkpoints + 10 versions of a + b once
        }


async def test_get_by_id_is_three_round_trips(s3_saver: AsyncS3Saver, reader: AsyncS3Saver) -> None:
    """A tip (the latest) needs no walk; an older checkpoint is found in the history by
    one more listing from the top (the manifest defines what exists)."""
    ids = await fill(s3_saver, "t", 50, concurrency=1)  # in order: a chain, no branch
    reader.stats.reset()
    tup = await reader.aget_tuple(cfg("t", ids[-1]))
    assert tup is not None and tup.checkpoint["channel_values"]["a"] == 49
    snap = reader.stats.snapshot()
    assert snap["by_operation"] == {
        "dynamodb.GetItem": 1,
        "s3.ListObjectsV2": 2,  # the id's key, its writes
        "s3.GetObject": 3,  # the checkpoint, its blobs a and b
    }
    assert snap["round_trips"] == 3
    reader.stats.reset()
    tup = await reader.aget_tuple(cfg("t", ids[10]))
    assert tup is not None and tup.checkpoint["channel_values"]["a"] == 10
    assert tup.parent_config is not None
    assert tup.parent_config["configurable"]["checkpoint_id"] == ids[9]
    snap = reader.stats.snapshot()
    assert snap["by_operation"] == {
        "dynamodb.GetItem": 1,
        "s3.ListObjectsV2": 3,  # + one page of the history, from the top down to it
        "s3.GetObject": 3,
    }
    assert snap["round_trips"] == 4


async def test_delta_channel_history_at_turn_20(
    s3_saver: AsyncS3Saver, reader: AsyncS3Saver
) -> None:
    graph = delta_graph().compile(checkpointer=s3_saver)
    for i in range(20):
        await graph.ainvoke({"messages": [("user", f"turn {i}")]}, cfg("d"))
    latest = await reader.aget_tuple({"configurable": {"thread_id": "d"}})
    assert latest is not None
    target = latest.parent_config  # not a snapshot step: the walk is needed
    assert target is not None
    tup = await reader.aget_tuple(target)
    assert tup is not None and "messages" not in tup.checkpoint["channel_values"]
    reader.stats.reset()
    hist = await reader.aget_delta_channel_history(config=target, channels=["messages"])
    cold = reader.stats.snapshot()
    assert cold["round_trips"] <= 4, cold
    # the same walk with the target envelope cached (LangGraph reads it just before)
    async with AsyncS3Saver(
        endpoint_url=reader.clients.endpoint_url,
        bucket=reader.target.bucket,
        table=reader.target.table,
    ) as warm:
        assert await warm.aget_tuple(target) is not None
        warm.stats.reset()
        again = await warm.aget_delta_channel_history(config=target, channels=["messages"])
        assert warm.stats.round_trips == 3
    assert again == hist
    msgs = [w[2] for w in hist["messages"]["writes"]]
    assert "seed" in hist["messages"] or msgs
    # and the state it rebuilds is right
    state = await delta_graph().compile(checkpointer=reader).aget_state(target)
    assert len(state.values["messages"]) == 39


@pytest.mark.parametrize("snapshot_every", [7, 100])
async def test_delta_state_at_turn_20_in_at_most_4_round_trips(
    s3_saver: AsyncS3Saver, reader: AsyncS3Saver, snapshot_every: int
) -> None:
    """graph.aget_state: get_tuple overlaps the ancestor walk; the walk call is free."""
    from langgraph.checkpoint.memory import InMemorySaver

    from langgraph_s3.graphs import norm

    writer = delta_graph(snapshot_every).compile(checkpointer=s3_saver)
    memory = delta_graph(snapshot_every).compile(checkpointer=InMemorySaver())
    for i in range(20):
        for g in (writer, memory):
            await g.ainvoke({"messages": [("user", f"turn {i}")]}, cfg("d"))
    graph = delta_graph(snapshot_every).compile(checkpointer=reader)
    reader.stats.reset()
    with reader.stats.label("walk"):
        state = await graph.aget_state({"configurable": {"thread_id": "d"}})
    snap = reader.stats.snapshot()
    assert snap["round_trips"] <= 4, snap
    assert norm(state.values) == norm((await memory.aget_state(cfg("d"))).values)
    assert len(state.values["messages"]) == 40
    if snapshot_every == 7:  # a seed exists: 4 round trips, and far fewer GETs
        assert snap["round_trips"] == 4
        assert snap["by_operation"]["s3.GetObject"] < 30
    else:  # no snapshot yet: the walk reaches the root, 3 round trips
        assert snap["round_trips"] == 3
