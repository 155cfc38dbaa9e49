"""A thread replaced by an import (same thread id, same checkpoint ids, other objects)
while another process knows its old life: that process neither builds on what it
knew of the old life (cached objects, where values were held) nor commits a checkpoint
whose parent it read in the old life."""

from __future__ import annotations

import contextlib
import io
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from langgraph.checkpoint.base import CheckpointTuple, empty_checkpoint

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.checkpoint.packs import PackedObjects, PackGoneError
from langgraph_s3.core.put_mode import CREATE
from langgraph_s3.errors import CheckpointConflictError
from langgraph_s3.testing.fakes import MemoryBucket, MemoryObjectStore, MemoryTable, memory_saver
from langgraph_s3.testing.graphs import chat_graph

pytestmark = pytest.mark.unit


def cfg(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


async def turn(graph: Any, text: str) -> None:
    await graph.ainvoke({"messages": [("user", text)]}, cfg("t"))


async def test_a_writer_that_knew_the_old_life_builds_only_on_the_imported_one() -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    # its caches (objects included) span the replace
    writer = memory_saver(bucket=bucket, table=table, cache_bytes=64 << 20)
    graph = chat_graph().compile(checkpointer=writer)
    for text in ("hello there", "what is the weather in Oslo?"):
        await turn(graph, text)
    admin = memory_saver(bucket=bucket, table=table)
    await admin.aprune(["t"], keep_last=1)  # the export's oldest names a parent it lacks
    file = io.BytesIO()
    await admin.aexport(["t"], file)
    file.seek(0)
    await admin.aimport(file, replace=True)  # same ids; the latest now holds it all
    await turn(graph, "thanks!")  # the writer's caches told where the old life kept them
    cold = memory_saver(bucket=bucket, table=table, cache_bytes=0)
    state = await chat_graph().compile(checkpointer=cold).aget_state(cfg("t"))
    assert [m.content for m in state.values["messages"]][-2:][0] == "thanks!"
    assert len(state.values["messages"]) == 8  # three turns, one with a tool call
    assert [c async for c in cold.alist(cfg("t"))]  # the whole history reads


async def test_a_checkpoint_continuing_the_replaced_life_is_discarded() -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table)
    graph = chat_graph().compile(checkpointer=writer)
    await turn(graph, "hello there")
    admin = memory_saver(bucket=bucket, table=table)
    file = io.BytesIO()
    await admin.aexport(["t"], file)  # the thread after one turn
    await turn(graph, "what is the weather in Oslo?")
    latest = await writer.aget_tuple(cfg("t"))  # the writer reads it (the old life)
    assert latest is not None
    before = dict(bucket.objects)
    file.seek(0)
    await admin.aimport(file, replace=True)  # back to one turn, same ids
    imported = await admin.aget_tuple(cfg("t"))
    assert imported is not None and imported.checkpoint["id"] < latest.checkpoint["id"]
    # the second turn's PUTs landed after the replace's deletion listed the thread
    late = {k: o for k, o in before.items() if k not in bucket.objects}
    assert late
    bucket.objects.update(late)
    nxt = dict(latest.checkpoint, id=_after(latest.checkpoint["id"]))
    with pytest.raises(CheckpointConflictError, match="replaced"):
        await writer.aput(latest.config, nxt, {"source": "loop", "step": 9}, {})
    cold = memory_saver(bucket=bucket, table=table, cache_bytes=0)
    now = await cold.aget_tuple(cfg("t"))
    assert now is not None and now.checkpoint["id"] == imported.checkpoint["id"]
    state = await chat_graph().compile(checkpointer=cold).aget_state(cfg("t"))
    assert len(state.values["messages"]) == 2  # the imported turn, whole


def _after(cid: str) -> str:
    """A checkpoint id just after ``cid`` (the same time, a higher sequence)."""
    head, tail = cid.rsplit("-", 1)
    return f"{head}-{int(tail, 16) + 1:012x}"


async def test_a_read_beside_the_put_does_not_move_the_life_it_commits_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The life a put commits in is the one its parent was read in, taken with the
    parent's holders: another request of the process reading the new life between the
    two (a UI polling the state) does not let the put build on the old life."""
    bucket, table = MemoryBucket(), MemoryTable()
    writer = memory_saver(bucket=bucket, table=table, cache_bytes=64 << 20)
    graph = chat_graph().compile(checkpointer=writer)
    for text in ("hello there", "what is the weather in Oslo?"):
        await turn(graph, text)
    admin = memory_saver(bucket=bucket, table=table)
    await admin.aprune(["t"], keep_last=1)
    latest = await writer.aget_tuple(cfg("t"))  # the run reads its parent: the old life
    assert latest is not None
    file = io.BytesIO()
    await admin.aexport(["t"], file)
    file.seek(0)
    await admin.aimport(file, replace=True)  # same ids, a new life
    objects = cast(MemoryObjectStore, writer.raw_objects)
    hook, fired = objects.request, []

    @contextlib.asynccontextmanager
    async def beside(operation: str, nbytes: int = 0) -> AsyncIterator[None]:
        if operation == "s3.PutObject" and not fired:  # the put's first request
            fired.append(operation)
            await writer.aget_tuple(cfg("t"))  # beside the put: the process sees the new life
        async with hook(operation, nbytes):
            yield

    monkeypatch.setattr(objects, "request", beside)
    nxt = dict(latest.checkpoint, id=_after(latest.checkpoint["id"]))
    with pytest.raises(CheckpointConflictError, match="replaced"):
        await writer.aput(latest.config, nxt, {"source": "loop", "step": 9}, {})
    assert fired  # the read did come beside the put
    cold = memory_saver(bucket=bucket, table=table, cache_bytes=0)
    state = await chat_graph().compile(checkpointer=cold).aget_state(cfg("t"))
    assert len(state.values["messages"]) == 6  # the import's, whole


async def _packed_thread_read_by_a_writer(
    bucket: MemoryBucket, table: MemoryTable
) -> tuple[AsyncS3Saver, CheckpointTuple]:
    """A packed thread whose latest the item holds (written after the packing): the
    writer reads it from the item alone, noting the pack without reading it."""
    writer = memory_saver(bucket=bucket, table=table)
    first = empty_checkpoint()
    done = await writer.aput(cfg("t"), first, {"source": "input", "step": -1}, {})
    assert (await memory_saver(bucket=bucket, table=table).apack(["t"])).threads == 1
    other = memory_saver(bucket=bucket, table=table)
    await other.aput(done, dict(first, id=_after(first["id"])), {"source": "loop", "step": 0}, {})
    reads = dict(writer.stats.by_operation)
    latest = await writer.aget_tuple(cfg("t"))
    assert latest is not None
    assert writer.stats.by_operation.get("s3.GetObject", 0) == reads.get("s3.GetObject", 0)
    return writer, latest


@pytest.mark.parametrize(("how", "says"), [("import", "replaced"), ("delete", "deleted")])
async def test_a_put_whose_pack_went_with_a_replace_or_deletion_is_no_corruption(
    how: str, says: str
) -> None:
    """The pack the writer noted is gone because the thread was replaced (an import's
    replace) or deleted since its read: the put follows the manifest (the thread is not
    packed any more) and the commit says what happened (a CheckpointConflictError),
    never that the pack is corrupt (advice that has an operator delete a healthy
    thread). Seeds 30516 and 31319 of the simulation."""
    bucket, table = MemoryBucket(), MemoryTable()
    writer, latest = await _packed_thread_read_by_a_writer(bucket, table)
    admin = memory_saver(bucket=bucket, table=table)
    if how == "import":
        file = io.BytesIO()
        await admin.aexport(["t"], file)
        file.seek(0)
        await admin.aimport(file, replace=True)  # same ids, a new life, no pack
    else:
        await admin.adelete_thread("t")
    assert not [k for k in bucket.objects if k.startswith("packs/")]
    nxt = dict(latest.checkpoint, id=_after(latest.checkpoint["id"]))
    with pytest.raises(CheckpointConflictError, match=says):
        await writer.aput(latest.config, nxt, {"source": "loop", "step": 1}, {})
    now = await memory_saver(bucket=bucket, table=table).aget_tuple(cfg("t"))
    if how == "import":
        assert now is not None and now.checkpoint["id"] == latest.checkpoint["id"]
    else:
        assert now is None


async def test_a_pack_the_manifest_still_names_is_missing() -> None:
    """Following the manifest excuses no pack that is truly gone: while the manifest
    still names it (no new life, no deletion), a write under the thread says so
    (PackGoneError), after asking the manifest again."""
    bucket, table = MemoryBucket(), MemoryTable()
    writer, _ = await _packed_thread_read_by_a_writer(bucket, table)
    (pack,) = [k for k in bucket.objects if k.startswith("packs/")]
    del bucket.objects[pack]  # lost by hand: the item names it still
    objects = cast(PackedObjects, writer.objects)
    asked = writer.stats.by_operation.get("dynamodb.GetItem", 0)
    with pytest.raises(PackGoneError):
        await objects.put("threads/t/ns/~/w/x/y/r", b"w", mode=CREATE)
    assert writer.stats.by_operation["dynamodb.GetItem"] == asked + 2  # asked again, twice
    assert not [k for k in bucket.objects if k.endswith("/x/y/r")]
