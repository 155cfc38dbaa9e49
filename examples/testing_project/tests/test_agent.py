"""Tests as a user writes them, in a project whose pytest config says nothing about asyncio.

The first two tests are the README's example ("Testing your agents offline"), verbatim.
"""

import pytest
from my_agent import build_my_agent  # your graph's builder


async def test_my_agent(s3_saver):
    graph = build_my_agent().compile(checkpointer=s3_saver)
    config = {"configurable": {"thread_id": "t"}}
    await graph.ainvoke({"messages": [("user", "hi")]}, config)
    assert (await graph.aget_state(config)).values["messages"]


async def test_my_memory(async_s3_store):
    await async_s3_store.aput(("users", "u1"), "prefs", {"tone": "brief"})
    assert (await async_s3_store.aget(("users", "u1"), "prefs")).value == {"tone": "brief"}


def test_sync_store(s3_store):
    s3_store.put(("users", "u2"), "prefs", {"tone": "chatty"})
    assert s3_store.get(("users", "u2"), "prefs").value == {"tone": "chatty"}


@pytest.fixture
async def thread_config():
    """A plain ``@pytest.fixture`` on an ``async def``: no pytest_asyncio decorator."""
    yield {"configurable": {"thread_id": "from-a-plain-async-fixture"}}


async def test_plain_async_fixture(async_s3_saver, thread_config):
    graph = build_my_agent().compile(checkpointer=async_s3_saver)
    await graph.ainvoke({"messages": [("user", "hello")]}, thread_config)
    messages = (await graph.aget_state(thread_config)).values["messages"]
    assert [m.content for m in messages] == ["hello", "echo: hello"]


@pytest.mark.asyncio
async def test_marked(async_s3_store):
    """Marked, so it runs in strict mode too (projects that opt out of auto mode)."""
    await async_s3_store.aput(("docs",), "a", {"n": 1})
    assert [item.key for item in await async_s3_store.asearch(("docs",))] == ["a"]
