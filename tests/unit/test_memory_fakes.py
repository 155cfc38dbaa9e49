"""What only the fakes have: shared state, direct edits, a clock, request timing."""

from __future__ import annotations

import asyncio

import pytest

from langgraph_s3.aws.stats import RequestStats
from langgraph_s3.core.put_mode import CREATE
from langgraph_s3.testing.fakes import (
    MemoryBucket,
    MemoryManifest,
    MemoryObjectStore,
    MemoryTable,
    StoredObject,
)

pytestmark = pytest.mark.unit


async def test_stores_on_one_bucket_share_it_and_direct_edits_show() -> None:
    bucket = MemoryBucket("shared", clock=lambda: 1_700_000_000.75)
    a, b = MemoryObjectStore(bucket), MemoryObjectStore(bucket)
    await a.put("k/1", b"one")
    assert await b.get("k/1") == b"one"
    del bucket.objects["k/1"]  # a test damaging the bucket: no request, seen at once
    bucket.objects["k/2"] = StoredObject(b"two", '"x"', 5.0)
    assert [o.key for o in await b.list_all("k/")] == ["k/2"]
    bucket.objects.update({"k/0": StoredObject(b"", '"y"', 5.0)})
    bucket.objects.pop("k/2")
    assert [o.key for o in await a.list_all("k/")] == ["k/0"]
    await a.put("k/3", b"")
    (listed,) = [o for o in await a.list_all("k/") if o.key == "k/3"]
    assert listed.modified == 1_700_000_000.0  # the clock, to the whole second
    assert a.stats is not b.stats and a.stats.total == 4 and b.stats.total == 2


async def test_requests_in_flight_together_are_one_round_trip() -> None:
    stats = RequestStats()
    store = MemoryObjectStore(stats=stats)
    manifest = MemoryManifest(stats=stats)
    await store.put("k", b"v")
    stats.reset()
    await asyncio.gather(store.get("k"), store.get("k"), manifest.reads.latest("t", ""))
    assert stats.round_trips == 1
    assert stats.by_operation == {"s3.GetObject": 2, "dynamodb.GetItem": 1}
    stats.reset()
    for _ in range(3):
        await store.get("k")
    assert stats.round_trips == 3
    assert stats.bytes_sent == 0
    await store.put("k", b"12345")
    assert stats.bytes_sent == 5  # object bodies only


async def test_a_table_shared_by_deployments_and_its_clock() -> None:
    now = [1_800_000_000.0]
    table = MemoryTable(clock=lambda: now[0])
    one = MemoryManifest(table, deployment="b/~/", ttl_seconds=60)
    two = MemoryManifest(table, deployment="b/other/")
    await one.commits.advance("t", "", "1f1ecd00-0000-6000-8000-000000000000", "tail", None)
    await two.commits.advance("t", "", "1f1ecd00-0000-6000-8000-000000000001", "tail", None)
    assert len(table.items) == 2
    e = await one.reads.latest("t", "")
    assert e is not None and e.expires_at == 1_800_000_060 and e.created_at == 1_800_000_000
    now[0] += 60
    assert await one.reads.latest("t", "") is None  # expired
    assert await two.reads.latest("t", "") is not None  # no TTL in that deployment


def test_the_fakes_are_usable_from_another_thread_loop() -> None:
    """A sync saver drives them from its background loop: requests hold a lock."""
    bucket = MemoryBucket()

    async def writer(n: int) -> None:
        store = MemoryObjectStore(bucket)
        for i in range(50):
            await store.put(f"k/{n}/{i}", b"x", mode=CREATE)

    import threading

    threads = [threading.Thread(target=asyncio.run, args=(writer(n),)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(bucket.objects) == 200
