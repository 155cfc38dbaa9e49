"""The manifest item stays small however many forks a thread has: past HEADS_INLINE
heads a writer's commit spills the older half to tip markers, and every fork stays
in the history (listed, readable by id, continued), until a prune removes them."""

from __future__ import annotations

import orjson
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from langgraph_s3.manifest import HEADS_INLINE
from langgraph_s3.testing.fakes import MemoryTable, memory_saver

pytestmark = pytest.mark.unit

FORKS = 1_600


def cfg(thread: str, cid: str | None = None) -> dict[str, object]:
    conf: dict[str, object] = {"thread_id": thread, "checkpoint_ns": ""}
    if cid:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


async def test_1600_forks_keep_the_item_small_and_every_fork_in_the_history() -> None:
    table = MemoryTable("forks")
    saver = memory_saver(table=table)
    root = empty_checkpoint()
    await saver.aput(cfg("t"), root, {"step": 0}, {})
    forks: list[str] = []
    biggest = 0
    for i in range(FORKS):
        c = empty_checkpoint()
        c["id"] = str(uuid6(clock_seq=i))
        await saver.aput(cfg("t", root["id"]), c, {"step": 1, "fork": i}, {})
        forks.append(c["id"])
        item = next(v for k, v in table.items.items() if k[1] == "~")
        biggest = max(biggest, len(orjson.dumps(item, default=lambda b: "x" * len(b))))
        assert len(item.get("heads", {}).get("SS", ())) <= HEADS_INLINE + 2
    assert biggest < 4_000  # bytes, at 1,600 forks (about 58 KB with every head inline)
    listed = [t.config["configurable"]["checkpoint_id"] async for t in saver.alist(cfg("t"))]
    assert sorted(listed) == sorted([root["id"], *forks])  # every fork, once
    for cid in (forks[0], forks[1], forks[FORKS // 2], forks[-2]):  # spilled or not
        got = await saver.aget_tuple(cfg("t", cid))
        assert got is not None and got.metadata["fork"] == forks.index(cid)
    # an old, spilled fork is continued like any other
    c = empty_checkpoint()
    await saver.aput(cfg("t", forks[3]), c, {"step": 2}, {})
    assert (await saver.aget_tuple(cfg("t"))).checkpoint["id"] == c["id"]  # type: ignore[union-attr]
    assert len([t async for t in saver.alist(cfg("t"))]) == FORKS + 2
    # a prune keeps the latest line only: forks, markers and all go
    await saver.aprune(["t"], keep_last=2)
    after = [t.config["configurable"]["checkpoint_id"] async for t in saver.alist(cfg("t"))]
    assert after == [c["id"], forks[3]]
    entry = await saver.manifest.reads.latest("t", "")
    assert entry is not None and not entry.spilled and not entry.heads
    keys = saver.layout.namespace("t", "")
    assert await saver.raw_objects.list_all(keys.prefix + "t/") == []  # every generation
