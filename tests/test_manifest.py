"""The DynamoDB manifest on its own: pure decisions without a server, and its
compare-and-swap commits against moto."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langgraph.checkpoint.base.id import uuid6

from helpers import advance_rewriting
from langgraph_s3.aws import door as aws
from langgraph_s3.aws.clients import ClientFactory, Limits
from langgraph_s3.core.commit import How
from langgraph_s3.core.records import Entry, Fields
from langgraph_s3.errors import CheckpointConflictError, ConflictError
from langgraph_s3.manifest import (
    Manifest,
    deletions,
    deployment_key,
)
from langgraph_s3.testing import MotoServer, unique_names


def ids(n: int) -> list[str]:
    """n uuid6 checkpoint ids, oldest first (they sort by time)."""
    out = [str(uuid6()) for _ in range(n)]
    assert out == sorted(out)
    return out


@pytest.fixture
async def manifest(s3_fresh: MotoServer) -> AsyncIterator[Manifest]:
    clients = ClientFactory(endpoint_url=s3_fresh.url)
    man = Manifest(
        clients,
        unique_names()["table"],
        deployment=deployment_key("bucket", "prefix"),
        ttl_seconds=None,
    )
    await man.setup.create()
    yield man
    await clients.aclose()


async def live(man: Manifest, thread: str = "t", ns: str = "") -> Entry:
    entry = await man.reads.latest(thread, ns)
    assert entry is not None
    return entry


async def test_advance_moves_latest_and_keeps_forks_as_heads(manifest: Manifest) -> None:
    c1, c2, c3, c4 = ids(4)
    stats = manifest.clients.stats
    before = stats.total
    await manifest.commits.advance("t", "", c1, "c1.tail", None)
    assert stats.total - before == 1  # a new life: one UpdateItem
    e = await live(manifest)
    assert (e.latest_id, e.floor, e.heads) == (c1, c1, frozenset())

    before = stats.total
    await manifest.commits.advance("t", "", c3, "c3.tail", c1)
    assert stats.total - before == 1  # the fast path
    await manifest.commits.advance("t", "", c2, "c2.tail", c1)  # older than latest: a head
    await manifest.commits.advance("t", "", c4, "c4.tail", c1, How(uses_delta=True))  # a newer fork
    e = await live(manifest)
    assert (e.latest_id, e.latest_tail, e.uses_delta) == (c4, "c4.tail", True)
    assert e.heads == {c2, c3} and e.floor == c1

    rev = e.rev
    await manifest.commits.advance("t", "", c3, "c3.tail", c1)  # a replay changes nothing
    assert (await live(manifest)).rev == rev


async def test_advance_gives_up_after_max_conflicts_rounds(
    manifest: Manifest, monkeypatch: pytest.MonkeyPatch
) -> None:
    c1, c2, c3 = ids(3)
    await manifest.commits.advance("t", "", c1, "x", None)
    await manifest.commits.advance("t", "", c2, "x", c1)
    manifest.clients.limits = Limits(max_conflicts=3)
    rounds = 0

    async def always_lost(*args: Any) -> bool:
        nonlocal rounds
        rounds += 1
        return False

    monkeypatch.setattr(manifest.commits, "_add_tip", always_lost)
    with pytest.raises(ConflictError, match=r"thread 't'.*3 attempts"):
        await manifest.commits.advance("t", "", c3, "x", c1)
    assert rounds == 3


async def test_advance_waits_for_a_deletion_lease_then_rewrites(
    manifest: Manifest, monkeypatch: pytest.MonkeyPatch
) -> None:
    c1, c2 = ids(2)
    await manifest.commits.advance("t", "", c1, "x", None)
    monkeypatch.setattr(deletions, "DELETE_LEASE_SECONDS", 1)
    deletion = await manifest.deletions.tombstone("t")
    lease = (await manifest.reads.read("t", "")).lease_until  # type: ignore[union-attr]
    rewrites: list[float] = []

    async def rewrite() -> None:
        rewrites.append(time.time())

    await advance_rewriting(manifest, "t", "", c2, "y", None, rewrite=rewrite)
    assert len(rewrites) == 1 and rewrites[0] >= lease  # only once the lease ran out
    e = await live(manifest)
    assert (e.latest_id, e.floor) == (c2, c2)  # a new life
    assert not await manifest.deletions.renew(deletion.keys, deletion.stamp)  # the old one is over


async def test_advance_refuses_a_parent_of_a_deleted_life(manifest: Manifest) -> None:
    c1, c2 = ids(2)
    await manifest.commits.advance("t", "", c1, "x", None)
    await manifest.deletions.tombstone("t")
    with pytest.raises(CheckpointConflictError, match="deleted"):
        await manifest.commits.advance("t", "", c2, "y", c1)


async def test_raise_floor_holds_beside_a_writer_and_replace_is_conditioned_on_the_rev(
    manifest: Manifest,
) -> None:
    c1, c2, c3, c4, c5, c6 = ids(6)
    await manifest.commits.advance("t", "", c1, "x", None)
    await manifest.commits.advance("t", "", c2, "x", c1)
    await manifest.commits.advance("t", "", c4, "x", c2)
    await manifest.commits.advance("t", "", c3, "x", c2)  # a side branch: a head
    stale = await live(manifest)
    assert stale.heads == {c3}
    await manifest.commits.advance("t", "", c5, "x", c1)  # another fork: heads changed
    assert not await manifest.upkeep.raise_floor(stale, c2, {c3})
    assert not await manifest.upkeep.replace(stale, Fields(c1, "x", c1, False, 0, set()))

    seen = await live(manifest)
    await manifest.commits.advance("t", "", c6, "x6", c5)  # the writer goes on: latest moves
    assert not await manifest.upkeep.replace(seen, Fields(c1, "x", c1, False, 0, set()))
    assert await manifest.upkeep.raise_floor(seen, c2, {c3})  # prune does not start over
    e = await live(manifest)
    assert (e.latest_id, e.latest_tail, e.floor, e.heads) == (c6, "x6", c2, frozenset())
    assert e.gone == {c3} and e.rev == seen.rev + 2
    assert e.created_at == seen.created_at

    assert await manifest.upkeep.replace(e, Fields(c3, "x3", c3, True, e.created_at, set()))
    e = await live(manifest)
    assert (e.latest_id, e.latest_tail, e.uses_delta) == (c3, "x3", True)


async def test_drop_retires_the_entry_as_read(manifest: Manifest) -> None:
    c1, c2 = ids(2)
    await manifest.commits.advance("t", "", c1, "x", None)
    stale = await live(manifest)
    await manifest.commits.advance("t", "", c2, "x", c1)
    assert not await manifest.upkeep.drop(stale)
    assert await manifest.upkeep.drop(await live(manifest))
    assert await manifest.reads.latest("t", "") is None
    raw = await manifest.reads.read("t", "")
    assert raw is not None and raw.tombstone and raw.lease_until == 0  # no wait for writers


async def test_merge_into_nothing_and_beside_a_history(manifest: Manifest) -> None:
    s1, d1, s2 = ids(3)
    await manifest.commits.advance("src", "", s1, "s1", None)
    source = await live(manifest, "src")
    assert await manifest.upkeep.merge("dst", source, None)
    copied = await live(manifest, "dst")
    assert (copied.latest_id, copied.floor) == (s1, s1)
    assert not await manifest.upkeep.merge("dst", source, None)  # it exists now

    await manifest.commits.advance("other", "", d1, "d1", None)
    await manifest.commits.advance("src", "", s2, "s2", s1)
    target = await manifest.reads.read("other", "")
    assert await manifest.upkeep.merge("other", await live(manifest, "src"), target)
    e = await live(manifest, "other")
    assert (e.latest_id, e.latest_tail, e.heads, e.floor) == (s2, "s2", {d1}, s1)
    assert not await manifest.upkeep.merge("other", source, target)  # target changed since


async def test_tombstone_covers_every_namespace_and_the_root(manifest: Manifest) -> None:
    c1, c2 = ids(2)
    await manifest.commits.advance("t", "sub", c1, "x", None)
    await manifest.commits.advance("t", "sub2", c2, "x", None)
    deletion = await manifest.deletions.tombstone("t")
    stamp, keys = deletion.stamp, deletion.keys
    assert sorted(k["sk"]["S"] for k in keys) == sorted(
        manifest.key("t", ns)["sk"]["S"] for ns in ("", "sub", "sub2")
    )
    assert await manifest.reads.namespaces("t") == []
    for ns in ("", "sub", "sub2"):
        raw = await manifest.reads.read("t", ns)
        assert raw is not None and raw.tombstone and raw.lease_until > time.time()
    assert await manifest.deletions.renew(keys, stamp)
    await manifest.deletions.release(keys, stamp)
    assert (await manifest.reads.read("t", "sub")).lease_until == 0  # type: ignore[union-attr]
    assert not await manifest.deletions.renew(keys, stamp + 1)  # another deletion's stamp


async def test_pages_follow_last_evaluated_key(manifest: Manifest) -> None:
    paged = Manifest(
        manifest.clients,
        manifest.table,
        deployment=manifest.deployment,
        ttl_seconds=None,
        page_size=1,
    )
    for i, cid in enumerate(ids(3)):
        await manifest.commits.advance("t", f"ns{i}", cid, "x", None)
    await manifest.commits.advance("u", "", ids(1)[0], "x", None)
    stats = manifest.clients.stats
    stats.reset()
    found = await paged.reads.namespaces("t")
    assert sorted(e.checkpoint_ns for e in found) == ["ns0", "ns1", "ns2"]
    # One item per page. (moto ends on the third; DynamoDB may hand back a
    # LastEvaluatedKey with a full last page, costing one more, empty, Query.)
    assert stats.by_operation == {"dynamodb.Query": 3}
    stats.reset()
    assert sorted(e.checkpoint_ns for e in await manifest.reads.namespaces("t")) == [
        "ns0",
        "ns1",
        "ns2",
    ]
    assert stats.by_operation == {"dynamodb.Query": 1}
    scanned = [e.thread_id async for page in paged.reads.scan() for e in page]
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
    await manifest.commits.advance("t", "", c1, "x", None)
    await manifest.commits.advance("t", "sub", c2, "x", None)
    await other.commits.advance("t", "", c3, "x", None)
    await manifest.setup.mark_migrated()  # the marker is not an entry
    mine = [e async for page in manifest.reads.scan() for e in page]
    assert sorted((e.checkpoint_ns, e.latest_id) for e in mine) == [("", c1), ("sub", c2)]
    assert [e.latest_id for e in await other.reads.namespaces("t")] == [c3]
    assert await manifest.setup.migrated() and not await other.setup.migrated()


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
    await manifest.commits.advance("new", "", c2, "x", None)  # has a "/" in its key: not legacy
    found = [e async for e in manifest.setup.legacy_entries()]
    assert [(e.thread_id, e.latest_id) for e in found] == [("old-thread", c1)]
    await manifest.setup.adopt(found[0])
    e = await live(manifest, "old-thread")
    assert (e.latest_id, e.latest_tail, e.floor) == (c1, "x1", "")  # all history visible
    await manifest.setup.adopt(found[0])  # adopting twice leaves the adopted one as it is
    assert (await live(manifest, "old-thread")).rev == e.rev
