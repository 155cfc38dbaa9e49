"""An agent on AWS Lambda, persisted with langgraph-s3.

The saver and the graph are built once, at module scope, outside any event
loop; each invocation runs the graph in ``asyncio.run`` (a new loop), and the
saver creates its clients for that loop. The thread id comes from the event:

    {"thread_id": "user-42", "message": "What's the weather in Oslo?"}

Settings: LANGGRAPH_S3_CHECKPOINTER (the terraform module's output
``environment`` gives it), and the usual AWS environment.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.demo import build_agent

saver = AsyncS3Saver.from_url(os.environ["LANGGRAPH_S3_CHECKPOINTER"])
saver.preload()  # SDK + service models now: Lambda's init phase has a full CPU
graph = build_agent().compile(checkpointer=saver)


async def _run(thread_id: str, message: str) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread_id}}
    result = await graph.ainvoke({"messages": [("user", message)]}, config)
    last = result["messages"][-1]
    return {"thread_id": thread_id, "reply": str(last.content), "messages": len(result["messages"])}


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    thread_id = event.get("thread_id")
    message = event.get("message")
    if not isinstance(thread_id, str) or not thread_id or not isinstance(message, str):
        return {"error": "the event needs a non-empty 'thread_id' and a 'message' string"}
    return asyncio.run(_run(thread_id, message))
