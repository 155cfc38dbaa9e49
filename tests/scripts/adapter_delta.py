"""Run by tests/test_agent_server.py in a process of its own (LangGraph's Agent Server
reads its settings at import): DeltaChannel turns through the server's checkpointer
adapter, which does not forward ``aget_delta_channel_history`` and walks the
ancestors one ``aget_tuple`` at a time, and the same turns on the saver directly.
Prints each turn's requests, round trips and operations as JSON, and whether both
graphs hold the same messages."""

from __future__ import annotations

import asyncio
import json
import os
import sys

os.environ.setdefault("REDIS_URI", "unused")  # the server's settings, read at import
os.environ.setdefault("DATABASE_URI", ":memory:")
os.environ.setdefault("MIGRATIONS_PATH", "__inmem")

from langgraph_api._checkpointer._adapter import (
    CheckpointerCapabilities,
    _CustomCheckpointerAdapter,
)

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing.graphs import chat_graph, delta_graph
from langgraph_s3.testing.moto import moto_server, unique_names, use_dummy_credentials


async def turns(saver: AsyncS3Saver, checkpointer: object, thread: str, n: int) -> list[dict]:
    graph = delta_graph(100).compile(checkpointer=checkpointer)  # LangGraph's default
    config = {"configurable": {"thread_id": thread}}
    out = []
    for i in range(n):
        await saver.aflush()  # the last turn's object PUTs ended: not this turn's
        saver.stats.reset()
        await graph.ainvoke({"messages": [("user", f"turn {i}")]}, config)
        snap = saver.stats.snapshot()
        out.append(
            {
                "requests": snap["requests"],
                "round_trips": snap["round_trips"],
                "by_operation": snap["by_operation"],
            }
        )
    state = await graph.aget_state(config)
    out.append({"messages": [m.content for m in state.values["messages"]]})
    return out


async def main(turn_count: int) -> None:
    use_dummy_credentials()
    with moto_server() as server, server.delayed(0.05):
        async with AsyncS3Saver(endpoint_url=server.url, **unique_names()) as saver:
            await saver.setup()
            direct = await turns(saver, saver, "direct", turn_count)
            caps = CheckpointerCapabilities.from_type(type(saver))
            adapter = _CustomCheckpointerAdapter(saver, caps)
            adapted = await turns(saver, adapter, "adapted", turn_count)
            # one thread, continued in turn by direct calls and by the server
            mixed = {"configurable": {"thread_id": "mixed"}}
            by_saver = chat_graph().compile(checkpointer=saver)
            by_server = chat_graph().compile(checkpointer=adapter)
            for who, graph in (("direct", by_saver), ("server", by_server)) * 2:
                await graph.ainvoke({"messages": [("user", f"{who} turn")]}, mixed)
            state = await by_saver.aget_state(mixed)
            mixed_messages = [m.content for m in state.values["messages"]]
            legacy = await legacy_thread(saver, adapter)
    print(json.dumps({"direct": direct, "adapter": adapted, "mixed": mixed_messages, **legacy}))


async def legacy_thread(saver: AsyncS3Saver, adapter: object) -> dict[str, object]:
    """A thread begun with 12-digit versions (as before 0.1), then served by the adapter
    (which pads to 32): refused with the fix; after export and import, continued."""
    import random
    import tempfile

    from langgraph_s3.errors import InvalidRequestError

    def twelve(current: object, channel: None) -> str:
        n = 0 if current is None else int(str(current).split(".")[0])
        return f"{n + 1:012}.{random.getrandbits(48):012x}"

    config = {"configurable": {"thread_id": "legacy"}}
    saver.get_next_version = twelve  # type: ignore[method-assign]
    await (
        chat_graph()
        .compile(checkpointer=saver)
        .ainvoke({"messages": [("user", "old turn")]}, config)
    )
    del saver.get_next_version
    by_server = chat_graph().compile(checkpointer=adapter)
    try:
        await by_server.ainvoke({"messages": [("user", "server turn")]}, config)
        refused = ""
    except InvalidRequestError as exc:
        refused = str(exc)
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/legacy.jsonl"
        await saver.aexport(["legacy"], path)
        await saver.aimport(path, replace=True)
    await by_server.ainvoke({"messages": [("user", "server turn")]}, config)
    state = await by_server.aget_state(config)
    return {"refused": refused, "carried": [m.content for m in state.values["messages"]]}


asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 12))
