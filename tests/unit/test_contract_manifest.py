"""The manifest contract: the same assertions on ``Manifest`` (moto) and on
``MemoryManifest``: commits, forks, new lives, tombstones and leases, the
maintenance compare-and-swaps, the refusals, and the requests each one costs."""

from __future__ import annotations

import asyncio
import itertools
import random
from dataclasses import replace
from typing import Any

import pytest
from unit_helpers import Backend, checkpoint_ids, counts, expect, on_objects, plain, reset

from helpers import advance_rewriting
from langgraph_s3.core.commit import How
from langgraph_s3.core.ports import ManifestPort
from langgraph_s3.core.records import (
    Entry,
    Expiry,
    Fields,
    Late,
    mark_until,
    marks_until,
    removal_mark,
)
from langgraph_s3.errors import CheckpointConflictError, MissingResourceError
from langgraph_s3.manifest.schema import raw_of
from langgraph_s3.testing import unique_names

pytestmark = pytest.mark.unit


@pytest.fixture
def backend(tables: Backend) -> Backend:
    """Every table: DynamoDB's (memory, moto) and the object manifest's."""
    return tables


OLDEST = "00000000-0000-6000-8000-000000000000"


def tail(cid: str) -> str:
    return f"tail-of-{cid}"


async def entry(m: ManifestPort, thread: str = "t", ns: str = "") -> Entry:
    e = await m.reads.latest(thread, ns)
    assert e is not None
    return e


async def test_a_table_until_created(backend: Backend) -> None:
    m = backend.manifest()
    assert await m.setup.exists() is False
    with pytest.raises(MissingResourceError):
        await m.reads.latest("t", "")
    await m.setup.create()
    assert await m.setup.exists() is True
    await m.setup.create()  # again: fine
    assert await m.reads.latest("t", "") is None
    assert await m.reads.read("t", "") is None
    assert await m.reads.namespaces("t") == []


async def test_the_fast_path_is_one_update(manifest: ManifestPort) -> None:
    a, b, c = checkpoint_ids(3)
    await manifest.commits.advance("t", "", a, tail(a), None)  # a new life: no read
    await manifest.commits.advance("t", "", b, tail(b), a, How(uses_delta=True))  # parent is latest
    assert counts(manifest) == expect(
        manifest, {"dynamodb.UpdateItem": 2}, {"s3.ListObjectsV2": 1, "s3.PutObject": 2}
    )
    e = await entry(manifest)
    assert (e.latest_id, e.latest_tail, e.floor, e.heads, e.rev) == (b, tail(b), a, set(), 2)
    assert e.uses_delta and e.thread_id == "t" and e.checkpoint_ns == ""
    assert e.created_at > 0 and e.updated_at >= e.created_at and e.expires_at is None
    reset(manifest)
    await manifest.commits.advance("t", "", c, tail(c), b)
    assert counts(manifest) == expect(manifest, {"dynamodb.UpdateItem": 1}, {"s3.PutObject": 1})
    assert (await entry(manifest)).uses_delta is False


async def test_a_replay_of_a_tip_changes_nothing(manifest: ManifestPort) -> None:
    a, b = checkpoint_ids(2)
    await manifest.commits.advance("t", "", a, tail(a), None)
    await manifest.commits.advance("t", "", b, tail(b), a)
    before = await manifest.reads.read("t", "")
    assert before is not None
    reset(manifest)
    await manifest.commits.advance("t", "", b, tail(b), a)  # the answer was lost: again
    after = await manifest.reads.read("t", "")
    assert after is not None and after == before
    # the failed fast path, one read that finds it committed (+ the read above)
    assert counts(manifest) == expect(
        manifest, {"dynamodb.UpdateItem": 1, "dynamodb.GetItem": 2}, {"s3.GetObject": 3}
    )
    # the manifest keeps tips only: a replay of an ancestor is not known as committed,
    # and joins the heads (redundant: latest's lineage holds it already)
    await manifest.commits.advance("t", "", a, tail(a), None)
    e = await entry(manifest)
    assert (e.latest_id, e.heads, e.rev) == (b, {a}, 3)


async def test_forks_become_heads_and_a_newer_fork_becomes_latest(manifest: ManifestPort) -> None:
    ids = checkpoint_ids(8)
    await manifest.commits.advance("t", "", ids[0], tail(ids[0]), None)
    await manifest.commits.advance("t", "", ids[5], tail(ids[5]), ids[0])
    reset(manifest)
    # older than latest, from an older parent: a head beside latest
    await manifest.commits.advance("t", "", ids[3], tail(ids[3]), ids[0])
    assert counts(manifest) == expect(
        manifest,
        {"dynamodb.UpdateItem": 2, "dynamodb.GetItem": 1},
        {"s3.GetObject": 2, "s3.PutObject": 1},
    )
    e = await entry(manifest)
    assert (e.latest_id, e.heads, e.tips) == (ids[5], {ids[3]}, {ids[5], ids[3]})
    # newer than latest, continuing a head: latest moves, the old latest is a head
    await manifest.commits.advance("t", "", ids[7], tail(ids[7]), ids[3])
    e = await entry(manifest)
    assert (e.latest_id, e.latest_tail) == (ids[7], tail(ids[7]))
    assert e.heads == {ids[3], ids[5]}
    assert e.floor == ids[0] and e.rev == 4
    # a fork older than the floor's life: refused
    with pytest.raises(CheckpointConflictError):
        await manifest.commits.advance("t", "", ids[6], tail(ids[6]), OLDEST)
    # a parentless checkpoint on a live thread (another root): a head too
    await manifest.commits.advance("t", "", ids[6], tail(ids[6]), None)
    assert (await entry(manifest)).heads == {ids[3], ids[5], ids[6]}


async def test_a_tombstone_refuses_its_writers_and_waits_for_its_lease(
    manifest: ManifestPort,
) -> None:
    a, b, c = checkpoint_ids(3)
    await manifest.commits.advance("t", "", a, tail(a), None)
    await manifest.commits.advance("t", "sub", a, tail(a), None)
    reset(manifest)
    deletion = await manifest.deletions.tombstone("t")
    # the root first (and its content out, its keys to mark recorded), then the others
    assert counts(manifest) == expect(
        manifest,
        {"dynamodb.Query": 1, "dynamodb.UpdateItem": 3},
        {"s3.ListObjectsV2": 1, "s3.PutObject": 3},
    )
    assert sorted(k["sk"]["S"] for k in deletion.keys) == ["sub", "~"]
    assert await manifest.reads.latest("t", "") is None
    assert await manifest.reads.namespaces("t") == []
    raw = await manifest.reads.read("t", "")
    assert raw is not None and raw.tombstone and raw.live(0) is None
    assert raw.lease_until > 0
    # a writer still holding the old life's checkpoint is refused
    with pytest.raises(CheckpointConflictError, match="deleted"):
        await manifest.commits.advance("t", "", b, tail(b), a)
    assert await manifest.deletions.renew(deletion.keys, deletion.stamp) is True
    await manifest.deletions.release(deletion.keys, deletion.stamp)
    raw = await manifest.reads.read("t", "")
    assert raw is not None and raw.tombstone and raw.lease_until == 0
    # the lease is over: a new life starts, its objects stored again first
    rewrites = []

    async def rewrite() -> None:
        rewrites.append(c)

    await advance_rewriting(manifest, "t", "", c, tail(c), None, rewrite=rewrite)
    assert rewrites == [c]
    e = await entry(manifest)
    assert (e.latest_id, e.floor, e.heads) == (c, c, set())
    # the old deletion may not go on: its tombstone was replaced
    assert await manifest.deletions.renew(deletion.keys, deletion.stamp) is False


async def test_a_namespace_is_born_only_beside_a_live_root(manifest: ManifestPort) -> None:
    """A subgraph's first commit during a deletion (after its root's tombstone) waits
    for the deletion and stores its objects again: never a namespace the deletion
    did not find, live under its tombstone."""
    a, b, c = checkpoint_ids(3)
    await manifest.commits.advance("t", "", a, tail(a), None)
    reset(manifest)
    await manifest.commits.advance("t", "sub", a, tail(a), None)
    assert counts(manifest) == expect(
        manifest,
        {"dynamodb.TransactWriteItems": 1},
        {"s3.ListObjectsV2": 1, "s3.PutObject": 2, "s3.GetObject": 1},
    )  # the item and a check
    deletion = await manifest.deletions.tombstone("t")
    rewrites: list[str] = []

    async def rewrite() -> None:
        rewrites.append(b)

    born = asyncio.ensure_future(
        advance_rewriting(manifest, "t", "new", b, tail(b), None, rewrite=rewrite)
    )
    await asyncio.sleep(0.6)  # two polls of the lease
    assert not born.done() and await manifest.reads.read("t", "new") is None
    await manifest.deletions.release(deletion.keys, deletion.stamp)
    await born
    assert rewrites == [b]  # after the deletion: its objects stored again
    assert (await entry(manifest, "t", "new")).latest_id == b
    # one born over a released tombstone stores its objects again too (they may have
    # been listed by that deletion before it was committed)
    again = await manifest.deletions.tombstone("t")
    await manifest.deletions.release(again.keys, again.stamp)
    await advance_rewriting(manifest, "t", "later", c, tail(c), None, rewrite=rewrite)
    assert rewrites == [b, b]


async def test_a_revive_puts_back_all_or_nothing(manifest: ManifestPort) -> None:
    a, b = checkpoint_ids(2)
    await manifest.commits.advance("t", "", a, tail(a), None)
    await manifest.commits.advance("t", "sub", b, tail(b), None)
    deletion = await manifest.deletions.tombstone("t")
    # another deletion took one namespace over (its own stamp): this one is not undone
    other = await manifest.deletions.tombstone("t")
    await manifest.deletions.revive(deletion)
    for ns in ("", "sub"):
        raw = await manifest.reads.read("t", ns)
        assert raw is not None and raw.tombstone
        assert raw.deleted_at == str(other.stamp)


async def test_tombstone_of_a_thread_that_never_was(manifest: ManifestPort) -> None:
    deletion = await manifest.deletions.tombstone("never")
    assert [k["sk"]["S"] for k in deletion.keys] == ["~"]  # the root namespace, always
    raw = await manifest.reads.read("never", "")
    assert raw is not None and raw.tombstone
    assert (
        await manifest.deletions.renew(deletion.keys, deletion.stamp + 1) is False
    )  # not its stamp


async def test_revive_puts_back_what_a_deletion_tombstoned(manifest: ManifestPort) -> None:
    a, b = checkpoint_ids(2)
    await manifest.commits.advance("t", "", a, tail(a), None)
    await manifest.commits.advance("t", "sub", b, tail(b), None)
    items = {ns: await manifest.reads.read("t", ns) for ns in ("", "sub")}
    deletion = await manifest.deletions.tombstone("t")
    assert await manifest.reads.latest("t", "") is None
    reset(manifest)
    await manifest.deletions.revive(deletion)
    assert counts(manifest) == expect(
        manifest, {"dynamodb.TransactWriteItems": 1}, {"s3.PutObject": 5, "s3.DeleteObjects": 1}
    )  # all at once
    for ns, before in items.items():
        assert await manifest.reads.read("t", ns) == before
    # a thread that never was: its tombstone goes, nothing comes back
    gone = await manifest.deletions.tombstone("never")
    await manifest.deletions.revive(gone)
    assert await manifest.reads.read("never", "") is None
    # a tombstone another deletion replaced is left to it
    first = await manifest.deletions.tombstone("t")
    await manifest.deletions.tombstone("t")
    await manifest.deletions.revive(first)
    assert (await manifest.reads.read("t", "")).tombstone  # type: ignore[union-attr]


async def test_scan_names_the_deletions_in_progress(manifest: ManifestPort) -> None:
    """A deletion holding its lease may still fail and revive the thread: the scan
    names it (no extra request), and no longer once the deletion is released."""
    a, b = checkpoint_ids(2)
    await manifest.commits.advance("t", "", a, tail(a), None)
    await manifest.commits.advance("u", "", b, tail(b), None)
    deletion = await manifest.deletions.tombstone("t")
    reset(manifest)
    deleting: set[str] = set()
    live = [e.thread_id async for page in manifest.reads.scan(deleting=deleting) for e in page]
    assert live == ["u"] and deleting == {"t"}
    assert set(counts(manifest)) == {
        "s3.ListObjectsV2" if on_objects(manifest) else "dynamodb.Scan"
    }
    await manifest.deletions.release(deletion.keys, deletion.stamp)
    deleting.clear()
    assert [e.thread_id async for page in manifest.reads.scan(deleting=deleting) for e in page] == [
        "u"
    ]
    assert deleting == set()
    # a TTL sweep's tombstone never comes back: no one waits for it
    raw = await manifest.reads.read("u", "")
    assert raw is not None
    assert await manifest.deletions.tombstone_expired(Expiry("u", raw.rev)) is not None
    assert [e async for page in manifest.reads.scan(deleting=deleting) for e in page] == []
    assert deleting == set()
    swept = await manifest.reads.read("u", "")
    assert swept is not None and swept.tombstone and not swept.revivable


async def test_drop_retires_an_entry_as_read(manifest: ManifestPort) -> None:
    a, b, c = checkpoint_ids(3)
    await manifest.commits.advance("t", "", a, tail(a), None)
    stale = await entry(manifest)
    await manifest.commits.advance("t", "", b, tail(b), a)
    reset(manifest)
    assert await manifest.upkeep.drop(stale) is False
    assert await manifest.upkeep.drop(await entry(manifest)) is True
    assert counts(manifest) == expect(
        manifest,
        {"dynamodb.UpdateItem": 2, "dynamodb.GetItem": 1},
        {"s3.GetObject": 2, "s3.PutObject": 1},
    )
    assert await manifest.reads.latest("t", "") is None
    with pytest.raises(CheckpointConflictError):
        await manifest.commits.advance("t", "", c, tail(c), b)
    await manifest.commits.advance("t", "", c, tail(c), None)  # no lease: a new life at once
    assert (await entry(manifest)).floor == c


async def test_raise_floor_is_a_compare_and_swap_and_guards_what_it_removed(
    manifest: ManifestPort,
) -> None:
    ids = checkpoint_ids(8)
    await manifest.commits.advance("t", "", ids[0], tail(ids[0]), None)
    for parent, cid in itertools.pairwise(ids[:4]):
        await manifest.commits.advance("t", "", cid, tail(cid), parent)
    seen = await entry(manifest)
    # a writer's next turn (a child of the latest) meanwhile: the line prune keeps
    # only grew, so its commit still holds, in one request
    await manifest.commits.advance("t", "", ids[4], tail(ids[4]), ids[3])
    reset(manifest)
    assert await manifest.upkeep.raise_floor(seen, ids[2], {ids[3]}) is True
    assert counts(manifest) == expect(manifest, {"dynamodb.UpdateItem": 1}, {"s3.PutObject": 1})
    e = await entry(manifest)
    assert (e.latest_id, e.floor, e.heads, e.gone) == (ids[4], ids[2], set(), {ids[3]})
    assert e.rev == seen.rev + 2
    # a second prune that read before the first committed: its floor is gone
    assert await manifest.upkeep.raise_floor(seen, ids[3], set()) is False
    # refused: a parent below the floor, a parent maintenance removed
    with pytest.raises(CheckpointConflictError, match="removed"):
        await manifest.commits.advance("t", "", ids[5], tail(ids[5]), ids[1])
    with pytest.raises(CheckpointConflictError, match="removed"):
        await manifest.commits.advance("t", "", ids[5], tail(ids[5]), ids[3])
    # a parent at the floor is fine (a fork beside latest)
    await manifest.commits.advance("t", "", ids[5], tail(ids[5]), ids[2])
    assert (await entry(manifest)).latest_id == ids[5]
    # removed ids below the floor are not kept
    e = await entry(manifest)
    assert await manifest.upkeep.raise_floor(e, ids[5], {ids[1], ids[6]})
    assert (await entry(manifest)).gone == {ids[6]}


async def test_a_removal_mark_holds_a_new_life_off_until_unmarked(
    manifest: ManifestPort,
) -> None:
    a, b, c, d = checkpoint_ids(4)
    await manifest.commits.advance("t", "", a, tail(a), None)
    await manifest.commits.advance("t", "", b, tail(b), a)
    mark, seen = removal_mark(manifest.now()), await entry(manifest)
    reset(manifest)
    assert await manifest.upkeep.raise_floor(seen, b, set(), mark=mark) is True
    assert counts(manifest) == expect(
        manifest, {"dynamodb.UpdateItem": 1}, {"s3.PutObject": 1}
    )  # the mark rides on the commit
    assert (await entry(manifest)).removing == {mark}
    # an import's replace: the thread is deleted while the prune still deletes
    deletion = await manifest.deletions.tombstone("t")
    await manifest.deletions.release(deletion.keys, deletion.stamp)
    raw = await manifest.reads.read("t", "")
    assert raw is not None and raw.tombstone
    now = manifest.now()
    assert raw.lease_until == 0 and raw.held_until(now) == mark_until(mark) > now
    reset(manifest)
    await manifest.upkeep.unmark("t", "", mark)
    assert counts(manifest) == expect(manifest, {"dynamodb.UpdateItem": 1}, {"s3.PutObject": 1})
    after = await manifest.reads.read("t", "")
    assert after is not None and after.held_until(now) == 0
    assert after.rev == raw.rev + 1  # a swap that read the mark cannot write it back
    await manifest.commits.advance("t", "", c, tail(c), None)  # the new life, at once
    e = await entry(manifest)
    assert (e.latest_id, e.removing) == (c, frozenset())
    # the other commits of a removal carry marks too; a PutItem keeps them
    other = removal_mark(manifest.now())
    await manifest.commits.advance("t", "", d, tail(d), c)
    e = await entry(manifest)
    # a packing's switch requires its mark, put on before its pack was stored
    assert await manifest.upkeep.set_pack("t", None, None, mark=other) is False
    assert await manifest.upkeep.mark(e, other) is True
    assert await manifest.upkeep.set_pack("t", None, None, mark=other) is True
    e = await entry(manifest)
    assert e.removing == {other}
    new = Fields(e.latest_id, e.latest_tail, e.floor, False, e.created_at, {c}, life=e.life)
    assert await manifest.upkeep.retip(e, replace(new, removing=e.removing), ["r"], mark=mark)
    assert (await entry(manifest)).removing == {mark, other}
    await manifest.upkeep.unmark("t", "", other)
    await manifest.upkeep.unmark("t", "", mark)
    await manifest.upkeep.unmark("gone", "", mark)  # no item: none made
    assert await manifest.reads.read("gone", "") is None
    assert (await entry(manifest)).removing == frozenset()


def test_marks_that_no_removal_could_have_made_hold_nothing() -> None:
    now = 1_800_000_000.0
    good = removal_mark(now)
    pack = removal_mark(now, "pack")
    garbage = ["garbage", "nan:x", "inf:x", "-inf:x", "1e300:x", f"{int(now) + 10**6}:x", ""]
    assert marks_until([*garbage], now) == 0.0
    assert marks_until([*garbage, good], now) == mark_until(good) == now + 120
    assert marks_until([good, pack], now, kinds=("pack",)) == mark_until(pack)
    assert marks_until([good], now, kinds=("pack",)) == 0.0  # a prune's: not a packing's
    assert marks_until([good], now + 121) == now + 120  # spent: holds nothing now
    raw = raw_of({"deleted": {"BOOL": True}, "removing": {"SS": [*filter(None, garbage)]}})
    assert raw.held_until(now) == 0.0


async def test_two_first_writers_both_join_the_life(manifest: ManifestPort) -> None:
    """Two writers start one thread at once; the newer root commits first. The older
    root lowers the floor (no prune raised it) and both lines continue. Once a prune
    has raised the floor, a late root below it is refused, never hidden."""
    older, newer, after_older, after_newer, late = checkpoint_ids(5)
    await manifest.commits.advance("t", "", newer, tail(newer), None)
    assert (await entry(manifest)).floor == newer
    await manifest.commits.advance("t", "", older, tail(older), None)
    e = await entry(manifest)
    assert (e.latest_id, e.floor, e.born, e.heads) == (newer, older, older, {older})
    await manifest.commits.advance("t", "", after_older, tail(after_older), older)
    await manifest.commits.advance("t", "", after_newer, tail(after_newer), newer)
    e = await entry(manifest)
    assert (e.latest_id, e.floor) == (after_newer, older) and after_older in e.heads
    assert await manifest.upkeep.raise_floor(e, after_newer, set())
    e = await entry(manifest)
    assert (e.floor, e.born) == (after_newer, "")
    with pytest.raises(CheckpointConflictError, match="older than the thread's history"):
        await manifest.commits.advance("t", "", older, tail(older), None)
    await manifest.commits.advance("t", "", late, tail(late), None)  # a root above it is fine
    e = await entry(manifest)
    assert (e.latest_id, e.heads, e.floor) == (late, {after_newer}, after_newer)


async def test_replace_is_a_compare_and_swap(manifest: ManifestPort) -> None:
    a, b, c = checkpoint_ids(3)
    await manifest.commits.advance("t", "", a, tail(a), None)
    stale = await entry(manifest)
    await manifest.commits.advance("t", "", b, tail(b), a)
    new = Fields(a, tail(a), a, True, stale.created_at, set(), {b})
    assert await manifest.upkeep.replace(stale, new) is False
    current = await entry(manifest)
    assert await manifest.upkeep.replace(current, new) is True
    e = await entry(manifest)
    assert (e.latest_id, e.uses_delta, e.gone, e.created_at) == (a, True, {b}, stale.created_at)
    with pytest.raises(CheckpointConflictError):
        await manifest.commits.advance("t", "", c, tail(c), b)  # b was removed


async def test_merge_into_a_new_and_into_a_live_target(manifest: ManifestPort) -> None:
    ids = checkpoint_ids(6)
    await manifest.commits.advance("src", "", ids[1], tail(ids[1]), None)
    await manifest.commits.advance("src", "", ids[4], tail(ids[4]), ids[1])
    source = await entry(manifest, "src")
    # a target with no item
    assert await manifest.upkeep.merge("dst", source, None) is True
    d = await entry(manifest, "dst")
    assert (d.latest_id, d.floor, d.heads, d.thread_id) == (ids[4], ids[1], set(), "dst")
    # conditioned on the target as read: it changed since
    assert await manifest.upkeep.merge("dst", source, None) is False
    # a live target keeps its own history beside the copy
    await manifest.commits.advance("own", "", ids[0], tail(ids[0]), None)
    await manifest.commits.advance("own", "", ids[5], tail(ids[5]), ids[0])
    target = await manifest.reads.read("own", "")
    assert await manifest.upkeep.merge("own", source, target) is True
    o = await entry(manifest, "own")
    assert (o.latest_id, o.floor, o.heads) == (ids[5], ids[0], {ids[4]})
    assert await manifest.upkeep.merge("own", source, target) is False  # stale


async def test_namespaces_and_scan_see_one_deployment_of_a_shared_table(
    backend: Backend,
) -> None:
    mine, theirs = backend.manifest(prefix="mine"), backend.manifest(prefix="theirs")
    await mine.setup.create()
    await theirs.setup.create()  # the same table, or a manifest of its own in the bucket
    (a,) = checkpoint_ids(1)
    for ns in ("", "b", "a|x", "é"):
        await mine.commits.advance("t", ns, a, tail(a), None)
    await mine.commits.advance("u", "", a, tail(a), None)
    await theirs.commits.advance("t", "", a, tail(a), None)
    await mine.deletions.tombstone("u")
    await mine.setup.mark_migrated()
    got = [e.checkpoint_ns for e in await mine.reads.namespaces("t")]
    assert sorted(got) == ["", "a|x", "b", "é"]
    assert [e.checkpoint_ns for e in await theirs.reads.namespaces("t")] == [""]
    scanned = [(e.thread_id, e.checkpoint_ns) async for page in mine.reads.scan() for e in page]
    assert sorted(scanned) == [("t", ""), ("t", "a|x"), ("t", "b"), ("t", "é")]
    assert await mine.setup.migrated() is True
    assert await theirs.setup.migrated() is False


async def test_legacy_entries_are_adopted(backend: Backend) -> None:
    m = backend.manifest()
    await m.setup.create()
    a, b = checkpoint_ids(2)
    await backend.put_raw_item(
        {
            "pk": {"S": "old-thread"},
            "sk": {"S": "~"},
            "thread_id": {"S": "old-thread"},
            "checkpoint_ns": {"S": ""},
            "latest_id": {"S": a},
            "latest_tail": {"S": tail(a)},
        }
    )
    await backend.put_raw_item({"pk": {"S": "junk"}, "sk": {"S": "~"}})  # skipped
    await m.commits.advance("new", "", b, tail(b), None)  # this layout: not legacy
    legacy = [e async for e in m.setup.legacy_entries()]
    if backend.objects:  # a manifest in the bucket holds its deployment's items only
        assert legacy == []
        return
    assert [(e.thread_id, e.latest_id, e.rev) for e in legacy] == [("old-thread", a, 0)]
    await m.setup.adopt(legacy[0])
    await m.setup.adopt(legacy[0])  # one there already stands
    e = await entry(m, "old-thread")
    assert (e.latest_id, e.floor, e.rev) == (a, "", 1)
    assert [x.thread_id async for x in m.setup.legacy_entries()] == ["old-thread"]  # left in place


async def test_a_marker_and_a_foreign_item_are_not_entries(backend: Backend) -> None:
    m = backend.manifest()
    await m.setup.create()
    await m.setup.mark_migrated()
    pk = m.deployment + "t"
    await backend.put_raw_item({"pk": {"S": pk}, "sk": {"S": "x"}, "latest_id": {"N": "1"}})
    (a,) = checkpoint_ids(1)
    await m.commits.advance("t", "", a, tail(a), None)
    assert [e.checkpoint_ns for e in await m.reads.namespaces("t")] == [""]
    assert [e.thread_id async for page in m.reads.scan() for e in page] == ["t"]
    raw = await m.reads.read("t", "")
    assert raw is not None and raw.latest is not None and raw.latest.latest_id == a


async def test_the_same_random_script_gives_the_same_items(s3_endpoint: Any) -> None:
    """Differential: one seeded script of commits (chains, forks, replays, stale
    parents), tombstones, drops and floors on both kinds; every outcome and every item
    (times aside) must be the same."""
    ids = checkpoint_ids(40)
    answers = {}
    names = unique_names()  # the same names on both: the same keys
    for kind in ("memory", "moto"):
        backend = Backend(kind, s3_endpoint.url, names)
        try:
            m = backend.manifest()
            await m.setup.create()
            answers[kind] = await random_script(m, random.Random(2), ids, 36)
        finally:
            await backend.aclose()
    for step, (mem, moto) in enumerate(zip(answers["memory"], answers["moto"], strict=True)):
        assert mem == moto, f"step {step}: {mem} != {moto}"


async def random_script(m: ManifestPort, rng: random.Random, ids: list[str], n: int) -> list[Any]:
    out: list[Any] = []
    threads = ["t1", "t2"]
    used: dict[str, list[str]] = {t: [] for t in threads}
    next_id = 0
    for _ in range(n):
        thread = rng.choice(threads)
        op = rng.choices(
            ["advance", "replay", "tombstone", "drop", "floor", "replace"], [7, 2, 1, 1, 1, 2]
        )[0]
        try:
            if op == "advance" and next_id < len(ids):
                cid = ids[next_id]
                next_id += 1
                parent = rng.choice([None, *used[thread][-3:]])
                await m.commits.advance(
                    thread, "", cid, tail(cid), parent, How(uses_delta=rng.random() < 0.3)
                )
                used[thread].append(cid)
                result: Any = "ok"
            elif op == "replay" and used[thread]:
                cid = rng.choice(used[thread])
                await m.commits.advance(thread, "", cid, tail(cid), None)
                result = "ok"
            elif op == "tombstone":
                d = await m.deletions.tombstone(thread)
                await m.deletions.release(d.keys, d.stamp)
                result = len(d.keys)
            else:
                e = await m.reads.latest(thread, "")
                if e is None:
                    result = None
                elif op == "drop":
                    result = await m.upkeep.drop(e)
                elif op == "floor":
                    result = await m.upkeep.raise_floor(e, min(e.tips), set(used[thread][-2:]))
                else:
                    new = Fields(e.latest_id, e.latest_tail, e.floor, False, 0, set(e.heads))
                    result = await m.upkeep.replace(e, new)
        except CheckpointConflictError as exc:
            result = f"refused: {str(exc).split(':')[0]}"
        raw = await m.reads.read(thread, "")
        out.append((op, thread, result, plain(raw)))
    return out


async def test_a_late_pass_is_found_once_due_and_moved_only_later(manifest: ManifestPort) -> None:
    """A deletion's late-pass record: the sweep's Scan yields it once due (and the
    thread's own reads never see it); another deletion's moves its due time and its
    upto each only later; its end removes it unless it was moved meanwhile."""
    a = checkpoint_ids(1)[0]
    await manifest.commits.advance("t", "", a, tail(a), None)
    now = int(manifest.now())
    reset(manifest)
    await manifest.deletions.note_late("t", Late(now + 100, a))
    await manifest.deletions.note_late("t", Late(now + 50, a))  # earlier: no effect
    assert counts(manifest) == expect(
        manifest,
        {"dynamodb.GetItem": 2, "dynamodb.UpdateItem": 1},
        {"s3.ListObjectsV2": 1, "s3.PutObject": 1, "s3.GetObject": 1},
    )

    async def lates() -> list[Expiry]:
        return [x async for page in manifest.reads.expired() for x in page if x.late is not None]

    assert await lates() == []  # not due
    await manifest.deletions.note_late("t", Late(now - 1, a))  # an earlier due: no effect either
    assert await lates() == []
    assert [e.thread_id for e in await manifest.reads.namespaces("t")] == ["t"]
    assert [e.thread_id async for page in manifest.reads.scan() for e in page] == ["t"]
    await manifest.deletions.note_late("u", Late(now - 1, a))
    b = checkpoint_ids(1)[0]  # newer than a
    await manifest.deletions.note_late("u", Late(now - 5, b))  # a deleter behind: its upto only
    assert await lates() == [Expiry("u", None, Late(now - 1, b))]
    await manifest.deletions.late_done("u", now - 2)  # another pass's end: the record stays
    assert len(await lates()) == 1
    await manifest.deletions.late_done("u", now - 1)
    assert await lates() == []
