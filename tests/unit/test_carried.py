"""Carried writes (``CheckpointEnvelope.carried``) on the in-memory fakes: a copy is used
only in the version the listing shows, stays small, and garbage is named."""

from __future__ import annotations

from typing import Any

import ormsgpack
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_s3.core import codec
from langgraph_s3.errors import CorruptObjectError
from langgraph_s3.testing.fakes import MemoryBucket, MemoryTable, StoredObject, memory_saver

pytestmark = pytest.mark.unit
ERROR = "__error__"  # LangGraph's special channel for a task's error (WRITES_IDX_MAP)


def cfg(cid: str | None = None) -> dict[str, Any]:
    c = {"thread_id": "t", "checkpoint_ns": ""}
    if cid:
        c["checkpoint_id"] = cid
    return {"configurable": c}


@pytest.mark.usefixtures("writes_in_s3")
async def test_a_read_racing_an_overwrite_carries_the_version_it_read() -> None:
    """The listing shows version a, the GET finds b (written meanwhile): the process keeps
    b under b's own ETag; once the object is a again, list() serves a, as stored."""
    bucket, table = MemoryBucket(), MemoryTable()
    w = memory_saver(bucket=bucket, table=table)
    r = memory_saver(bucket=bucket, table=table)
    c1 = await w.aput(cfg(), empty_checkpoint(), {"source": "input", "step": -1}, {})
    await w.aput_writes(c1, [(ERROR, "error-a")], "task-1")
    store: Any = r.raw_objects
    real = store.get_with_etag
    fired = []

    async def racing(key: str) -> Any:  # another writer's overwrite lands just before
        if "/w/" in key and not fired:
            fired.append(key)
            await w.aput_writes(c1, [(ERROR, "error-b")], "task-1")
        return await real(key)

    store.get_with_etag = racing
    tup = await r.aget_tuple(cfg())
    store.get_with_etag = real
    assert fired and tup is not None
    await r.aput(tup.config, empty_checkpoint(), {"source": "loop", "step": 0}, {})
    await w.aput_writes(c1, [(ERROR, "error-a")], "task-1")  # last write wins: a again
    cold = memory_saver(bucket=bucket, table=table)
    by_id = await cold.aget_tuple(c1)
    listed = {t.config["configurable"]["checkpoint_id"]: t async for t in cold.alist(cfg())}
    assert by_id is not None and by_id.pending_writes == [("task-1", ERROR, "error-a")]
    assert listed[c1["configurable"]["checkpoint_id"]].pending_writes == by_id.pending_writes


async def test_compressible_writes_are_carried_only_when_small_uncompressed() -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    s = memory_saver(bucket=bucket, table=table)
    c1 = await s.aput(cfg(), empty_checkpoint(), {"source": "input", "step": -1}, {})
    for i in range(5):  # 2 MiB each, ~125 bytes compressed
        await s.aput_writes(c1, [("out", "x" * (2 << 20))], f"task-{i}")
    await s.aput_writes(c1, [("small", "y" * 100)], "task-s")
    await s.aput(c1, empty_checkpoint(), {"source": "loop", "step": 0}, {})
    sizes = sorted(len(o.body) for k, o in bucket.objects.items() if "/c/" in k)
    assert sizes[-1] < 4096, sizes  # not megabytes of carried copies
    listed = [t async for t in memory_saver(bucket=bucket, table=table).alist(cfg())]
    assert len(listed[1].pending_writes) == 6  # the large ones are fetched


@pytest.mark.parametrize(
    "garbage",
    [[[None, 7, 300_000_000]], [["w/k", '"e"', b"x" * (codec.CARRY_MAX + 1)]], [["k", 1, b""]]],
)
async def test_garbage_carried_entries_are_corrupt(garbage: Any) -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    s = memory_saver(bucket=bucket, table=table)
    await s.aput(cfg(), empty_checkpoint(), {"source": "input", "step": -1}, {})
    await s.aflush()  # stored, and read from S3, not from the manifest's copy
    (key,) = [k for k in bucket.objects if "/c/" in k]
    raw = ormsgpack.unpackb(codec.plain(bucket.objects[key].body))
    bucket.objects[key] = StoredObject(
        ormsgpack.packb({**raw, "carried": garbage}), '"x"', bucket.now(), None
    )
    with pytest.raises(CorruptObjectError, match="carried write"):
        await memory_saver(bucket=bucket, table=table).aget_tuple(cfg())


@pytest.mark.parametrize(
    "body", [b"\xc1\x01garbage", b"\xc1\x01", b"\x28\xb5\x2f\xfdgarbage", b"\xc1\xffzz"]
)
@pytest.mark.usefixtures("writes_in_s3")
async def test_a_damaged_write_object_is_named_on_every_read(body: bytes) -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    s = memory_saver(bucket=bucket, table=table)
    c1 = await s.aput(cfg(), empty_checkpoint(), {"source": "input", "step": -1}, {})
    await s.aput_writes(c1, [("a", 1)], "task-1")
    (wkey,) = [k for k in bucket.objects if "/w/" in k]
    bucket.objects[wkey] = StoredObject(body, '"x"', bucket.now(), None)
    for read in ("latest", "by_id", "list"):
        cold = memory_saver(bucket=bucket, table=table)
        with pytest.raises(CorruptObjectError):
            if read == "latest":
                await cold.aget_tuple(cfg())
            elif read == "by_id":
                await cold.aget_tuple(c1)
            else:
                _ = [t async for t in cold.alist(cfg())]
