"""Packing, repacking and unpacking while other processes read, write and prune the
thread (two savers on one bucket and table stand for two processes), over HTTP on moto."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from helpers import cfg, chat, saver_on
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.graphs import CHAT_TURNS, ahistory, chat_graph

# A cold reader that read the manifest (pack P1) just before a repack (or an
# unpack by prune/copy/rollback) removed P1.


async def run(s3_fresh: MotoServer, act: str) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names) as writer:
        await writer.setup()
        g = chat_graph().compile(checkpointer=writer)
        for text in CHAT_TURNS[:2]:
            await g.ainvoke({"messages": [("user", text)]}, cfg("t"))
        await writer.apack(["t"])
        await g.ainvoke({"messages": [("user", "more")]}, cfg("t"))  # plain objects again
        async with saver_on(s3_fresh, names, cache_bytes=0) as reader:
            orig = reader.manifest.reads.latest
            calls = 0

            async def latest(thread: str, ns: str) -> Any:
                nonlocal calls
                got = await orig(thread, ns)
                calls += 1
                if calls == 1:
                    if act == "repack":
                        assert (await writer.apack(["t"])).threads == 1
                    else:
                        await writer.aprune(["t"], keep_last=100)
                return got

            reader.manifest.reads.latest = latest  # type: ignore[method-assign]
            tup = await reader.aget_tuple(cfg("t"))
            assert tup is not None


async def test_repack_during_cold_read(s3_fresh: MotoServer) -> None:
    await run(s3_fresh, "repack")


async def test_unpack_during_cold_read(s3_fresh: MotoServer) -> None:
    await run(s3_fresh, "prune")


# A reader in another process that read the manifest before the pack switch and
# the objects after the packer removed them.


async def test_get_tuple_during_pack(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names) as writer:
        await writer.setup()
        g = chat_graph().compile(checkpointer=writer)
        for text in CHAT_TURNS[:3]:
            await g.ainvoke({"messages": [("user", text)]}, cfg("t"))
        async with (
            saver_on(s3_fresh, names, cache_bytes=0) as reader,
            saver_on(s3_fresh, names) as packer,
        ):
            before = await reader.aget_tuple(cfg("t"))  # reader knows: not packed
            assert before is not None
            orig = reader.manifest.reads.latest
            fired = False

            async def latest(thread: str, ns: str) -> Any:
                nonlocal fired
                got = await orig(thread, ns)
                if not fired:
                    fired = True
                    await packer.apack(["t"])  # switch + delete happen in between
                return got

            reader.manifest.reads.latest = latest  # type: ignore[method-assign]
            after = await reader.aget_tuple(cfg("t"))
            assert after is not None, "get_tuple returned None for a live thread"
            assert after.checkpoint["id"] == before.checkpoint["id"]


async def test_list_during_pack(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names) as writer:
        await writer.setup()
        g = chat_graph().compile(checkpointer=writer)
        for i in range(40):
            await g.ainvoke({"messages": [("user", f"turn {i}")]}, cfg("t"))
        async with (
            saver_on(s3_fresh, names, cache_bytes=0) as reader,
            saver_on(s3_fresh, names) as packer,
        ):
            full = [t.checkpoint["id"] async for t in reader.alist(cfg("t"))]
            out = []
            n = 0
            async for t in reader.alist(cfg("t")):
                out.append(t.checkpoint["id"])
                n += 1
                if n == 2:
                    await packer.apack(["t"])
            assert out == full, f"list during pack: {len(out)} of {len(full)}"


async def test_graph_resumes_during_pack(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names) as writer:
        await writer.setup()
        g = chat_graph().compile(checkpointer=writer)
        for text in CHAT_TURNS[:3]:
            await g.ainvoke({"messages": [("user", text)]}, cfg("t"))
        async with (
            saver_on(s3_fresh, names, cache_bytes=0) as app,
            saver_on(s3_fresh, names) as packer,
        ):
            await app.aget_tuple(cfg("t"))  # this process knows: not packed
            orig = app.manifest.reads.latest
            fired = False

            async def latest(thread: str, ns: str) -> Any:
                nonlocal fired
                got = await orig(thread, ns)
                if not fired:
                    fired = True
                    await packer.apack(["t"])
                return got

            app.manifest.reads.latest = latest  # type: ignore[method-assign]
            out = (
                await chat_graph()
                .compile(checkpointer=app)
                .ainvoke({"messages": [("user", "next")]}, cfg("t"))
            )
            n = len(out["messages"])
            assert n > 2, f"the conversation restarted: {n} messages"


# A process that lists a thread while the packer is between its switch and its
# delete marks every key 'shadowed' for good; once the plain copies are gone it
# cannot read the thread any more.


async def test_shadowed_is_never_forgotten(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names) as w:
        await w.setup()
        g = chat_graph().compile(checkpointer=w)
        for text in CHAT_TURNS[:2]:
            await g.ainvoke({"messages": [("user", text)]}, cfg("t"))
        async with (
            saver_on(s3_fresh, names, cache_bytes=0) as reader,
            saver_on(s3_fresh, names) as packer,
        ):
            before = [t.checkpoint["id"] async for t in reader.alist(cfg("t"))]
            orig = packer.raw_objects.delete

            async def delete(keys: Any) -> Any:
                # the switch is done, the plain copies are still there: a read now
                during = [t.checkpoint["id"] async for t in reader.alist(cfg("t"))]
                assert during == before
                return await orig(keys)

            packer.raw_objects.delete = delete  # type: ignore[method-assign]
            await packer.apack(["t"])
            tup = await reader.aget_tuple(cfg("t"))
            assert tup is not None, "the reader lost the thread"
            after = [t.checkpoint["id"] async for t in reader.alist(cfg("t"))]
            assert after == before, f"{len(after)} of {len(before)}"


# A listing that met the pack after another call did; writes of two processes merged
# into one packed write object.


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


# The walk's listing (``Listed``): it serves LangGraph's generic
# DeltaChannel walk only. Two savers on one bucket and table stand for two processes:
# a read by id after another process wrote, deleted or packed sees what is there now,
# and an internal signal never escapes a read.


@pytest.fixture
async def two(s3_fresh: MotoServer) -> AsyncIterator[tuple[AsyncS3Saver, AsyncS3Saver]]:
    names = unique_names()
    a = AsyncS3Saver(endpoint_url=s3_fresh.url, **names)
    b = AsyncS3Saver(endpoint_url=s3_fresh.url, **names)
    await a.setup()
    try:
        yield a, b
    finally:
        await a.aclose()
        await b.aclose()


async def chain(saver: AsyncS3Saver, thread: str, n: int) -> list[str]:
    ids: list[str] = []
    conf: Any = cfg(thread)
    cp = empty_checkpoint()
    for i in range(n):
        cp = create_checkpoint(cp, None, i)
        v = saver.get_next_version(cp["channel_versions"].get("x"), None)
        cp["channel_values"]["x"] = f"v{i}"
        cp["channel_versions"]["x"] = v
        conf = await saver.aput(conf, cp, {"source": "loop", "step": i, "parents": {}}, {"x": v})
        ids.append(conf["configurable"]["checkpoint_id"])
    return ids


async def test_reads_by_id_see_another_process_writes_and_deletes(
    two: tuple[AsyncS3Saver, AsyncS3Saver],
) -> None:
    a, b = two
    ids = await chain(b, "t", 4)
    assert await a.aget_tuple(cfg("t", ids[0])) is not None  # an older one: a listing
    await b.aput_writes(cfg("t", ids[-1]), [("x", "from b")], task_id="task-1")
    await b.aput_writes(cfg("t", ids[1]), [("x", "resumed")], task_id="task-2")
    tip = await a.aget_tuple(cfg("t", ids[-1]))
    old = await a.aget_tuple(cfg("t", ids[1]))
    assert tip is not None and [w[2] for w in tip.pending_writes or []] == ["from b"]
    assert old is not None and [w[2] for w in old.pending_writes or []] == ["resumed"]
    await b.adelete_thread("t")
    assert await a.aget_tuple(cfg("t", ids[0])) is None
    assert await a.aget_tuple(cfg("t", ids[2])) is None


async def test_a_pack_by_another_process_between_two_reads_is_read_through(
    two: tuple[AsyncS3Saver, AsyncS3Saver],
) -> None:
    a, b = two
    ids = await chain(b, "t", 5)
    assert await a.aget_tuple(cfg("t", ids[0])) is not None
    await b.apack(["t"])  # the loose objects a listed are gone now
    got = await a.aget_tuple(cfg("t", ids[2]))
    assert got is not None and got.checkpoint["channel_values"] == {"x": "v2"}


def test_langgraphs_generic_walk_still_looks_as_the_saver_expects() -> None:
    """walk_scope finds the walk by its code and tells a walk's first read by a local
    not yet set: if LangGraph renames it, the walks stop sharing their listing (each
    still correct, each as slow as before), and this says why."""
    from langgraph.checkpoint.base import BaseCheckpointSaver

    code = BaseCheckpointSaver.aget_delta_channel_history.__code__
    assert "target_tuple" in code.co_varnames


# Regular writes are first-write-wins per (task, idx); after packing, a second
# put_writes of the same task makes a plain object that shadows the pack's.


async def scenario(saver: Any, pack: Any) -> list[Any]:
    ck = create_checkpoint(empty_checkpoint(), None, 0)
    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    out = await saver.aput(cfg, ck, {"source": "loop", "step": 0}, {})
    await saver.aput_writes(out, [("a", 1), ("b", 2)], "task1")
    await pack()
    await saver.aput_writes(out, [("a", 10), ("b", 20), ("c", 30)], "task1")
    tup = await saver.aget_tuple(out)
    return sorted(tup.pending_writes)


async def test_the_first_write_of_a_task_wins_across_a_pack(s3_fresh: MotoServer) -> None:
    async def nothing() -> None:
        return None

    expected = await scenario(InMemorySaver(), nothing)
    names = unique_names()
    async with saver_on(s3_fresh, names) as saver:
        await saver.setup()
        got = await scenario(saver, lambda: saver.apack(["t"]))
        async with saver_on(s3_fresh, names) as cold:
            got_cold = sorted(
                (
                    await cold.aget_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
                ).pending_writes
            )
    assert got == expected
    assert got_cold == expected  # a process that never saw the thread unpacked


# A prune of a packed thread while a writer in another process is between its blob
# PUT and its commit: unpack re-puts the latest with a new LastModified, which is
# prune's cutoff for unreferenced blobs.


async def put(saver: AsyncS3Saver, parent: dict | None, values: dict[str, Any], step: int):
    base = empty_checkpoint() if parent is None else parent["ck"]
    ck = create_checkpoint(base, None, step)
    versions = {}
    for ch, v in values.items():
        ck["channel_values"][ch] = v
        versions[ch] = saver.get_next_version(ck["channel_versions"].get(ch), None)
        ck["channel_versions"][ch] = versions[ch]
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    if parent is not None:
        config = parent["config"]
    out = await saver.aput(config, ck, {"source": "loop", "step": step}, versions)
    return {"ck": ck, "config": out}


@pytest.mark.parametrize("packed", [True, False])
async def test_prune_keeps_a_blob_a_writer_has_yet_to_commit(
    s3_fresh: MotoServer, packed: bool
) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names) as w, saver_on(s3_fresh, names) as admin:
        await w.setup()
        c1 = await put(w, None, {"a": "one"}, 0)
        c2 = await put(w, c1, {"a": "two"}, 1)
        if packed:  # unpacking rewrites the objects: their times must not move the cutoff
            assert (await admin.apack(["t"])).threads == 1
        orig = w.manifest.commits.advance

        async def advance(*args: Any, **kw: Any) -> str | None:
            # the writer's blob is stored; its commit is slow (a retry, a GC pause)
            await asyncio.sleep(1.1)  # LastModified has 1 s resolution on S3
            await admin.aprune(["t"])
            return await orig(*args, **kw)

        w.manifest.commits.advance = advance  # type: ignore[method-assign]
        big = "x" * (300 * 1024)
        await put(w, c2, {"big": big}, 2)
        w.manifest.commits.advance = orig  # type: ignore[method-assign]
        async with saver_on(s3_fresh, names, cache_bytes=0) as cold:
            tup = await cold.aget_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
            assert tup is not None and tup.checkpoint["channel_values"]["big"] == big
            assert tup.checkpoint["channel_values"].get("big") == big


async def test_pack_twice_concurrently_with_a_writer(s3_fresh: MotoServer) -> None:
    names = unique_names()
    ref = InMemorySaver()
    async with (
        saver_on(s3_fresh, names) as w,
        saver_on(s3_fresh, names) as p1,
        saver_on(s3_fresh, names) as p2,
    ):
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
        async with saver_on(s3_fresh, names) as cold:
            got = await ahistory(chat_graph().compile(checkpointer=cold), cfg("t"))
        assert got == await ahistory(chat_graph().compile(checkpointer=ref), cfg("t"))
