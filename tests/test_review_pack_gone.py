"""A cold reader that read the manifest (pack P1) just before a repack (or an
unpack by prune/copy/rollback) removed P1."""

from __future__ import annotations

from typing import Any

from helpers import cfg
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.graphs import CHAT_TURNS, chat_graph
from langgraph_s3.testing import MotoServer, unique_names


def s3(server: MotoServer, names: dict[str, str], **kw: Any) -> AsyncS3Saver:
    return AsyncS3Saver(endpoint_url=server.url, **names, **kw)


async def run(s3_fresh: MotoServer, act: str) -> None:
    names = unique_names()
    async with s3(s3_fresh, names) as writer:
        await writer.setup()
        g = chat_graph().compile(checkpointer=writer)
        for text in CHAT_TURNS[:2]:
            await g.ainvoke({"messages": [("user", text)]}, cfg("t"))
        await writer.apack(["t"])
        await g.ainvoke({"messages": [("user", "more")]}, cfg("t"))  # plain objects again
        async with s3(s3_fresh, names, cache_bytes=0) as reader:
            orig = reader.manifest.latest
            calls = 0

            async def latest(thread: str, ns: str) -> Any:
                nonlocal calls
                got = await orig(thread, ns)
                calls += 1
                if calls == 1:
                    if act == "repack":
                        print(await writer.apack(["t"]))
                    else:
                        print(await writer.aprune(["t"], keep_last=100))
                return got

            reader.manifest.latest = latest  # type: ignore[method-assign]
            tup = await reader.aget_tuple(cfg("t"))
            assert tup is not None


async def test_repack_during_cold_read(s3_fresh: MotoServer) -> None:
    await run(s3_fresh, "repack")


async def test_unpack_during_cold_read(s3_fresh: MotoServer) -> None:
    await run(s3_fresh, "prune")
