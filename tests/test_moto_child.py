"""A moto server in a process of its own (``testing/moto_child.py``): the latency it is
given is waited inside each request, its log of requests reaches the caller on one
clock with the caller's, and a reset wipes it, as the in-process server does."""

from __future__ import annotations

import time

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing import unique_names
from langgraph_s3.testing.latency import Latency, tag_background
from langgraph_s3.testing.moto_child import moto_child

pytestmark = pytest.mark.integration


async def test_a_child_server_waits_logs_and_resets() -> None:
    with moto_child(latency=Latency(s3=0.03, dynamodb=0.02)) as server:
        names = unique_names()
        async with AsyncS3Saver(endpoint_url=server.url, **names) as saver:  # type: ignore[arg-type]
            await saver.setup()
            with server.recording() as log:
                t0 = time.perf_counter()
                assert [t async for t in saver.alist_threads()] == []
                t1 = time.perf_counter()
            assert log, "the scan of threads was logged"
            for r in log:
                assert t0 <= r.start <= r.end <= t1  # one clock with ours
                wait = 0.02 if r.service == "dynamodb" else 0.03
                assert r.end - r.start >= wait
            with server.delayed(0.0), server.recording() as quick:
                assert [t async for t in saver.alist_threads()] == []
            assert quick and all(r.end - r.start < 0.02 for r in quick)
            assert server.latency == Latency(s3=0.03, dynamodb=0.02)  # restored
        server.reset()
        async with AsyncS3Saver(endpoint_url=server.url, **names) as saver:  # type: ignore[arg-type]
            assert not await saver.raw_objects.bucket_exists()


async def test_background_requests_are_tagged_and_held_past_the_call() -> None:
    """``tag_background``: the held object's PUT a put leaves behind is logged as
    background and held ``Latency.background`` longer, so it ends after the put
    returned (off the put's path); the put's own commit is not tagged."""
    probe = Latency(s3=0.01, dynamodb=0.01, background=0.5)
    with moto_child(latency=probe) as server:
        async with AsyncS3Saver(endpoint_url=server.url, **unique_names()) as saver:  # type: ignore[arg-type]
            tag_background(saver.clients)
            await saver.setup()
            cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
            first = await saver.aput(cfg, empty_checkpoint(), {}, {})  # waits for its PUT
            with server.recording() as log:
                t0 = time.perf_counter()
                await saver.aput(first, empty_checkpoint(), {}, {})
                t1 = time.perf_counter()
                await saver.aflush()
    commits = [r for r in log if r.operation == "UpdateItem" and r.end <= t1]
    puts = [r for r in log if r.service == "s3" and r.operation == "PUT"]
    assert len(commits) == 1 and not commits[0].background
    assert len(puts) == 1 and puts[0].background
    assert t0 <= puts[0].start < t1 < puts[0].end  # the put did not wait for it
    assert puts[0].end - puts[0].start >= 0.5 + 0.01
