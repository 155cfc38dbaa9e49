"""Retention over HTTP on moto: the list of threads, thread TTL that deletes (expiry,
sweeps, a reused id), retention rules for prune, and what maintenance reports.

Time moves by an injected manifest clock: no test sleeps for an expiry.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from helpers import DAY, cfg, chat, clocked, keys_of, nest, saver_on
from langgraph_s3 import AsyncS3Saver, InvalidRequestError, Report
from langgraph_s3.manifest import Manifest
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.graphs import CHAT_TURNS, ahistory, chat_graph


async def stored(saver: AsyncS3Saver, thread: str) -> tuple[int, int, int]:
    """(checkpoint objects, objects, bytes) of a thread, from a listing."""
    listed = await saver.objects.list_all(saver.layout.thread(thread))
    checkpoints = sum("/c/" in o.key for o in listed)
    return checkpoints, len(listed), sum(o.size for o in listed)


async def only(saver: AsyncS3Saver) -> Any:
    (info,) = [t async for t in saver.alist_threads()]
    return info


# ------------------------------------------------------------- list of threads
async def test_list_threads_reads_the_manifest_only(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names, thread_ttl_days=30) as saver:
        await saver.setup()
        await chat(saver, "a", CHAT_TURNS[0])
        await nest(saver, "n")
        await chat(saver, "b", *CHAT_TURNS[:2])
        with saver.stats.label("threads"):
            threads = [t async for t in saver.alist_threads()]
        spent = saver.stats.labels["threads"].by_operation
        assert spent == {"dynamodb.Scan": 1}, spent
        by_id = {t.thread_id: t for t in threads}
        assert sorted(by_id) == ["a", "b", "n"]
        assert by_id["n"].namespaces[0] == "" and len(by_id["n"].namespaces) == 3
        assert by_id["a"].namespaces == ("",)
        for t in threads:
            latest = await saver.aget_tuple(cfg(t.thread_id))
            assert latest is not None
            assert t.latest_id == latest.config["configurable"]["checkpoint_id"]
            assert t.created_at <= t.updated_at
            assert t.expires_at is not None
            assert abs((t.expires_at - t.updated_at) - timedelta(days=30)) < timedelta(seconds=2)


async def test_list_threads_filters_and_pages(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names) as saver:
        await saver.setup()
        clock = clocked(saver)
        for i in range(6):
            await chat(saver, f"old{i}", CHAT_TURNS[0])
        await nest(saver, "nested-old")  # three namespaces: split across small pages
        clock.advance(3)
        middle = datetime.fromtimestamp(clock.now - DAY, UTC)
        for i in range(5):
            await chat(saver, f"new{i}", CHAT_TURNS[0])
        everything = [t.thread_id async for t in saver.alist_threads()]
        assert sorted(everything) == sorted(
            [f"old{i}" for i in range(6)] + ["nested-old"] + [f"new{i}" for i in range(5)]
        )
        newer = {t.thread_id async for t in saver.alist_threads(updated_after=middle)}
        older = {t.thread_id async for t in saver.alist_threads(updated_before=middle)}
        assert newer == {f"new{i}" for i in range(5)}
        assert older == {f"old{i}" for i in range(6)} | {"nested-old"}

        # pages of 2 items: every thread still comes once, whole, in table order
        cast(Manifest, saver.manifest).page_size = 2
        assert [t.thread_id async for t in saver.alist_threads()] == everything
        paged: list[str] = []
        after = None
        while True:
            page = [t async for t in saver.alist_threads(limit=5, after=after)]
            if not page:
                break
            assert len(page) <= 5
            paged += [t.thread_id for t in page]
            after = page[-1].cursor
        assert paged == everything
        nested = [t async for t in saver.alist_threads() if t.thread_id == "nested-old"]
        assert len(nested) == 1 and len(nested[0].namespaces) == 3

        with pytest.raises(InvalidRequestError, match="cursor"):
            [t async for t in saver.alist_threads(after="not a cursor!")]
        with pytest.raises(InvalidRequestError, match="timezone"):
            [t async for t in saver.alist_threads(updated_after=datetime(2026, 1, 1))]


# ------------------------------------------------------------------ expiry
async def test_an_expired_thread_is_gone_everywhere_then_swept_to_nothing(
    s3_fresh: MotoServer,
) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names, thread_ttl_days=timedelta(days=7)) as saver:
        await saver.setup()
        clock = clocked(saver)
        await chat(saver, "t", *CHAT_TURNS[:3])
        await nest(saver, "n")
        await chat(saver, "keep", CHAT_TURNS[0])
        subs = [
            t.config["configurable"]["checkpoint_ns"] async for t in saver.alist(cfg("n", ns=None))
        ]
        sub = next(ns for ns in subs if ns)
        assert await saver.aget_tuple(cfg("n", ns=sub)) is not None
        stored_t, stored_n = await stored(saver, "t"), await stored(saver, "n")

        clock.advance(6)
        await chat(saver, "keep", CHAT_TURNS[1])  # a write refreshes its TTL
        clock.advance(1.01)
        graph = chat_graph().compile(checkpointer=saver)
        for thread in ("t", "n"):
            assert (await graph.aget_state(cfg(thread))).values == {}
            assert [x async for x in saver.alist(cfg(thread, ns=None))] == []
        assert await saver.aget_tuple(cfg("n", ns=sub)) is None  # its namespaces too
        assert {t.thread_id async for t in saver.alist_threads()} == {"keep"}
        assert {t.config["configurable"]["thread_id"] async for t in saver.alist(None)} == {"keep"}

        progress: list[tuple[int, int]] = []
        report = await saver.asweep_ttl(
            progress=lambda r, done, total: progress.append((done, total))
        )
        assert await keys_of(saver, "t") == [] and await keys_of(saver, "n") == []
        assert report.threads == 2 and report.skipped == 0
        assert report.checkpoints == stored_t[0] + stored_n[0]
        assert report.objects == stored_t[1] + stored_n[1]
        assert report.bytes == stored_t[2] + stored_n[2]
        assert report.namespaces == 1 + len(set(subs))
        assert [done for done, _ in progress] == [1, 2] and progress[-1] == (2, 2)
        assert await saver.aget_tuple(cfg("keep")) is not None
        assert await saver.asweep_ttl() == Report()  # nothing left to sweep

        # a reused id starts clean
        await chat(saver, "t", "hello again")
        ref = InMemorySaver()
        await chat(ref, "t", "hello again")
        assert await ahistory(graph, cfg("t")) == await ahistory(
            chat_graph().compile(checkpointer=ref), cfg("t")
        )


async def test_a_reused_expired_id_sweeps_the_old_life_first(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names, thread_ttl_days=1) as saver:
        await saver.setup()
        clock = clocked(saver)
        await nest(saver, "t")  # subgraph namespaces go with it
        await chat(saver, "t", *CHAT_TURNS[:2])
        clock.advance(1.5)
        await chat(saver, "t", "a new start")
        await chat(saver, "fresh", "a new start")
        # nothing of the old life is left: the same objects as a thread that never had one
        assert [k.split("/ns/", 1)[1].split("/")[0] for k in await keys_of(saver, "t")] == [
            k.split("/ns/", 1)[1].split("/")[0] for k in await keys_of(saver, "fresh")
        ]
        assert len(await keys_of(saver, "t")) == len(await keys_of(saver, "fresh"))
        assert [t.namespaces async for t in saver.alist_threads() if t.thread_id == "t"] == [("",)]
        assert (await saver.asweep_ttl()).threads == 0


async def test_a_run_still_writing_on_an_expired_thread_is_refused(s3_fresh: MotoServer) -> None:
    from langgraph_s3 import CheckpointConflictError

    names = unique_names()
    async with saver_on(s3_fresh, names, thread_ttl_days=1) as saver:
        await saver.setup()
        clock = clocked(saver)
        await chat(saver, "t", CHAT_TURNS[0])
        latest = await saver.aget_tuple(cfg("t"))
        assert latest is not None
        clock.advance(2)
        from langgraph.checkpoint.base import empty_checkpoint

        ck = empty_checkpoint()
        with pytest.raises(CheckpointConflictError, match="expired"):
            await saver.aput(latest.config, ck, {"source": "loop", "step": 9}, {})
        assert (await saver.asweep_ttl()).threads == 1
        assert await keys_of(saver, "t") == []


async def test_reads_refresh_the_ttl_only_when_asked(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names, thread_ttl_days=2) as plain:
        await plain.setup()
        clock = clocked(plain)
        await chat(plain, "t", CHAT_TURNS[0])
        await plain.aflush()  # stored: the read below costs what a cold read of S3 costs
        async with saver_on(
            s3_fresh, names, thread_ttl_days=2, thread_ttl_refresh_on_read=True
        ) as r:
            cast(Manifest, r.manifest).clock = clock
            first = (await only(plain)).expires_at
            clock.advance(1)
            assert await plain.aget_tuple(cfg("t")) is not None
            assert (await only(plain)).expires_at == first
            with r.stats.label("read"):
                assert await r.aget_tuple(cfg("t")) is not None
            assert r.stats.labels["read"].by_operation.get("dynamodb.UpdateItem") == 1
            assert r.stats.labels["read"].round_trips == 3  # the refresh rides beside the read
            refreshed = (await only(plain)).expires_at
            assert refreshed is not None and first is not None
            assert refreshed - first == timedelta(days=1)
            clock.advance(1.5)  # past the first expiry, not the refreshed one
            assert [x async for x in plain.alist(cfg("t"))] != []
            clock.advance(1)
            assert await r.aget_tuple(cfg("t")) is None  # an expired thread is not revived
            assert [t async for t in plain.alist_threads()] == []


async def test_the_background_sweeper_sweeps_and_stops(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names, thread_ttl_days=1) as saver:
        await saver.setup()
        clock = clocked(saver)
        await chat(saver, "t", CHAT_TURNS[0])
        clock.advance(2)
        task = await saver.start_ttl_sweeper(sweep_interval_minutes=0.001)
        assert await saver.start_ttl_sweeper() is task  # one sweeper at a time
        for _ in range(200):
            if not await keys_of(saver, "t"):
                break
            await asyncio.sleep(0.05)
        assert await keys_of(saver, "t") == []
        assert await saver.stop_ttl_sweeper(timeout=5)
        assert task.done()
        with pytest.raises(InvalidRequestError, match="positive"):
            AsyncS3Saver(bucket="bkt", thread_ttl_days=0)


# ------------------------------------------------------------ retention rules
async def test_prune_keep_last_and_older_than_follow_the_latest_line(
    s3_fresh: MotoServer,
) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names) as saver:
        await saver.setup()
        await chat(saver, "t", *CHAT_TURNS[:3])
        graph = chat_graph().compile(checkpointer=saver)
        full = await ahistory(graph, cfg("t"))
        c0, n0, b0 = await stored(saver, "t")

        report = await saver.aprune(["t"], keep_last=5)
        assert await ahistory(graph, cfg("t")) == full[:5]
        c1, n1, b1 = await stored(saver, "t")
        # checkpoints leave the history; an object holding values of kept ones stays
        assert (report.threads, report.checkpoints) == (1, len(full) - 5)
        assert (report.objects, report.bytes) == (n0 - n1, b0 - b1)
        assert 0 < c0 - c1 <= report.checkpoints

        # older_than: a moment between turns; the latest line after it stays
        await asyncio.sleep(0.01)
        cut = datetime.now(UTC)
        await asyncio.sleep(0.01)
        await chat(saver, "t", CHAT_TURNS[3])
        grown = await ahistory(graph, cfg("t"))
        new = len(grown) - 5
        report = await saver.aprune(["t"], older_than=cut)
        assert await ahistory(graph, cfg("t")) == grown[:new]
        assert report.checkpoints == 5
        # both: a checkpoint either rule keeps stays
        assert (await saver.aprune(["t"], keep_last=2, older_than=cut)).checkpoints == 0
        assert await ahistory(graph, cfg("t")) == grown[:new]
        assert (await saver.aprune(["t"], keep_last=2)).checkpoints == new - 2
        # an age, by the manifest's clock: everything but the latest is older than a day
        clock = clocked(saver)
        clock.advance(2)
        assert (await saver.aprune(["t"], older_than=timedelta(days=1))).checkpoints == 1
        assert await ahistory(graph, cfg("t")) == grown[:1]
        again = await saver.aprune(["t"], older_than=timedelta(days=1))
        assert (again.checkpoints, again.objects, again.skipped) == (0, 0, 1)


async def test_maintenance_reports_and_bad_rules(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names) as saver:
        await saver.setup()
        await chat(saver, "a", *CHAT_TURNS[:2])
        await nest(saver, "b")
        ca, na, ba = await stored(saver, "a")
        copied = await saver.acopy_thread("a", "a2")
        assert (copied.threads, copied.namespaces) == (1, 1)
        assert (copied.checkpoints, copied.objects, copied.bytes) == (ca, na, ba)
        seen: list[tuple[int, int, int]] = []
        report = await saver.aprune(
            ["a", "b", "a2"], keep_last=1, progress=lambda r, d, t: seen.append((r.threads, d, t))
        )
        assert report.threads == 3
        assert sorted(d for _, d, _ in seen) == [1, 2, 3] and {t for _, _, t in seen} == {3}
        cb, nb, bb = await stored(saver, "b")
        deleted = await saver.adelete_thread("b")
        assert (deleted.threads, deleted.namespaces) == (1, 3)
        assert (deleted.checkpoints, deleted.objects, deleted.bytes) == (cb, nb, bb)
        gone = await saver.aprune(["a"], strategy="delete")
        assert gone.threads == 1 and await keys_of(saver, "a") == []
        for bad in (0, -1, 1.5, True):
            with pytest.raises(InvalidRequestError, match="keep_last"):
                await saver.aprune(["a2"], keep_last=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidRequestError, match="naive"):
            await saver.aprune(["a2"], older_than=datetime(2026, 1, 1))
        with pytest.raises(InvalidRequestError, match="older_than"):
            await saver.aprune(["a2"], older_than=30)  # type: ignore[arg-type]
        with pytest.raises(InvalidRequestError, match="delete"):
            await saver.aprune(["a2"], strategy="delete", keep_last=3)
        assert await saver.aget_tuple(cfg("a2")) is not None  # refused: nothing lost


def test_the_sync_saver_has_every_twin(s3_fresh: MotoServer, tmp_path: Any) -> None:
    from langgraph_s3 import S3Saver

    names = unique_names()
    with S3Saver(endpoint_url=s3_fresh.url, thread_ttl_days=1, **names) as saver:
        saver.setup()
        graph = chat_graph().compile(checkpointer=saver)
        for thread in ("a", "b"):
            for text in CHAT_TURNS[:2]:
                graph.invoke({"messages": [("user", text)]}, cfg(thread))
        assert sorted(t.thread_id for t in saver.list_threads()) == ["a", "b"]
        assert saver.prune(["a"], keep_last=2).threads == 1
        assert len(list(saver.list(cfg("a")))) == 2
        assert saver.pack(["b"]).threads == 1
        out = saver.export(None, tmp_path / "all.jsonl")
        assert out.threads == 2
        with S3Saver(endpoint_url=s3_fresh.url, **unique_names()) as other:
            other.setup()
            assert other.import_(tmp_path / "all.jsonl").threads == 2
            assert len(list(other.list(cfg("b")))) == len(list(saver.list(cfg("b"))))
        cast(Manifest, saver.manifest).clock = lambda: time.time() + 2 * DAY
        saver.start_sweeper(sweep_interval_minutes=0.001)
        for _ in range(200):
            if not list(saver.list_threads()) and not asyncio.run(_nothing_left(saver)):
                break
            time.sleep(0.05)
        assert saver.stop_sweeper(timeout=5)
        assert list(saver.list_threads()) == []
        assert asyncio.run(_nothing_left(saver)) == 0  # the pack went too
        assert saver.sweep_ttl() == Report()


async def _nothing_left(saver: Any) -> int:
    async with AsyncS3Saver(
        endpoint_url=saver.clients.endpoint_url,
        bucket=saver.target.bucket,
        prefix=saver.target.prefix,
        table=saver.target.table,
    ) as probe:
        return len(await probe.raw_objects.list_all(probe.layout.threads())) + len(
            await probe.raw_objects.list_all(probe.layout.root + "packs/")
        )


async def test_list_threads_cursor_paging(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names) as a:
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
