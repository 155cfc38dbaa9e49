"""The object manifest's own parts (``manifest="s3"``): its keys, its versions, its
transactions' intents, and the saver on it in memory (what the contract tests do not
say: how it finds an item's newest version, and who settles a stranded intent)."""

from __future__ import annotations

import asyncio
import random
import string
from typing import Any

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.errors import InvalidIdError
from langgraph_s3.manifest import TTL_ATTRIBUTE
from langgraph_s3.manifest.conditions import Absent, Change, N, S, TxCheck, TxPut, TxUpdate, eq
from langgraph_s3.manifest.objects import ObjectTable, keys
from langgraph_s3.manifest.objects import heads as heads_module
from langgraph_s3.manifest.objects.codec import DEAD_MAX, Intent, Version, decode, encode
from langgraph_s3.testing.fakes import MemoryBucket, MemoryObjectStore, memory_saver
from langgraph_s3.testing.graphs import CHAT_TURNS, chat_graph

pytestmark = pytest.mark.unit


def key(sk: str = "r", pk: str = "d/t") -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


async def table_on(bucket: MemoryBucket | None = None) -> ObjectTable:
    store = MemoryObjectStore(bucket or MemoryBucket("bkt"), concurrency=8)
    table = ObjectTable(store, "p/manifest/")
    await table.create(ttl_attribute=TTL_ATTRIBUTE)
    return table


def cfg(thread: str, cid: str | None = None) -> Any:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if cid:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


# ------------------------------------------------------------------ keys
def test_the_escape_keeps_order_and_prefixes_in_characters_above_the_slash() -> None:
    rng = random.Random(5)
    alphabet = "/-._~0" + string.ascii_letters[:6] + "é"
    words = {"", "0", "00", "/"} | {
        "".join(rng.choice(alphabet) for _ in range(rng.randrange(6))) for _ in range(400)
    }
    for a in words:
        code = keys.escape(a)
        assert keys.unescape(code) == a
        assert all(ch > "/" for ch in code)
        for b in words:
            # order kept (what a listing in binary order returns), and prefixes too
            assert (keys.escape(a) < keys.escape(b)) == (a < b)
            if a:
                assert keys.escape(b).startswith(code) == b.startswith(a)


def test_a_listing_that_goes_directory_by_directory_lists_in_key_order() -> None:
    """SeaweedFS lists ``o/a/…`` before ``o/a!/…`` (a directory's entries, then the
    next name): with every character of a part above ``/``, that is binary order."""
    pks = ["a", "a!", "a-b", "a.b", "a/b", "ab"]
    items = sorted(keys.item_prefix("m/", "", pk, "r") for pk in pks)

    def by_directory(key: str) -> list[str]:
        return key.split("/")

    assert sorted(items, key=by_directory) == items
    assert [keys.split("m/", "", i + "ffffffffffff") for i in items] == [
        (pk, "r", 0) for pk in sorted(pks)
    ]


def test_a_key_past_s3s_limit_is_refused_up_front() -> None:
    with pytest.raises(InvalidIdError, match="1024 bytes"):
        keys.item_prefix("m/", "", "d/" + "-" * 300, "r")
    with pytest.raises(InvalidIdError, match="one deployment"):
        keys.item_prefix("m/", "mine/", "theirs/t", "r")


def test_a_deleted_items_version_is_told_by_its_size() -> None:
    dead = encode(Version(7, None, "0123456789abcdef"))
    tiny = encode(Version(7, {"pk": {"S": "a"}}, "0123456789abcdef"))
    pending = encode(Version(8, None, "t", Intent("x" * 32, None, None, True)))
    assert len(dead) <= DEAD_MAX < min(len(tiny), len(pending))
    assert decode(pending, "k").intent == Intent("x" * 32, None, None, True)


# ------------------------------------------------------------------ versions
async def test_a_cached_item_is_read_in_one_get_and_a_cold_one_in_a_list_and_a_get() -> None:
    bucket = MemoryBucket("bkt")
    table = await table_on(bucket)
    for n in range(30):
        await table.put({**key(), "n": N(n)})
    table.store.stats.reset()  # type: ignore[attr-defined]
    assert (await table.get(key()) or {})["n"] == N(29)
    assert dict(table.store.stats.by_operation) == {"s3.GetObject": 1}  # type: ignore[attr-defined]
    cold = ObjectTable(MemoryObjectStore(bucket, concurrency=8), "p/manifest/")
    assert (await cold.get(key()) or {})["n"] == N(29)  # 30 versions: still 2 requests
    assert dict(cold.store.stats.by_operation) == {  # type: ignore[attr-defined]
        "s3.GetObject": 2,  # the format marker (once), the newest version
        "s3.ListObjectsV2": 1,
    }


async def test_a_copy_behind_follows_the_versions_it_missed() -> None:
    bucket = MemoryBucket("bkt")
    a, b = await table_on(bucket), await table_on(bucket)
    await a.put({**key(), "n": N(0)})
    assert (await b.get(key()) or {})["n"] == N(0)
    for n in range(1, 3):
        await a.update(key(), Change({"n": N(n)}))
    # b's copy is 2 behind: its write's base is stale, its PUT lost, read, retried
    await b.update(key(), Change(add={"n": N(10)}), when=eq("n", N(2)))
    assert (await a.get(key()) or {})["n"] == N(12)


async def test_a_lost_answer_is_known_by_the_writers_token() -> None:
    table = await table_on()
    await table.put({**key(), "n": N(1)})
    real = table.store.put

    async def applied_but_lost(k: str, body: bytes, **kw: Any) -> Any:
        await real(k, body, **kw)
        return None  # as if 412: the retry found its own version there

    table.store.put = applied_but_lost  # type: ignore[method-assign]
    await table.update(key(), Change(add={"n": N(1)}))
    table.store.put = real  # type: ignore[method-assign]
    fresh = await table_on(table.store.data)  # type: ignore[attr-defined]
    assert (await fresh.get(key()) or {})["n"] == N(2)  # applied once


async def test_a_stranded_intent_is_waited_for_then_aborted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A committer that wrote its intents and froze: a reader waits (``INTENT_WAIT``),
    then aborts it; the committer, thawed, finds its transaction aborted and its
    caller's retry writes it anew."""
    monkeypatch.setattr(heads_module, "INTENT_WAIT", 0.05)
    bucket = MemoryBucket("bkt")
    table = await table_on(bucket)
    await table.put({**key("root"), "rev": N(1)})
    await table.put({**key("a"), "v": S("before")})
    prefix = table._prefix(key("a"))
    head = await table.versions.head(prefix)
    stranded = Intent("tx" * 16, head.image, {**key("a"), "v": S("after")}, multi=True)
    assert await table.versions.create(
        prefix, Version(head.seq + 1, None, "t", stranded), head.basis
    )
    other = await table_on(bucket)
    assert (await other.get(key("a")) or {})["v"] == S("before")  # aborted: its pre
    assert await table.versions.decide("tx" * 16, heads_module.COMMITTED, head.basis) == b"abort"
    # and a transaction through it commits
    await other.transact(
        [TxCheck(key("root"), eq("rev", N(1))), TxPut({**key("a"), "v": S("new")}), TxPut(key("b"))]
    )
    assert (await table.get(key("a")) or {})["v"] == S("new")


async def test_a_reader_waits_for_a_pending_commit_rather_than_read_around_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(heads_module, "INTENT_WAIT", 5.0)
    bucket = MemoryBucket("bkt")
    table = await table_on(bucket)
    await table.put({**key("a"), "v": S("before")})
    prefix = table._prefix(key("a"))
    head = await table.versions.head(prefix)
    pending = Intent("tx" * 16, head.image, {**key("a"), "v": S("after")}, multi=True)
    await table.versions.create(prefix, Version(head.seq + 1, None, "t", pending), head.basis)
    reader = asyncio.ensure_future((await table_on(bucket)).get(key("a")))
    await asyncio.sleep(0.1)
    assert not reader.done()  # neither before nor after: it waits
    await table.versions.decide("tx" * 16, heads_module.COMMITTED, head.basis)
    assert ((await asyncio.wait_for(reader, 2)) or {})["v"] == S("after")


async def test_racing_transactions_each_apply_whole_or_not_at_all() -> None:
    bucket = MemoryBucket("bkt")
    tables = [await table_on(bucket) for _ in range(6)]
    await tables[0].put({**key("n"), "total": N(0)})

    async def move(t: ObjectTable, i: int) -> None:
        item = await t.get(key("n"))
        assert item is not None
        await t.transact(
            [
                TxUpdate(key("n"), Change(add={"total": N(1)}), when=eq("total", item["total"])),
                TxPut({**key(f"x{i}"), "by": N(i)}),
            ]
        )

    async def until_done(t: ObjectTable, i: int) -> None:
        while True:
            try:
                return await move(t, i)
            except Exception as exc:  # a lost condition: read again, as the rules do
                assert "ConditionalCheckFailed" in str(exc), exc

    await asyncio.gather(*(until_done(t, i) for i, t in enumerate(tables)))
    assert (await tables[0].get(key("n")) or {})["total"] == N(6)
    assert len([i async for page in tables[1].query("d/t") for i in page]) == 7


# ------------------------------------------------------------------ the saver
async def test_32_forks_at_once_all_commit_on_the_bucket_alone() -> None:
    bucket = MemoryBucket("bkt")
    savers = [memory_saver(bucket=bucket, manifest="s3") for _ in range(32)]
    await savers[0].setup()
    root = await savers[0].aput(cfg("t"), generate_checkpoint(), generate_metadata(step=0), {})
    cps = [
        generate_checkpoint(channel_values={"a": i}, channel_versions={"a": 100 + i})
        for i in range(32)
    ]
    await asyncio.gather(
        *(
            s.aput(root, cp, generate_metadata(step=1), {"a": 100 + i})
            for i, (s, cp) in enumerate(zip(savers, cps, strict=True))
        )
    )
    e = await savers[5].manifest.reads.latest("t", "")
    assert e is not None and e.tips - {root["configurable"]["checkpoint_id"]} == {
        cp["id"] for cp in cps
    }
    assert len([t async for t in savers[9].alist(cfg("t"))]) == 33


async def _second_turn(kind: str) -> tuple[dict[str, int], int]:
    """A warm tool turn's requests and round trips (async nodes: one order every run)."""
    saver = memory_saver(manifest=kind)
    await saver.setup()
    graph = chat_graph(async_nodes=True).compile(checkpointer=saver)
    await graph.ainvoke({"messages": [("user", CHAT_TURNS[0])]}, cfg("t"))
    saver.stats.reset()
    await graph.ainvoke({"messages": [("user", CHAT_TURNS[1])]}, cfg("t"))
    return dict(saver.stats.by_operation), int(saver.stats.snapshot()["round_trips"])


async def test_a_chat_turn_on_the_bucket_waits_as_many_round_trips_as_on_dynamodb() -> None:
    """A warm chat turn: the writes a turn makes to its thread's item at once go out as
    one version each (``writes.py``), so no PUT loses to its own process's: as many
    round trips as DynamoDB's UpdateItems take, in fewer requests."""
    on_table, table_trips = await _second_turn("dynamodb")
    on_bucket, bucket_trips = await _second_turn("s3")
    assert on_table["dynamodb.UpdateItem"] == 9 and on_table["dynamodb.GetItem"] == 1
    # the bucket's: its manifest's versions beside the same checkpoints' PUTs, 9 writes
    # grouped into 5
    assert set(on_bucket) <= {"s3.GetObject", "s3.PutObject"}, on_bucket
    writes = on_table["dynamodb.UpdateItem"] + on_table["s3.PutObject"]
    assert on_bucket["s3.PutObject"] <= writes - 4, (on_bucket, on_table)
    assert bucket_trips == table_trips == 7
    assert [await _second_turn("s3") for _ in range(3)] == [(on_bucket, bucket_trips)] * 3


async def test_the_conformance_suite_passes_on_the_bucket_alone_in_memory() -> None:
    @checkpointer_test(name="AsyncS3Saver, manifest in the bucket, in memory")
    async def factory() -> Any:
        saver = memory_saver(manifest="s3")
        await saver.setup()
        yield saver

    report = await validate(factory)
    failures = {cap: r.failures for cap, r in report.results.items() if r.failures}
    assert not failures, failures
    assert sum(r.tests_passed for r in report.results.values()) == 81


def test_table_and_manifest_s3_together_are_refused() -> None:
    from langgraph_s3.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="takes no table"):
        AsyncS3Saver.from_url("s3://bucket/p?manifest=s3&table=tab")
    with pytest.raises(ConfigurationError, match="not a manifest kind"):
        AsyncS3Saver.from_url("s3://bucket/p?manifest=dynamo")
    with pytest.raises(ConfigurationError, match="takes no table"):
        AsyncS3Saver(bucket="bucket", manifest="s3", table="tab")
    saver = AsyncS3Saver.from_url("s3://bucket/p?manifest=s3")
    assert saver.target.manifest == "s3" and saver.target.table is None


# ------------------------------------------------------------------ the fence and GC
def test_only_versions_whose_successor_is_an_hour_old_are_freed() -> None:
    from langgraph_s3.core.records import Listed
    from langgraph_s3.manifest.objects.gc import freeable

    at = [10_000.0, 9_000.0, 5_000.0, 4_000.0, 100.0]  # newest first, LastModified
    versions = [Listed(f"i/x/{n}", modified=t) for n, t in enumerate(at)]
    # now is the newest's: v1 (9,000) is 1,000 s old, v2 (5,000) 5,000 s: only what
    # follows a version an hour old goes, never the newest
    assert freeable(versions) == ["i/x/3", "i/x/4"]
    assert freeable(versions[:1]) == []


async def test_a_write_built_on_an_old_read_is_not_sent() -> None:
    import time

    from langgraph_s3.errors import StaleBasisError

    table = await table_on()
    await table.put({**key(), "n": N(1)})
    prefix = table._prefix(key())
    head = await table.versions.head(prefix)
    table.store.stats.reset()  # type: ignore[attr-defined]
    with pytest.raises(StaleBasisError):  # a Lambda frozen for 7 minutes after its read
        await table.versions.create(
            prefix, Version(head.seq + 1, {**key(), "n": N(9)}, "t"), time.monotonic() - 420
        )
    assert "s3.PutObject" not in table.store.stats.by_operation  # type: ignore[attr-defined]
    # the table's own write, on a copy cached 7 minutes ago: read again, then written
    old = heads_module.Head(head.seq, head.image, None, time.monotonic() - 420, head.token)
    table.versions.remember(prefix, old, 64)
    table.versions._cache[prefix] = (old, 64)
    await table.update(key(), Change(add={"n": N(1)}))
    assert (await (await table_on(table.store.data)).get(key()) or {})["n"] == N(2)  # type: ignore[attr-defined]


async def test_the_writer_of_every_16th_version_frees_what_an_hour_superseded() -> None:
    from langgraph_s3.core.tasks import BACKGROUND_TASK

    now = [1_000_000.0]
    bucket = MemoryBucket("bkt", clock=lambda: now[0])
    table = await table_on(bucket)
    prefix = table._prefix(key())

    async def versions() -> int:
        for task in [t for t in asyncio.all_tasks() if t.get_name() == BACKGROUND_TASK]:
            await task
        return len(await table.store.list_all(prefix))

    for n in range(15):  # versions 0..14, a minute apart
        await table.put({**key(), "n": N(n)})
        now[0] += 60
    assert await versions() == 15
    now[0] += 2 * 3600
    await table.put({**key(), "n": N(15)})  # the 16th: v0..v13 have successors an hour old
    assert await versions() == 2  # v14 (its successor is new) and v15
    assert (await (await table_on(bucket)).get(key()) or {})["n"] == N(15)
    for n in range(16, 40):
        await table.put({**key(), "n": N(n)})
    now[0] += 2 * 3600
    assert await table.collect() == 25  # the sweep's part: all but the newest
    assert await versions() == 1
    assert (await (await table_on(bucket)).get(key()) or {})["n"] == N(39)


def test_an_express_one_zone_bucket_is_refused_for_the_manifest() -> None:
    from langgraph_s3.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="Express One Zone"):
        AsyncS3Saver(bucket="agents--use1-az4--x-s3", manifest="s3")
    AsyncS3Saver(bucket="agents--use1-az4--x-s3")  # its manifest in DynamoDB: fine


async def test_setup_refuses_a_store_where_two_racing_creates_both_win() -> None:
    from langgraph_s3.aws.probes import check_racing_creates
    from langgraph_s3.core.put_mode import Create
    from langgraph_s3.errors import ConditionsIgnoredError

    honest = MemoryObjectStore(MemoryBucket("bkt"), concurrency=8)
    await check_racing_creates(honest, "p/")  # exactly one of 8 won
    assert await honest.list_all("p/") == []  # and the scratch key is gone

    class Sloppy(MemoryObjectStore):
        """Checks If-None-Match after the write lands: racers all win."""

        async def put(self, key: str, body: bytes, **kw: Any) -> str | None:
            if isinstance(kw.get("mode"), Create):
                await asyncio.sleep(0)
                kw = {**kw, "mode": None}
            return await super().put(key, body, **kw)

    with pytest.raises(ConditionsIgnoredError, match="8 of 8 racing"):
        await check_racing_creates(Sloppy(MemoryBucket("bkt"), concurrency=8), "p/")


# ------------------------------------------------------------------ grouped writes
class _HeldPuts(MemoryObjectStore):
    """Each PUT of a version waits for its gate before it reaches the bucket (on the
    wire); a caller that gives up does not stop it (the request was sent)."""

    def __init__(self, bucket: MemoryBucket) -> None:
        super().__init__(bucket, concurrency=8)
        self.gates: list[asyncio.Event] = []
        self.sent = 0

    async def put(self, key: str, body: bytes, **kw: Any) -> str | None:
        if "/i/" not in key or not self.gates:
            return await super().put(key, body, **kw)
        gate = self.gates.pop(0)
        self.sent += 1

        async def on_the_wire() -> str | None:
            await gate.wait()
            return await MemoryObjectStore.put(self, key, body, **kw)

        return await asyncio.shield(asyncio.ensure_future(on_the_wire()))


async def _turns(n: int = 50) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_a_cancelled_leaders_put_on_the_wire_is_waited_for_never_sent_twice() -> None:
    """A leader's PUT carries its write and another's; the leader is cancelled with it
    on the wire. The next leader waits for that PUT (it lands: both writes applied once),
    and sends nothing of its own meanwhile."""
    store = _HeldPuts(MemoryBucket("bkt"))
    table = ObjectTable(store, "p/manifest/")
    await table.create(ttl_attribute=TTL_ATTRIBUTE)
    await table.put({**key(), "n": N(0)})
    gate = asyncio.Event()
    store.gates = [gate, asyncio.Event()]
    first = asyncio.ensure_future(table.update(key(), Change(add={"n": N(1)})))
    second = asyncio.ensure_future(table.update(key(), Change(add={"n": N(10)})))
    await _turns()
    first.cancel()
    await _turns()
    assert store.sent == 1 and not second.done()  # the second waits for the first's PUT
    gate.set()
    await asyncio.wait_for(second, 5)
    fresh = ObjectTable(MemoryObjectStore(store.data, concurrency=8), "p/manifest/")
    assert (await fresh.get(key()) or {})["n"] == N(11)  # each write once
    assert store.sent == 1


async def test_every_write_a_landed_group_carried_is_answered_whoever_is_cancelled() -> None:
    """Writes grouped under a leader that is cancelled, then under a second that is
    cancelled too: each of the others returns, and every write is applied once."""
    store = _HeldPuts(MemoryBucket("bkt"))
    table = ObjectTable(store, "p/manifest/")
    await table.create(ttl_attribute=TTL_ATTRIBUTE)
    await table.put({**key(), "n": N(0)})
    gates = [asyncio.Event(), asyncio.Event()]
    store.gates = list(gates)

    def add() -> asyncio.Future[Any]:
        return asyncio.ensure_future(table.update(key(), Change(add={"n": N(1)})))

    l1, w2, w5 = add(), add(), add()
    await _turns()
    w3 = add()  # joins the next group
    await _turns()
    l1.cancel()
    await _turns()
    gates[0].set()  # the first group's PUT lands: l1, w2, w5 applied
    await _turns()
    assert w5.done() and not w5.cancelled() and w5.exception() is None
    w2.cancel()  # the second leader, with w3's PUT on the wire
    await _turns()
    gates[1].set()
    await asyncio.wait_for(w3, 5)
    fresh = ObjectTable(MemoryObjectStore(store.data, concurrency=8), "p/manifest/")
    assert (await fresh.get(key()) or {})["n"] == N(4)


async def test_answers_decided_on_a_cached_copy_are_read_again_first() -> None:
    """A delete of what this process saw absent, an ADD onto what it saw as a string:
    both read the item before answering (another process changed it)."""
    bucket = MemoryBucket("bkt")
    a, b = await table_on(bucket), await table_on(bucket)
    assert await a.get(key()) is None
    await b.put({**key(), "n": N(1)})
    await a.delete(key())  # not a no-op: the item is there now
    assert await b.get(key()) is None
    await a.put({**key(), "n": S("one")})
    await b.put({**key(), "n": N(1)})  # b makes it a number
    await a.update(key(), Change(add={"n": N(1)}))  # a's copy says a string
    await a.transact([TxUpdate(key(), Change(add={"n": N(1)})), TxPut(key("other"))])
    assert (await b.get(key()) or {})["n"] == N(3)
    await a.transact([TxCheck(key(), eq("n", N(3))), TxCheck(key("other"), Absent("x"))])


async def test_a_version_erased_under_a_reader_is_read_past_never_taken_for_a_deletion() -> None:
    """A cold reader lists an item (newest v1), then v2 is written and v1 erased before
    its GET of v1 arrives: it lists again and reads v2, never "absent"."""

    class SlowGets(MemoryObjectStore):
        gate: asyncio.Event | None = None

        async def get(self, key_: str, *, cache: bool = False) -> bytes | None:
            if self.gate is not None and "/i/" in key_:
                await self.gate.wait()
            return await super().get(key_, cache=cache)

    bucket = MemoryBucket("bkt")
    writer = await table_on(bucket)
    await writer.put({**key(), "state": S("live"), "wrapped": S("secret")})
    await writer.update(key(), Change({"state": S("forgetting")}))
    slow = SlowGets(bucket, concurrency=8)
    reader = ObjectTable(slow, "p/manifest/")
    slow.gate = asyncio.Event()
    got = asyncio.ensure_future(reader.get(key()))
    await _turns()
    await writer.update(key(), Change({"state": S("forgotten")}, remove=("wrapped",)))
    await writer.erase_history(key())
    slow.gate.set()
    assert await got == {**key(), "state": S("forgotten")}
    bodies = [o.body for k, o in bucket.objects.items() if "/i/" in k]
    assert not any(b"secret" in body for body in bodies)  # no earlier version holds it


async def test_racers_the_store_failed_do_not_fail_the_probe_unless_all_did() -> None:
    """A store that answers some of 8 racing create-only PUTs 500 (after the SDK's
    retries): they did not win, and the probe stands on the others; every racer
    failing is reported."""
    from langgraph_s3.aws.probes import check_racing_creates
    from langgraph_s3.core.put_mode import Create
    from langgraph_s3.errors import ServiceError

    class Strained(MemoryObjectStore):
        failing = 3

        async def put(self, key: str, body: bytes, **kw: Any) -> str | None:
            if isinstance(kw.get("mode"), Create) and self.failing:
                self.failing -= 1
                raise ServiceError("InternalError", code="InternalError", status=500)
            return await super().put(key, body, **kw)

    await check_racing_creates(Strained(MemoryBucket("bkt"), concurrency=8), "p/")
    broken = Strained(MemoryBucket("bkt"), concurrency=8)
    broken.failing = 8
    with pytest.raises(ServiceError, match="InternalError"):
        await check_racing_creates(broken, "p/")
