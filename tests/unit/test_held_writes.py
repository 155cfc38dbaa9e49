"""Pending writes the manifest item holds until their objects are stored
(``checkpoint/held_writes.py``): one UpdateItem per ``put_writes``, nothing of S3 on the
caller's path, first-wins and last-wins kept across the item and S3, the count exact,
and every reader, maintenance and a process that never wrote them seeing them."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from langgraph.checkpoint.base import ERROR, INTERRUPT, Checkpoint
from langgraph.checkpoint.base.id import uuid6
from unit_helpers import FrozenWrites, small_checkpoint

from langgraph_s3.checkpoint.maintenance.settling import settling
from langgraph_s3.core.held import HeldWrite, InlineCommit, held_size, new_hold, write_size
from langgraph_s3.core.keys import invert_id
from langgraph_s3.manifest.decide import carried_change
from langgraph_s3.manifest.dynamodb import Expression
from langgraph_s3.manifest.schema import held_writes, inline_copies, write_attribute
from langgraph_s3.testing.fakes import memory_saver
from langgraph_s3.testing.objects import MemoryBucket
from langgraph_s3.testing.table import MemoryTable, holds

pytestmark = pytest.mark.unit

CFG: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def ck(cid: str | None = None) -> Checkpoint:
    out: Checkpoint = small_checkpoint(cid)
    return out


def root(table: MemoryTable, thread: str = "t") -> dict[str, Any]:
    (item,) = [
        i
        for i in table.items.values()
        if i["sk"]["S"] == "~" and i.get("thread_id", {}).get("S") == thread
    ]
    return item


def held_tails(table: MemoryTable) -> list[str]:
    return [w.tail for w in held_writes(root(table))]


def stored_writes(bucket: MemoryBucket) -> list[str]:
    return sorted(k for k in bucket.objects if "/w/" in k)


async def test_put_writes_is_one_update_and_every_read_sees_it_at_once() -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    w = memory_saver(bucket=bucket, table=table)
    c1 = await w.aput(CFG, ck(), {"step": -1}, {"v": 1})
    await w.aflush()
    w.stats.reset()
    frozen = FrozenWrites(w)  # its object never lands while the readers read
    await w.aput_writes(c1, [("a", 1), ("b", "two")], "task-1")
    assert w.stats.snapshot()["by_operation"] == {"dynamodb.UpdateItem": 1}
    assert stored_writes(bucket) == [] and len(held_tails(table)) == 1
    want = [("task-1", "a", 1), ("task-1", "b", "two")]
    cold = memory_saver(bucket=bucket, table=table)
    cold.stats.reset()
    latest = await cold.aget_tuple(CFG)
    assert latest is not None and latest.pending_writes == want
    # the item, then the checkpoint's object (stored: aflush): no LIST, no write GET
    assert cold.stats.snapshot()["by_operation"] == {"dynamodb.GetItem": 1, "s3.GetObject": 1}
    by_id = await memory_saver(bucket=bucket, table=table).aget_tuple(c1)
    assert by_id is not None and by_id.pending_writes == want
    listed = [t async for t in memory_saver(bucket=bucket, table=table).alist(CFG)]
    assert listed[0].pending_writes == want
    frozen.gate.set()
    await w.aflush()
    assert len(stored_writes(bucket)) == 1  # landed; the latest's writes stay held too
    assert len(held_tails(table)) == 1


async def test_the_next_commit_drops_the_stored_writes_and_the_count_is_exact() -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    w = memory_saver(bucket=bucket, table=table)
    cfg = await w.aput(CFG, ck(), {"step": -1}, {"v": 1})
    for step in range(6):
        await w.aput_writes(cfg, [("a", step), (ERROR, f"e{step}")], f"task-{step}")
        await asyncio.sleep(0)  # the background PUTs run
        cfg = await w.aput(cfg, ck(), {"step": step}, {"v": step + 2})
        item = root(table)
        exact = sum(held_size(c) for c in inline_copies(item))
        exact += sum(write_size(x) for x in held_writes(item))
        assert int(item["held_bytes"]["N"]) == exact
    await w.aflush()
    # the writes of every checkpoint a newer one was committed over left the item
    assert held_tails(table) == []
    assert len(stored_writes(bucket)) == 12
    listed = [t async for t in memory_saver(bucket=bucket, table=table).alist(CFG)]
    assert [len(t.pending_writes or []) for t in listed] == [0, 2, 2, 2, 2, 2, 2]


async def test_regular_writes_keep_the_first_write_per_index_across_item_and_s3() -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    a, b = memory_saver(bucket=bucket, table=table), memory_saver(bucket=bucket, table=table)
    c1 = await a.aput(CFG, ck(), {"step": -1}, {"v": 1})
    await a.aput_writes(c1, [("x", "first")], "task-1")
    await b.aget_tuple(CFG)  # b knows the life
    await b.aput_writes(c1, [("x", "second"), ("y", "added")], "task-1")  # a conflict
    want = [("task-1", "x", "first"), ("task-1", "y", "added")]
    got = await memory_saver(bucket=bucket, table=table).aget_tuple(CFG)
    assert got is not None and got.pending_writes == want
    c2 = await a.aput(c1, ck(), {"step": 0}, {"v": 2})
    await a.aflush()
    await b.aflush()
    await a.aput(c2, ck(), {"step": 1}, {"v": 3})  # drops c1's stored writes
    await a.aflush()
    assert held_tails(table) == []
    # held again: indexes 0 and 1 lose to S3's, index 2 is new
    await a.aput_writes(c1, [("x", "late"), ("y", "other"), ("z", "more")], "task-1")
    got = await memory_saver(bucket=bucket, table=table).aget_tuple(c1)
    assert got is not None and got.pending_writes == [*want, ("task-1", "z", "more")]
    await a.aflush()
    assert [k for k in stored_writes(bucket) if k.endswith("/r")]
    got = await memory_saver(bucket=bucket, table=table).aget_tuple(c1)
    assert got is not None and got.pending_writes == [*want, ("task-1", "z", "more")]


async def test_a_commit_drops_a_held_write_only_as_it_was_stored() -> None:
    """Held, stored, settled out by maintenance, then held again under the same key with
    other writes by a second run of the task (whose PUT has not landed): the first
    writer's next commit, which knows the first version stored, leaves the second held
    (a drop is conditioned on the write's value, not its name alone), the count stays
    exact, and first-write-wins per index holds across the item and S3."""
    bucket, table = MemoryBucket(), MemoryTable()
    p, r = memory_saver(bucket=bucket, table=table), memory_saver(bucket=bucket, table=table)
    upkeep = memory_saver(bucket=bucket, table=table)
    c1 = await p.aput(CFG, ck(), {"step": -1}, {"v": 1})
    await p.aput_writes(c1, [("x", "first")], "task-1")
    await p.aflush()  # stored; p knows it
    entry = await upkeep.manifest.reads.latest("t", "")
    assert entry is not None
    await settling(upkeep.manifest, upkeep.objects, upkeep.layout).reads.settle_entries([entry])
    assert held_tails(table) == []
    frozen = FrozenWrites(r)  # the second run's object does not land yet
    await r.aget_tuple(CFG)
    await r.aput_writes(c1, [("x", "second"), ("y", "added")], "task-1")
    assert len(held_tails(table)) == 1
    await p.aput(c1, ck(), {"step": 0}, {"v": 2})
    item = root(table)
    exact = sum(held_size(c) for c in inline_copies(item))
    exact += sum(write_size(x) for x in held_writes(item))
    assert int(item["held_bytes"]["N"]) == exact and len(held_tails(table)) == 1
    frozen.gate.set()
    await r.aflush()
    await p.aflush()
    got = await memory_saver(bucket=bucket, table=table).aget_tuple(c1)
    assert got is not None
    assert sorted(got.pending_writes or []) == [("task-1", "x", "first"), ("task-1", "y", "added")]


async def test_a_special_writes_late_put_never_replaces_a_newer_one() -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    a = memory_saver(bucket=bucket, table=table)
    c1 = await a.aput(CFG, ck(), {"step": -1}, {"v": 1})
    await a.aflush()
    frozen = FrozenWrites(a)
    await a.aput_writes(c1, [(INTERRUPT, "older")], "task-1")
    await frozen.sent.wait()  # its PUT is on its way, held back
    frozen.gate.set()
    b = memory_saver(bucket=bucket, table=table)
    await b.aget_tuple(CFG)
    await b.aput_writes(c1, [(INTERRUPT, "newer")], "task-1")
    await b.aflush()
    await a.aflush()
    for reader in (a, b, memory_saver(bucket=bucket, table=table)):
        got = await reader.aget_tuple(CFG)
        assert got is not None and got.pending_writes == [("task-1", INTERRUPT, "newer")]
    (key,) = stored_writes(bucket)
    got = await memory_saver(bucket=bucket, table=table).aget_tuple(c1)
    assert got is not None and got.pending_writes == [("task-1", INTERRUPT, "newer")]
    assert b"newer" in bucket.objects[key].body or b"newer" in _plain(bucket.objects[key].body)


def _plain(body: bytes) -> bytes:
    from langgraph_s3.core import codec

    return codec.plain(body)


async def test_a_large_special_write_takes_the_older_held_one_out() -> None:
    """An interrupt too large to hold goes to S3 first; the smaller one the item held
    for the same task would hide it: it leaves the item, and every read sees the new."""
    bucket, table = MemoryBucket(), MemoryTable()
    a = memory_saver(bucket=bucket, table=table)
    c1 = await a.aput(CFG, ck(), {"step": -1}, {"v": 1})
    await a.aput_writes(c1, [(INTERRUPT, "small")], "task-1")
    assert len(held_tails(table)) == 1
    big = os.urandom(12_000).hex()
    await a.aput_writes(c1, [(INTERRUPT, big)], "task-1")
    assert held_tails(table) == []
    for reader in (a, memory_saver(bucket=bucket, table=table)):
        got = await reader.aget_tuple(CFG)
        assert got is not None and got.pending_writes == [("task-1", INTERRUPT, big)]


async def test_writes_a_reaped_writer_left_held_are_stored_by_the_next_writer() -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    a = memory_saver(bucket=bucket, table=table)
    c1 = await a.aput(CFG, ck(), {"step": -1}, {"v": 1})
    await a.aflush()
    FrozenWrites(a)  # reaped: its PUT never lands
    await a.aput_writes(c1, [("a", "kept")], "task-1")
    b = memory_saver(bucket=bucket, table=table)
    got = await b.aget_tuple(CFG)
    assert got is not None and got.pending_writes == [("task-1", "a", "kept")]
    c2 = await b.aput(got.config, ck(), {"step": 0}, {"v": 2})
    await b.aflush()  # stored from here (learned from the item its commit read)
    await b.aput(c2, ck(), {"step": 1}, {"v": 3})
    await b.aflush()
    assert held_tails(table) == [] and len(stored_writes(bucket)) == 1
    got = await memory_saver(bucket=bucket, table=table).aget_tuple(c1)
    assert got is not None and got.pending_writes == [("task-1", "a", "kept")]


async def test_maintenance_and_export_see_the_held_writes(tmp_path: Any) -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    a = memory_saver(bucket=bucket, table=table)
    c1 = await a.aput(CFG, ck(), {"step": -1}, {"v": 1})
    FrozenWrites(a)  # not landed: held only
    await a.aput_writes(c1, [("a", "held"), (INTERRUPT, "stop?")], "task-1")
    admin = memory_saver(bucket=bucket, table=table)
    await admin.acopy_thread("t", "t2")
    copied = await admin.aget_tuple({"configurable": {"thread_id": "t2"}})
    want = [("task-1", INTERRUPT, "stop?"), ("task-1", "a", "held")]  # by (task, idx)
    assert copied is not None and copied.pending_writes == want
    assert held_tails(table) == []  # the copy stored them first (maintenance settles)
    export = tmp_path / "t.jsonl"
    await admin.aexport(["t"], export)
    await admin.adelete_thread("t")
    await admin.aimport(export)
    back = await memory_saver(bucket=bucket, table=table).aget_tuple(CFG)
    assert back is not None and back.pending_writes == want


async def test_a_tasks_writes_stored_in_s3_first_keep_the_held_first_ones() -> None:
    """The item holds a task's first write; a second put_writes of the task is too large
    to hold and goes to S3 first: the first write still wins, before and after its
    object lands."""
    bucket, table = MemoryBucket(), MemoryTable()
    a = memory_saver(bucket=bucket, table=table)
    c1 = await a.aput(CFG, ck(), {"step": -1}, {"v": 1})
    await a.aflush()
    frozen = FrozenWrites(a)
    await a.aput_writes(c1, [("a", "FIRST")], "task-1")
    b = memory_saver(bucket=bucket, table=table)
    big = os.urandom(9_000).hex()
    await b.aput_writes(c1, [("a", "SECOND"), ("b", big)], "task-1")
    want = [("task-1", "a", "FIRST"), ("task-1", "b", big)]
    for read in (CFG, c1):
        got = await memory_saver(bucket=bucket, table=table).aget_tuple(read)
        assert got is not None and got.pending_writes == want
    frozen.gate.set()
    await a.aflush()
    await b.aflush()
    got = await memory_saver(bucket=bucket, table=table).aget_tuple(c1)
    assert got is not None and got.pending_writes == want


async def test_a_read_by_id_sees_held_writes_once_the_latest_is_bare_no_more() -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    a = memory_saver(bucket=bucket, table=table)
    c1 = await a.aput(CFG, ck(), {"step": -1}, {"v": 1})
    FrozenWrites(a)  # the held one's object never lands
    await a.aput_writes(c1, [("a", "held")], "task-1")
    big = os.urandom(9_000).hex()
    b = memory_saver(bucket=bucket, table=table)
    await b.aput_writes(c1, [("b", big)], "task-2")  # S3 first: the latest is bare no more
    want = [("task-1", "a", "held"), ("task-2", "b", big)]
    for read in (CFG, c1):
        got = await memory_saver(bucket=bucket, table=table).aget_tuple(read)
        assert got is not None and got.pending_writes == want
    listed = [t async for t in memory_saver(bucket=bucket, table=table).alist(CFG)]
    assert listed[0].pending_writes == want


async def test_a_large_special_write_that_fails_leaves_the_held_one() -> None:
    """A's interrupt is held (A reaped before its object lands); B's larger one for the
    same task fails before it is stored: A's acknowledged write is still read."""
    from langgraph_s3.errors import EndpointTimeoutError

    bucket, table = MemoryBucket(), MemoryTable()
    a = memory_saver(bucket=bucket, table=table)
    c1 = await a.aput(CFG, ck(), {"step": -1}, {"v": 1})
    await a.aflush()
    FrozenWrites(a)
    await a.aput_writes(c1, [(INTERRUPT, "by A")], "task-1")
    b = memory_saver(bucket=bucket, table=table)
    real = b.objects.put

    async def dies(key: str, body: bytes, **kw: Any) -> Any:
        if "/w/" in key:
            raise EndpointTimeoutError("B's process dies before its PUT")
        return await real(key, body, **kw)

    b.objects.put = dies  # type: ignore[method-assign]
    with pytest.raises(EndpointTimeoutError):
        await b.aput_writes(c1, [(INTERRUPT, os.urandom(9_000).hex())], "task-1")
    for read in (CFG, c1):
        got = await memory_saver(bucket=bucket, table=table).aget_tuple(read)
        assert got is not None and got.pending_writes == [("task-1", INTERRUPT, "by A")]


@pytest.mark.parametrize("tail", ["checkpoint", "w/zz", "w/a.b"])
async def test_an_attribute_named_like_a_held_write_that_is_none_is_left_alone(
    tail: str,
) -> None:
    """Another program's ``hw:`` attribute (or a console edit) whose name is no write key:
    never stored over an object, never in an update's names; the thread reads, flushes,
    commits and is deleted as ever."""
    bucket, table = MemoryBucket(), MemoryTable()
    w = memory_saver(bucket=bucket, table=table)
    c1 = await w.aput(CFG, ck(), {"step": -1}, {"v": 1})
    c2 = await w.aput(c1, ck(), {"step": 0}, {"v": 2})
    await w.aflush()
    before = {k: o.body for k, o in bucket.objects.items()}
    name = tail
    if tail == "checkpoint":
        name = sorted(k for k in bucket.objects if "/c/" in k)[0].split("/c/", 1)[1]
    root(table)["hw:" + name] = {"B": b"junk"}
    await w.aput(c2, ck(), {"step": 1}, {"v": 3})
    await w.aflush()
    assert {k: o.body for k, o in bucket.objects.items() if k in before} == before
    assert not any(o.body == b"junk" for o in bucket.objects.values())
    got = await memory_saver(bucket=bucket, table=table).aget_tuple(c2)
    assert got is not None
    await memory_saver(bucket=bucket, table=table).adelete_thread("t")
    assert await memory_saver(bucket=bucket, table=table).aget_tuple(CFG) is None


def test_a_held_write_is_dropped_by_its_holds_tag_not_its_body_sent_again() -> None:
    """A commit that drops a stored write sends the 16 bytes of its hold's tag in its
    condition, whatever the write's size (the body went up once, with the hold), and the
    tag tells that hold apart from another under the same key, even of the same bytes."""
    older, newer = str(uuid6()), str(uuid6())
    write = new_hold(f"w/{invert_id(older)}x/task-1/r", os.urandom(4000))
    again = new_hold(write.tail, write.body)  # another run's hold of the same bytes
    assert again.tag != write.tag and len(write.tag) == 16
    inline = InlineCommit(drop_writes=(write,))
    _, removes, when, held = carried_change(inline, newer, "c/tail", counted=True)
    assert removes == ["bare", "hw:" + write.tail] and held == -write_size(write)
    rendered = Expression()
    rendered.condition(when)  # type: ignore[arg-type]
    sent = [v["B"] for v in rendered.values.values() if "B" in v]
    assert sent == [write.tag]
    item = {"hw:" + write.tail: write_attribute(write), "held_bytes": {"N": "9999"}}
    assert holds(when, item)  # type: ignore[arg-type]
    assert not holds(when, {**item, "hw:" + write.tail: write_attribute(again)})  # type: ignore[arg-type]
    assert held_writes(item) == (write,)


async def test_a_write_an_earlier_build_held_as_bare_bytes_is_stored_and_dropped() -> None:
    """An item an earlier build wrote holds a write as its bare bytes (no digest): it is
    read, stored by the next writer and dropped by its whole value, the count exact."""
    bucket, table = MemoryBucket(), MemoryTable()
    a = memory_saver(bucket=bucket, table=table)
    c1 = await a.aput(CFG, ck(), {"step": -1}, {"v": 1})
    await a.aflush()
    FrozenWrites(a)  # reaped before its PUT landed
    await a.aput_writes(c1, [("a", "kept")], "task-1")
    item = root(table)
    (new,) = held_writes(item)
    old = HeldWrite(new.tail, new.body, legacy=True)
    item["hw:" + new.tail] = write_attribute(old)  # as the earlier build held it
    item["held_bytes"] = {
        "N": str(int(item["held_bytes"]["N"]) - write_size(new) + write_size(old))
    }
    assert held_writes(item) == (old,)
    b = memory_saver(bucket=bucket, table=table)
    got = await b.aget_tuple(CFG)
    assert got is not None and got.pending_writes == [("task-1", "a", "kept")]
    c2 = await b.aput(got.config, ck(), {"step": 0}, {"v": 2})
    await b.aflush()
    await b.aput(c2, ck(), {"step": 1}, {"v": 3})
    await b.aflush()
    item = root(table)
    assert held_tails(table) == [] and len(stored_writes(bucket)) == 1
    assert int(item["held_bytes"]["N"]) == sum(held_size(c) for c in inline_copies(item))
    got = await memory_saver(bucket=bucket, table=table).aget_tuple(c1)
    assert got is not None and got.pending_writes == [("task-1", "a", "kept")]


async def test_a_special_write_held_again_with_the_same_bytes_is_not_dropped_as_stored() -> None:
    """P holds an interrupt "A" and stores it; maintenance settles it out; Q writes "B"
    (stored, settled); R writes "A" again and is frozen before its PUT. P's next commit
    knows "A" stored, but R's hold is another one (its own tag): it stays in the item,
    R's PUT stores it, and the last acknowledged write ("A") is what every read sees."""
    bucket, table = MemoryBucket(), MemoryTable()
    p = memory_saver(bucket=bucket, table=table)

    async def settle_all() -> None:
        up = memory_saver(bucket=bucket, table=table)
        entry = await up.manifest.reads.latest("t", "")
        assert entry is not None
        await settling(up.manifest, up.objects, up.layout).reads.settle_entries([entry])

    c1 = await p.aput(CFG, ck(), {"step": -1}, {"v": 1})
    await p.aflush()
    await p.aput_writes(c1, [(INTERRUPT, "A")], "task-1")
    await p.aflush()  # stored: P drops it at its next commit
    await settle_all()
    q = memory_saver(bucket=bucket, table=table)
    await q.aget_tuple(CFG)
    await q.aput_writes(c1, [(INTERRUPT, "B")], "task-1")
    await q.aflush()
    await settle_all()
    r = memory_saver(bucket=bucket, table=table)
    await r.aget_tuple(CFG)
    frozen = FrozenWrites(r)
    await r.aput_writes(c1, [(INTERRUPT, "A")], "task-1")  # the last write
    await p.aput(c1, ck(), {"step": 0}, {"v": 2})
    assert len(held_tails(table)) == 1  # R's hold stayed
    frozen.gate.set()
    await r.aflush()
    got = await memory_saver(bucket=bucket, table=table).aget_tuple(c1)
    assert got is not None and got.pending_writes == [("task-1", INTERRUPT, "A")]
