"""The object store contract: the same assertions on ``ObjectStore`` (moto) and on
``MemoryObjectStore``, requests per operation included."""

from __future__ import annotations

import hashlib
import math
import random
import time
from typing import Any

import pytest
from unit_helpers import Backend, counts, reset

from langgraph_s3.aws.s3 import ObjectStore
from langgraph_s3.core.keys import ERASURE_MARKER
from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.core.put_mode import CREATE, Update
from langgraph_s3.core.records import Lifecycle
from langgraph_s3.errors import MissingResourceError, NotFoundError
from langgraph_s3.testing import unique_names
from langgraph_s3.testing.fakes import MemoryObjectStore

pytestmark = pytest.mark.unit


def md5(body: bytes) -> str:
    return f'"{hashlib.md5(body).hexdigest()}"'


async def test_a_missing_bucket_until_created(backend: Backend) -> None:
    store = backend.store()
    assert await store.bucket_exists() is False
    for call in (
        store.get("k"),
        store.put("k", b"x"),
        store.list_all(""),
        store.delete(["k"]),
        store.delete_if_match("k", md5(b"x")),
        store.lifecycle(),
    ):
        with pytest.raises(MissingResourceError):
            await call
    await store.create_bucket()
    await store.create_bucket()  # again: fine
    assert await store.bucket_exists() is True
    assert await store.lifecycle() == Lifecycle()


async def test_lifecycle_rules_round_trip(store: ObjectStorePort) -> None:
    rules: list[dict[str, Any]] = [
        {"ID": "r1", "Status": "Enabled", "Filter": {"Prefix": "p/"}, "Expiration": {"Days": 3}},
        {
            "ID": "r2",
            "Status": "Enabled",
            "Filter": {"Tag": {"Key": "ttl", "Value": "1d"}},
            "Expiration": {"Days": 1},
        },
    ]
    await store.set_lifecycle(Lifecycle(rules, "varies_by_storage_class"))
    got = await store.lifecycle()
    assert got.rules == rules and got.minimum_object_size == "varies_by_storage_class"
    assert counts(store) == {
        "s3.PutBucketLifecycleConfiguration": 1,
        "s3.GetBucketLifecycleConfiguration": 1,
    }


async def test_conditional_puts(store: ObjectStorePort) -> None:
    assert await store.put("k", b"one") == md5(b"one")
    # If-None-Match: * on an existing key fails and leaves it as it was
    assert await store.put("k", b"two", mode=CREATE) is None
    assert await store.get_with_etag("k") == (b"one", md5(b"one"))
    # If-Match: another ETag fails; a missing key (404) fails too and creates nothing
    assert await store.put("k", b"two", mode=Update(md5(b"other"))) is None
    assert await store.put("nokey", b"two", mode=Update(md5(b"two"))) is None
    assert await store.get("nokey") is None
    # the right ETag wins; an unconditional put always does
    assert await store.put("k", b"two", mode=Update(md5(b"one"))) == md5(b"two")
    assert await store.put("k", b"three") == md5(b"three")
    assert await store.put("new", b"x", mode=CREATE) == md5(b"x")
    assert await store.get("k") == b"three"
    assert await store.get_with_etag("gone") == (None, None)
    assert counts(store) == {"s3.PutObject": 7, "s3.GetObject": 4}


async def test_deletes(store: ObjectStorePort) -> None:
    assert await store.delete([]) == 0  # no request
    for key in ("a", "b", "c"):
        await store.put(key, key.encode())
    assert await store.delete(["a", "missing"]) == 2  # a missing key is no error
    assert await store.get("a") is None
    assert await store.delete_if_match("b", md5(b"other")) is False
    assert await store.delete_if_match("missing", md5(b"b")) is True  # S3: 204, gone
    assert await store.get("b") == b"b"
    assert await store.delete_if_match("b", md5(b"b")) is True
    assert await store.get("b") is None
    assert [o.key for o in await store.list_all("")] == ["c"]
    assert counts(store) == {
        "s3.PutObject": 3,
        "s3.DeleteObjects": 1,
        "s3.DeleteObject": 3,
        "s3.GetObject": 3,
        "s3.ListObjectsV2": 1,
    }


async def test_deletes_go_in_batches_of_1000(store: ObjectStorePort) -> None:
    keys = [f"k/{i:05}" for i in range(1001)]
    assert await store.delete(keys) == 1001
    assert counts(store) == {"s3.DeleteObjects": 2}


async def test_copy(store: ObjectStorePort) -> None:
    await store.put("src", b"body")
    await store.copy("src", "dst")
    assert await store.get_with_etag("dst") == (b"body", md5(b"body"))
    with pytest.raises(NotFoundError):
        await store.copy("missing", "dst2")
    assert await store.get("dst2") is None


async def test_a_copy_of_the_version_a_listing_showed(store: ObjectStorePort) -> None:
    """``if_match``: the source is copied only while it is the version listed (S3's
    x-amz-copy-source-if-match, which moto ignores and the test server enforces); one
    replaced since (an erasure marker, say) is a NotFoundError and nothing is written."""
    listed = await store.put("src", b"first")
    assert listed is not None
    await store.copy("src", "dst", if_match=listed)
    assert await store.get("dst") == b"first"
    await store.put("src", b"replaced since the listing")
    with pytest.raises(NotFoundError):
        await store.copy("src", "dst2", if_match=listed)
    assert await store.get("dst2") is None
    with pytest.raises(NotFoundError):
        await store.copy("missing", "dst3", if_match=listed)
    assert await store.get("dst3") is None


async def test_get_many_keeps_order_and_reports_missing_keys(store: ObjectStorePort) -> None:
    await store.put("a", b"A")
    await store.put("c", b"C")
    reset(store)
    assert await store.get_many(["c", "b", "a", "c"]) == [b"C", None, b"A", b"C"]
    assert counts(store) == {"s3.GetObject": 4}


async def test_cache_of_immutable_objects(backend: Backend) -> None:
    store = backend.store(cache_bytes=1 << 20)
    await store.create_bucket()
    assert store.cache is not None
    await store.put("imm", b"x" * 100, cache=True)
    await store.put("plain", b"y")
    reset(store)
    assert await store.get("imm", cache=True) == b"x" * 100  # a hit: no request
    assert await store.get("plain", cache=True) == b"y"  # a miss, then cached
    assert await store.get("plain", cache=True) == b"y"
    assert await store.get("imm") == b"x" * 100  # cache=False: always a request
    assert counts(store) == {"s3.GetObject": 2}
    await store.delete(["imm"])  # evicted
    assert await store.get("imm", cache=True) is None
    # an erasure marker is never cached (a new life's write replaces it), and a write
    # of a key replaces what was cached of it
    await store.put("marked", ERASURE_MARKER)
    assert await store.get("marked", cache=True) == ERASURE_MARKER
    await store.put("marked", b"a new life's checkpoint")
    assert await store.get("marked", cache=True) == b"a new life's checkpoint"
    await store.put("marked", b"replaced again")
    assert await store.get("marked", cache=True) == b"replaced again"


KEYS = [
    "o",
    "p",
    "p/",
    "p/0",
    "p/B",
    "p/Z",
    "p/a",
    "p/a b",
    "p/a-",
    "p/a/b",
    "p/a/c",
    "p/~x",
    "p/é",
    "p/日本",
    "q",
]


async def test_listing_order_start_after_and_pages(store: ObjectStorePort) -> None:
    etags = {}
    before = time.time()
    for key in random.Random(1).sample(KEYS, len(KEYS)):
        etags[key] = await store.put(key, key.encode())
    after = time.time()
    # ascending UTF-8 byte order (which is code point order)
    by_bytes = sorted(KEYS, key=lambda k: k.encode())
    cases = [
        (prefix, start_after, page_size)
        for page_size in (1, 1000)
        for start_after in (None, "p", "p/a", "p/a/", "p/zz")
        for prefix in ("p/", "x/")
    ] + [("p/a", start, 2) for start in ("", "o", "p/", "p/a/b", "q")]
    for prefix, start_after, page_size in cases:
        reset(store)
        pages = [
            p async for p in store.list_pages(prefix, start_after=start_after, page_size=page_size)
        ]
        # ObjectStore sends StartAfter only when it sorts after the prefix
        cut = start_after if start_after is not None and start_after > prefix else None
        want = [k for k in by_bytes if k.startswith(prefix) and (cut is None or k > cut)]
        got = [o.key for p in pages for o in p]
        assert got == want, (prefix, start_after, page_size)
        assert [len(p) for p in pages[:-1]] == [page_size] * (len(pages) - 1)
        assert all(0 < len(p) <= page_size for p in pages)
        # one request per page; a listing with nothing to list is one request too
        assert counts(store) == {"s3.ListObjectsV2": max(1, math.ceil(len(want) / page_size))}
        for listed in (o for p in pages for o in p):
            assert listed.etag == etags[listed.key]
            assert listed.modified == int(listed.modified)  # whole seconds, as S3 lists
            assert int(before) - 1 <= listed.modified <= after + 1
    assert [o.key for o in await store.list_all("p/", start_after="p/a")] == [
        k for k in by_bytes if k.startswith("p/") and k > "p/a"
    ]


async def test_a_listing_sees_keys_written_between_its_pages(store: ObjectStorePort) -> None:
    for key in ("k/1", "k/3"):
        await store.put(key, b"")
    pages = store.list_pages("k/", page_size=1)
    first = await pages.__anext__()
    await store.put("k/2", b"")  # after the last key listed: the next page has it
    await store.put("k/0", b"")  # before it: never listed
    rest = [o.key async for p in pages for o in p]
    assert [o.key for o in first] == ["k/1"]
    assert rest == ["k/2", "k/3"]


async def test_the_same_random_script_gives_the_same_answers(
    s3_endpoint: Any,
) -> None:
    """Differential: one seeded script of conditional writes, copies, deletes and
    listings on both kinds; every answer (ETags included) must be the same."""
    answers = {}
    names = unique_names()  # the same names on both: the same keys
    for kind in ("memory", "moto"):
        backend = Backend(kind, s3_endpoint.url, names)
        try:
            store = backend.store()
            assert isinstance(store, MemoryObjectStore if kind == "memory" else ObjectStore)
            await store.create_bucket()
            answers[kind] = await random_script(store, random.Random(7), 60)
            answers[kind].append(counts(store))
        finally:
            await backend.aclose()
    assert answers["memory"] == answers["moto"]


async def random_script(store: ObjectStorePort, rng: random.Random, n: int) -> list[Any]:
    keys = [f"d/{a}{b}" for a in "xy" for b in "0123"]
    bodies = [b"", b"a", b"b", b"ccc"]
    out: list[Any] = []
    for _ in range(n):
        op = rng.choice(["put", "put_inm", "put_im", "get", "copy", "delete", "dim", "list"])
        key = rng.choice(keys)
        try:
            if op == "put":
                out.append(await store.put(key, rng.choice(bodies)))
            elif op == "put_inm":
                out.append(await store.put(key, rng.choice(bodies), mode=CREATE))
            elif op == "put_im":
                etag = md5(rng.choice(bodies))
                out.append(await store.put(key, rng.choice(bodies), mode=Update(etag)))
            elif op == "get":
                out.append(await store.get_with_etag(key))
            elif op == "copy":
                out.append(await store.copy(key, rng.choice(keys)))
            elif op == "delete":
                out.append(await store.delete(rng.sample(keys, 2)))
            elif op == "dim":
                out.append(await store.delete_if_match(key, md5(rng.choice(bodies))))
            else:
                size = rng.choice([1, 2, 5])
                start = rng.choice([None, "d/", "d/x2", "d/y"])
                out.append(
                    [
                        [(o.key, o.etag) for o in p]
                        async for p in store.list_pages("d/", start_after=start, page_size=size)
                    ]
                )
        except Exception as exc:
            out.append(type(exc).__name__)
    return out
