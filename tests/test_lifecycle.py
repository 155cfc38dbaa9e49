"""Lifecycle edges: closing from async code, dropped savers, sweepers on other loops,
and what a listing or a shared table may hold that we never wrote."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
import warnings

import aiohttp
import pytest
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata

from helpers import cfg
from langgraph_s3 import AsyncS3Saver, AsyncS3Store, S3Saver
from langgraph_s3.core.keys import encode
from langgraph_s3.testing import MotoServer, unique_names


def open_sessions() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, aiohttp.ClientSession) and not o.closed)


def loop_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "langgraph-s3-loop" and t.is_alive())


async def test_sync_close_from_async_code_neither_waits_nor_leaks(s3_fresh: MotoServer) -> None:
    before = open_sessions()
    saver = S3Saver(endpoint_url=s3_fresh.url, request_timeout=20, **unique_names())
    await asyncio.to_thread(saver.setup)  # the background loop's clients
    await saver.aput(cfg(), generate_checkpoint(), generate_metadata(), {})  # this loop's
    assert open_sessions() - before == 4
    started = time.monotonic()
    saver.close()  # this thread's loop cannot answer until close() returns
    assert time.monotonic() - started < 10  # not request_timeout (20 s) for this loop
    await asyncio.sleep(0.2)  # this loop runs again: the queued close runs
    assert open_sessions() == before
    assert saver.clients.open_loops == 0


def test_a_dropped_sync_saver_takes_its_thread_and_clients_with_it(
    s3_fresh: MotoServer,
) -> None:
    before_threads, before_sessions = loop_threads(), open_sessions()
    for _ in range(5):
        saver = S3Saver(endpoint_url=s3_fresh.url, **unique_names())
        saver.setup()
        assert loop_threads() == before_threads + 1
        del saver  # never closed
        gc.collect()
    deadline = time.monotonic() + 10
    while loop_threads() > before_threads and time.monotonic() < deadline:
        time.sleep(0.05)
    assert loop_threads() == before_threads
    assert open_sessions() == before_sessions


async def test_stopping_a_sweeper_that_runs_on_another_loop(s3_fresh: MotoServer) -> None:
    store = AsyncS3Store(bucket=unique_names()["bucket"], endpoint_url=s3_fresh.url)
    await store.setup()
    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever, daemon=True)
    thread.start()
    try:
        started = asyncio.run_coroutine_threadsafe(store.start_ttl_sweeper(60), other)
        task = await asyncio.wrap_future(started)
        assert not task.done()
        assert await store.stop_ttl_sweeper(timeout=5) is True
        assert task.cancelled()
        await store.aclose()  # its clients on the other loop are closed there too
    finally:
        other.call_soon_threadsafe(other.stop)
        thread.join(5)
        other.close()


async def test_stray_objects_under_checkpoints_are_skipped_not_fatal(
    s3_saver: AsyncS3Saver, caplog: pytest.LogCaptureFixture
) -> None:
    cp = generate_checkpoint(channel_values={"a": 1}, channel_versions={"a": 1})
    out = await s3_saver.aput(cfg(), cp, generate_metadata(), {"a": 1})
    nsp = s3_saver.layout.namespace("t", "")
    s3 = await s3_saver.clients.client("s3")
    c = nsp.checkpoints
    strays = [c, f"{c}00xzz.", f"{c}ff00x.", f"{c}notes.txt"]
    for key in strays:  # a console "folder", stray uploads
        await s3.put_object(Bucket=s3_saver.target.bucket, Key=key, Body=b"x")
    with caplog.at_level(logging.WARNING, logger="langgraph_s3.core.keys"):
        listed = [t.config async for t in s3_saver.alist(cfg())]
        assert listed == [out]
        assert await s3_saver.aget_tuple(out) is not None
        await s3_saver.aprune(["t"])
        await s3_saver.adelete_for_runs(["no-such-run"])
    assert "not a checkpoint key written by langgraph-s3" in caplog.text
    tup = await s3_saver.aget_tuple(cfg())
    assert tup is not None and tup.checkpoint["id"] == cp["id"]


async def test_items_another_writer_left_in_the_table_are_skipped(
    s3_saver: AsyncS3Saver,
) -> None:
    out = await s3_saver.aput(cfg("mine"), generate_checkpoint(), generate_metadata(), {})
    ddb = await s3_saver.clients.client("dynamodb")
    table = s3_saver.target.table
    await ddb.put_item(TableName=table, Item={"pk": {"S": "other"}, "sk": {"S": "x"}})
    await ddb.put_item(TableName=table, Item={"pk": {"S": "mine"}, "sk": {"S": "odd"}})
    assert [t.config async for t in s3_saver.alist(None)] == [out]
    assert [t.config async for t in s3_saver.alist({"configurable": {"thread_id": "mine"}})] == [
        out
    ]
    await s3_saver.adelete_thread("mine")
    assert await s3_saver.aget_tuple(cfg("mine")) is None


async def test_sync_store_close_from_async_code_with_a_sweeper_on_this_loop(
    s3_fresh: MotoServer,
) -> None:
    from langgraph_s3 import S3Store

    store = S3Store(bucket=unique_names()["bucket"], endpoint_url=s3_fresh.url)
    await asyncio.to_thread(store.setup)
    task = await store.start_ttl_sweeper(60)  # on this loop, not the store's own
    started = time.monotonic()
    store.close()  # this thread waits: the sweeper here is cancelled, not waited for
    assert time.monotonic() - started < 10
    # cancelled, and left to unwind here (a sweep may have a request in flight)
    await asyncio.wait({task}, timeout=10)
    assert task.cancelled()


def test_a_dropped_saver_in_a_reference_cycle_closes_its_clients(
    s3_fresh: MotoServer, caplog: pytest.LogCaptureFixture
) -> None:
    before_threads, before_sessions = loop_threads(), open_sessions()
    caplog.set_level(logging.ERROR, logger="asyncio")  # aiohttp reports unclosed sessions here

    class Agent:  # holds the saver; the saver's graph holds the agent: a cycle
        def __init__(self) -> None:
            self.saver = S3Saver(endpoint_url=s3_fresh.url, **unique_names())
            self.saver.me = self  # type: ignore[attr-defined]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            agent = Agent()
            agent.saver.setup()
            del agent  # only the cyclic GC can free it
            gc.collect()
        deadline = time.monotonic() + 10
        while loop_threads() > before_threads and time.monotonic() < deadline:
            time.sleep(0.05)
        gc.collect()
    assert loop_threads() == before_threads
    assert open_sessions() == before_sessions
    said = caplog.text + "".join(str(w.message) for w in caught)
    assert "Unclosed client session" not in said  # closed, not merely freed


async def test_delete_for_runs_keeps_the_writes_of_kept_checkpoints(
    s3_saver: AsyncS3Saver,
) -> None:
    keep = await s3_saver.aput(
        cfg(), generate_checkpoint(), generate_metadata(run_id="keep-run"), {}
    )
    await s3_saver.aput_writes(keep, [("ch", "pending")], "task-1")
    kid = keep["configurable"]["checkpoint_id"]
    nsp = s3_saver.layout.namespace("t", "")
    stray = nsp.checkpoint(kid, None, "doomed-run")  # same id, other run
    s3 = await s3_saver.clients.client("s3")
    # as a replay of the id by another run leaves it: that run named in the run index first
    await s3_saver.manifest.commits.note_run("t", encode("doomed-run", "run_id"))
    await s3.put_object(Bucket=s3_saver.target.bucket, Key=stray, Body=b"x")
    await s3_saver.adelete_for_runs(["doomed-run"])
    tup = await s3_saver.aget_tuple(keep)
    assert tup is not None and tup.pending_writes == [("task-1", "ch", "pending")]
