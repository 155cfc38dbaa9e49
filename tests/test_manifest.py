"""The DynamoDB manifest on its own: pure decisions without a server, and its
compare-and-swap commits against moto."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langgraph.checkpoint.base.id import uuid6

from langgraph_s3.aws import door as aws
from langgraph_s3.aws.clients import ClientFactory, Limits
from langgraph_s3.core.records import Entry, Fields, Raw, uuid6_time
from langgraph_s3.errors import CheckpointConflictError, ConflictError
from langgraph_s3.manifest import (
    GONE_LIMIT,
    GONE_SECONDS,
    Manifest,
    deletions,
    deployment_key,
    trim_gone,
)
from langgraph_s3.manifest.decide import decide
from langgraph_s3.testing import MotoServer, unique_names


def ids(n: int) -> list[str]:
    """n uuid6 checkpoint ids, oldest first (they sort by time)."""
    out = [str(uuid6()) for _ in range(n)]
    assert out == sorted(out)
    return out


def uuid6_at(epoch: float) -> str:
    """A uuid6 id made at ``epoch`` (what uuid6() gives at that time)."""
    ticks = int(epoch * 1e7) + 0x01B21DD213814000
    value = (ticks >> 12) << 80 | 6 << 76 | (ticks & 0xFFF) << 64 | 0b10 << 62 | 12345
    return str(uuid.UUID(int=value))


def item(**attrs: Any) -> dict[str, Any]:
    """A stored item: str -> S, bool -> BOOL, int -> N, set -> SS."""
    out: dict[str, Any] = {"thread_id": {"S": "t"}, "checkpoint_ns": {"S": ""}}
    for k, v in attrs.items():
        if isinstance(v, bool):
            out[k] = {"BOOL": v}
        elif isinstance(v, int):
            out[k] = {"N": str(v)}
        elif isinstance(v, set):
            out[k] = {"SS": sorted(v)}
        else:
            out[k] = {"S": v}
    return out


# ------------------------------------------------------------- pure functions
def test_deployment_key_names_bucket_and_prefix_without_slashes_inside() -> None:
    assert deployment_key("b", "/p/q/") == deployment_key("b", "p/q")
    key = deployment_key("b", "p/q")
    assert key.startswith("b/") and key.endswith("/")
    assert key.count("/") == 2  # the prefix's own slash is encoded away
    assert deployment_key("b", "p") != deployment_key("b", "") != deployment_key("c", "")


def test_uuid6_time_reads_the_timestamp_of_uuid6_ids_only() -> None:
    before = time.time()
    got = uuid6_time(str(uuid6()))
    assert got is not None and before - 1 <= got <= time.time() + 1
    assert uuid6_time("not-a-uuid") is None
    assert uuid6_time("8f14e45f-ceea-467a-9575-4f5c5ef1d3a2") is None  # uuid4


def test_trim_gone_keeps_recent_ids_above_the_floor_up_to_the_limit() -> None:
    many = ids(GONE_LIMIT + 5)
    now = uuid6_time(many[-1])
    assert now is not None
    kept = trim_gone(many, "", now)
    assert kept == set(many[-GONE_LIMIT:])  # the newest
    assert trim_gone(many[:3], many[1], now) == set(many[1:3])  # below the floor goes
    assert trim_gone(many[:3], "", now + GONE_SECONDS + 1) == set()  # older than an hour
    assert trim_gone({"run-a"}, "", now) == {"run-a"}  # no time in it: kept


def test_entry_tips() -> None:
    e = Entry("t", "", "c3", "c3.tail", heads=frozenset({"c1", "c2"}))
    assert e.tips == {"c1", "c2", "c3"}


def test_raw_reads_rev_tombstone_lease_and_expiry() -> None:
    live = Raw(item(latest_id="c1", latest_tail="x", rev=4, expires_at=100))
    assert live.rev == 4 and not live.tombstone and live.lease_until == 0
    assert not live.expired(99) and live.expired(100)
    entry = live.live(99)
    assert entry is not None and entry.latest_id == "c1" and entry.rev == 4
    assert entry.expires_at == 100
    assert live.live(100) is None  # expired reads as absent
    stone = Raw(item(deleted=True, lease_until=50, rev=2))
    assert stone.tombstone and stone.lease_until == 50 and stone.live(0) is None
    assert Raw({}).rev == 0


def test_decide_starts_a_new_life_over_nothing_or_a_finished_deletion() -> None:
    step = decide(None, "c2", "tail", None, True, 0)
    assert isinstance(step, Fields) and step.life  # a new life, with its token
    assert step == Fields("c2", "tail", "c2", True, 0, set(), born="c2", life=step.life)
    # over a deleted life: runs of it may be in flight, so the floor never comes down
    step = decide(Raw(item(deleted=True, rev=3)), "c2", "tail", None, True, 0)
    assert isinstance(step, Fields) and step.life
    assert step == Fields("c2", "tail", "c2", True, 0, set(), born="", life=step.life)
    # a parent the item never heard of (a life deleted item and all) starts one too
    assert isinstance(decide(None, "c2", "tail", "c1", False, 0), Fields)


@pytest.mark.parametrize(
    ("attrs", "now", "said"),
    [({"deleted": True}, 0, "deleted"), ({"latest_id": "c1", "expires_at": 5}, 9, "expired")],
)
def test_decide_refuses_to_continue_a_deleted_or_expired_life(
    attrs: dict[str, Any], now: float, said: str
) -> None:
    raw = Raw(item(latest_tail="x", rev=1, **attrs))
    with pytest.raises(CheckpointConflictError, match=said):
        decide(raw, "c2", "tail", "c1", False, now)


def test_decide_on_a_live_entry() -> None:
    raw = Raw(item(latest_id="c5", latest_tail="x", floor="c2", heads={"c4"}, gone={"c3"}))
    assert decide(raw, "c5", "x", "c4", False, 0) is None  # already latest
    assert decide(raw, "c4", "x", "c2", False, 0) is None  # already a head
    step = decide(raw, "c6", "y", "c5", False, 0)
    assert isinstance(step, Entry) and step.latest_id == "c5"  # add a tip to it
    for parent in ("c1", "c3"):  # below the floor, or removed above it
        with pytest.raises(CheckpointConflictError, match="removed"):
            decide(raw, "c6", "y", parent, False, 0)
    # a root older than a floor prune raised (born unset): refused, not hidden
    with pytest.raises(CheckpointConflictError, match="older than the thread's history"):
        decide(raw, "c1", "y", None, False, 0)


def test_decide_lowers_a_floor_no_prune_raised_for_a_late_root() -> None:
    """Two writers start one thread: the newer root committed first; the older one
    must join the life (the floor comes down), not vanish below it."""
    c1, c2, c3, c4, c5 = ids(5)
    raw = Raw(item(latest_id=c5, latest_tail="x", floor=c3, born=c3, heads={c4}))
    step = decide(raw, c2, "y", None, False, 0)
    assert step == Fields(c5, "x", c2, False, 0, {c4, c2}, set(), born=c2)
    with pytest.raises(CheckpointConflictError, match="removed"):  # not a continuation
        decide(raw, c2, "y", c1, False, 0)
    # a root from more than an hour before the floor's: a writer stalled across a
    # deletion or an expiry, not a concurrent first writer
    stale = uuid6_at(uuid6_time(c2) - GONE_SECONDS - 60)  # type: ignore[operator]
    with pytest.raises(CheckpointConflictError, match="older than the thread's history"):
        decide(raw, stale, "y", None, False, 0)
    # a non-uuid6 id cannot be dated: refused rather than guessed
    with pytest.raises(CheckpointConflictError, match="older than the thread's history"):
        decide(raw, "0-custom", "y", None, False, 0)


# -------------------------------------------------------------- against moto
@pytest.fixture
async def manifest(s3_fresh: MotoServer) -> AsyncIterator[Manifest]:
    clients = ClientFactory(endpoint_url=s3_fresh.url)
    man = Manifest(
        clients,
        unique_names()["table"],
        deployment=deployment_key("bucket", "prefix"),
        ttl_seconds=None,
    )
    await man.create()
    yield man
    await clients.aclose()


async def live(man: Manifest, thread: str = "t", ns: str = "") -> Entry:
    entry = await man.latest(thread, ns)
    assert entry is not None
    return entry


async def test_advance_moves_latest_and_keeps_forks_as_heads(manifest: Manifest) -> None:
    c1, c2, c3, c4 = ids(4)
    stats = manifest.clients.stats
    before = stats.total
    await manifest.advance("t", "", c1, "c1.tail", None)
    assert stats.total - before == 1  # a new life: one UpdateItem
    e = await live(manifest)
    assert (e.latest_id, e.floor, e.heads) == (c1, c1, frozenset())

    before = stats.total
    await manifest.advance("t", "", c3, "c3.tail", c1)
    assert stats.total - before == 1  # the fast path
    await manifest.advance("t", "", c2, "c2.tail", c1)  # older than latest: a head
    await manifest.advance("t", "", c4, "c4.tail", c1, uses_delta=True)  # a newer fork
    e = await live(manifest)
    assert (e.latest_id, e.latest_tail, e.uses_delta) == (c4, "c4.tail", True)
    assert e.heads == {c2, c3} and e.floor == c1

    rev = e.rev
    await manifest.advance("t", "", c3, "c3.tail", c1)  # a replay changes nothing
    assert (await live(manifest)).rev == rev


async def test_advance_gives_up_after_max_conflicts_rounds(
    manifest: Manifest, monkeypatch: pytest.MonkeyPatch
) -> None:
    c1, c2, c3 = ids(3)
    await manifest.advance("t", "", c1, "x", None)
    await manifest.advance("t", "", c2, "x", c1)
    manifest.clients.limits = Limits(max_conflicts=3)
    rounds = 0

    async def always_lost(*args: Any) -> bool:
        nonlocal rounds
        rounds += 1
        return False

    monkeypatch.setattr(manifest, "_add_tip", always_lost)
    with pytest.raises(ConflictError, match=r"thread 't'.*3 attempts"):
        await manifest.advance("t", "", c3, "x", c1)
    assert rounds == 3


async def test_advance_waits_for_a_deletion_lease_then_rewrites(
    manifest: Manifest, monkeypatch: pytest.MonkeyPatch
) -> None:
    c1, c2 = ids(2)
    await manifest.advance("t", "", c1, "x", None)
    monkeypatch.setattr(deletions, "DELETE_LEASE_SECONDS", 1)
    deletion = await manifest.tombstone("t")
    lease = (await manifest.read("t", "")).lease_until  # type: ignore[union-attr]
    rewrites: list[float] = []

    async def rewrite() -> None:
        rewrites.append(time.time())

    await manifest.advance("t", "", c2, "y", None, rewrite=rewrite)
    assert len(rewrites) == 1 and rewrites[0] >= lease  # only once the lease ran out
    e = await live(manifest)
    assert (e.latest_id, e.floor) == (c2, c2)  # a new life
    assert not await manifest.renew(deletion.keys, deletion.stamp)  # the old one is over


async def test_advance_refuses_a_parent_of_a_deleted_life(manifest: Manifest) -> None:
    c1, c2 = ids(2)
    await manifest.advance("t", "", c1, "x", None)
    await manifest.tombstone("t")
    with pytest.raises(CheckpointConflictError, match="deleted"):
        await manifest.advance("t", "", c2, "y", c1)


async def test_raise_floor_holds_beside_a_writer_and_replace_is_conditioned_on_the_rev(
    manifest: Manifest,
) -> None:
    c1, c2, c3, c4, c5, c6 = ids(6)
    await manifest.advance("t", "", c1, "x", None)
    await manifest.advance("t", "", c2, "x", c1)
    await manifest.advance("t", "", c4, "x", c2)
    await manifest.advance("t", "", c3, "x", c2)  # a side branch: a head
    stale = await live(manifest)
    assert stale.heads == {c3}
    await manifest.advance("t", "", c5, "x", c1)  # another fork: heads changed
    assert not await manifest.raise_floor(stale, c2, {c3})
    assert not await manifest.replace(stale, Fields(c1, "x", c1, False, 0, set()))

    seen = await live(manifest)
    await manifest.advance("t", "", c6, "x6", c5)  # the writer goes on: latest moves
    assert not await manifest.replace(seen, Fields(c1, "x", c1, False, 0, set()))
    assert await manifest.raise_floor(seen, c2, {c3})  # prune does not start over
    e = await live(manifest)
    assert (e.latest_id, e.latest_tail, e.floor, e.heads) == (c6, "x6", c2, frozenset())
    assert e.gone == {c3} and e.rev == seen.rev + 2
    assert e.created_at == seen.created_at

    assert await manifest.replace(e, Fields(c3, "x3", c3, True, e.created_at, set()))
    e = await live(manifest)
    assert (e.latest_id, e.latest_tail, e.uses_delta) == (c3, "x3", True)


async def test_drop_retires_the_entry_as_read(manifest: Manifest) -> None:
    c1, c2 = ids(2)
    await manifest.advance("t", "", c1, "x", None)
    stale = await live(manifest)
    await manifest.advance("t", "", c2, "x", c1)
    assert not await manifest.drop(stale)
    assert await manifest.drop(await live(manifest))
    assert await manifest.latest("t", "") is None
    raw = await manifest.read("t", "")
    assert raw is not None and raw.tombstone and raw.lease_until == 0  # no wait for writers


async def test_merge_into_nothing_and_beside_a_history(manifest: Manifest) -> None:
    s1, d1, s2 = ids(3)
    await manifest.advance("src", "", s1, "s1", None)
    source = await live(manifest, "src")
    assert await manifest.merge("dst", source, None)
    copied = await live(manifest, "dst")
    assert (copied.latest_id, copied.floor) == (s1, s1)
    assert not await manifest.merge("dst", source, None)  # it exists now

    await manifest.advance("other", "", d1, "d1", None)
    await manifest.advance("src", "", s2, "s2", s1)
    target = await manifest.read("other", "")
    assert await manifest.merge("other", await live(manifest, "src"), target)
    e = await live(manifest, "other")
    assert (e.latest_id, e.latest_tail, e.heads, e.floor) == (s2, "s2", {d1}, s1)
    assert not await manifest.merge("other", source, target)  # target changed since


async def test_tombstone_covers_every_namespace_and_the_root(manifest: Manifest) -> None:
    c1, c2 = ids(2)
    await manifest.advance("t", "sub", c1, "x", None)
    await manifest.advance("t", "sub2", c2, "x", None)
    deletion = await manifest.tombstone("t")
    stamp, keys, _ = deletion  # a tuple still (with the items it replaced)
    assert sorted(k["sk"]["S"] for k in keys) == sorted(
        manifest.key("t", ns)["sk"]["S"] for ns in ("", "sub", "sub2")
    )
    assert await manifest.namespaces("t") == []
    for ns in ("", "sub", "sub2"):
        raw = await manifest.read("t", ns)
        assert raw is not None and raw.tombstone and raw.lease_until > time.time()
    assert await manifest.renew(keys, stamp)
    await manifest.release(keys, stamp)
    assert (await manifest.read("t", "sub")).lease_until == 0  # type: ignore[union-attr]
    assert not await manifest.renew(keys, stamp + 1)  # another deletion's stamp


async def test_pages_follow_last_evaluated_key(manifest: Manifest) -> None:
    paged = Manifest(
        manifest.clients,
        manifest.table,
        deployment=manifest.deployment,
        ttl_seconds=None,
        page_size=1,
    )
    for i, cid in enumerate(ids(3)):
        await manifest.advance("t", f"ns{i}", cid, "x", None)
    await manifest.advance("u", "", ids(1)[0], "x", None)
    stats = manifest.clients.stats
    stats.reset()
    found = await paged.namespaces("t")
    assert sorted(e.checkpoint_ns for e in found) == ["ns0", "ns1", "ns2"]
    # One item per page. (moto ends on the third; DynamoDB may hand back a
    # LastEvaluatedKey with a full last page, costing one more, empty, Query.)
    assert stats.by_operation == {"dynamodb.Query": 3}
    stats.reset()
    assert sorted(e.checkpoint_ns for e in await manifest.namespaces("t")) == ["ns0", "ns1", "ns2"]
    assert stats.by_operation == {"dynamodb.Query": 1}
    scanned = [e.thread_id async for page in paged.scan() for e in page]
    assert sorted(scanned) == ["t", "t", "t", "u"]
    with pytest.raises(ValueError, match="page_size must be at least 1"):
        Manifest(manifest.clients, manifest.table, deployment="d", ttl_seconds=None, page_size=0)


async def test_scan_and_namespaces_see_only_their_deployment(manifest: Manifest) -> None:
    other = Manifest(
        manifest.clients,
        manifest.table,
        deployment=deployment_key("bucket", "other"),
        ttl_seconds=None,
    )
    c1, c2, c3 = ids(3)
    await manifest.advance("t", "", c1, "x", None)
    await manifest.advance("t", "sub", c2, "x", None)
    await other.advance("t", "", c3, "x", None)
    await manifest.mark_migrated()  # the marker is not an entry
    mine = [e async for page in manifest.scan() for e in page]
    assert sorted((e.checkpoint_ns, e.latest_id) for e in mine) == [("", c1), ("sub", c2)]
    assert [e.latest_id for e in await other.namespaces("t")] == [c3]
    assert await manifest.migrated() and not await other.migrated()


async def test_legacy_entries_are_adopted_under_the_deployment_key(manifest: Manifest) -> None:
    c1, c2 = ids(2)
    legacy = {
        "pk": {"S": "old-thread"},  # 0.1 keyed by thread alone, without rev
        "sk": {"S": "~"},
        "thread_id": {"S": "old-thread"},
        "checkpoint_ns": {"S": ""},
        "latest_id": {"S": c1},
        "latest_tail": {"S": "x1"},
    }
    await aws.call(manifest.clients, "dynamodb", "put_item", TableName=manifest.table, Item=legacy)
    await manifest.advance("new", "", c2, "x", None)  # has a "/" in its key: not legacy
    found = [e async for e in manifest.legacy_entries()]
    assert [(e.thread_id, e.latest_id) for e in found] == [("old-thread", c1)]
    await manifest.adopt(found[0])
    e = await live(manifest, "old-thread")
    assert (e.latest_id, e.latest_tail, e.floor) == (c1, "x1", "")  # all history visible
    await manifest.adopt(found[0])  # adopting twice leaves the adopted one as it is
    assert (await live(manifest, "old-thread")).rev == e.rev
