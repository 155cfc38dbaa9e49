"""TTL edge cases: DynamoDB's TTL removing the root item before any sweep."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from helpers import cfg, chat, clocked, nest, ttl_removes
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing import MotoServer, unique_names


def saver_on(server: MotoServer, names: dict[str, str], **kw: Any) -> AsyncS3Saver:
    return AsyncS3Saver(endpoint_url=server.url, **names, **kw)


async def test_reused_id_after_ttl_removal_shows_old_subgraphs(s3_fresh: MotoServer) -> None:
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
        infos = [t.namespaces async for t in saver.alist_threads()]
        print("old:", old_ns, "\nnew life lists:", now_ns, "\nthreads:", infos)
        assert now_ns == {""}, "the new life lists the old life's subgraph namespaces"


async def test_reborn_sweep_leaves_old_subgraph_items(s3_fresh: MotoServer) -> None:
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
        print(await saver._maintenance().sweep_removed("t", expired_at))
        out = [
            t.config["configurable"]["checkpoint_ns"] async for t in saver.alist(cfg("t", ns=None))
        ]
        print(out)
