"""Reproductions from the second review of packs (issue 11), kept as tests."""

from __future__ import annotations

from langgraph.checkpoint.base import empty_checkpoint

from helpers import cfg
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.graphs import chat_graph
from langgraph_s3.testing import MotoServer, unique_names


async def test_a_listing_goes_on_whole_when_another_call_met_the_pack_first(
    s3_fresh: MotoServer,
) -> None:
    names = unique_names()
    async with (
        AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as p,
        AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as q,
    ):
        await p.setup()
        graph = chat_graph().compile(checkpointer=p)
        for i in range(25):
            await graph.ainvoke({"messages": [("user", f"turn {i}")]}, cfg("t"))
        only = {"source": "loop"}  # a filter: 50 checkpoints a chunk
        want = [t.checkpoint["id"] async for t in p.alist(cfg("t"), filter=only)]
        listing = p.alist(cfg("t"), filter=only)
        got = [(await listing.__anext__()).checkpoint["id"]]
        assert (await q.apack(["t"])).threads == 1  # another process packs it
        assert await p.aget_tuple(cfg("t")) is not None  # another call of P meets the pack
        got += [t.checkpoint["id"] async for t in listing]
        assert got == want


async def test_two_processes_merge_writes_into_one_packed_write_object(
    s3_fresh: MotoServer,
) -> None:
    names = unique_names()
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as s:
        await s.setup()
        c = await s.aput(cfg("t"), empty_checkpoint(), {"source": "input", "step": -1}, {})
        await s.aput_writes(c, [("a", 1)], "task1", "p")
        await s.apack(["t"])
    async with (
        AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as p,
        AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as z,
    ):
        await p.aget_tuple(c)
        await z.aget_tuple(c)  # both read the packed thread
        await p.aput_writes(c, [("a", 1), ("b", 2)], "task1", "p")
        await z.aput_writes(c, [("a", 1), ("b", 2), ("c", 3)], "task1", "p")
        for saver in (p, z):
            tup = await saver.aget_tuple(c)
            assert tup is not None
            assert sorted((w[1], w[2]) for w in tup.pending_writes or ()) == [
                ("a", 1),
                ("b", 2),
                ("c", 3),
            ]
