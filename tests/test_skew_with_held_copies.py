"""Clock skew between two writers of one thread while its manifest item holds
checkpoint copies (``core/held.py``): writer A's checkpoint PUTs are frozen (a Lambda
frozen right after it answered: its turn acknowledged, its copies only in the item);
writer B, whose clock is 10 minutes off A's (and S3's), continues the thread and runs
its upkeep: a prune, a packing, then ``delete_thread``; A then thaws.

Until the deletion nothing acknowledged may be lost: B's reads, and the history, are
InMemorySaver's after the same turns. After it (and A's thaw) nothing of the thread
may be readable or left in the bucket (an erasure marker aside) or in its items.

B's clock is its manifest clock, which every decision of the library reads (leases,
marks, the deletion's windows); the checkpoint ids LangGraph makes come from the
process's clock (ids of a writer behind are ``tests/test_clock_skew.py``'s subject).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from helpers import cfg, clocked, left_of, thread_items
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.manifest.schema import INLINE_PREFIX
from langgraph_s3.testing import MotoServer, Names
from langgraph_s3.testing.graphs import CHAT_TURNS, chat_graph, norm

THREAD = "t"


class Frozen:
    """A writer's checkpoint PUTs held back before they reach S3, then let go."""

    def __init__(self, saver: AsyncS3Saver) -> None:
        self.real, self.gate = saver.objects.put, asyncio.Event()
        saver.objects.put = self.put  # type: ignore[method-assign]

    async def put(self, key: str, body: bytes, **kw: Any) -> Any:
        if "/c/" in key and not self.gate.is_set():
            await self.gate.wait()
        return await self.real(key, body, **kw)


async def turn(saver: Any, text: str) -> None:
    await (
        chat_graph()
        .compile(checkpointer=saver)
        .ainvoke({"messages": [("user", text)]}, cfg(THREAD))
    )


async def view(saver: Any) -> tuple[Any, list[Any]]:
    """The state's messages and the history's (step, next, messages), newest first."""
    graph = chat_graph().compile(checkpointer=saver)
    state = await graph.aget_state(cfg(THREAD))
    history = [
        (s.metadata["step"] if s.metadata else None, s.next, norm(s.values.get("messages", [])))
        async for s in graph.aget_state_history(cfg(THREAD))
    ]
    return norm(state.values.get("messages", [])), history


async def held_in_items(saver: AsyncS3Saver) -> list[str]:
    found = await thread_items(saver, THREAD)
    return [n for item in found for n in item if n.startswith(INLINE_PREFIX) or n == "md"]


@pytest.mark.parametrize("skew", [-600.0, 600.0])
async def test_a_writer_10_minutes_off_beside_a_frozen_writer_loses_nothing_and_erases_all(
    s3_fresh: MotoServer, names: Names, skew: float
) -> None:
    memory = InMemorySaver()
    async with (
        AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as a,
        AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as b,
    ):
        clock = clocked(b)
        clock.now += skew
        await turn(a, CHAT_TURNS[0])
        await a.aflush()
        frozen = Frozen(a)
        await turn(a, CHAT_TURNS[1])  # acknowledged; its checkpoints only in the item
        assert await held_in_items(a)
        await turn(b, CHAT_TURNS[2])  # B goes on from A's held latest
        for text in CHAT_TURNS[:3]:
            await turn(memory, text)
        expected = await view(memory)
        assert await view(b) == expected
        assert await view(a) == expected
        await b.aprune([THREAD], keep_last=100)  # everything kept: settles what is held
        assert await view(b) == expected
        await b.apack([THREAD])
        assert await view(b) == expected
        await b.adelete_thread(THREAD)
        frozen.gate.set()  # A thaws: its PUTs go on
        for _ in range(200):
            await asyncio.sleep(0)
        await a.aflush()
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as reader:
        assert await reader.aget_tuple(cfg(THREAD)) is None
        assert [c async for c in reader.alist(cfg(THREAD, ns=None))] == []
        assert await left_of(reader, THREAD) == []
        assert await held_in_items(reader) == []
