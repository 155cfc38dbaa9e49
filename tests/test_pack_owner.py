"""A pack is read only for the thread it was made for: a pack object replaced by
another thread's (by hand, a bad restore) is refused with the pack named, never read
as an empty or foreign history."""

from __future__ import annotations

import pytest

from helpers import cfg
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.errors import CorruptObjectError
from langgraph_s3.testing import MotoServer, Names
from langgraph_s3.testing.graphs import chat_graph


async def test_a_pack_of_another_thread_is_refused(s3_fresh: MotoServer, names: Names) -> None:
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as saver:
        graph = chat_graph().compile(checkpointer=saver)
        for t in ("mine", "other"):
            await graph.ainvoke({"messages": [("user", f"hi from {t}")]}, cfg(t))
        await saver.apack(["mine", "other"])
        mine = (await saver.manifest.reads.latest("mine", "")).pack  # type: ignore[union-attr]
        other = (await saver.manifest.reads.latest("other", "")).pack  # type: ignore[union-attr]
        assert mine is not None and other is not None
        body = await saver.raw_objects.get(other.key)
        assert body is not None
        await saver.raw_objects.delete([mine.key])
        await saver.raw_objects.put(mine.key, body)  # the same size class: read whole
    # a fresh process (nothing cached) reading "mine"
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as fresh:
        with pytest.raises(CorruptObjectError, match=r"a pack of thread 'other'.*for 'mine'"):
            await fresh.aget_tuple(cfg("mine"))
        with pytest.raises(CorruptObjectError, match="a pack of thread 'other'"):
            [c async for c in fresh.alist(cfg("mine"))]
        # the other thread still reads, from its own pack
        state = await chat_graph().compile(checkpointer=fresh).aget_state(cfg("other"))
        assert "hi from other" in str(state.values["messages"][0].content)
