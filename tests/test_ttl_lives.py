"""Thread TTL across lives, over HTTP on moto: DynamoDB's TTL removing a root item
before any sweep, an id reused after it, the stream handler beside a new life, and a
sweep racing a new conversation."""

from __future__ import annotations

import asyncio
import contextlib
import operator
import time
from datetime import timedelta
from typing import Annotated, Any, TypedDict, cast

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from helpers import cfg, chat, clocked, nest, saver_on, ttl_removes
from langgraph_s3 import AsyncS3Saver, CheckpointConflictError
from langgraph_s3.manifest import Manifest
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.graphs import CHAT_TURNS, ahistory, chat_graph

# TTL edge cases: DynamoDB's TTL removing the root item before any sweep.


async def test_an_id_reused_after_ttl_removal_lists_only_the_new_life(
    s3_fresh: MotoServer,
) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names, thread_ttl_days=timedelta(minutes=20)) as saver:
        await saver.setup()
        clock = clocked(saver)
        await nest(saver, "t")
        old_ns = {
            t.config["configurable"]["checkpoint_ns"] async for t in saver.alist(cfg("t", ns=None))
        }
        clock.advance(25 / 1440)  # expired 5 minutes ago
        await ttl_removes(saver, "t")
        await chat(saver, "t", "a new conversation")
        now_ns = {
            t.config["configurable"]["checkpoint_ns"] async for t in saver.alist(cfg("t", ns=None))
        }
        assert len(old_ns) > 1  # the old life had subgraph namespaces
        assert now_ns == {""}, "the new life lists the old life's subgraph namespaces"


async def test_a_sweep_after_a_new_life_began_removes_the_old_subgraphs(
    s3_fresh: MotoServer,
) -> None:
    """DynamoDB's TTL removed an expired nested thread's root item, a new conversation
    began on the id, then the stream handler swept the old life: the new conversation
    is all the thread holds, none of the old life's subgraph namespaces."""
    names = unique_names()
    async with saver_on(s3_fresh, names, thread_ttl_days=timedelta(minutes=20)) as saver:
        await saver.setup()
        clock = clocked(saver)
        await nest(saver, "t")
        expired_at = clock.now + 20 * 60
        clock.advance(25 / 1440)
        await ttl_removes(saver, "t")
        await chat(saver, "t", "a new conversation")
        # the stream handler's work for the REMOVE record (sweeper.py -> sweep_removed)
        report = await saver.maintenance().sweep_removed("t", expired_at)
        assert report.objects > 0  # the old life's objects
        out = [
            t.config["configurable"]["checkpoint_ns"] async for t in saver.alist(cfg("t", ns=None))
        ]
        assert out and set(out) == {""}
        assert [e.checkpoint_ns for e in await saver.manifest.reads.namespaces("t")] == [""]
        state = await chat_graph().compile(checkpointer=saver).aget_state(cfg("t"))
        assert state.values["messages"][0].content == "a new conversation"


# A new life after DynamoDB's TTL removed the old root item must not continue the old
# life's subgraph namespaces, and the stream handler must never delete a committed
# checkpoint of a new life.


class Log(TypedDict):
    log: Annotated[list[str], operator.add]


def stateful(saver: Any) -> Any:
    """A subgraph with a checkpointer of its own: its namespace ("inner") is the same
    in every turn of the thread."""
    inner = StateGraph(Log)
    inner.add_node("step", lambda s: {"log": ["inner-step"]})
    inner.add_edge(START, "step")
    inner.add_edge("step", END)
    outer = StateGraph(Log)
    outer.add_node("inner", inner.compile(checkpointer=True))
    outer.add_edge(START, "inner")
    outer.add_edge("inner", END)
    return outer.compile(checkpointer=saver)


async def test_a_new_life_does_not_continue_an_old_subgraph_namespace(
    s3_fresh: MotoServer,
) -> None:
    names = unique_names()
    async with AsyncS3Saver(
        endpoint_url=s3_fresh.url, thread_ttl_days=timedelta(minutes=20), **names
    ) as saver:
        await saver.setup()
        clock = clocked(saver)
        graph = stateful(saver)
        for _ in range(3):
            await graph.ainvoke({"log": ["user"]}, cfg("t"))
        clock.advance(25 / 1440)
        await ttl_removes(saver, "t")  # DynamoDB's TTL took the root item
        ref = stateful(InMemorySaver())
        assert await graph.ainvoke({"log": ["user"]}, cfg("t")) == await ref.ainvoke(
            {"log": ["user"]}, cfg("t")
        )
        inner: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": "inner"}}
        mine = [t async for t in saver.alist(inner)]
        theirs = [t async for t in ref.checkpointer.alist(inner)]
        assert len(mine) == len(theirs)
        report = await saver.maintenance().sweep_removed("t", clock.now - 300)
        assert report.threads == 1
        assert await graph.ainvoke({"log": ["user"]}, cfg("t")) == await ref.ainvoke(
            {"log": ["user"]}, cfg("t")
        )


class HoldFirstUpdate:
    """A table whose first UpdateItem (a writer's fast-path commit) waits for ``go``."""

    def __init__(self, inner: Any, reached: asyncio.Event, go: asyncio.Event) -> None:
        self.inner, self.reached, self.go, self.first = inner, reached, go, True

    async def update(self, *args: Any, **kw: Any) -> Any:
        if self.first:
            self.first = False
            self.reached.set()
            await self.go.wait()
        return await self.inner.update(*args, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_the_stream_handler_never_deletes_a_committed_first_checkpoint(
    s3_fresh: MotoServer,
) -> None:
    names = unique_names()
    now = [time.time()]

    def saver() -> AsyncS3Saver:
        s = AsyncS3Saver(endpoint_url=s3_fresh.url, thread_ttl_days=1, **names)
        cast(Manifest, s.manifest).clock = lambda: now[0]
        return s

    async with saver() as a, saver() as b:
        await a.setup()
        ga, gb = chat_graph().compile(checkpointer=a), chat_graph().compile(checkpointer=b)
        await ga.ainvoke({"messages": [("user", "old life")]}, cfg("t"))
        expired_at = now[0] + 86400
        now[0] += 2 * 86400
        await ttl_removes(a, "t")
        # two new conversations at once: A's root is older, B's commits first, and the
        # handler's sweep runs between B's commit and A's
        reached, go = asyncio.Event(), asyncio.Event()
        manifest = cast(Manifest, a.manifest)
        # A's first commit waits
        manifest.items.db = HoldFirstUpdate(manifest.items.db, reached, go)
        run_a = asyncio.create_task(ga.ainvoke({"messages": [("user", "from A")]}, cfg("t")))
        await reached.wait()
        await asyncio.sleep(0.3)  # A's first checkpoint object is stored
        await gb.ainvoke({"messages": [("user", "from B")]}, cfg("t"))
        await b.maintenance().sweep_removed("t", expired_at)
        go.set()
        a_done = False
        with contextlib.suppress(CheckpointConflictError):
            await run_a  # refused (its root is older than the sealed life), or whole
            a_done = True
    async with saver() as cold:  # whatever is committed reads whole, and goes on
        history = [t async for t in cold.alist(cfg("t"))]
        assert history and all(t.checkpoint is not None for t in history)
        entry = await cold.manifest.reads.latest("t", "")
        assert entry is not None
        # every checkpoint the manifest's history starts from is there
        assert entry.floor in {t.checkpoint["id"] for t in history}
        said = [
            m.content for t in history for m in t.checkpoint["channel_values"].get("messages", [])
        ]
        assert "from B" in said and ("from A" in said) == a_done
        out = (
            await chat_graph()
            .compile(checkpointer=cold)
            .ainvoke({"messages": [("user", "next")]}, cfg("t"))
        )
        assert out["messages"][-2].content == "next"


# A sweep racing a new conversation on the id.


async def test_sweep_races_a_new_conversation(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with (
        saver_on(s3_fresh, names, thread_ttl_days=1) as a,
        saver_on(s3_fresh, names, thread_ttl_days=1) as b,
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
            async with saver_on(s3_fresh, names, thread_ttl_days=1) as cold:
                cast(Manifest, cold.manifest).clock = ca
                got = await ahistory(chat_graph().compile(checkpointer=cold), cfg(t))
                infos = [x.namespaces async for x in cold.alist_threads() if x.thread_id == t]
            assert got == await ahistory(chat_graph().compile(checkpointer=ref), cfg(t))
            assert infos == [("",)], infos


async def test_a_new_conversation_racing_a_sweep_keeps_its_writes_when_its_puts_are_slow(
    s3_fresh: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race above on a loaded machine: the new conversation's first put (sweeping the
    old life beside the sweeper) outlasts the time a task's writes give their own
    checkpoint's put to begin. LangGraph begins a thread's puts one after another, so
    the writes wait for the puts ahead of it here, not refuse the task (as they did,
    "the thread was deleted ... start the run again", with the wait cut short)."""
    import langgraph_s3.checkpoint.inline as inline

    monkeypatch.setattr(inline, "UNSEEN_WAIT", 0.0005)  # every put "slow"
    await test_sweep_races_a_new_conversation(s3_fresh)
