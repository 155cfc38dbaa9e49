"""Maintenance on a thread a writer keeps busy: prune and copy finish in one round
(a writer going on changes nothing of what they act on), and a copy racing packers is
a consistent snapshot of the source at one moment, never empty or unreadable."""

from __future__ import annotations

import asyncio
from typing import Any

from helpers import cfg
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing import MotoServer, Names
from langgraph_s3.testing.graphs import chat_graph


async def ids(saver: AsyncS3Saver, thread: str) -> list[str]:
    return [c.config["configurable"]["checkpoint_id"] async for c in saver.alist(cfg(thread))]


async def busy(saver: AsyncS3Saver, thread: str, stop: asyncio.Event) -> int:
    """Turns back to back until told to stop; how many were acknowledged."""
    graph = chat_graph().compile(checkpointer=saver)
    n = 0
    while not stop.is_set():
        await graph.ainvoke({"messages": [("user", f"turn {n}")]}, cfg(thread))
        n += 1
    return n


async def test_prune_and_copy_finish_beside_a_busy_writer(
    s3_fresh: MotoServer, names: Names
) -> None:
    # one round each: with max_conflicts=1 any restart on the writer's commits fails
    async with (
        AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as writer,
        AsyncS3Saver(endpoint_url=s3_fresh.url, max_conflicts=1, **names) as ops,
    ):
        graph = chat_graph().compile(checkpointer=writer)
        for i in range(4):
            await graph.ainvoke({"messages": [("user", f"warm {i}")]}, cfg("busy"))
        stop = asyncio.Event()
        turns = asyncio.create_task(busy(writer, "busy", stop))
        try:
            with s3_fresh.delayed(0.005):
                for round_ in range(4):
                    before = await ids(ops, "busy")
                    report = await ops.acopy_thread("busy", f"copy-{round_}")
                    after = await ids(ops, "busy")
                    copy = await ids(ops, f"copy-{round_}")
                    assert report.threads == 1
                    # the source's history at one moment between the two reads
                    assert copy and after[-len(copy) :] == copy, (copy, after)
                    assert len(copy) >= len(before)
                    pruned = await ops.aprune(["busy"], keep_last=2)
                    assert pruned.threads + pruned.skipped == 1
        finally:
            stop.set()
            done = await turns
        assert done >= 4
        final = await ids(ops, "busy")
        state = await graph.aget_state(cfg("busy"))
        assert f"turn {done - 1}" in [str(m.content) for m in state.values["messages"]]
        assert len(final) >= 2  # the turns since the last prune, and the two it kept


async def test_a_copy_racing_packers_is_whole(s3_fresh: MotoServer, names: Names) -> None:
    async with (
        AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as writer,
        AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as packer1,
        AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as packer2,
        AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as copier,
    ):
        graph = chat_graph().compile(checkpointer=writer)
        for i in range(3):
            await graph.ainvoke({"messages": [("user", f"warm {i}")]}, cfg("src"))
        stop = asyncio.Event()

        async def pack(saver: AsyncS3Saver) -> None:
            while not stop.is_set():
                await saver.apack(["src"])
                await asyncio.sleep(0)

        tasks: list[asyncio.Task[Any]] = [
            asyncio.create_task(busy(writer, "src", stop)),
            asyncio.create_task(pack(packer1)),
            asyncio.create_task(pack(packer2)),
        ]
        try:
            for round_ in range(6):
                target = f"copy-{round_}"
                await copier.acopy_thread("src", target)
                async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as fresh:
                    copy = await ids(fresh, target)
                    source = await ids(fresh, "src")
                    assert len(copy) >= 4  # never empty
                    assert source[-len(copy) :] == copy  # a moment of the source
                    state = await chat_graph().compile(checkpointer=fresh).aget_state(cfg(target))
                    assert [str(m.content) for m in state.values["messages"]][:1] == ["warm 0"]
        finally:
            stop.set()
            await asyncio.gather(*tasks)


async def test_a_rollback_finishes_beside_a_busy_writer(s3_fresh: MotoServer, names: Names) -> None:
    async with (
        AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as writer,
        AsyncS3Saver(endpoint_url=s3_fresh.url, max_conflicts=1, **names) as ops,
    ):
        graph = chat_graph().compile(checkpointer=writer)
        for i in range(2):
            await graph.ainvoke({"messages": [("user", f"warm {i}")]}, cfg("busy"))
        main = (await graph.aget_state(cfg("busy"))).config
        old = [s async for s in graph.aget_state_history(cfg("busy"))][2].config
        bad = {"configurable": {**old["configurable"], "run_id": "bad-run"}}
        await graph.ainvoke({"messages": [("user", "a bad branch")]}, bad)
        await graph.ainvoke({"messages": [("user", "back on main")]}, main)  # latest again
        stop = asyncio.Event()
        turns = asyncio.create_task(busy(writer, "busy", stop))
        try:
            with s3_fresh.delayed(0.005):
                await asyncio.sleep(0.1)
                report = await ops.adelete_for_runs(["bad-run"])
        finally:
            stop.set()
            done = await turns
        assert report.checkpoints >= 2  # the bad branch's
        said = [str(m.content) for m in (await graph.aget_state(cfg("busy"))).values["messages"]]
        assert "back on main" in said and f"turn {done - 1}" in said
        history = [s async for s in graph.aget_state_history(cfg("busy"))]
        assert not any(
            "a bad branch" in str(m.content) for s in history for m in s.values.get("messages", [])
        )
