"""Checkpoints a manifest item holds until their objects are stored (``inline.py``), and
what a process remembers of them, across a new life that reuses the thread's ids (an
import's replace, a deletion and a new conversation)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from langgraph_s3.checkpoint.inline import HELD_BUDGET
from langgraph_s3.testing.fakes import memory_saver
from langgraph_s3.testing.objects import MemoryBucket
from langgraph_s3.testing.table import MemoryTable

pytestmark = pytest.mark.unit

CFG: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def ck(cid: str, value: str | None = None) -> Checkpoint:
    c = empty_checkpoint()
    c["id"] = cid
    c["channel_values"] = {"v": value or cid[:8]}
    c["channel_versions"] = {"v": 1}
    return c


def holds(table: MemoryTable, cid: str) -> bool:
    return any(n == f"inline:{cid}" for item in table.items.values() for n in item)


async def test_a_new_lifes_held_copy_is_not_dropped_by_an_old_lifes_stored_note() -> None:
    """A stored c (and would drop it); the thread is replaced and B re-puts c with the
    same id, B's object never landing; A reads the new life and goes on: B's c stays
    held (its only copy), and every reader sees it."""
    bucket, table = MemoryBucket(), MemoryTable()
    a, b, c = (memory_saver(bucket=bucket, table=table) for _ in range(3))
    r_id, c_id, d_id = str(uuid6()), str(uuid6()), str(uuid6())
    r_cfg = await a.aput(CFG, ck(r_id), {"step": -1}, {"v": 1})
    c_cfg = await a.aput(r_cfg, ck(c_id), {"step": 0}, {"v": 1})
    for _ in range(20):  # A's PUT of c lands: A would drop c at its next commit
        await asyncio.sleep(0)
    await b.adelete_thread("t")
    real_put = b.objects.put
    never = asyncio.Event()
    prefix = b.layout.namespace("t", "").checkpoint_id_prefix(c_id)

    async def frozen(key: str, body: bytes, **kw: Any) -> Any:
        if key.startswith(prefix):
            await never.wait()  # B frozen before c's object lands
        return await real_put(key, body, **kw)

    b.objects.put = frozen  # type: ignore[method-assign]
    rb = await b.aput(CFG, ck(r_id), {"step": -1}, {"v": 1})
    await b.aput(rb, ck(c_id, "new life"), {"step": 0}, {"v": 1})
    assert holds(table, c_id)
    latest = await a.aget_tuple(CFG)
    assert latest is not None and latest.checkpoint["channel_values"] == {"v": "new life"}
    await a.aput(latest.config, ck(d_id), {"step": 1}, {"v": 1})
    assert holds(table, c_id)  # A's commit did not drop B's copy
    got = await c.aget_tuple(c_cfg)
    assert got is not None and got.checkpoint["channel_values"] == {"v": "new life"}
    assert [t.checkpoint["id"] async for t in c.alist(CFG)] == [d_id, c_id, r_id]
    await a.aclose()
    assert holds(table, c_id) or any(k.startswith(prefix) for k in bucket.objects)


async def test_writes_on_a_new_lifes_bare_latest_are_never_hidden() -> None:
    """A committed a child of c; the thread is replaced and c is the new life's bare
    latest: A's acknowledged writes on c are seen by every read."""
    bucket, table = MemoryBucket(), MemoryTable()
    a, b, c = (memory_saver(bucket=bucket, table=table) for _ in range(3))
    r_id, c_id, d_id = str(uuid6()), str(uuid6()), str(uuid6())
    r_cfg = await a.aput(CFG, ck(r_id), {"step": -1}, {"v": 1})
    c_cfg = await a.aput(r_cfg, ck(c_id), {"step": 0}, {"v": 1})
    await a.aput(c_cfg, ck(d_id), {"step": 1}, {"v": 1})
    await b.adelete_thread("t")
    rb = await b.aput(CFG, ck(r_id), {"step": -1}, {"v": 1})
    await b.aput(rb, ck(c_id), {"step": 0}, {"v": 1})
    latest = await a.aget_tuple(CFG)
    assert latest is not None and latest.config["configurable"]["checkpoint_id"] == c_id
    await a.aput_writes(c_cfg, [("v", "acked")], task_id="task1")
    want = [("task1", "v", "acked")]
    for reader in (a, c):
        got = await reader.aget_tuple(CFG)
        assert got is not None and got.pending_writes == want
    by_id = await c.aget_tuple(c_cfg)
    assert by_id is not None and by_id.pending_writes == want
    listed = [t async for t in c.alist(CFG)]
    assert listed[0].pending_writes == want


async def test_a_bare_latest_lists_no_writes_and_a_put_writes_says_otherwise() -> None:
    """A run's last checkpoint has no writes: its read is one GetItem. Writes on it (an
    interrupt, another process resuming) are acknowledged only once the item says so."""
    bucket, table = MemoryBucket(), MemoryTable()
    w, r = memory_saver(bucket=bucket, table=table), memory_saver(bucket=bucket, table=table)
    top = await w.aput(CFG, ck(str(uuid6())), {"step": -1}, {"v": 1})
    r.stats.reset()
    assert (await r.aget_tuple(CFG)) is not None
    assert r.stats.snapshot()["by_operation"] == {"dynamodb.GetItem": 1}  # held, bare
    await w.aput_writes(top, [("v", "x")], task_id="t1")
    got = await r.aget_tuple(CFG)
    assert got is not None and got.pending_writes == [("t1", "v", "x")]


async def test_the_item_holds_at_most_the_budget_of_copies() -> None:
    """Puts whose objects do not land (a slow S3) keep the item under HELD_BUDGET: past
    it, a commit waits for the held objects and drops them."""
    bucket, table = MemoryBucket(), MemoryTable()
    w = memory_saver(bucket=bucket, table=table)
    first = await w.aput(CFG, ck(str(uuid6())), {"step": -1}, {"v": 1})  # proves the bucket
    real_put = w.objects.put
    gate = asyncio.Event()

    async def slow(key: str, body: bytes, **kw: Any) -> Any:
        if "/c/" in key:
            await gate.wait()
        return await real_put(key, body, **kw)

    w.objects.put = slow  # type: ignore[method-assign]
    big = "x" * 3000  # an envelope of about 3 KB (compressible: held small)
    config, biggest = first, 0

    async def open_gate_later() -> None:
        for _ in range(2000):
            await asyncio.sleep(0)
        gate.set()

    opener = asyncio.create_task(open_gate_later())
    for i in range(40):
        c = ck(str(uuid6()), f"{i}-{big}-{uuid6()}")
        config = await w.aput(config, c, {"step": i}, {"v": i + 2})
        item = next(iter(table.items.values()))
        held = sum(len(v["M"]["b"]["B"]) for n, v in item.items() if n.startswith("inline:"))
        biggest = max(biggest, held)
    await opener
    assert 0 < biggest <= HELD_BUDGET + 8 * 1024
    await w.aflush()
    item = next(iter(table.items.values()))
    assert not [n for n in item if n.startswith("inline:")]
    assert len([t async for t in w.alist(CFG)]) == 41


async def test_flush_stores_a_copy_whose_put_failed_and_empties_the_item() -> None:
    """A background PUT fails (S3 refused it once): ``aflush`` begins it again, and when
    it returns every committed checkpoint is an object and the item holds none."""
    bucket, table = MemoryBucket(), MemoryTable()
    w = memory_saver(bucket=bucket, table=table)
    first = await w.aput(CFG, ck(str(uuid6())), {"step": -1}, {"v": 1})  # proves the bucket
    real_put = w.objects.put
    failed: list[str] = []

    async def flaky(key: str, body: bytes, **kw: Any) -> Any:
        if "/c/" in key and key not in failed:
            failed.append(key)
            raise ConnectionError("S3 dropped the connection")
        return await real_put(key, body, **kw)

    w.objects.put = flaky  # type: ignore[method-assign]
    cid = str(uuid6())
    await w.aput(first, ck(cid), {"step": 0}, {"v": 2})
    for _ in range(50):  # the PUT has failed by now; nothing begins it again yet
        await asyncio.sleep(0)
    assert failed and holds(table, cid)
    await w.aflush()
    assert not holds(table, cid)
    assert len(failed) == 1 and any(k == failed[0] for k in bucket.objects)


async def test_flush_right_as_the_last_put_lands_drops_its_copy() -> None:
    """``aflush`` called in the loop turn the last PUT ends in (its done callback not yet
    run) still counts the object stored and drops the copy."""
    bucket, table = MemoryBucket(), MemoryTable()
    w = memory_saver(bucket=bucket, table=table)
    config = await w.aput(CFG, ck(str(uuid6())), {"step": -1}, {"v": 1})
    ids = []
    for i in range(5):
        ids.append(str(uuid6()))
        config = await w.aput(config, ck(ids[-1]), {"step": i}, {"v": i + 2})
    for turns in range(8):  # flush at each turn offset from the last put's return
        for _ in range(turns):
            await asyncio.sleep(0)
        await w.aflush()
        assert not [c for c in ids if holds(table, c)], turns
        ids.append(str(uuid6()))
        config = await w.aput(config, ck(ids[-1]), {"step": 9 + turns}, {"v": 20 + turns})


async def test_flush_begins_again_a_put_that_fails_while_it_waits() -> None:
    """The last put's PUT is in flight when ``aflush`` begins (an ``aclose`` right after
    a turn) and fails once: ``aflush`` stores it all the same."""
    bucket, table = MemoryBucket(), MemoryTable()
    w = memory_saver(bucket=bucket, table=table)
    first = await w.aput(CFG, ck(str(uuid6())), {"step": -1}, {"v": 1})
    real_put = w.objects.put
    failed: list[str] = []

    async def flaky(key: str, body: bytes, **kw: Any) -> Any:
        if "/c/" in key and key not in failed:
            failed.append(key)
            for _ in range(10):  # still in flight when aflush begins
                await asyncio.sleep(0)
            raise ConnectionError("S3 dropped the connection")
        return await real_put(key, body, **kw)

    w.objects.put = flaky  # type: ignore[method-assign]
    cid = str(uuid6())
    await w.aput(first, ck(cid), {"step": 0}, {"v": 2})
    assert not failed or holds(table, cid)
    await w.aflush()
    assert len(failed) == 1 and not holds(table, cid)
    assert any(k == failed[0] for k in bucket.objects)
