"""AsyncS3Store / S3Store: side by side with InMemoryStore, ordering, TTL, vectors, graphs."""

from __future__ import annotations

import asyncio
import hashlib
import math
import random
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from langgraph.store.base import InvalidNamespaceError, Item
from langgraph.store.memory import InMemoryStore

from langgraph_s3 import AsyncS3Store, ConfigurationError, S3Store
from langgraph_s3.store.facade import lifecycle_rules
from langgraph_s3.store.format import TTL_TAG, ttl_class
from langgraph_s3.testing import MotoServer, unique_names


@pytest.fixture
async def store(s3_fresh: MotoServer) -> AsyncIterator[AsyncS3Store]:
    async with AsyncS3Store(
        endpoint_url=s3_fresh.url, bucket=unique_names()["bucket"], prefix="mem"
    ) as s:
        await s.setup()
        yield s


def view(item: Item | None) -> Any:
    return None if item is None else (item.namespace, item.key, item.value)


# ---------------------------------------------------------- side by side
NAMESPACES = [
    ("users",),
    ("users", "1"),
    ("users", "2"),
    ("users", "1", "prefs"),
    ("docs",),
    ("a:b",),
    ("a", "b"),
    ("ünï", "c/d"),
    ("x" * 150, "long"),
    ("users2",),
]
KEYS = ["k1", "k2", "k:3", "k/4", "é", "k" * 200]


def random_value(rng: random.Random) -> dict[str, Any]:
    return {
        "n": rng.randint(0, 9),
        "tag": rng.choice(["red", "green", "blue"]),
        "nested": {
            "x": rng.random(),
            "list": [rng.randint(0, 3) for _ in range(rng.randint(0, 3))],
        },
        **({"maybe": rng.choice([True, None, "s"])} if rng.random() < 0.5 else {}),
    }


FILTERS: list[dict[str, Any] | None] = [
    None,
    {"tag": "red"},
    {"n": {"$gt": 4}},
    {"n": {"$gte": 2, "$lt": 7}},
    {"tag": {"$ne": "blue"}, "n": {"$lte": 5}},
    {"nested": {"x": {"$gt": 0.5}}},
    {"maybe": True},
]


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_random_operations_match_in_memory_store(store: AsyncS3Store, seed: int) -> None:
    rng = random.Random(seed)
    memory = InMemoryStore()
    for step in range(120):
        ns, key = rng.choice(NAMESPACES), rng.choice(KEYS)
        roll = rng.random()
        if roll < 0.55:
            value = random_value(rng)
            await store.aput(ns, key, value)
            await memory.aput(ns, key, value)
        elif roll < 0.7:
            await store.adelete(ns, key)
            await memory.adelete(ns, key)
        elif roll < 0.85:
            assert view(await store.aget(ns, key)) == view(await memory.aget(ns, key))
        else:
            prefix = rng.choice([(), *NAMESPACES])[: rng.randint(0, 2)]
            flt = rng.choice(FILTERS)
            ours = await store.asearch(prefix, filter=flt, limit=1000)
            theirs = await memory.asearch(prefix, filter=flt, limit=1000)
            assert sorted(map(view, ours)) == sorted(map(view, theirs)), (step, prefix, flt)
        if step % 20 == 19:
            # deliberate difference: InMemoryStore keeps listing a namespace after its
            # last item is deleted (or after a mere get); we list namespaces with items,
            # as does an InMemoryStore holding only the items
            holding = InMemoryStore()
            for item in await memory.asearch((), limit=10**6):
                await holding.aput(item.namespace, item.key, item.value)
            for kwargs in (
                {},
                {"prefix": ("users",)},
                {"suffix": ("prefs",)},
                {"prefix": ("users", "*")},
                {"max_depth": 1},
                {"max_depth": 2, "limit": 3, "offset": 1},
            ):
                assert await store.alist_namespaces(**kwargs) == await holding.alist_namespaces(
                    **kwargs
                ), kwargs


async def test_search_order_filter_before_limit_and_missing_fields(store: AsyncS3Store) -> None:
    for i in range(12):
        await store.aput(("items",), f"k{i:02}", {"i": i, **({"even": True} if i % 2 == 0 else {})})
    got = await store.asearch(("items",), limit=3)
    assert [r.key for r in got] == ["k11", "k10", "k09"]  # newest updated_at first
    await store.aput(("items",), "k03", {"i": 3})  # an update makes it newest
    assert (await store.asearch(("items",), limit=1))[0].key == "k03"
    # the filter applies before limit/offset: 6 even items, second page of 4
    page = await store.asearch(("items",), filter={"even": True}, limit=4, offset=4)
    assert [r.key for r in page] == ["k02", "k00"]
    # a missing or non-numeric field never raises, it just does not match
    assert await store.asearch(("items",), filter={"nope": {"$gt": 1}}) == []
    await store.aput(("items",), "text", {"i": "not a number"})
    assert len(await store.asearch(("items",), filter={"i": {"$gte": 0}}, limit=100)) == 12
    with pytest.raises(ValueError, match="unsupported filter operator"):
        await store.asearch(("items",), filter={"i": {"$regex": "x"}})


async def test_prefix_search_is_by_whole_labels(store: AsyncS3Store) -> None:
    await store.aput(("users",), "a", {"v": 1})
    await store.aput(("users", "1"), "b", {"v": 2})
    await store.aput(("users2",), "c", {"v": 3})
    await store.aput(("users:1",), "d", {"v": 4})
    keys = sorted(r.key for r in await store.asearch(("users",)))
    assert keys == ["a", "b"]
    assert [r.key for r in await store.asearch(("users", "1"))] == ["b"]


async def test_items_round_trip_and_created_at_is_kept(store: AsyncS3Store) -> None:
    value = {
        "unicode": "日本語 ✓",
        "big": 2**70,
        "neg": -(2**63),
        "float": 0.1,
        "none": None,
        "nested": {"list": [1, [2, {"x": False}]], "empty": {}},
        "esc": 'a"b\\c\n',
    }
    await store.aput(("rt",), "k", value)
    first = await store.aget(("rt",), "k")
    assert first is not None and first.value == value
    await asyncio.sleep(0.01)
    await store.aput(("rt",), "k", {"v": 2})
    # a fresh store process (no memory of the item) keeps created_at too
    async with AsyncS3Store(
        endpoint_url=store.clients.endpoint_url, bucket=store.bucket, prefix="mem"
    ) as other:
        await other.aput(("rt",), "k", {"v": 3})
        second = await other.aget(("rt",), "k")
    assert second is not None and second.value == {"v": 3}
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at


async def test_bad_namespaces_are_rejected(store: AsyncS3Store) -> None:
    for bad in [(), ("a.b",), ("",), ("a", "")]:
        with pytest.raises(InvalidNamespaceError):
            await store.aput(bad, "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        await store.asearch(("a.b",))
    with pytest.raises(ConfigurationError, match="needs a vector index"):
        await store.asearch(("a",), query="anything")


# ----------------------------------------------------------------- TTL
async def test_ttl_expiry_sweeper_and_refresh(s3_fresh: MotoServer) -> None:
    ttl = {"default_ttl": 0.05, "refresh_on_read": True}  # 3 seconds
    async with AsyncS3Store(endpoint_url=s3_fresh.url, ttl=ttl, **_bucket()) as store:
        await store.setup()
        await store.aput(("t",), "short", {"v": 1})
        await store.aput(("t",), "long", {"v": 2}, ttl=60)
        await store.aput(("t",), "forever", {"v": 3}, ttl=None)
        await store.aput(("u",), "short", {"v": 4})
        await asyncio.sleep(1.6)
        assert await store.aget(("t",), "short") is not None  # read refreshes: 3 s more
        await asyncio.sleep(1.6)  # ("u",) expired; the refreshed one has ~1.4 s left
        assert await store.aget(("t",), "short", refresh_ttl=False) is not None
        assert await store.aget(("u",), "short") is None  # expired, not yet swept
        assert [r.key for r in await store.asearch(("u",))] == []
        assert await store.alist_namespaces() == [("t",)]  # ("u",) holds only expired items
        assert await store.sweep_ttl() == 1  # the expired item in ("u",): LangGraph's name
        s3 = await store.clients.client("s3")
        keys = [o["Key"] for o in (await s3.list_objects_v2(Bucket=store.bucket))["Contents"]]
        assert not any("/u/" in k for k in keys)
        await asyncio.sleep(1.6)  # now the refreshed one has expired too
        task = await store.start_ttl_sweeper(sweep_interval_minutes=0.005)
        for _ in range(50):
            if await store.aget(("t",), "long") is not None and not await _exists(
                store, ("t",), "short"
            ):
                break
            await asyncio.sleep(0.1)
        assert not await _exists(store, ("t",), "short")
        assert await store.stop_ttl_sweeper(timeout=5) and task.done()
        assert {r.key for r in await store.asearch(("t",))} == {"long", "forever"}


async def _exists(store: AsyncS3Store, ns: tuple[str, ...], key: str) -> bool:
    s3 = await store.clients.client("s3")
    resp = await s3.list_objects_v2(Bucket=store.bucket, Prefix=store.layout.store_item(ns, key))
    return bool(resp.get("Contents"))


def _bucket() -> dict[str, str]:
    return {"bucket": unique_names()["bucket"]}


async def test_lifecycle_rules_match_the_tags_and_keep_other_rules(s3_fresh: MotoServer) -> None:
    async with AsyncS3Store(endpoint_url=s3_fresh.url, **_bucket()) as store:
        s3 = await store.clients.client("s3")
        await s3.create_bucket(Bucket=store.bucket)
        theirs = {
            "ID": "their-own-rule",
            "Filter": {"Prefix": "logs/"},
            "Status": "Enabled",
            "Expiration": {"Days": 400},
        }
        await s3.put_bucket_lifecycle_configuration(
            Bucket=store.bucket, LifecycleConfiguration={"Rules": [theirs]}
        )
        await store.setup()
        await store.setup()  # idempotent
        rules = (await s3.get_bucket_lifecycle_configuration(Bucket=store.bucket))["Rules"]
        assert next(r for r in rules if r["ID"] == "their-own-rule")["Expiration"] == {"Days": 400}
        ours = {r["ID"]: r for r in rules if r["ID"].startswith("langgraph-s3-ttl-")}
        assert len(ours) == len(lifecycle_rules())
        await store.aput(("n",), "k", {"v": 1}, ttl=3 * 1440)  # three days
        await store.aput(("n",), "k2", {"v": 1}, ttl=5)
        tags = await s3.get_object_tagging(
            Bucket=store.bucket, Key=store.layout.store_item(("n",), "k")
        )
        (tag,) = tags["TagSet"]
        assert tag == {"Key": TTL_TAG, "Value": "3d"}
        rule = ours[f"langgraph-s3-ttl-{tag['Value']}"]
        assert rule["Filter"]["Tag"] == tag and rule["Expiration"]["Days"] == 3
        tags2 = await s3.get_object_tagging(
            Bucket=store.bucket, Key=store.layout.store_item(("n",), "k2")
        )
        assert tags2["TagSet"] == [{"Key": TTL_TAG, "Value": "1d"}]
    # a class never expires an item before its TTL
    for minutes in (1, 1440, 1441, 10 * 1440, 400 * 1440):
        cls = ttl_class(minutes)
        assert cls is not None and int(cls[:-1]) * 1440 >= minutes


# ------------------------------------------------------------- vectors
def embed(texts: Sequence[str]) -> list[list[float]]:
    """Deterministic bag-of-words vectors: no model, no download."""
    out = []
    for text in texts:
        vec = [0.0] * 16
        for word in text.lower().split():
            vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % 16] += 1.0
        out.append(vec)
    return out


async def test_vector_search_scores_are_cosine_similarities(s3_fresh: MotoServer) -> None:
    index = {"dims": 16, "embed": embed, "fields": ["text"]}
    async with AsyncS3Store(endpoint_url=s3_fresh.url, index=index, **_bucket()) as store:
        await store.setup()
        docs = {
            "a": "the cat sat on the mat",
            "b": "dogs chase cats in the park",
            "c": "stock markets fell sharply today",
        }
        for key, text in docs.items():
            await store.aput(("docs",), key, {"text": text, "len": len(text)})
        await store.aput(("docs",), "skip", {"text": "the cat"}, index=False)
        hits = await store.asearch(("docs",), query="cat on a mat", limit=10)
        assert hits[0].key == "a"
        q = embed(["cat on a mat"])[0]
        for hit in hits:
            if hit.key == "skip":
                assert hit.score is None  # not indexed: listed after the scored ones
                continue
            expected = _cos(q, embed([docs[hit.key]])[0])
            assert hit.score is not None and math.isclose(hit.score, expected, rel_tol=1e-5)
        assert hits[-1].key == "skip"
        filtered = await store.asearch(("docs",), query="cat", filter={"len": {"$gt": 25}})
        assert {h.key for h in filtered} == {"b", "c"}


def _cos(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


# -------------------------------------------------------- bulk reads
async def test_search_reads_segments_not_one_request_per_item(store: AsyncS3Store) -> None:
    # a bulk load (batches of puts) maintains its namespaces' segments itself
    await store.abatch([_put(("bulk", str(i % 4)), f"k{i}", {"i": i}) for i in range(400)])
    store.stats.reset()
    first = await store.asearch(("bulk",), limit=1000)
    assert len(first) == 400
    # listing of items + listing of segments, then the 4 namespace segments
    assert store.stats.snapshot()["by_operation"] == {"s3.ListObjectsV2": 2, "s3.GetObject": 4}
    # a changed and a deleted item are read from S3, never from the stale segment
    await store.aput(("bulk", "1"), "k1", {"i": -1})
    await store.adelete(("bulk", "2"), "k2")
    store.stats.reset()
    now = {r.key: r.value["i"] for r in await store.asearch(("bulk",), limit=1000)}
    assert now["k1"] == -1 and "k2" not in now and len(now) == 399
    # the changed item; the 4 segments, unchanged, were decoded by the first search
    assert store.stats.snapshot()["by_operation"]["s3.GetObject"] == 1
    assert await store.acompact(("bulk",)) == 399


async def test_a_search_over_1000_items_is_two_round_trips(store: AsyncS3Store) -> None:
    """A page of items beside the segments' listing, then the segment: 2 round trips
    (the listing is cut at keys the segment holds past a page: see the unit tier); 1 once
    the process decoded the segment at its ETag."""
    await store.abatch([_put(("k",), f"k{i:04d}", {"i": i}) for i in range(1000)])
    store.stats.reset()
    found = await store.asearch(("k",), filter={"i": {"$gte": 990}}, limit=100)
    assert sorted(r.value["i"] for r in found) == list(range(990, 1000))
    snap = store.stats.snapshot()
    assert snap["by_operation"] == {"s3.ListObjectsV2": 2, "s3.GetObject": 1}
    assert snap["round_trips"] == 2
    store.stats.reset()  # again: the segment, decoded, is not read again (1 round trip)
    again = await store.asearch(("k",), filter={"i": {"$gte": 990}}, limit=100)
    assert sorted(r.value["i"] for r in again) == list(range(990, 1000))
    snap = store.stats.snapshot()
    assert snap["by_operation"] == {"s3.ListObjectsV2": 2} and snap["round_trips"] == 1


async def test_items_put_one_by_one_are_compacted_by_the_first_search(
    store: AsyncS3Store,
) -> None:
    for i in range(60):  # single puts: one request each, no segment upkeep
        await store.aput(("users", str(i % 20)), "profile", {"i": i})
    store.stats.reset()
    assert len(await store.asearch(("users",), limit=100)) == 20
    cold = store.stats.snapshot()["by_operation"]
    assert cold["s3.GetObject"] == 20 and cold["s3.PutObject"] == 1  # compacted
    store.stats.reset()
    filtered = await store.asearch(("users",), filter={"i": {"$gte": 55}}, limit=100)
    assert sorted(r.value["i"] for r in filtered) == [55, 56, 57, 58, 59]
    # many small namespaces, one segment for the prefix searched
    assert store.stats.snapshot()["by_operation"] == {"s3.ListObjectsV2": 2, "s3.GetObject": 1}


def _put(ns: tuple[str, ...], key: str, value: dict[str, Any]) -> Any:
    from langgraph.store.base import PutOp

    return PutOp(ns, key, value)


async def test_get_and_put_request_counts(store: AsyncS3Store) -> None:
    store.stats.reset()
    await store.aput(("c",), "k", {"v": 1})
    assert store.stats.snapshot()["by_operation"] == {"s3.PutObject": 1}
    store.stats.reset()
    await store.aput(("c",), "k", {"v": 2})  # seen: one conditional PUT
    assert store.stats.snapshot()["by_operation"] == {"s3.PutObject": 1}
    store.stats.reset()
    assert (await store.aget(("c",), "k")) is not None
    assert store.stats.snapshot()["by_operation"] == {"s3.GetObject": 1}


# --------------------------------------------------------------- sync
def test_sync_store(s3_fresh: MotoServer) -> None:
    with S3Store.from_conn_string(
        f"s3://{unique_names()['bucket']}/p?endpoint_url={s3_fresh.url}", ttl={"default_ttl": 60}
    ) as store:
        store.setup()
        store.put(("s",), "k", {"v": 1})
        item = store.get(("s",), "k")
        assert item is not None and item.value == {"v": 1}
        assert [r.key for r in store.search(("s",))] == ["k"]
        assert store.list_namespaces() == [("s",)]
        assert store.sweep_ttl() == 0 and store.sweep() == 0  # blocking, and its old name
        store.delete(("s",), "k")
        assert store.get(("s",), "k") is None
    with pytest.raises(ConfigurationError, match="the saver's"):  # a metadata key
        S3Store.from_conn_string("s3://bucket?table=tab&subjects=user_id").__enter__()


# -------------------------------------------------------------- graph
async def test_graph_uses_the_store_across_threads(s3_fresh: MotoServer) -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.runtime import Runtime

    async def remember(state: MessagesState, runtime: Runtime[Any]) -> dict[str, Any]:
        assert runtime.store is not None
        text = str(state["messages"][-1].content)
        ns = ("memories", "user-1")
        if text.startswith("remember "):
            await runtime.store.aput(ns, f"m{len(text)}", {"fact": text[9:]})
            return {"messages": [("ai", "noted")]}
        facts = sorted(i.value["fact"] for i in await runtime.store.asearch(ns))
        return {"messages": [("ai", "; ".join(facts))]}

    builder = StateGraph(MessagesState)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    async with AsyncS3Store(endpoint_url=s3_fresh.url, **_bucket()) as store:
        await store.setup()
        graph = builder.compile(checkpointer=InMemorySaver(), store=store)
        t1 = {"configurable": {"thread_id": "one"}}
        t2 = {"configurable": {"thread_id": "two"}}
        await graph.ainvoke({"messages": [("user", "remember I like tea")]}, t1)
        await graph.ainvoke({"messages": [("user", "remember my cat is Miso")]}, t1)
        out = await graph.ainvoke({"messages": [("user", "what do you know?")]}, t2)
    assert out["messages"][-1].content == "I like tea; my cat is Miso"


async def test_async_embedding_function_and_per_put_fields(s3_fresh: MotoServer) -> None:
    calls: list[int] = []

    async def aembed(texts: Sequence[str]) -> list[list[float]]:
        calls.append(len(texts))  # one call per batch of puts
        return embed(texts)

    index = {"dims": 16, "embed": aembed, "fields": ["title"]}
    async with AsyncS3Store(endpoint_url=s3_fresh.url, index=index, **_bucket()) as store:
        await store.setup()
        await store.abatch(
            [
                _put(("n",), "a", {"title": "tea time", "body": "oslo rain"}),
                _put(("n",), "b", {"title": "fjord boat", "body": "tea tea tea"}),
            ]
        )
        assert calls == [2]
        await store.aput(("n",), "c", {"title": "x", "body": "tea party"}, index=["body"])
        hits = await store.asearch(("n",), query="tea", limit=3)
        assert {h.key for h in hits[:2]} == {"a", "c"}  # b's body was not indexed
        assert hits[2].key == "b" and hits[2].score is not None and hits[2].score < hits[1].score
