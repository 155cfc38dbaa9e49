"""Garbage exports: a duplicated line, reordered write records."""

from __future__ import annotations

import io

import orjson
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from helpers import cfg, dump
from langgraph_s3 import CorruptObjectError
from langgraph_s3.graphs import CHAT_TURNS, chat_graph, nested_graph
from langgraph_s3.transfer import aexport_threads, aimport_threads


async def exported() -> list[bytes]:
    src = InMemorySaver()
    g = chat_graph().compile(checkpointer=src)
    for text in CHAT_TURNS[:2]:
        await g.ainvoke({"messages": [("user", text)]}, cfg("t"))
    buf = io.BytesIO()
    await aexport_threads(src, ["t"], buf)
    return buf.getvalue().splitlines(keepends=True)


async def test_a_duplicated_line_half_imports_a_thread() -> None:
    lines = await exported()
    kinds = [orjson.loads(line).get("kind") for line in lines]
    i = kinds.index("checkpoint") + 1
    bad = [*lines[:i], lines[i - 1], *lines[i:]]  # a line written twice
    dst = InMemorySaver()
    with pytest.raises(Exception) as err:
        await aimport_threads(dst, io.BytesIO(b"".join(bad)))
    print("error:", err.value)
    n = len(await dump(dst, "t"))
    print("imported checkpoints:", n, "of", kinds.count("checkpoint"))
    assert n == 0, "half a thread was imported before the error"


async def test_write_records_of_another_checkpoint_are_attached_to_the_wrong_one() -> None:
    src = InMemorySaver()
    g = nested_graph().compile(checkpointer=src)
    await g.ainvoke({"trail": []}, cfg("w", ns=None))  # waits on an interrupt: pending writes
    buf = io.BytesIO()
    await aexport_threads(src, ["w"], buf)
    lines = buf.getvalue().splitlines(keepends=True)
    recs = [orjson.loads(line) for line in lines]
    w = next(i for i, r in enumerate(recs) if r.get("kind") == "write")
    cks = [i for i, r in enumerate(recs) if r.get("kind") == "checkpoint"]
    # a write moved after a checkpoint that is not its own
    other = next(i for i in cks if recs[i]["checkpoint_id"] != recs[w]["checkpoint_id"] and i > w)
    moved = [*lines[:w], *lines[w + 1 : other + 1], lines[w], *lines[other + 1 :]]
    with pytest.raises(CorruptObjectError, match="out of place"):
        await aimport_threads(InMemorySaver(), io.BytesIO(b"".join(moved)))
