"""An agent on AWS Lambda, persisted with langgraph-s3.

The saver, the graph and one event loop (``asyncio.Runner``, stdlib since
Python 3.11) are built once, at module scope, during Lambda's init phase. Each
invocation runs the graph on that same loop, so warm invocations reuse the S3
and DynamoDB clients and their open keep-alive connections: no new clients,
no new TCP/TLS handshakes (``asyncio.run`` per invocation would make a new loop,
so new clients and connections, every time). The thread id comes from the event:

    {"thread_id": "user-42", "message": "What's the weather in Oslo?"}

Settings: LANGGRAPH_S3_CHECKPOINTER (the terraform module's output
``environment`` gives it), and the usual AWS environment.
"""

from __future__ import annotations

import asyncio
import atexit
import os
from typing import Any

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing.graphs import chat_graph

saver = AsyncS3Saver.from_url(os.environ["LANGGRAPH_S3_CHECKPOINTER"])
saver.preload()  # SDK + service models now: Lambda's init phase has a full CPU
graph = chat_graph().compile(checkpointer=saver)
runner = asyncio.Runner()  # one loop for the container's life: clients live on it
# Lambda ends a container without running this; a local process (tests, the
# cold-start probe) closes the loop, and so the clients, when it exits
atexit.register(runner.close)


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
    return runner.run(_run(thread_id, message))
