"""``list`` beside what changes under it: its first checkpoint page goes out beside the
manifest read, its writes page beside the envelopes' GETs (``checkpoint/listing.py``).
A copy that leaves the item between the page and the read, and a packing between the
GETs and the writes page, each make it list again: no committed checkpoint and no
acknowledged write is missing from what it returns."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.checkpoint.base import Checkpoint
from langgraph.checkpoint.base.id import uuid6
from unit_helpers import small_checkpoint

from langgraph_s3.testing.fakes import memory_saver
from langgraph_s3.testing.objects import MemoryBucket
from langgraph_s3.testing.table import MemoryTable

pytestmark = pytest.mark.unit

CFG: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def ck(cid: str | None = None) -> Checkpoint:
    out: Checkpoint = small_checkpoint(cid)
    return out


def holds(table: MemoryTable, cid: str) -> bool:
    return any(n == f"inline:{cid}" for item in table.items.values() for n in item)


async def test_a_page_listed_before_a_copy_left_the_item_is_listed_again() -> None:
    """``list`` sends its first page beside the manifest read. When S3 answers the page
    before a held copy's object lands, and DynamoDB the read after that copy left the
    item (stored, then dropped), neither names it: the lineage still looks for it within
    the page, and the page is listed again after the entry, so no checkpoint is missed
    (one LIST more, in that race only)."""
    bucket, table = MemoryBucket(), MemoryTable()
    w = memory_saver(bucket=bucket, table=table)
    gate = asyncio.Event()
    real_put = w.objects.put

    async def put(key: str, body: bytes, **kw: Any) -> Any:
        if "/c/" in key:
            await gate.wait()  # a frozen writer: sent, not landed
        return await real_put(key, body, **kw)

    gate.set()
    ids = [str(uuid6()) for _ in range(4)]
    at = await w.aput(CFG, ck(ids[0]), {"step": -1}, {"v": 1})
    await w.aflush()  # c0 stored
    gate.clear()
    w.objects.put = put
    for i in (1, 2):
        at = await w.aput(at, ck(ids[i]), {"step": i}, {"v": i + 1})
    assert holds(table, ids[1]) and holds(table, ids[2])

    r = memory_saver(bucket=bucket, table=table)
    read = asyncio.Event()
    real_pages, real_latest = r.objects.list_pages, r.manifest.reads.latest
    pages = 0

    async def list_pages(prefix: str, **kw: Any) -> Any:
        nonlocal pages
        async for page in real_pages(prefix, **kw):
            if "/c/" in prefix:
                pages += 1
                if pages == 1:  # S3 answered; then c1 and c2 land and leave the item,
                    gate.set()  # and c3 is committed, held
                    await w.aflush()
                    gate.clear()
                    await w.aput(at, ck(ids[3]), {"step": 3}, {"v": 4})
                    read.set()
            yield page

    async def latest(*args: Any, **kw: Any) -> Any:
        await read.wait()  # DynamoDB answers after
        return await real_latest(*args, **kw)

    r.objects.list_pages = list_pages  # type: ignore[method-assign]
    r.manifest.reads.latest = latest  # type: ignore[method-assign]
    got = [t.checkpoint["id"] async for t in r.alist(CFG)]
    assert not holds(table, ids[1]) and not holds(table, ids[2]) and holds(table, ids[3])
    assert got == ids[::-1]
    assert pages == 2  # the page beside the read, then the page after it
    gate.set()
    await w.aflush()


async def test_a_packing_between_the_envelopes_and_the_writes_page_is_listed_again() -> None:
    """S3 answers the envelopes' GETs, the thread is packed (its writes move into the
    pack and their objects are deleted), then S3 answers the writes LIST: it lacks them.
    The entry read after that answer names the new pack, and the list starts over with
    it: every checkpoint comes with its pending writes."""
    bucket, table = MemoryBucket(), MemoryTable()
    w = memory_saver(bucket=bucket, table=table)
    c1 = await w.aput(CFG, ck(), {"step": -1}, {"v": 1})
    await w.aput_writes(c1, [("a", "w1")], "task-1")
    c2 = await w.aput(c1, ck(), {"step": 0}, {"v": 2})
    await w.aput_writes(c2, [("a", "w2")], "task-2")
    await w.aput(c2, ck(), {"step": 1}, {"v": 3})
    await w.aflush()
    want = [[], [("task-2", "a", "w2")], [("task-1", "a", "w1")]]
    r, packer = memory_saver(bucket=bucket, table=table), memory_saver(bucket=bucket, table=table)
    envelopes = asyncio.Event()
    real_get_many, real_pages = r.objects.get_many, r.objects.list_pages
    packed = False

    async def get_many(keys: Any, **kw: Any) -> Any:
        out = await real_get_many(keys, **kw)
        if any("/c/" in k for k in keys):
            envelopes.set()
        return out

    async def list_pages(prefix: str, **kw: Any) -> Any:
        nonlocal packed
        if "/w/" in prefix and not packed:
            await envelopes.wait()  # the GETs answered first; then the packing
            await packer.apack(["t"])
            packed = True
        async for page in real_pages(prefix, **kw):
            yield page

    r.objects.get_many, r.objects.list_pages = get_many, list_pages  # type: ignore[method-assign]
    got = [t.pending_writes async for t in r.alist(CFG)]
    assert packed and not any("/w/" in k for k in bucket.objects)  # the writes are packed
    assert got == want
