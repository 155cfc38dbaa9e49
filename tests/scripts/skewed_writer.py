"""A writer on another machine whose clock is off: ``python skewed_writer.py URL BUCKET
TABLE THREAD OFFSET``. Its clock (``time``, so the uuid6 checkpoint ids LangGraph makes)
reads OFFSET seconds from the real one. It imports everything, prints ``ready``, then
runs one chat turn per line read from stdin (the line is the message) and prints one
JSON line per turn: ``{"ok": true}`` or ``{"error": class name, "message": str}``."""

from __future__ import annotations

import asyncio
import sys
import time

import orjson

OFFSET = float(sys.argv[5])
_ns, _s = time.time_ns, time.time
time.time_ns = lambda: _ns() + int(OFFSET * 1e9)  # type: ignore[assignment]
time.time = lambda: _s() + OFFSET  # type: ignore[assignment]

from langgraph_s3 import AsyncS3Saver  # noqa: E402
from langgraph_s3.testing.graphs import chat_graph  # noqa: E402


async def main() -> None:
    url, bucket, table, thread = sys.argv[1:5]
    async with AsyncS3Saver(endpoint_url=url, bucket=bucket, table=table) as saver:
        graph = chat_graph().compile(checkpointer=saver)
        print("ready", flush=True)
        for line in sys.stdin:
            config = {"configurable": {"thread_id": thread}}
            try:
                await graph.ainvoke({"messages": [("user", line.strip())]}, config)
                out: dict[str, object] = {"ok": True}
            except Exception as exc:
                out = {"error": type(exc).__name__, "message": str(exc)}
            print(orjson.dumps(out).decode(), flush=True)


asyncio.run(main())
