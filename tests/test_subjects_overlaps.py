"""Forgettings that overlap, and a subject that comes back between them, on moto (S3,
DynamoDB and KMS over HTTP): a run that read the subject's record before another run
ended its life erases nothing of the next life, and writes no receipt for it; and what
a deployment held before it declared subjects (plain items, plain segments) is found
and erased too."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

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
    assert await b._w.seals.subjects.registry.life_of(began["subject"], 2) is None  # type: ignore[union-attr]
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
    never written since, and a wider segment holding her items in plain: a read of the
    item names the namespace for her, and forgetting erases the items and drops the
    segment."""
    from langgraph_s3 import AsyncS3Store

    plain = AsyncS3Store(endpoint_url=world.moto.url, **world.names)
    world.stores.append(plain)
    await plain.aput(MEMORY, "m0", {"text": "alice-plain-words"})
    await plain.aput(("users", "bob", "memories"), "m0", {"text": "bob-plain-words"})
    await plain.acompact(("users",))  # a segment of both, in plain
    reader = world.store()
    hits = await reader.asearch(("users",))  # through the segment: names nothing
    assert len(hits) == 2
    for user in ("alice", "bob"):  # read from its object: names it for its subject
        assert await reader.aget(("users", user, "memories"), "m0") is not None
    saver = world.saver(subject_label=1)
    plan = await saver.aforget("alice", dry_run=True)
    assert plan["store_namespaces"] == 1 and plan["key"] == "none"
    receipt = await saver.aforget("alice")
    assert receipt["deleted"]["store_items"] == 1 and receipt["life"] is None  # never sealed
    assert await world.store().aget(MEMORY, "m0") is None
    assert world.plaintext("alice-plain-words") == []
    assert world.plaintext("bob-plain-words")  # bob's own item, still plain, still his
    assert (await world.store().aget(("users", "bob", "memories"), "m0")) is not None


async def test_a_life_whose_run_stopped_after_its_key_gets_its_receipt_later(world: World) -> None:
    """A run destroys life 1's key and stops; alice comes back (life 2) before anyone runs
    it again. The next forgetting of alice writes life 1's receipt (owed) before its own."""
    a = world.saver(subject_label=1, subject_key_seconds=1)
    await world.store(subject_key_seconds=1).aput(MEMORY, "old", {"text": "life one"})
    began = await a.aforget("alice", wait=False)
    later = a.manifest.now() + 10_000
    a.manifest.clock = lambda: later
    registry = a._w.seals.subjects.registry  # type: ignore[union-attr]

    async def stop(*_: object, **__: object) -> None:
        raise Stopped

    registry.drop_named = stop  # type: ignore[method-assign]
    with pytest.raises(Stopped):
        await a.aforget("alice")  # its key destroyed, then the process dies
    await world.store(subject_key_seconds=1).aput(MEMORY, "new", {"text": "life two"})
    rerun = world.saver(subject_label=1, subject_key_seconds=1)
    going = await rerun.aforget("alice", wait=False)
    assert going["state"] == "forgetting" and going["life"] == 2
    chain = [r async for r in rerun.receipts().all()]
    assert [(r["subject"], r["life"]) for r in chain] == [(began["subject"], 1)]  # owed first
    assert chain[0]["deleted"]["store_items"] == 1 and chain[0]["key_destroyed"]
    rerun.manifest.clock = lambda: later + 20_000
    second = await rerun.aforget("alice")
    assert second["life"] == 2 and second["seq"] == 2
    assert await rerun.receipts().verify() is None


async def test_a_run_that_stalled_before_marking_writes_no_receipt_for_the_next_life(
    world: World,
) -> None:
    """A run reads alice's live record (life 1) and stalls; another forgets life 1 and
    alice comes back. The stalled run must not mark, count or write a receipt for life 2."""
    a = world.saver(subject_label=1, subject_key_seconds=1)
    b = world.saver(subject_label=1, subject_key_seconds=1)
    await world.store(subject_key_seconds=1).aput(MEMORY, "old", {"text": "life one"})
    later = a.manifest.now() + 10_000
    subjects = b._w.seals.subjects  # type: ignore[union-attr]
    begins = subjects.forget_begins

    async def stalled(subject: str, life: int | None = None) -> Any:
        await a.aforget("alice", wait=False)  # meanwhile: life 1 forgotten by another run
        a.manifest.clock = b.manifest.clock = lambda: later
        await a.aforget("alice")
        await world.store(subject_key_seconds=1).aput(MEMORY, "new", {"text": "life two"})
        return await begins(subject, life)

    subjects.forget_begins = stalled  # type: ignore[method-assign]
    done = await b.aforget("alice")
    assert done["life"] == 1 and done["seq"] == 1  # life 1's receipt, found
    record = await subjects.registry.get(done["subject"])
    assert record is not None and record.life == 2 and record.state == "live"
    assert await subjects.registry.life_of(done["subject"], 2) is None
    assert [r["life"] async for r in b.receipts().all()] == [1]
    got = await world.store().aget(MEMORY, "new")
    assert got is not None and got.value == {"text": "life two"}
