"""Archive packs over HTTP on moto: a packed thread reads, continues,
prunes, copies and deletes as before; a crash at any step of packing loses
nothing. InMemorySaver (through the export of test_transfer) is the oracle."""

from __future__ import annotations

import base64
import time
from typing import Any, cast

import orjson
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from helpers import THREADS, build_threads, cfg, chat, dump, graph_views, keys_of, left_of, saver_on
from langgraph_s3 import AsyncS3Saver, CorruptObjectError, InvalidRequestError
from langgraph_s3.checkpoint import pack_lookup
from langgraph_s3.manifest import Manifest
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.graphs import CHAT_TURNS, ahistory, chat_graph, delta_graph


async def build_more(saver: AsyncS3Saver) -> None:
    await (
        chat_graph()
        .compile(checkpointer=saver)
        .ainvoke({"messages": [("user", "one more")]}, cfg("chat"))
    )


async def raw_keys(saver: AsyncS3Saver, thread: str) -> list[str]:
    return [o.key for o in await left_of(saver, thread)]


async def pack_keys(saver: AsyncS3Saver, thread: str) -> list[str]:
    return [o.key for o in await saver.raw_objects.list_all(saver.layout.packs(thread))]


async def views(saver: AsyncS3Saver) -> dict[str, Any]:
    return {t: (await dump(saver, t), await graph_views(saver, t)) for t in THREADS}


async def test_a_packed_thread_reads_the_same_in_one_object(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names) as saver:
        await saver.setup()
        await build_threads(saver)
        before = await views(saver)
        stored = {t: await raw_keys(saver, t) for t in THREADS}
        report = await saver.apack(list(THREADS))
        assert report.threads == 3 and report.skipped == 0
        assert report.objects == sum(len(k) for k in stored.values())
        for t in THREADS:
            assert await raw_keys(saver, t) == []  # the small objects are gone
            assert len(await pack_keys(saver, t)) == 1  # one object per thread
        assert await views(saver) == before  # the packing process
        async with saver_on(s3_fresh, names) as cold:  # a process that never saw the packs
            assert await views(cold) == before
        async with saver_on(s3_fresh, names) as cold:
            with cold.stats.label("latest"):
                tup = await cold.aget_tuple(cfg("chat"))
            assert tup is not None
            latest = cold.stats.labels["latest"]
            # the manifest and the writes page; then again with the pack (read whole):
            # one round trip more than an unpacked thread's three, at most
            assert latest.round_trips <= 4, latest
        # nothing new since: packing again does nothing
        again = await saver.apack(["chat"])
        assert (again.threads, again.skipped) == (0, 1)


async def test_a_packed_thread_goes_on_and_packs_again(s3_fresh: MotoServer) -> None:
    names = unique_names()
    ref = InMemorySaver()
    async with saver_on(s3_fresh, names) as saver:
        await saver.setup()
        for s in (saver, ref):
            g = chat_graph().compile(checkpointer=s)
            for text in CHAT_TURNS[:2]:
                await g.ainvoke({"messages": [("user", text)]}, cfg("t"))
        await saver.apack(["t"])
        first = await pack_keys(saver, "t")
        for s in (saver, ref):  # new turns on a packed thread
            await (
                chat_graph()
                .compile(checkpointer=s)
                .ainvoke({"messages": [("user", CHAT_TURNS[2])]}, cfg("t"))
            )
        graph = chat_graph().compile(checkpointer=saver)
        oracle = await ahistory(chat_graph().compile(checkpointer=ref), cfg("t"))
        assert await ahistory(graph, cfg("t")) == oracle
        assert await raw_keys(saver, "t") != []  # the new turn: plain objects
        report = await saver.apack(["t"])  # folded into a new pack
        assert report.threads == 1
        assert await raw_keys(saver, "t") == []
        assert len(await pack_keys(saver, "t")) == 1 and await pack_keys(saver, "t") != first
        async with saver_on(s3_fresh, names) as cold:
            assert await ahistory(chat_graph().compile(checkpointer=cold), cfg("t")) == oracle


async def test_a_large_delta_pack_is_read_by_ranges(
    s3_fresh: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pack_lookup, "WHOLE_BELOW", 0)  # every pack read by ranges
    names = unique_names()
    ref = InMemorySaver()
    async with saver_on(s3_fresh, names) as saver:
        await saver.setup()
        for s in (saver, ref):
            g = delta_graph(snapshot_every=3).compile(checkpointer=s)
            for i in range(8):
                await g.ainvoke({"messages": [("user", f"turn {i}")]}, cfg("d"))
        await saver.apack(["d"])
        assert await raw_keys(saver, "d") == []
        oracle = await ahistory(delta_graph(snapshot_every=3).compile(checkpointer=ref), cfg("d"))
        async with saver_on(s3_fresh, names) as cold:
            graph = delta_graph(snapshot_every=3).compile(checkpointer=cold)
            with cold.stats.label("state"):
                state = await graph.aget_state(cfg("d"))
            assert len(state.values["messages"]) == 16
            assert await ahistory(graph, cfg("d")) == oracle
            await graph.ainvoke({"messages": [("user", "after the pack")]}, cfg("d"))
            assert len((await graph.aget_state(cfg("d"))).values["messages"]) == 18


async def test_maintenance_on_packed_threads(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names) as saver:
        await saver.setup()
        await build_threads(saver)
        before = await views(saver)
        await saver.apack(list(THREADS))
        copied = await saver.acopy_thread("chat", "chat-copy")
        assert copied.threads == 1
        assert await dump(saver, "chat-copy") != []
        assert (await graph_views(saver, "chat"))[0] == before["chat"][1][0]
        kept = await saver.aprune(["waiting"], keep_last=1000)  # removes nothing: stays packed
        assert (kept.threads, kept.skipped) == (0, 1)
        assert len(await pack_keys(saver, "waiting")) == 1
        pruned = await saver.aprune(["waiting"], keep_last=1)
        assert pruned.threads == 1 and len(await dump(saver, "waiting")) >= 1
        assert await pack_keys(saver, "waiting") == []  # unpacked to be pruned
        deleted = await saver.adelete_thread("done")
        assert deleted.objects == 1 and deleted.checkpoints == len(before["done"][0])
        assert await raw_keys(saver, "done") == [] and await pack_keys(saver, "done") == []
        assert await dump(saver, "done") == []
        await saver.adelete_for_runs(["no-such-run"])
        assert (await views(saver))["chat"] == before["chat"]
        with pytest.raises(InvalidRequestError, match="idle_days"):
            await saver.apack()


async def test_a_crash_at_each_step_of_packing_loses_nothing(
    s3_fresh: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names) as saver:
        await saver.setup()
        await build_threads(saver)
        before = await views(saver)

        class Crash(Exception):
            pass

        async def crash(*args: Any, **kw: Any) -> Any:
            raise Crash

        # 1. the pack is stored, the manifest never switches to it
        with monkeypatch.context() as m:
            m.setattr(saver.manifest.upkeep, "set_pack", crash)
            with pytest.raises(Crash):
                await saver.apack(["chat"])
        assert len(await pack_keys(saver, "chat")) == 1  # an orphan pack
        async with saver_on(s3_fresh, names) as cold:
            assert await views(cold) == before
        # 2. the manifest switched, the objects were never removed
        real_delete = saver.raw_objects.delete
        with monkeypatch.context() as m:
            m.setattr(saver.raw_objects, "delete", crash)
            with pytest.raises(Crash):
                await saver.apack(["waiting"])
        assert await raw_keys(saver, "waiting") != []
        async with saver_on(s3_fresh, names) as cold:
            assert await views(cold) == before
            await cold.apack(["chat", "waiting"])  # finishes both, cleanly
        assert saver.raw_objects.delete == real_delete
        for t in ("chat", "waiting"):
            assert await raw_keys(saver, t) == []
        assert len(await pack_keys(saver, "waiting")) == 1
        assert len(await pack_keys(saver, "chat")) == 2  # the orphan: too young to be sure
        async with saver_on(s3_fresh, names) as cold:
            assert await views(cold) == before
            await build_more(cold)
            cast(Manifest, cold.manifest).clock = lambda: time.time() + 2 * 3600
            await cold.apack(["chat"])  # two hours on, the orphan goes
        assert len(await pack_keys(saver, "chat")) == 1
        # and a deletion takes every pack of the thread
        await saver.apack(["waiting"])
        with monkeypatch.context() as m:
            m.setattr(saver.manifest.upkeep, "set_pack", crash)
            await build_more(saver)
            with pytest.raises(Crash):
                await saver.apack(["chat"])
        assert len(await pack_keys(saver, "chat")) == 2
        assert (await saver.adelete_thread("chat")).threads == 1
        assert await pack_keys(saver, "chat") == [] and await raw_keys(saver, "chat") == []


async def test_idle_threads_are_packed(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names) as saver:
        await saver.setup()
        manifest = cast(Manifest, saver.manifest)
        manifest.clock = lambda: time.time() - 10 * 86400
        await (
            chat_graph()
            .compile(checkpointer=saver)
            .ainvoke({"messages": [("user", "old")]}, cfg("old"))
        )
        manifest.clock = time.time
        await (
            chat_graph()
            .compile(checkpointer=saver)
            .ainvoke({"messages": [("user", "new")]}, cfg("new"))
        )
        report = await saver.apack(idle_days=7)
        assert report.threads == 1
        assert len(await pack_keys(saver, "old")) == 1 and await pack_keys(saver, "new") == []


async def test_a_rollback_unpacks_only_the_threads_holding_its_runs(s3_fresh: MotoServer) -> None:
    names = unique_names()
    ref = InMemorySaver()
    async with saver_on(s3_fresh, names) as saver:
        await saver.setup()
        for s in (saver, ref):
            graph = chat_graph().compile(checkpointer=s)
            for i, run in enumerate(("run-1", "run-2")):
                for thread in ("a", "b"):
                    if run == "run-2" and (thread == "b" or s is ref):
                        continue  # b holds run-1 only; the oracle never had run-2
                    conf = {"configurable": {"thread_id": thread, "run_id": run}}
                    await graph.ainvoke({"messages": [("user", CHAT_TURNS[i])]}, conf)
        await saver.apack(["a", "b"])
        await saver.adelete_for_runs(["run-2"])
        assert await pack_keys(saver, "a") == []  # held run-2: unpacked, then rolled back
        assert len(await pack_keys(saver, "b")) == 1  # did not: still packed
        for thread in ("a", "b"):
            graph = chat_graph().compile(checkpointer=saver)
            oracle = chat_graph().compile(checkpointer=ref)
            assert await ahistory(graph, cfg(thread)) == await ahistory(oracle, cfg(thread))


# Damaged and missing packs: named, never read as something else.


async def test_a_damaged_or_missing_pack_is_named(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names) as a:
        await a.setup()
        for t in ("bad", "gone"):
            await chat(a, t, *CHAT_TURNS[:2])
            await a.apack([t])
        pb = (await a.manifest.reads.latest("bad", "")).pack
        body = await a.raw_objects.get(pb.key)
        await a.raw_objects.put(pb.key, body[:20] + b"\x00" * 30 + body[50:])
        pg = (await a.manifest.reads.latest("gone", "")).pack
        await a.raw_objects.delete([pg.key])
        async with saver_on(s3_fresh, names) as cold:
            for t in ("bad", "gone"):  # named as corrupt, never served as empty
                with pytest.raises(CorruptObjectError):
                    await cold.aget_tuple(cfg(t))
                with pytest.raises(CorruptObjectError):
                    await cold.apack([t])
                with pytest.raises(CorruptObjectError):
                    await cold.aprune([t], keep_last=1)
                assert (await cold.adelete_thread(t)).threads == 1  # and deleted whole
                assert await keys_of(cold, t) == []
                assert await cold.raw_objects.list_all(cold.layout.packs(t)) == []
        assert [t.thread_id async for t in a.alist_threads(after="")] == []  # from the start
        for cur in [
            "!!!",
            base64.urlsafe_b64encode(orjson.dumps(["", ""])).decode(),
            base64.urlsafe_b64encode(orjson.dumps("ab")).decode(),
            base64.urlsafe_b64encode(orjson.dumps(["x" * 3000, "y"])).decode(),
        ]:
            with pytest.raises(InvalidRequestError, match="cursor"):
                [t.thread_id async for t in a.alist_threads(after=cur)]
