"""The store under contention, sweeps racing writers, and corrupt or foreign objects.

Every test runs over HTTP against moto; races are staged with request hooks or
barriers, never with sleeps.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import orjson
import pytest
from aiobotocore.session import get_session
from langgraph.store.base import Item

from langgraph_s3 import AsyncS3Store, CorruptObjectError
from langgraph_s3.store import format as it
from langgraph_s3.testing import MotoServer, unique_names

CONTENDERS = 32
ROUNDS = 3
NS, KEY = ("race",), "k"


@pytest.fixture
async def bucket(s3_fresh: MotoServer) -> AsyncIterator[str]:
    name = unique_names()["bucket"]
    async with AsyncS3Store(endpoint_url=s3_fresh.url, bucket=name, prefix="p") as s:
        await s.setup()
    yield name


def _store(s3: MotoServer, bucket: str, **kwargs: Any) -> AsyncS3Store:
    return AsyncS3Store(endpoint_url=s3.url, bucket=bucket, prefix="p", **kwargs)


async def _raw_put(store: AsyncS3Store, key: str, body: bytes) -> str:
    s3 = await store.clients.client("s3")
    return str((await s3.put_object(Bucket=store.bucket, Key=key, Body=body))["ETag"])


def _body(ns: tuple[str, ...], key: str, value: dict[str, Any], **kw: Any) -> bytes:
    at = it.now()
    fields: dict[str, Any] = {"expires_at": None, "ttl": None, **kw}
    return it.dump_item(it.StoredItem(ns, key, value, at, at, vectors={}, **fields))


# ------------------------------------------------------------ contention
async def test_put_after_another_instance_deleted_it_is_not_lost(
    s3_fresh: MotoServer, bucket: str
) -> None:
    async with _store(s3_fresh, bucket) as a, _store(s3_fresh, bucket) as b:
        await a.aput(NS, KEY, {"v": 1})
        first = await a.aget(NS, KEY)
        await b.adelete(NS, KEY)
        await a.aput(NS, KEY, {"v": 2})  # a still holds the deleted version's ETag
        second = await b.aget(NS, KEY)
    assert first is not None and second is not None and second.value == {"v": 2}
    assert second.created_at > first.created_at  # deleted in between: re-created


async def test_32_contenders_on_one_key_all_succeed_last_writer_wins(
    s3_fresh: MotoServer, bucket: str
) -> None:
    """Three rounds of 32 instances writing one key at once; round 1 mixes in deletes.

    A barrier ends each round, so the rounds themselves are ordered: after a
    round the value is one written in it, and ``created_at`` is the creation
    time of round 0, then a re-creation within round 1 (its deletes removed the
    item), then kept through round 2 (puts only).
    """
    barrier = asyncio.Barrier(CONTENDERS)
    failures: list[BaseException] = []
    ops = 0
    after: list[Item | None] = []  # the item at the end of each round
    ends: list[datetime] = []  # when each round ended

    async def contender(i: int, store: AsyncS3Store) -> None:
        nonlocal ops
        for rnd in range(ROUNDS):
            try:
                if rnd == 1 and i % 4 == 0:
                    await store.adelete(NS, KEY)
                else:
                    await store.aput(NS, KEY, {"round": rnd, "by": i})
            except Exception as exc:
                failures.append(exc)
            ops += 1
            if await barrier.wait() == 0:
                after.append(await store.aget(NS, KEY))
                ends.append(it.now())
            await barrier.wait()

    session = get_session()  # one botocore model cache; each store has its own client
    stores = [_store(s3_fresh, bucket, session=session) for _ in range(CONTENDERS)]
    try:
        await asyncio.gather(*(contender(i, s) for i, s in enumerate(stores)))
    finally:
        for s in stores:
            await s.aclose()
    print(f"{CONTENDERS} contenders, {ops} operations, {len(failures)} failed")
    assert failures == [] and ops == CONTENDERS * ROUNDS
    round0, round1, round2 = after
    assert round0 is not None and round2 is not None
    for rnd, item in enumerate(after):
        assert item is None or item.value["round"] == rnd
    assert round0.created_at < ends[0]
    if round1 is None:  # a delete was last in round 1: round 2 re-created it
        assert round2.created_at > ends[1]
    else:
        assert ends[0] < round1.created_at < ends[1]  # deleted in round 1, then re-created
        assert round2.created_at == round1.created_at  # kept through round 2's updates


# ---------------------------------------------------------------- sweep
async def test_sweep_deletes_only_the_version_it_saw_expire(
    s3_fresh: MotoServer, bucket: str
) -> None:
    """An expired key rewritten between the sweep's listing and its delete survives."""
    async with _store(s3_fresh, bucket) as sweeper, _store(s3_fresh, bucket) as writer:
        past = it.now() - timedelta(minutes=5)
        for key in ("rewritten", "stale"):
            await _raw_put(
                sweeper,
                sweeper.layout.store_item(("t",), key),
                _body(("t",), key, {"old": True}, expires_at=past, ttl=1.0),
            )
        s3 = await sweeper.clients.client("s3")
        rewrite: asyncio.Future[None] | None = None

        async def rewrite_before_delete(**_: Any) -> None:
            """Every delete request of the sweep waits until the key was rewritten."""
            nonlocal rewrite
            if rewrite is None:  # the listing and reads are done: deletes are next
                rewrite = asyncio.ensure_future(
                    writer.aput(("t",), "rewritten", {"fresh": True}, ttl=None)
                )
            await rewrite

        for op in ("DeleteObject", "DeleteObjects"):
            s3.meta.events.register(f"before-call.s3.{op}", rewrite_before_delete)
        swept = await sweeper.asweep_ttl()
        assert rewrite is not None and rewrite.done()
        fresh = await writer.aget(("t",), "rewritten")
        assert fresh is not None and fresh.value == {"fresh": True}
        assert swept == 1  # only "stale" was really deleted
        assert await writer.aget(("t",), "stale") is None
        assert [r.key for r in await writer.asearch(("t",))] == ["rewritten"]


# ----------------------------------------------------------- corruption
async def test_a_garbage_item_is_named_by_get_and_skipped_by_search(
    s3_fresh: MotoServer, bucket: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with _store(s3_fresh, bucket) as store:
        for key in ("a", "b"):
            await store.aput(("u",), key, {"k": key})
        await store.aput(("u", "sub"), "c", {"k": "c"})
        bad = store.layout.store_item(("u",), "bad")
        await _raw_put(store, bad, b"not json")
        foreign = f"{store.layout.store_namespace(('u',))}README.txt"  # a stray upload
        await _raw_put(store, foreign, b"hello")
        with pytest.raises(CorruptObjectError) as info:
            await store.aget(("u",), "bad")
        assert info.value.key == bad and bad in str(info.value)
        assert (await store.aget(("u",), "a")) is not None  # its neighbours are fine
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="langgraph_s3"):
            for _ in range(2):
                got = await store.asearch(("u",), limit=100)
                assert sorted(r.key for r in got) == ["a", "b", "c"]
            assert await store.alist_namespaces() == [("u",), ("u", "sub")]
        for key in (bad, foreign):  # reported, once per key
            assert sum(key in r.getMessage() for r in caplog.records) == 1, key


async def test_an_item_whose_body_names_another_item_is_rejected(
    s3_fresh: MotoServer, bucket: str
) -> None:
    async with _store(s3_fresh, bucket) as store:
        await store.aput(("u", "2"), "ok", {"v": 1})
        planted = store.layout.store_item(("u", "2"), "k")
        await _raw_put(store, planted, _body(("admin",), "k", {"role": "admin"}))
        other_key = store.layout.store_item(("u", "2"), "k2")
        await _raw_put(store, other_key, _body(("u", "2"), "k", {"v": "k's body at k2"}))
        for key in ("k", "k2"):
            with pytest.raises(CorruptObjectError) as info:
                await store.aget(("u", "2"), key)
            assert info.value.key == store.layout.store_item(("u", "2"), key)
        assert [r.key for r in await store.asearch(("u",))] == ["ok"]
        assert await store.asearch(("admin",)) == []
        assert await store.alist_namespaces() == [("u", "2")]


async def test_an_item_with_fields_of_the_wrong_type_is_corrupt(
    s3_fresh: MotoServer, bucket: str
) -> None:
    async with _store(s3_fresh, bucket) as store:
        key = store.layout.store_item(("u",), "k")
        doc = it.to_json(it.StoredItem(("u",), "k", {}, it.now(), it.now(), None, None, {}))
        for field, wrong in (
            ("value", [1, 2]),
            ("ns", "u"),
            ("key", 7),
            ("ttl", "soon"),
            ("expires_at", "2999-01-01T00:00:00"),  # no offset: cannot be compared
        ):
            await _raw_put(store, key, orjson.dumps({**doc, field: wrong}))
            with pytest.raises(CorruptObjectError):
                await store.aget(("u",), "k")
            assert await store.asearch(("u",)) == []


async def test_a_garbage_segment_is_ignored_and_rebuilt(s3_fresh: MotoServer, bucket: str) -> None:
    async with _store(s3_fresh, bucket, compact_after=4) as store:
        for i in range(10):
            await store.aput(("g",), f"k{i}", {"i": i})
        assert await store.acompact(("g",)) == 10
        seg = store.layout.store_segment(("g",))
        await _raw_put(store, seg, b"\x00garbage")
        assert len(await store.asearch(("g",), limit=100)) == 10
        # that search found every item loose, so it compacted: the segment is valid again
        s3 = await store.clients.client("s3")
        body = await (await s3.get_object(Bucket=bucket, Key=seg))["Body"].read()
        assert len(it.load_segment(body)) == 10
        store.stats.reset()
        assert len(await store.asearch(("g",), limit=100)) == 10
        assert store.stats.snapshot()["by_operation"] == {"s3.ListObjectsV2": 2, "s3.GetObject": 1}


async def test_a_segment_entry_naming_another_item_is_not_served(
    s3_fresh: MotoServer, bucket: str
) -> None:
    """A segment is only trusted for the key it files an entry under."""
    async with _store(s3_fresh, bucket) as store:
        await store.aput(("u", "2"), "k", {"v": "mine"})
        key = store.layout.store_item(("u", "2"), "k")
        listed = (
            await (await store.clients.client("s3")).list_objects_v2(Bucket=bucket, Prefix=key)
        )["Contents"][0]
        forged = it.StoredItem(
            ("admin",), "k", {"role": "admin"}, it.now(), it.now(), None, None, {}
        )
        await _raw_put(
            store,
            store.layout.store_segment(("u",)),
            it.dump_segment({key: (listed["ETag"], forged)}),
        )
        got = await store.asearch(("u",))
        assert [(r.namespace, r.value) for r in got] == [(("u", "2"), {"v": "mine"})]
        assert await store.alist_namespaces() == [("u", "2")]
