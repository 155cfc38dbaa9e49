"""A process that lists a thread while the packer is between its switch and its
delete marks every key 'shadowed' for good; once the plain copies are gone it
cannot read the thread any more."""

from __future__ import annotations

from typing import Any

from helpers import cfg
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.graphs import CHAT_TURNS, chat_graph
from langgraph_s3.testing import MotoServer, unique_names


def s3(server: MotoServer, names: dict[str, str], **kw: Any) -> AsyncS3Saver:
    return AsyncS3Saver(endpoint_url=server.url, **names, **kw)


async def test_shadowed_is_never_forgotten(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with s3(s3_fresh, names) as w:
        await w.setup()
        g = chat_graph().compile(checkpointer=w)
        for text in CHAT_TURNS[:2]:
            await g.ainvoke({"messages": [("user", text)]}, cfg("t"))
        async with s3(s3_fresh, names, cache_bytes=0) as reader, s3(s3_fresh, names) as packer:
            before = [t.checkpoint["id"] async for t in reader.alist(cfg("t"))]
            orig = packer.raw_objects.delete

            async def delete(keys: Any) -> Any:
                # the switch is done, the plain copies are still there: a read now
                during = [t.checkpoint["id"] async for t in reader.alist(cfg("t"))]
                assert during == before
                return await orig(keys)

            packer.raw_objects.delete = delete  # type: ignore[method-assign]
            await packer.apack(["t"])
            print("shadowed:", len(reader.objects.shadowed))
            tup = await reader.aget_tuple(cfg("t"))
            assert tup is not None, "the reader lost the thread"
            after = [t.checkpoint["id"] async for t in reader.alist(cfg("t"))]
            assert after == before, f"{len(after)} of {len(before)}"
