"""A reader in another process that read the manifest before the pack switch and
the objects after the packer removed them."""

from __future__ import annotations

from typing import Any

from helpers import cfg
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.graphs import CHAT_TURNS, chat_graph
from langgraph_s3.testing import MotoServer, unique_names


def s3(server: MotoServer, names: dict[str, str], **kw: Any) -> AsyncS3Saver:
    return AsyncS3Saver(endpoint_url=server.url, **names, **kw)


async def test_get_tuple_during_pack(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with s3(s3_fresh, names) as writer:
        await writer.setup()
        g = chat_graph().compile(checkpointer=writer)
        for text in CHAT_TURNS[:3]:
            await g.ainvoke({"messages": [("user", text)]}, cfg("t"))
        async with s3(s3_fresh, names, cache_bytes=0) as reader, s3(s3_fresh, names) as packer:
            before = await reader.aget_tuple(cfg("t"))  # reader knows: not packed
            assert before is not None
            orig = reader.manifest.latest
            fired = False

            async def latest(thread: str, ns: str) -> Any:
                nonlocal fired
                got = await orig(thread, ns)
                if not fired:
                    fired = True
                    await packer.apack(["t"])  # switch + delete happen in between
                return got

            reader.manifest.latest = latest  # type: ignore[method-assign]
            pass
            after = await reader.aget_tuple(cfg("t"))
            print("after:", None if after is None else after.checkpoint["id"])
            assert after is not None, "get_tuple returned None for a live thread"
            assert after.checkpoint["id"] == before.checkpoint["id"]


async def test_list_during_pack(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with s3(s3_fresh, names) as writer:
        await writer.setup()
        g = chat_graph().compile(checkpointer=writer)
        for i in range(40):
            await g.ainvoke({"messages": [("user", f"turn {i}")]}, cfg("t"))
        async with s3(s3_fresh, names, cache_bytes=0) as reader, s3(s3_fresh, names) as packer:
            full = [t.checkpoint["id"] async for t in reader.alist(cfg("t"))]
            out = []
            n = 0
            async for t in reader.alist(cfg("t")):
                out.append(t.checkpoint["id"])
                n += 1
                if n == 2:
                    await packer.apack(["t"])
            print(len(full), len(out))
            assert out == full, f"list during pack: {len(out)} of {len(full)}"


async def test_graph_resumes_during_pack(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with s3(s3_fresh, names) as writer:
        await writer.setup()
        g = chat_graph().compile(checkpointer=writer)
        for text in CHAT_TURNS[:3]:
            await g.ainvoke({"messages": [("user", text)]}, cfg("t"))
        async with s3(s3_fresh, names, cache_bytes=0) as app, s3(s3_fresh, names) as packer:
            await app.aget_tuple(cfg("t"))  # this process knows: not packed
            orig = app.manifest.latest
            fired = False

            async def latest(thread: str, ns: str) -> Any:
                nonlocal fired
                got = await orig(thread, ns)
                if not fired:
                    fired = True
                    await packer.apack(["t"])
                return got

            app.manifest.latest = latest  # type: ignore[method-assign]
            out = (
                await chat_graph()
                .compile(checkpointer=app)
                .ainvoke({"messages": [("user", "next")]}, cfg("t"))
            )
            n = len(out["messages"])
            print("messages after the turn:", n)
            assert n > 2, f"the conversation restarted: {n} messages"
