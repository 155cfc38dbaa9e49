from __future__ import annotations

import asyncio
from typing import Any, cast

from langgraph.checkpoint.memory import InMemorySaver

from helpers import cfg, chat, clocked, nest
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.graphs import CHAT_TURNS, ahistory, chat_graph
from langgraph_s3.manifest import Manifest
from langgraph_s3.testing import MotoServer, unique_names


def s3(server: MotoServer, names: dict[str, str], **kw: Any) -> AsyncS3Saver:
    return AsyncS3Saver(endpoint_url=server.url, **names, **kw)


async def test_pack_twice_concurrently_with_a_writer(s3_fresh: MotoServer) -> None:
    names = unique_names()
    ref = InMemorySaver()
    async with s3(s3_fresh, names) as w, s3(s3_fresh, names) as p1, s3(s3_fresh, names) as p2:
        await w.setup()
        for s in (w, ref):
            await chat(s, "t", *CHAT_TURNS[:2])
        gw = chat_graph().compile(checkpointer=w)
        for i in range(4):
            await asyncio.gather(
                gw.ainvoke({"messages": [("user", f"x{i}")]}, cfg("t")),
                p1.apack(["t"]),
                p2.apack(["t"]),
            )
            await chat(ref, "t", f"x{i}")
        async with s3(s3_fresh, names) as cold:
            got = await ahistory(chat_graph().compile(checkpointer=cold), cfg("t"))
        assert got == await ahistory(chat_graph().compile(checkpointer=ref), cfg("t"))


async def test_sweep_races_a_new_conversation(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with (
        s3(s3_fresh, names, thread_ttl_days=1) as a,
        s3(s3_fresh, names, thread_ttl_days=1) as b,
    ):
        await a.setup()
        ca = clocked(a)
        cast(Manifest, b.manifest).clock = ca
        for i in range(3):
            t = f"t{i}"
            await nest(a, t)
            await chat(a, t, *CHAT_TURNS[:2])
            ca.advance(2)
            await asyncio.gather(b.asweep_ttl(), chat(a, t, "new start"))
            ref = InMemorySaver()
            await chat(ref, t, "new start")
            async with s3(s3_fresh, names, thread_ttl_days=1) as cold:
                cast(Manifest, cold.manifest).clock = ca
                got = await ahistory(chat_graph().compile(checkpointer=cold), cfg(t))
                infos = [x.namespaces async for x in cold.alist_threads() if x.thread_id == t]
            assert got == await ahistory(chat_graph().compile(checkpointer=ref), cfg(t))
            assert infos == [("",)], infos


async def test_list_threads_cursor_paging(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with s3(s3_fresh, names) as a:
        await a.setup()
        for i in range(5):
            await nest(a, f"n{i}")
            await chat(a, f"c{i}", CHAT_TURNS[0])
        cast(Manifest, a.manifest).page_size = 2
        seen: list[str] = []
        after = None
        while True:
            page = [t async for t in a.alist_threads(limit=3, after=after)]
            if not page:
                break
            seen += [t.thread_id for t in page]
            after = page[-1].cursor
        assert sorted(seen) == sorted([f"n{i}" for i in range(5)] + [f"c{i}" for i in range(5)]), (
            seen
        )
        full = [t async for t in a.alist_threads()]
        assert all(len(t.namespaces) == 3 for t in full if t.thread_id.startswith("n"))
