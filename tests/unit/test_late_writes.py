"""A task's writes whose PUT was on its way when its thread was deleted or replaced
(a Lambda frozen mid-request, a task that ended as the user deleted the thread): a
write key names a task id no deletion can know, so no erasure marker refuses it; the
deletion's late pass removes it once every PUT sent before the deletion has landed,
and a task that ran past its license asks the item before it writes at all."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from unit_helpers import FrozenWrites, HeldStep

from langgraph_s3.checkpoint import pending
from langgraph_s3.checkpoint.erasure import ERASED, late_pass_seconds
from langgraph_s3.errors import CheckpointConflictError
from langgraph_s3.manifest.decide import LATE_SK
from langgraph_s3.testing.fakes import MemoryBucket, MemoryTable, memory_saver
from langgraph_s3.testing.graphs import chat_graph

pytestmark = pytest.mark.unit

CFG: Any = {"configurable": {"thread_id": "t"}}
SECRET = "my card number is 4111"


def clocked() -> tuple[list[float], MemoryBucket, MemoryTable]:
    now = [1_800_000_000.0]
    return now, MemoryBucket(clock=lambda: now[0]), MemoryTable(clock=lambda: now[0])


def alive(bucket: MemoryBucket, keys: list[str]) -> list[str]:
    return [k for k in keys if k in bucket.objects and bucket.objects[k].body != ERASED]


def late_records(table: MemoryTable) -> list[Any]:
    return [i for i in table.items.values() if i["sk"]["S"] == LATE_SK]


async def exported_then_frozen(
    bucket: MemoryBucket, table: MemoryTable, tmp_path: Any
) -> tuple[Any, Any, Any, FrozenWrites, asyncio.Future[Any]]:
    """A thread of one turn, exported; then a second turn whose write PUTs are sent and
    held back: (writer, admin, the export's path, the frozen PUTs, the turn)."""
    writer = memory_saver(bucket=bucket, table=table)
    graph = chat_graph().compile(checkpointer=writer)
    await graph.ainvoke({"messages": [("user", "hello")]}, CFG)
    admin = memory_saver(bucket=bucket, table=table)
    export = tmp_path / "t.jsonl"
    await admin.aexport(["t"], export)
    frozen = FrozenWrites(writer)
    turn = asyncio.ensure_future(graph.ainvoke({"messages": [("user", SECRET)]}, CFG))
    await frozen.sent.wait()
    return writer, admin, export, frozen, turn


@pytest.mark.usefixtures("writes_in_s3")
@pytest.mark.parametrize("then", ["deleted", "begun again", "imported"])
async def test_writes_sent_before_a_deletion_go_with_its_late_pass(
    then: str, tmp_path: Any
) -> None:
    """The writer's task writes are sent, then the thread is deleted (and a new
    conversation begins on the id, or an import replaces it with its own export, whose
    ids are the old ones), then the writes land: the next sweep once the pass is due
    removes them, and nothing of the life now there."""
    now, bucket, table = clocked()
    _, admin, export, frozen, turn = await exported_then_frozen(bucket, table, tmp_path)
    await admin.adelete_thread("t")
    fresh = chat_graph().compile(checkpointer=memory_saver(bucket=bucket, table=table))
    if then == "begun again":
        await fresh.ainvoke({"messages": [("user", "a new conversation")]}, CFG)
    elif then == "imported":
        await admin.aimport(export)
    frozen.gate.set()  # the writer thaws: its writes land
    outcome = await asyncio.gather(turn, return_exceptions=True)
    assert isinstance(outcome[0], CheckpointConflictError)  # its next put is refused
    assert alive(bucket, frozen.keys) != []  # the deleted conversation is back in S3
    kept = {k: o.body for k, o in bucket.objects.items() if k not in frozen.keys}
    state = (await fresh.aget_state(CFG)).values.get("messages", [])

    assert (await admin.asweep_ttl()).threads == 0  # not due: a PUT may still land
    assert alive(bucket, frozen.keys) != [] and len(late_records(table)) == 1
    now[0] += late_pass_seconds(admin.clients.limits.request_timeout) + 1
    await admin.asweep_ttl()
    assert alive(bucket, frozen.keys) == []
    assert late_records(table) == []
    assert (await fresh.aget_state(CFG)).values.get("messages", []) == state
    if then != "deleted":  # the life there keeps every object it has
        left = {k: o.body for k, o in bucket.objects.items()}
        assert {k: b for k, b in kept.items() if b != ERASED} == {
            k: b for k, b in left.items() if b != ERASED and k in kept
        }
        assert len(state) == 2
    else:
        assert [k for k, o in bucket.objects.items() if "/t/" in k and o.body != ERASED] == []


@pytest.mark.parametrize("then", ["deleted", "begun again", "imported"])
async def test_held_writes_whose_put_lands_after_a_deletion_store_nothing(
    then: str, tmp_path: Any
) -> None:
    """The task's writes are held by the item (acknowledged), their object's PUT is
    frozen; the thread is deleted (and begun again, or imported over): the deletion took
    the held writes and marked their keys, so the thawed PUT stores nothing, at once,
    and the life now there is whole."""
    _, bucket, table = clocked()
    writer, admin, export, frozen, turn = await exported_then_frozen(bucket, table, tmp_path)
    held = [i for i in table.items.values() if any(n.startswith("hw:") for n in i)]
    assert held, "the writes are held by the item"
    await admin.adelete_thread("t")
    assert not any(n.startswith("hw:") for i in table.items.values() for n in i)
    fresh = chat_graph().compile(checkpointer=memory_saver(bucket=bucket, table=table))
    if then == "begun again":
        await fresh.ainvoke({"messages": [("user", "a new conversation")]}, CFG)
    elif then == "imported":
        await admin.aimport(export)
    state = (await fresh.aget_state(CFG)).values.get("messages", [])
    frozen.gate.set()  # the writer thaws: its PUTs go out
    outcome = await asyncio.gather(turn, return_exceptions=True)
    # the turn waited on no PUT of its writes: it ended before the deletion, or its
    # next put (or writes) after it was refused
    assert isinstance(outcome[0], dict | CheckpointConflictError), outcome
    await writer.aflush()
    assert alive(bucket, frozen.keys) == []  # nothing of it landed
    assert not any(SECRET.encode() in o.body for o in bucket.objects.values())
    assert (await fresh.aget_state(CFG)).values.get("messages", []) == state
    assert len(state) == {"deleted": 0, "begun again": 2, "imported": 2}[then]


@pytest.mark.usefixtures("writes_in_s3")
async def test_a_task_past_its_license_asks_the_item_before_its_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A task that ran longer than ``WRITE_LICENSE`` (here: any) asks the item before its
    writes' PUT (1 GetItem, or its checkpoint's own put here): on a live thread the
    writes go on."""
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    chat = chat_graph().compile(checkpointer=writer)
    asked = []
    for license in (pending.WRITE_LICENSE, -1.0):
        monkeypatch.setattr(pending, "WRITE_LICENSE", license)
        await chat.ainvoke({"messages": [("user", "hi")]}, CFG)
        writer.stats.reset()
        await chat.ainvoke({"messages": [("user", "more")]}, CFG)
        asked.append(writer.stats.by_operation.get("dynamodb.GetItem", 0))
    # the turn's first writes (of the checkpoint it read) ask the item, 1 GetItem; the
    # next ones are of a checkpoint whose put is in progress here: its commit answers
    assert asked[1] - asked[0] == 1
    assert len((await chat.aget_state(CFG)).values["messages"]) == 8


async def test_a_task_that_outlived_its_license_stores_no_writes_for_a_deleted_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The thread is deleted while a task runs past its license: the task's writes
    are not stored (before: their object was PUT after the deletion)."""
    monkeypatch.setattr(pending, "WRITE_LICENSE", -1.0)
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    held = HeldStep(f"about {SECRET}")
    graph = held.graph(writer)
    before = set(bucket.objects)
    turn = asyncio.ensure_future(graph.ainvoke({"messages": [("user", SECRET)]}, CFG))
    await held.started.wait()
    await memory_saver(bucket=bucket, table=table).adelete_thread("t")
    held.go.set()
    with pytest.raises(CheckpointConflictError):  # its writes', or its next put's
        await turn
    await writer.aflush()
    # before: the task's writes were stored after the deletion (a w/ object)
    assert [k for k in set(bucket.objects) - before if "/w/" in k] == []


async def test_a_late_pass_waits_for_a_deletion_in_progress() -> None:
    """A pass due while another deletion of the thread holds its lease is left to a
    later sweep (that deletion records a later pass of its own)."""
    now, bucket, table = clocked()
    admin = memory_saver(bucket=bucket, table=table)
    await chat_graph().compile(checkpointer=admin).ainvoke({"messages": [("user", "hi")]}, CFG)
    await admin.adelete_thread("t")
    (first,) = late_records(table)
    now[0] += late_pass_seconds(admin.clients.limits.request_timeout) + 1
    await admin.manifest.deletions.tombstone("t")  # a deletion that holds its lease (2 minutes)
    report = await admin.asweep_ttl()
    assert report.skipped == 1 and late_records(table) == [first]
