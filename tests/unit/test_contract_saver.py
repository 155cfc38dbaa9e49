"""The saver on the fakes makes exactly the requests it makes on AWS (moto): the same
calls, counted per operation, and the same number of round trips.

Each graph turn ends with ``aflush``: which checkpoints a manifest item still holds when
the next call reads it depends on when their PUTs landed (the network's timing, not the
saver's logic); flushed, every call starts from the same state on both. A held copy
stored twice within a call for the same reason (its own PUT and the next commit's) is
counted apart."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.core.put_mode import Create
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.fakes import memory_saver
from langgraph_s3.testing.graphs import CHAT_TURNS, chat_graph, delta_graph

pytestmark = pytest.mark.unit


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


async def script(saver: AsyncS3Saver) -> list[tuple[str, dict[str, int], int]]:
    """Calls of every kind; what each one cost."""
    out: list[tuple[str, dict[str, int], int]] = []

    marks = [0]
    written = saver.manifest.held.written

    async def counted(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> bool:
        marks[0] += 1
        return await written(thread_id, checkpoint_ns, checkpoint_id)

    saver.manifest.held.written = counted  # type: ignore[method-assign]

    # A held copy's background PUT and the next commit may both store it, as the
    # network's timing has it: the second CREATE finds it there (a 412, then the GET
    # that shows it is the same bytes). Timing, not the saver: counted and set aside,
    # at most twice a call (a saver that stored everything twice would still fail).
    lost = [0]
    put = saver.raw_objects.put

    async def counted_put(key: str, body: bytes, *, mode: Any = None, **kw: Any) -> Any:
        etag = await put(key, body, mode=mode, **kw)
        if etag is None and isinstance(mode, Create):
            lost[0] += 1
        return etag

    saver.raw_objects.put = counted_put  # type: ignore[method-assign]

    def cost(name: str) -> None:
        ops = dict(saver.stats.by_operation)
        assert lost[0] <= 2, (name, lost[0], ops)
        for op in ("s3.PutObject", "s3.GetObject"):
            ops[op] = ops.get(op, 0) - lost[0]
            if not ops[op]:
                del ops[op]
        lost[0] = 0
        if "turn" in name and marks[0]:
            # whether a put_writes tells the manifest that its checkpoint has writes
            # depends on whether LangGraph had begun that checkpoint's put (its tasks
            # run ahead of it), which is scheduling, not the saver: not compared
            ops["dynamodb.UpdateItem"] -= marks[0]
        marks[0] = 0
        out.append((name, ops, saver.stats.round_trips))
        saver.stats.reset()

    saver.stats.reset()
    chat = chat_graph().compile(checkpointer=saver)
    for turn in CHAT_TURNS[:2]:
        await chat.ainvoke({"messages": [("user", turn)]}, cfg("c"))
        await saver.aflush()
        cost(f"turn {turn!r}")
    delta = delta_graph(3).compile(checkpointer=saver)
    for i in range(3):
        await delta.ainvoke({"messages": [("user", f"d{i}")]}, cfg("d"))
        await saver.aflush()
    cost("3 delta turns")
    await delta.aget_state(cfg("d"))
    cost("delta state")
    listed = [t async for t in saver.alist(cfg("c"))]
    cost("alist")
    await saver.aget_tuple(listed[3].config)
    cost("get_tuple by id")
    await saver.acopy_thread("c", "c2")
    cost("copy_thread")
    await saver.aprune(["c2"])
    cost("prune")
    await saver.adelete_thread("c")
    cost("delete_thread")
    return out


async def test_the_fakes_cost_what_aws_costs(s3_endpoint: MotoServer) -> None:
    async with AsyncS3Saver(endpoint_url=s3_endpoint.url, cache_bytes=0, **unique_names()) as real:
        await real.setup()
        on_moto = await script(real)
    in_memory = await script(memory_saver())
    for (name, moto_ops, moto_trips), (_, mem_ops, mem_trips) in zip(
        on_moto, in_memory, strict=True
    ):
        assert mem_ops == moto_ops, name
        if "turn" not in name:  # a graph turn's overlap depends on LangGraph's scheduling
            assert mem_trips == moto_trips, (name, moto_ops)
