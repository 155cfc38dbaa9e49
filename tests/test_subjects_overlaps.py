"""Forgettings that overlap, and a subject that comes back between them, on moto (S3,
DynamoDB and KMS over HTTP): a run that read the subject's record before another run
ended its life erases nothing of the next life, and writes no receipt for it; and what
a deployment held before it declared subjects (plain items, plain segments) is found
and erased too."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from langgraph_s3.checkpoint.saver.forgetting import Forgetting
from langgraph_s3.testing import MotoServer
from subjects_world import World

MEMORY = ("users", "alice", "memories")


@pytest_asyncio.fixture
async def world(s3_fresh: MotoServer) -> AsyncIterator[World]:
    w = World(s3_fresh)
    await w.saver().setup()
    yield w
    await w.aclose()


class Stopped(Exception):
    """A forgetting run stopped (a crash) after it destroyed the key."""


async def test_a_stale_forgetting_spares_the_next_life_and_its_receipt(world: World) -> None:
    await world.store(subject_key_seconds=1).aput(MEMORY, "old", {"text": "life one"})
    a = world.saver(subject_label=1, subject_key_seconds=1)
    b = world.saver(subject_label=1, subject_key_seconds=1)
    began = await a.aforget("alice", wait=False)
    later = a.manifest.now() + 10_000

    async def meanwhile(_seconds: float) -> None:
        """While B waits out the bound: A ends life 1 and stops before clearing the
        index; alice comes back (life 2) and stores a memory in the same namespace."""
        a.manifest.clock = b.manifest.clock = lambda: later
        registry = a._w.seals.subjects.registry  # type: ignore[union-attr]

        async def stop(*_: object, **__: object) -> None:
            raise Stopped

        registry.drop_named = stop  # type: ignore[method-assign]
        with pytest.raises(Stopped):
            await a.aforget("alice")
        await world.store(subject_key_seconds=1).aput(MEMORY, "new", {"text": "life two"})

    receipt = await Forgetting(b._w).aforget("alice", sleep=meanwhile)
    assert receipt["life"] == 1 and receipt["subject"] == began["subject"]
    got = await world.store().aget(MEMORY, "new")
    assert got is not None and got.value == {"text": "life two"}
    assert await world.store().aget(MEMORY, "old") is None
    record = await b._w.seals.subjects.registry.get(began["subject"])  # type: ignore[union-attr]
    assert record is not None and record.life == 2 and record.state == "live"
    assert record.receipt is None  # life 2's forgetting will write its own
    chain = [r async for r in b.receipts().all()]
    assert [r["life"] for r in chain] == [1]
    c = world.saver(subject_label=1, subject_key_seconds=1)
    await c.aforget("alice", wait=False)
    c.manifest.clock = lambda: later + 20_000
    second = await c.aforget("alice")
    assert second["life"] == 2 and second["seq"] == 2 and second["deleted"]["store_items"] == 1
    assert await world.store().aget(MEMORY, "new") is None


async def test_items_stored_before_subjects_are_found_and_erased(world: World) -> None:
    """Plain items (a deployment before it declared subjects), one namespace of alice's
    never written since, and a wider segment holding her items in plain: a read names
    the namespace for her, and forgetting erases the items and drops the segment."""
    from langgraph_s3 import AsyncS3Store

    plain = AsyncS3Store(endpoint_url=world.moto.url, **world.names)
    world.stores.append(plain)
    await plain.aput(MEMORY, "m0", {"text": "alice-plain-words"})
    await plain.aput(("users", "bob", "memories"), "m0", {"text": "bob-plain-words"})
    await plain.acompact(("users",))  # a segment of both, in plain
    hits = await world.store().asearch(("users",))  # read with subjects: names them
    assert len(hits) == 2
    saver = world.saver(subject_label=1)
    plan = await saver.aforget("alice", dry_run=True)
    assert plan["store_namespaces"] == 1 and plan["key"] == "none"
    receipt = await saver.aforget("alice")
    assert receipt["deleted"]["store_items"] == 1 and receipt["life"] is None  # never sealed
    assert await world.store().aget(MEMORY, "m0") is None
    assert world.plaintext("alice-plain-words") == []
    assert world.plaintext("bob-plain-words")  # bob's own item, still plain, still his
    assert (await world.store().aget(("users", "bob", "memories"), "m0")) is not None
