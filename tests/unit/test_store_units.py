"""The store's pure pieces, and its CAS put against an in-memory fake: no S3, fast."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any, cast

import pytest
from langgraph.store.base import ListNamespacesOp, MatchCondition, PutOp, SearchOp

from langgraph_s3 import AsyncS3Store, ConfigurationError, ConflictError, InvalidRequestError
from langgraph_s3.aws.clients import ClientFactory
from langgraph_s3.core.keys import Layout
from langgraph_s3.core.put_mode import Create, PutMode
from langgraph_s3.core.records import Listed
from langgraph_s3.runtime.lifecycle import SAVER_PARAMS, STORE_PARAMS, AsyncLifecycle, SyncLifecycle
from langgraph_s3.runtime.periodic import PeriodicSweep
from langgraph_s3.runtime.runner import BackgroundLoop
from langgraph_s3.store import format as it
from langgraph_s3.store.items import ABSENT, ItemStore, Live, new_version, unexpired
from langgraph_s3.store.search import (
    Queries,
    VectorIndex,
    by_recency,
    by_similarity,
    check_search,
    fixed_prefix,
    select_namespaces,
)
from langgraph_s3.store.segments import (
    DecodedSegments,
    Segments,
    by_namespace,
    entries,
    partition,
    segment_entries,
)
from langgraph_s3.store.ttl import (
    RULE_PREFIX,
    ItemExpiry,
    install_lifecycle_rules,
    lifecycle_rules,
    merged_rules,
    rules_installed,
    sweep_interval,
)
from langgraph_s3.testing.fakes import MemoryObjectStore

LAYOUT = Layout("p")


def stored(ns: tuple[str, ...], key: str, value: dict[str, Any], **kw: Any) -> it.StoredItem:
    at = kw.pop("at", it.now())
    fields: dict[str, Any] = {"expires_at": None, "ttl": None, "vectors": {}, **kw}
    return it.StoredItem(ns, key, value, at, at, **fields)


def live(ns: tuple[str, ...], key: str, value: dict[str, Any], **kw: Any) -> Live:
    return Live(LAYOUT.store_item(ns, key), "etag", stored(ns, key, value, **kw))


# ------------------------------------------------------------------- filters
@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (None, True),
        ({"tag": "red"}, True),
        ({"tag": {"$ne": "red"}}, False),
        ({"missing": None}, True),  # a missing field reads as null
        ({"missing": {"$gt": 0}}, False),  # and never orders
        ({"n": {"$gte": 2, "$lt": 3}}, True),
        ({"n": {"$gt": "a"}}, False),  # incomparable: no match, no error
        ({"nested": {"x": {"$lte": 0.5}}}, True),
        ({"list": [1, 2]}, True),
        ({"list": [1]}, False),
        ({"flag": {"$gt": 0}}, False),  # a bool does not order as a number
    ],
)
def test_filters(flt: dict[str, Any] | None, expected: bool) -> None:
    value = {"tag": "red", "n": 2, "nested": {"x": 0.5}, "list": [1, 2], "flag": True}
    assert it.matches_filter(value, flt) is expected


def test_unknown_operators_fail_before_any_request() -> None:
    with pytest.raises(InvalidRequestError, match=r"\$regex"):
        it.validate_filter({"a": {"b": {"$regex": "x"}}})
    with pytest.raises(InvalidRequestError):
        check_search(SearchOp(("a",), filter={"a": {"$in": [1]}}), None)
    with pytest.raises(ConfigurationError, match="needs a vector index"):
        check_search(SearchOp(("a",), query="q"), None)


def test_namespace_conditions() -> None:
    ns = ("users", "1", "prefs")
    assert it.namespace_matches(ns, [MatchCondition("prefix", ("users", "*"))])
    assert it.namespace_matches(ns, [MatchCondition("suffix", ("*", "prefs"))])
    assert not it.namespace_matches(ns, [MatchCondition("suffix", ("users",))])
    assert not it.namespace_matches(("users",), [MatchCondition("prefix", ("users", "1"))])
    assert fixed_prefix([MatchCondition("prefix", ("users", "*", "x"))]) == ("users",)
    assert fixed_prefix([MatchCondition("suffix", ("x",))]) == ()
    assert fixed_prefix([]) == ()


def test_select_namespaces_truncates_sorts_and_pages() -> None:
    found = [("a", "1", "x"), ("a", "2"), ("b",), ("a", "1", "y")]
    op = ListNamespacesOp(max_depth=2, limit=2, offset=1)
    assert select_namespaces(found, op) == [("a", "2"), ("b",)]
    only_a = ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("a",)),))
    assert select_namespaces(found, only_a) == [("a", "1", "x"), ("a", "1", "y"), ("a", "2")]


# ------------------------------------------------------------------- ranking
def test_recency_then_similarity_order() -> None:
    t0 = it.now()
    old = live(("n",), "old", {}, at=t0)
    new = live(("n",), "new", {}, at=t0 + timedelta(seconds=1))
    assert [h.item.key for _, h in by_recency([old, new])] == ["new", "old"]
    near = live(("n",), "near", {}, vectors={"t": [1.0, 0.0], "u": [0.0, 1.0]})
    far = live(("n",), "far", {}, vectors={"t": [-1.0, 0.0]})
    bare = live(("n",), "bare", {})
    ranked = by_similarity([bare, far, near], [0.0, 1.0])
    assert [(score, h.item.key) for score, h in ranked] == [
        (1.0, "near"),  # its best field counts
        (0.0, "far"),
        (None, "bare"),  # not indexed: last, unscored
    ]
    assert it.cosine([0.0, 0.0], [1.0, 0.0]) == 0.0


def test_vector_index_texts_by_field_and_per_put() -> None:
    with pytest.raises(ConfigurationError, match="'dims' and 'embed'"):
        VectorIndex(cast(Any, {"dims": 2}))
    index = VectorIndex(cast(Any, {"dims": 2, "embed": lambda texts: [[1.0, 0.0]] * len(texts)}))
    ops = [
        PutOp(("n",), "a", {"text": "whole"}),
        PutOp(("n",), "b", {"tags": ["x", "y"]}, index=["tags[*]"]),
        PutOp(("n",), "c", {"text": "skipped"}, index=False),
        PutOp(("n",), "d", None),
    ]
    labels = [(item, label) for item, label, _ in index.texts(ops)]
    assert labels == [
        ((("n",), "a"), "$"),
        ((("n",), "b"), "tags[*].0"),
        ((("n",), "b"), "tags[*].1"),
    ]


# ------------------------------------------------------------------ segments
async def test_segment_entries_trust_only_their_own_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mine = stored(("u",), "k", {"v": 1})
    forged = stored(("admin",), "k", {"role": "admin"})
    key = LAYOUT.store_item(("u",), "k")
    other = LAYOUT.store_item(("u",), "other")
    body = it.dump_segment({key: ("e1", mine), other: ("e2", forged)})
    items = ItemStore(MemoryObjectStore(), LAYOUT, max_conflicts=3)
    assert await segment_entries(items, "seg", body) == {key: Live(key, "e1", mine)}
    assert await segment_entries(items, "seg", None) == {}
    with caplog.at_level(logging.WARNING, logger="langgraph_s3"):
        assert await segment_entries(items, "seg", b"\x00garbage") == {}
    assert "ignoring a segment" in caplog.text


def test_partition_uses_a_segment_entry_only_at_the_listed_etag() -> None:
    a, b = stored(("u",), "a", {}), stored(("u",), "b", {})
    ka, kb, kc = (LAYOUT.store_item(("u",), k) for k in "abc")
    cached = {ka: Live(ka, "e1", a), kb: Live(kb, "old", b)}
    hits, loose = partition([Listed(ka, "e1"), Listed(kb, "e2"), Listed(kc, "e3")], cached)
    assert [(h.key, h.etag) for h in hits] == [(ka, "e1")]
    assert loose == [kb, kc]
    assert entries(hits) == {ka: Live(ka, "e1", a)}


def test_a_batch_folds_only_the_namespaces_it_filled() -> None:
    written = [live(("a",), f"k{i}", {}) for i in range(3)] + [live(("b",), "k", {})]
    assert list(by_namespace(written, 3)) == [("a",)]
    assert len(by_namespace(written, 1)) == 2


# ----------------------------------------------------------------------- TTL
def test_ttl_classes_and_tags() -> None:
    assert it.tagging(None) is None
    assert it.tagging(60) == f"{it.TTL_TAG}=1d"
    assert it.tagging(1441) == f"{it.TTL_TAG}=2d"  # rounded up, never down
    assert it.tagging(11 * 365 * 1440) is None  # beyond the classes: the sweeper only
    item = stored(("t",), "k", {}, ttl=1.0, expires_at=it.now())
    assert item.expired(it.now())
    fresh = item.refreshed(it.now())
    assert not fresh.expired(it.now()) and fresh.created_at == item.created_at
    assert unexpired([Live("k", "e", item), Live("f", "e", fresh)], it.now())[0].item is fresh


def test_lifecycle_rules_merge_with_the_buckets_own() -> None:
    theirs = {"ID": "theirs", "Status": "Enabled", "Expiration": {"Days": 9}}
    outdated = {"ID": f"{RULE_PREFIX}1d", "Status": "Disabled"}
    assert not rules_installed([theirs, outdated])
    merged = merged_rules([theirs, outdated])
    assert merged == [theirs, *lifecycle_rules()]
    assert rules_installed(merged)
    days = [r["Expiration"]["Days"] for r in lifecycle_rules()]
    assert days == list(it.TTL_CLASSES_DAYS)


def test_sweep_interval_precedence() -> None:
    assert sweep_interval(2, {"sweep_interval_minutes": 7}) == 2
    assert sweep_interval(None, {"sweep_interval_minutes": 7}) == 7
    assert sweep_interval(None, {"default_ttl": 1}) == 5
    assert sweep_interval(None, None) == 5


async def test_sweeper_runs_until_stopped_and_survives_a_failing_sweep() -> None:
    runs: list[int] = []

    async def sweep() -> int:
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("S3 had a bad day")
        return 1

    sweeper = PeriodicSweep()
    task = sweeper.start(sweep, 0.0001)
    assert sweeper.start(sweep, 5) is task  # already running
    while len(runs) < 3:
        await asyncio.sleep(0.01)
    assert await sweeper.stop(timeout=5) and task.cancelled()
    assert await sweeper.stop(timeout=5)  # stopping twice is harmless


# --------------------------------------------------------------------- items
class FakeObjects:
    """Conditional PUT/GET on a dict, with injected losses."""

    def __init__(self) -> None:
        self.bodies: dict[str, tuple[bytes, str]] = {}
        self.calls: list[str] = []
        self.lose = 0  # conditional writes to fail before the next one lands
        self.version = 0

    async def put(
        self,
        key: str,
        body: bytes,
        *,
        mode: PutMode = None,
        tagging: str | None = None,
    ) -> str | None:
        self.calls.append("put")
        if_none_match, if_match = isinstance(mode, Create), getattr(mode, "etag", None)
        current = self.bodies.get(key)
        if self.lose:
            self.lose -= 1
            return None
        if if_none_match and current is not None:
            return None
        if if_match is not None and (current is None or current[1] != if_match):
            return None
        self.version += 1
        etag = f'"{self.version}"'
        self.bodies[key] = (body, etag)
        return etag

    async def get_with_etag(self, key: str) -> tuple[bytes | None, str | None]:
        self.calls.append("get")
        return self.bodies.get(key, (None, None))


def _items(fake: FakeObjects, max_conflicts: int = 4) -> ItemStore:
    return ItemStore(cast(Any, fake), LAYOUT, max_conflicts=max_conflicts)


async def test_put_new_seen_and_unseen_items() -> None:
    fake = FakeObjects()
    first = await _items(fake).put(PutOp(("u",), "k", {"v": 1}), {})
    assert fake.calls == ["put"]  # new: one If-None-Match PUT
    mine = _items(fake)
    fake.calls.clear()
    await mine.put(PutOp(("u",), "k", {"v": 2}), {})
    assert fake.calls == ["put", "get", "put"]  # unseen: the guess fails, then read
    fake.calls.clear()
    second = await mine.put(PutOp(("u",), "k", {"v": 3}), {})
    assert fake.calls == ["put"]  # seen: one If-Match PUT
    assert second.item.created_at == first.item.created_at
    assert second.item.value == {"v": 3}


async def test_put_builds_afresh_on_an_expired_item() -> None:
    fake = FakeObjects()
    past = it.now() - timedelta(days=1)
    key = LAYOUT.store_item(("u",), "k")
    old = stored(("u",), "k", {}, at=past, ttl=1.0, expires_at=past)
    fake.bodies[key] = (it.dump_item(old), '"old"')
    written = await _items(fake).put(PutOp(("u",), "k", {"v": 1}), {})
    assert written.item.created_at > past


async def test_put_retries_lost_rounds_then_raises() -> None:
    fake = FakeObjects()
    fake.lose = 3  # the guess and two read rounds lose, the third lands
    await _items(fake, max_conflicts=3).put(PutOp(("u",), "k", {"v": 1}), {})
    assert fake.calls.count("put") == 4
    fake.lose, fake.calls = 100, []
    with pytest.raises(ConflictError, match=r"item \('u',\)/k kept changing.*3 attempts"):
        await _items(fake, max_conflicts=3).put(PutOp(("u",), "k", {"v": 2}), {})
    assert fake.calls.count("put") == 1 + 3


def test_new_version_keeps_created_at_when_given() -> None:
    created = it.now() - timedelta(days=3)
    kept = new_version(PutOp(("u",), "k", {"v": 1}, ttl=60), {}, created)
    assert kept.created_at == created and kept.expires_at is not None
    assert new_version(PutOp(("u",), "k", {"v": 1}), {}, ABSENT.created_at).created_at > created


# ------------------------------------------- the store's parts on a memory bucket
class Parts:
    """Items, segments and expiry over a MemoryObjectStore: the store without S3."""

    def __init__(self, compact_after: int = 4) -> None:
        self.objects = MemoryObjectStore()
        self.items = ItemStore(self.objects, LAYOUT, max_conflicts=8)
        self.segments = Segments(self.objects, LAYOUT, self.items, compact_after=compact_after)
        self.expiry = ItemExpiry(self.items, self.segments)

    def counted(self) -> dict[str, int]:
        counts = dict(self.objects.stats.snapshot()["by_operation"])
        self.objects.stats.reset()
        return counts

    async def put(self, ns: tuple[str, ...], key: str, ttl: float | None = None) -> Live:
        return await self.items.put(PutOp(ns, key, {"k": key}, ttl=ttl), {})


async def test_a_read_with_many_loose_items_compacts_its_prefix() -> None:
    parts = Parts()
    for i in range(6):
        await parts.put(("g", str(i % 2)), f"k{i}")
    parts.counted()
    assert len(await parts.segments.scan(("g",))) == 6
    assert parts.counted() == {"s3.ListObjectsV2": 2, "s3.GetObject": 6, "s3.PutObject": 1}
    await parts.put(("g", "0"), "k0")  # changed: read from its object, not the segment
    await parts.items.delete([LAYOUT.store_item(("g", "1"), "k1")])
    parts.counted()
    found = {h.item.key: h.etag for h in await parts.segments.scan(("g",))}
    assert len(found) == 5 and "k1" not in found
    assert parts.counted() == {"s3.ListObjectsV2": 2, "s3.GetObject": 2}  # segment + k0
    assert await parts.segments.compact(("g",)) == 5
    parts.counted()
    await parts.segments.scan(("g",))
    assert parts.counted() == {"s3.ListObjectsV2": 2, "s3.GetObject": 1}


async def test_a_segment_decoded_once_serves_every_read_until_it_changes() -> None:
    """A segment read at an ETag is decoded once per process: a read that lists it at
    the same ETag GETs nothing; rewritten, it is read again; a search hands out copies
    of the values it holds, so a caller's change reaches no later read."""
    parts = Parts(compact_after=10**9)
    for i in range(5):
        await parts.put(("d",), f"k{i}")
    await parts.segments.compact(("d",))
    await parts.segments.scan(("d",))  # the segment's GET: decoded, kept
    parts.counted()
    for _ in range(3):
        assert len(await parts.segments.scan(("d",))) == 5
    assert parts.counted() == {"s3.ListObjectsV2": 6}  # the items and the segments
    await parts.put(("d",), "k5")
    await parts.segments.compact(("d",))  # rewritten: a new ETag
    parts.counted()
    assert len(await parts.segments.scan(("d",))) == 6
    assert parts.counted() == {"s3.ListObjectsV2": 2, "s3.GetObject": 1}
    queries = Queries(parts.segments, parts.expiry, None)
    (hit,) = await queries.search(SearchOp(("d",), filter={"k": "k1"}))
    hit.value["k"] = "changed by the caller"
    (again,) = await queries.search(SearchOp(("d",), filter={"k": "k1"}))
    assert again.value == {"k": "k1"}


def test_decoded_segments_keep_the_most_recent_under_their_limit() -> None:
    kept = DecodedSegments(limit=500)
    item = stored(("n",), "k", {})
    three = {f"k{i}": ("e", item) for i in range(3)}
    kept.put("a", "e1", three, 300)
    kept.put("b", "e1", three, 300)  # over 500 bytes: a leaves
    assert kept.get("a", "e1") is None and kept.get("b", "e1") == three
    assert kept.get("b", "e2") is None and kept.get("b", "") is None  # another ETag, none
    kept.put("c", "e1", three, 600)  # never held: too large
    assert kept.get("c", "e1") is None and kept.get("b", "e1") == three
    kept.put("b", "e2", three, 200)  # rewritten: the new version replaces the old
    kept.put("d", "e1", three, 300)
    assert kept.get("b", "e1") is None and kept.get("b", "e2") == three == kept.get("d", "e1")


async def test_a_batch_folds_its_items_into_the_namespace_segment() -> None:
    parts = Parts()
    written = [await parts.put(("b",), f"k{i}") for i in range(5)]
    written.append(await parts.put(("c",), "alone"))
    parts.counted()
    await parts.segments.fold(written)
    assert parts.counted() == {"s3.GetObject": 1, "s3.PutObject": 1}  # ("b",) only
    assert len(await parts.segments.scan(("b",))) == 5
    assert parts.counted() == {"s3.ListObjectsV2": 2, "s3.GetObject": 1}


async def test_sweep_deletes_expired_items_and_refresh_skips_changed_ones() -> None:
    parts = Parts()
    short = await parts.put(("t",), "short", ttl=0.0001)  # 6 ms
    await parts.put(("t",), "forever")
    await asyncio.sleep(0.05)
    assert [h.item.key for h in unexpired(await parts.segments.scan(("t",)), it.now())] == [
        "forever"
    ]
    assert await parts.expiry.sweep() == 1
    assert await parts.items.get(short.key) is None
    kept = await parts.put(("t",), "kept", ttl=60)
    await parts.put(("t",), "kept", ttl=60)  # a newer version: the older entry is stale
    parts.counted()
    await parts.expiry.refresh([kept], it.now())
    assert parts.counted() == {"s3.PutObject": 1}  # tried, lost, left alone
    fresh = await parts.items.get(kept.key)
    assert fresh is not None and fresh.etag != kept.etag


async def test_lifecycle_rules_are_installed_once() -> None:
    parts = Parts()
    await install_lifecycle_rules(parts.objects)
    await install_lifecycle_rules(parts.objects)
    assert parts.counted() == {
        "s3.GetBucketLifecycleConfiguration": 2,
        "s3.PutBucketLifecycleConfiguration": 1,
    }
    assert rules_installed((await parts.objects.lifecycle()).rules)


# ----------------------------------------------------------------- lifecycle
class Core:
    """A stand-in for a store's core: clients, a loop, and a setup that counts."""

    def __init__(self, *, bucket: str, prefix: str = "", **limits: Any) -> None:
        self.bucket, self.prefix, self.limits = bucket, prefix, limits
        self.clients = ClientFactory()
        self._runner = BackgroundLoop(self.clients.aclose_running)
        self.setups = 0

    async def _asetup(self, *, dry_run: bool = False) -> list[str]:
        if not dry_run:
            self.setups += 1
        return ["a thing"]


class AsyncThing(AsyncLifecycle, Core):
    pass


class SyncThing(SyncLifecycle, Core):
    CONN_PARAMS = SAVER_PARAMS


async def test_async_lifecycle() -> None:
    async with AsyncThing.from_conn_string("s3://bucket/p?read_timeout=3", prefix="q") as thing:
        assert isinstance(thing, AsyncThing)
        assert (thing.bucket, thing.prefix, thing.limits) == ("bucket", "q", {"read_timeout": 3})
        await thing.setup()
        assert thing.setups == 1
    # a store takes the table its deployment's subjects are kept in, and their options
    assert AsyncThing.from_url("s3://bucket?table=t").limits == {"table": "t"}
    assert {"table", "subject_label", "kms_key"} <= STORE_PARAMS
    with pytest.raises(ConfigurationError, match="saver's"):
        AsyncThing.from_url("s3://bucket?subjects=user_id")  # a metadata key: the saver's
    async with AsyncThing(bucket="b") as entered:
        assert isinstance(entered, AsyncThing)


def test_sync_lifecycle() -> None:
    with SyncThing.from_conn_string("s3://bucket/p?table=t") as thing:
        assert thing.limits == {"table": "t"}
        thing.setup()
        thing.setup()
        assert thing.setups == 2
    with SyncThing(bucket="b") as entered:
        assert isinstance(entered, SyncThing)


def test_the_store_takes_max_conflicts_like_the_other_limits() -> None:
    store = AsyncS3Store.from_url("s3://bucket/p?max_conflicts=3&read_timeout=4")
    assert store.clients.limits.max_conflicts == 3
    assert store.clients.limits.read_timeout == 4
    assert AsyncS3Store(bucket="bucket").clients.limits.max_conflicts == 64
    with pytest.raises(ConfigurationError, match="max_conflicts"):
        AsyncS3Store(bucket="bucket", max_conflicts=0)


async def _filled(n: int, *, page: int, span: int) -> tuple[Parts, list[str]]:
    """``n`` items in one namespace, their segment written; listings of ``page`` keys."""
    parts = Parts(compact_after=10**9)
    parts.segments = Segments(
        parts.objects, LAYOUT, parts.items, compact_after=10**9, page=page, span=span
    )
    for i in range(n):
        await parts.put(("big",), f"k{i:05d}")
    await parts.segments.compact(("big",))
    return parts, [f"k{i:05d}" for i in range(n)]


async def test_a_read_lists_ranges_cut_at_the_keys_its_segment_holds_at_once() -> None:
    """Ten pages of keys, the segment current: the listing's first page beside the
    segments' listing, the segment beside its second page, then the other ranges all
    at once (cut at every 90th key the segment holds, each one page): 3 round trips,
    not 11."""
    parts, keys = await _filled(1000, page=100, span=90)
    parts.counted()
    parts.objects.stats.reset()
    found = await parts.segments.read(("big",))
    snap = parts.objects.stats.snapshot()
    assert sorted(h.item.key for h in found.live) == keys and found.loose == 0
    # head: 2 pages; ranges after the 90th, 180th... key past the first page: 10
    assert snap["by_operation"] == {"s3.ListObjectsV2": 2 + 1 + 10, "s3.GetObject": 1}
    assert snap["round_trips"] == 3


async def test_a_read_of_one_page_is_two_round_trips() -> None:
    parts, keys = await _filled(100, page=100, span=90)
    parts.objects.stats.reset()
    found = await parts.segments.read(("big",))
    snap = parts.objects.stats.snapshot()
    assert sorted(h.item.key for h in found.live) == keys
    assert snap["by_operation"] == {"s3.ListObjectsV2": 2, "s3.GetObject": 1}
    assert snap["round_trips"] == 2


def test_cut_ranges_list_every_key_once_whatever_changed_since_the_segment() -> None:
    """Keys added anywhere (many into one range), removed (cut keys among them) and
    changed after the segment was written: a read lists each key there once, exactly
    the keys there are, and reads the changed and new ones from their objects."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=60, deadline=None)
    @given(
        n=st.integers(0, 60),
        page=st.integers(2, 12),
        added=st.lists(st.integers(0, 99_999), max_size=40),
        removed=st.lists(st.integers(0, 59), max_size=20),
        changed=st.lists(st.integers(0, 59), max_size=5),
    )
    def run(n: int, page: int, added: list[int], removed: list[int], changed: list[int]) -> None:
        async def body() -> None:
            span = max(1, page - 2)
            parts = Parts(compact_after=10**9)
            parts.segments = Segments(
                parts.objects, LAYOUT, parts.items, compact_after=10**9, page=page, span=span
            )
            want: dict[str, str] = {}
            for i in range(n):
                key = f"k{i * 1000:08d}"
                await parts.put(("big",), key)
                want[key] = key
            await parts.segments.compact(("big",))
            for a in added:  # between the known keys (a + 1 avoids them), or past them
                key = f"k{a * 10 + 1:08d}"
                await parts.put(("big",), key)
                want[key] = key
            for r in removed:
                key = f"k{r * 1000:08d}"
                if key in want:
                    await parts.items.delete([LAYOUT.store_item(("big",), key)])
                    del want[key]
            for c in changed:
                key = f"k{c * 1000:08d}"
                if key in want:
                    await parts.items.put(PutOp(("big",), key, {"k": "new"}), {})
                    want[key] = "new"
            found = await parts.segments.read(("big",))
            got = [h.item.key for h in found.live]
            assert sorted(got) == sorted(want) and len(got) == len(set(got))
            assert {h.item.key: h.item.value["k"] for h in found.live} == want

        asyncio.run(body())

    run()


def test_a_span_past_the_page_is_refused() -> None:
    parts = Parts()
    with pytest.raises(ValueError, match="span"):
        Segments(parts.objects, LAYOUT, parts.items, compact_after=4, page=10, span=11)


async def test_a_read_whose_listing_and_segments_both_fail_leaves_no_task_behind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The items' listing fails at once, then the segments' GET fails: the read raises
    the segments' error, and the listing's is retrieved (no "never retrieved" at GC)."""
    import gc

    class Failing(MemoryObjectStore):
        fail = False

        def list_pages(self, prefix: str, **kw: Any) -> Any:
            if self.fail and "/store/i/" in prefix:
                raise_at_once: Any = self._raise("items listing failed")
                return raise_at_once
            return super().list_pages(prefix, **kw)

        async def _raise(self, why: str) -> Any:  # an async iterator that fails at once
            raise RuntimeError(why)
            yield

        async def get_with_etag(self, key: str) -> Any:
            if self.fail:
                for _ in range(20):
                    await asyncio.sleep(0)
                raise RuntimeError("segment GET failed")
            return await super().get_with_etag(key)

    objs = Failing()
    items = ItemStore(objs, LAYOUT, max_conflicts=8)
    segments = Segments(objs, LAYOUT, items, compact_after=10**9, page=10, span=8)
    for i in range(30):
        await items.put(PutOp(("a",), f"k{i:03d}", {"v": i}), {})
    await segments.compact(("a",))
    objs.fail = True
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        with pytest.raises(RuntimeError, match="segment GET failed"):
            await segments.read(("a",))
        gc.collect()
        await asyncio.sleep(0)
    assert "never retrieved" not in caplog.text


def test_the_forgetting_reads_the_plain_entries_of_a_segment_as_the_store_writes_it() -> None:
    from langgraph_s3.runtime.store_erasure import plain_namespaces

    a, b = stored(("u", "a"), "k", {"v": 1}), stored(("u", "b"), "k", {"v": 2**70})
    body = it.dump_segment({"ka": ("e1", a), "kb": ("e2", b), "kc": ("e3", b"\xc1sealed")})
    assert body[:1] == b" "  # an integer beyond 64 bits: the stdlib's JSON
    assert plain_namespaces(body) == {("u", "a"), ("u", "b")}
    assert plain_namespaces(it.dump_segment({"ka": ("e1", a)})) == {("u", "a")}
    assert plain_namespaces(b"\x00garbage") == set()
