"""The library draws its own random tokens (lives, spills, packs, marks) from
``secrets``, never from ``uuid.uuid4``: a user's tests that patch ``uuid.uuid4`` for
deterministic ids (LangGraph's own do) get the sequence they expect; and ``copy_thread``
logs nothing about its own write objects."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest

from langgraph_s3.testing.fakes import MemoryBucket, MemoryTable, memory_saver
from langgraph_s3.testing.graphs import chat_graph

pytestmark = pytest.mark.unit


async def test_the_library_makes_no_uuid4_call(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = uuid.uuid4

    def counted() -> uuid.UUID:
        import traceback

        stack = traceback.extract_stack(limit=3)
        calls.append(stack[-2].filename)
        return real()

    monkeypatch.setattr(uuid, "uuid4", counted)
    bucket, table = MemoryBucket(), MemoryTable()
    saver = memory_saver(bucket=bucket, table=table)
    await saver.setup()
    graph = chat_graph().compile(checkpointer=saver)
    cfg: Any = {"configurable": {"thread_id": "t"}}
    for text in ("hello", "what is the weather in Oslo?"):
        await graph.ainvoke({"messages": [("user", text)]}, cfg)
    await saver.acopy_thread("t", "u")
    await saver.aprune(["t"], keep_last=1)
    await saver.apack(["u"])
    await saver.adelete_thread("t")
    await graph.ainvoke({"messages": [("user", "again")]}, cfg)  # a new life
    await saver.aclose()
    ours = [f for f in calls if "langgraph_s3" in f]
    assert ours == []


async def test_copy_thread_logs_nothing_of_its_write_objects(
    caplog: pytest.LogCaptureFixture,
) -> None:
    saver = memory_saver()
    graph = chat_graph().compile(checkpointer=saver)
    cfg: Any = {"configurable": {"thread_id": "t"}}
    await graph.ainvoke({"messages": [("user", "what is the weather in Oslo?")]}, cfg)
    with caplog.at_level(logging.DEBUG, logger="langgraph_s3"):
        await saver.acopy_thread("t", "u")
    assert [
        r.getMessage() for r in caplog.records if "not a checkpoint key" in r.getMessage()
    ] == []
    assert len([t async for t in saver.alist({"configurable": {"thread_id": "u"}})]) > 0
