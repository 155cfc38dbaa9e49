"""On a bucket with SSE-KMS default encryption S3's ETags are not the MD5 of the bodies
(strict moto: ``kms_etag``). The saver compares ETags with MD5s it computed only for a
shortcut (writes a checkpoint carries): real graphs must still match InMemorySaver, from
the writing saver and from a fresh one, and the store's conditional writes must work."""

from __future__ import annotations

import hashlib
from typing import Any

from langgraph.types import Command

from helpers import cfg, side_by_side
from langgraph_s3 import AsyncS3Saver, AsyncS3Store
from langgraph_s3.testing import MotoServer, Names, kms_etag
from langgraph_s3.testing.graphs import (
    CHAT_TURNS,
    ahistory,
    approval_graph,
    chat_graph,
    fanout_graph,
    norm,
    norm_snapshot,
)

KMS = {"Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms"}}]}


def md5(body: bytes) -> str:
    return f'"{hashlib.md5(body).hexdigest()}"'


async def graphs(saver: Any) -> Any:
    """A chat with a tool call, a fan-out (pending writes of many tasks) and an
    interrupt (special writes), each on its own thread, with their histories."""
    chat = chat_graph().compile(checkpointer=saver)
    outs = [norm(await chat.ainvoke({"messages": [("user", t)]}, cfg("chat"))) for t in CHAT_TURNS]
    fan = fanout_graph().compile(checkpointer=saver)
    outs.append(norm(await fan.ainvoke({"items": [1, 2, 3, 4], "results": []}, cfg("fan"))))
    approval = approval_graph().compile(checkpointer=saver)
    outs.append(norm(await approval.ainvoke({"request": "post", "log": []}, cfg("ok"))))
    outs.append(norm(await approval.ainvoke(Command(resume="approved"), cfg("ok"))))
    return outs, await states(saver)


async def states(saver: Any) -> Any:
    """Every thread's state and history, read through LangGraph."""
    out = []
    for graph, thread in (
        (chat_graph(), "chat"),
        (fanout_graph(), "fan"),
        (approval_graph(), "ok"),
    ):
        g = graph.compile(checkpointer=saver)
        out.append((norm_snapshot(await g.aget_state(cfg(thread))), await ahistory(g, cfg(thread))))
    return out


async def test_graphs_on_a_kms_bucket_match_in_memory_saver(
    s3_fresh: MotoServer, names: Names
) -> None:
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as saver:
        s3 = await saver.clients.client("s3")
        await s3.put_bucket_encryption(
            Bucket=names["bucket"], ServerSideEncryptionConfiguration=KMS
        )
        _, expected = await side_by_side(graphs, saver)
        listed = await saver.raw_objects.list_all("")
        assert len(listed) > 20
        for o in listed:  # the KMS path is taken: no ETag is the MD5 of its body
            body = await saver.raw_objects.get(o.key)
            assert body is not None and o.etag == kms_etag(md5(body)) != md5(body)
        assert await states(saver) == expected  # again, from its caches
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as fresh:  # nothing cached
        assert await states(fresh) == expected
        chat = chat_graph().compile(checkpointer=fresh)
        await chat.ainvoke({"messages": [("user", "and now?")]}, cfg("chat"))
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as again:
        chat = chat_graph().compile(checkpointer=again)
        hist = await ahistory(chat, cfg("chat"))
        before = expected[0][1]
        assert len(hist) > len(before) and hist[-len(before) :] == before  # the new turn on top
        assert hist[0]["values"]["messages"][-2] == ("human", "and now?", [])


async def test_store_on_a_kms_bucket(s3_fresh: MotoServer, names: Names) -> None:
    async with AsyncS3Store(bucket=names["bucket"], endpoint_url=s3_fresh.url) as store:
        s3 = await store.clients.client("s3")
        await s3.put_bucket_encryption(
            Bucket=names["bucket"], ServerSideEncryptionConfiguration=KMS
        )
        await store.setup()
        for i in range(3):  # new, then seen: If-Match with the ETag S3 gave
            await store.aput(("users", "1"), "prefs", {"n": i})
        await store.aput(("users", "2"), "prefs", {"n": 9})
    async with AsyncS3Store(bucket=names["bucket"], endpoint_url=s3_fresh.url) as fresh:
        await fresh.aput(("users", "1"), "prefs", {"n": 3})  # unseen: read, then If-Match
        item = await fresh.aget(("users", "1"), "prefs")
        assert item is not None and item.value == {"n": 3}
        hits = await fresh.asearch(("users",))
        assert sorted((h.namespace, h.value["n"]) for h in hits) == [
            (("users", "1"), 3),
            (("users", "2"), 9),
        ]
        await fresh.adelete(("users", "2"), "prefs")
        assert await fresh.aget(("users", "2"), "prefs") is None
