"""The manifest's staging port (``core.staging``), held to one contract on the fake
(memory) and on DynamoDB (moto): a staged thread is nobody's until it is published,
whole; a claim is one import's; a stage whose claim ran out is dropped, with the
late pass that removes what it wrote recorded first."""

from __future__ import annotations

import pytest
from unit_helpers import Backend, checkpoint_ids, counts, expect, on_objects, reset

from langgraph_s3.core.ports import ManifestPort
from langgraph_s3.core.staging import Claim, staging

pytestmark = pytest.mark.unit


@pytest.fixture
def backend(tables: Backend) -> Backend:
    """Every table: DynamoDB's (memory, moto) and the object manifest's."""
    return tables


NAMESPACES = 60
"""More subgraph namespaces than one transaction publishes (49)."""


def tail(cid: str) -> str:
    return f"tail-of-{cid}"


def claim(m: ManifestPort, token: str, upto: str, seconds: int = 120) -> Claim:
    return Claim(token, int(m.now()) + seconds, upto)


async def staged_thread(m: ManifestPort, token: str, ids: list[str], ns: int = 0) -> None:
    """Commit ``ids`` (a chain) to the thread's root, and one to ``ns`` subgraph
    namespaces, in import ``token``'s stage."""
    with staging(m.deployment, "t", token):
        parent = None
        for cid in ids:
            await m.commits.advance("t", "", cid, tail(cid), parent)
            parent = cid
        for i in range(ns):
            await m.commits.advance("t", f"child:{i}", ids[-1], tail(ids[-1]), None)


async def test_a_staged_thread_is_read_by_nobody_until_published(manifest: ManifestPort) -> None:
    ids = checkpoint_ids(3)
    assert await manifest.staging.stage("t", claim(manifest, "a", ids[-1])) is None
    await staged_thread(manifest, "a", ids, ns=2)
    assert (
        await manifest.reads.latest("t", "") is None and await manifest.reads.namespaces("t") == []
    )
    assert [t async for page in manifest.reads.threads() for t in page] == []
    assert [e async for page in manifest.reads.scan() for e in page] == []
    with staging(manifest.deployment, "t", "a"):  # the import reads its own
        staged = await manifest.reads.latest("t", "")
        assert staged is not None and staged.latest_id == ids[-1]
    reset(manifest)
    assert await manifest.staging.publish("t", "a") is True
    assert counts(manifest) == expect(
        manifest,
        {"dynamodb.GetItem": 1, "dynamodb.Query": 2, "dynamodb.TransactWriteItems": 1},
        # the claim's GET; the stage's and the thread's listings; 6 parts, each an
        # intent and a resolution, 1 decision; the stage's marker; the decision deleted
        {"s3.GetObject": 1, "s3.ListObjectsV2": 4, "s3.PutObject": 15, "s3.DeleteObjects": 1},
    )
    e = await manifest.reads.latest("t", "")
    assert e is not None and e.latest_id == ids[-1] and e.floor == ids[0]
    assert e.rev == staged.rev  # the root was absent: revs go on from the stage's
    assert sorted(x.checkpoint_ns for x in await manifest.reads.namespaces("t")) == [
        "",
        "child:0",
        "child:1",
    ]
    assert await manifest.staging.staged_claim("t") is None
    with staging(manifest.deployment, "t", "a"):
        assert await manifest.reads.namespaces("t") == []  # the stage is empty
    assert await manifest.staging.publish("t", "a") is False  # once


async def test_a_thread_of_many_namespaces_is_published_root_last(manifest: ManifestPort) -> None:
    ids = checkpoint_ids(2)
    await manifest.staging.stage("t", claim(manifest, "a", ids[-1]))
    await staged_thread(manifest, "a", ids, ns=NAMESPACES)
    reset(manifest)
    assert await manifest.staging.publish("t", "a") is True
    # 61 items, 2 parts each: 49 subgraph namespaces, then the other 11 with the root
    if on_objects(manifest):  # 2 transactions writing 123 items: an intent and a
        # resolution each, and a decision each
        assert counts(manifest)["s3.PutObject"] == 2 * 123 + 2
    else:
        assert counts(manifest)["dynamodb.TransactWriteItems"] == 2
    assert len(await manifest.reads.namespaces("t")) == NAMESPACES + 1


async def test_a_claim_is_one_imports(manifest: ManifestPort) -> None:
    a, b = claim(manifest, "a", "x"), claim(manifest, "b", "x")
    assert await manifest.staging.stage("t", a) is None
    other = await manifest.staging.stage("t", b)
    assert other is not None and other.token == "a" and other.until == a.until
    assert await manifest.staging.staged_claim("t") == a._replace(rev=None)
    renewed = a._replace(until=a.until + 60)
    assert await manifest.staging.stage("t", renewed, renew=True) is None
    assert (await manifest.staging.staged_claim("t")) == renewed
    gone = await manifest.staging.stage("t", b._replace(until=b.until + 60), renew=True)
    assert gone is not None and gone.until == 0  # not b's to renew
    assert await manifest.staging.stage("u", b) is None  # another thread: its own claim


async def test_a_thread_that_changed_since_the_claim_is_not_published(
    manifest: ManifestPort,
) -> None:
    ids = checkpoint_ids(4)
    await manifest.staging.stage("t", claim(manifest, "a", ids[1]))
    await staged_thread(manifest, "a", ids[:2])
    await manifest.commits.advance("t", "", ids[2], tail(ids[2]), None)  # a conversation began
    assert await manifest.staging.publish("t", "a") is False
    e = await manifest.reads.latest("t", "")
    assert e is not None and e.latest_id == ids[2]  # untouched
    # a namespace born under an absent root, after the claim: refused as well
    await manifest.staging.stage("u", claim(manifest, "b", ids[1]))
    with staging(manifest.deployment, "u", "b"):
        await manifest.commits.advance("u", "child:0", ids[0], tail(ids[0]), None)
    await manifest.commits.advance("u", "child:0", ids[3], tail(ids[3]), None)
    assert await manifest.staging.publish("u", "b") is False
    assert await manifest.staging.publish("u", "nobody") is False


async def test_a_stage_is_dropped_by_its_import_or_once_its_claim_ran_out(
    manifest: ManifestPort,
) -> None:
    ids = checkpoint_ids(2)
    await manifest.staging.stage("t", claim(manifest, "a", ids[0]))
    await staged_thread(manifest, "a", ids)
    assert await manifest.staging.unstage("t", "a", dead=True) is None  # alive: kept
    assert await manifest.staging.staged_claim("t") is not None
    late = await manifest.staging.unstage("t", "a")  # its own import drops it
    assert late is not None and late.upto == ids[1]  # the newest it committed, or upto
    assert await manifest.staging.staged_claim("t") is None
    with staging(manifest.deployment, "t", "a"):
        assert await manifest.reads.namespaces("t") == []
    assert await manifest.staging.unstage("t", "a") is None  # nothing left

    # a claim that ran out: dropped by anyone, the late pass recorded first
    await manifest.staging.stage("t", claim(manifest, "b", ids[1], seconds=-1))
    await staged_thread(manifest, "b", ids[:1])
    expired = [x async for page in manifest.reads.expired() for x in page if x.late is None]
    # the claim's partition and the import's own: each found, each names the import
    assert [(x.thread_id, x.stage) for x in expired] == [("t", "b"), ("t", "b")]
    late = await manifest.staging.unstage("t", "b", dead=True)
    assert late is not None and late.upto == ids[1]
    due = [x async for page in manifest.reads.expired() for x in page]
    assert [(x.thread_id, x.late, x.stage) for x in due] == [("t", late, None)]  # its late pass
