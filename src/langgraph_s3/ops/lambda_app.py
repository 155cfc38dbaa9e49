"""Your own graph as an AWS Lambda handler, persisted with langgraph-s3.

``langgraph-s3 lambda build path/to/graph.py:graph`` writes a handler module that is
just::

    from langgraph_s3.ops.lambda_app import LambdaApp
    handler = LambdaApp("graph:graph").handler

At init (Lambda's init phase has a full CPU) it imports the graph, builds the saver
from ``LANGGRAPH_S3_CHECKPOINTER`` (the terraform module's ``environment`` output),
preloads the SDK, and opens one event loop (``asyncio.Runner``) for the container's
life, so warm invocations reuse the clients and their open connections. Each
invocation runs the graph on that loop. The event::

    {"thread_id": "user-42", "message": "Hi"}          # a chat turn (MessagesState)
    {"thread_id": "user-42", "input": {...}}           # any input
    {"thread_id": "user-42", "resume": "yes"}          # answer an interrupt

The answer: ``thread_id``, the last message's text as ``reply`` when the state has
messages, ``interrupts`` when the run stopped at one, and the state's channels
(JSON-able views) as ``state`` unless ``"state": false`` is asked.
"""

from __future__ import annotations

import asyncio
import atexit
import os
from typing import Any

from langgraph_s3.ops.graph_spec import load_graph, with_saver

ENV_URL = "LANGGRAPH_S3_CHECKPOINTER"


class LambdaApp:
    """A graph behind a Lambda handler: see the module docstring. Built once per
    container (module scope); ``handler`` is what Lambda calls."""

    def __init__(self, spec: str, *, url: str | None = None, root: str | None = None) -> None:
        from langgraph_s3.checkpoint.saver import AsyncS3Saver

        conn = url or os.environ.get(ENV_URL)
        if not conn:
            raise RuntimeError(
                f"{ENV_URL} is not set: give the function the terraform module's "
                "`environment` output (s3://BUCKET/PREFIX?table=TABLE)"
            )
        self.saver = AsyncS3Saver.from_url(conn)
        self.saver.preload()  # the SDK and its models now, in the init phase
        self.graph = with_saver(load_graph(spec, root=root), self.saver)
        self.runner = asyncio.Runner()  # one loop for the container: clients live on it
        atexit.register(self.runner.close)  # a local process (tests) closes it on exit

    def handler(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        """One invocation: a bad event is answered with an ``error``, not raised (a
        raise would make Lambda retry an event that cannot succeed)."""
        from langgraph.errors import EmptyInputError, InvalidUpdateError

        thread_id = event.get("thread_id") if isinstance(event, dict) else None
        if not isinstance(thread_id, str) or not thread_id or not thread_id.isprintable():
            return {"error": "the event needs a 'thread_id': a non-empty printable string"}
        given = [k for k in ("message", "input", "resume") if k in event]
        if len(given) != 1:
            return {"error": "give exactly one of 'message', 'input' or 'resume'"}
        if "message" in event and not isinstance(event["message"], str):
            return {"error": "'message' must be a string"}
        if not isinstance(event.get("state", True), bool):
            return {"error": "'state' must be true or false"}
        try:
            return self.runner.run(self._run(thread_id, event))
        except (EmptyInputError, InvalidUpdateError) as exc:  # the input, not the service
            return {"error": f"the graph refused the input: {exc}"}

    async def _run(self, thread_id: str, event: dict[str, Any]) -> dict[str, Any]:
        from langgraph.types import Command

        from langgraph_s3.ops.conversation import is_message, message
        from langgraph_s3.ops.views import plain

        config = {"configurable": {"thread_id": thread_id}}
        if "message" in event:
            payload: Any = {"messages": [("user", event["message"])]}
        elif "resume" in event:
            payload = Command(resume=event["resume"])
        else:
            payload = event["input"]
        result = await self.graph.ainvoke(payload, config)
        shown = plain(result) if isinstance(result, dict) else {"output": plain(result)}
        out: dict[str, Any] = {"thread_id": thread_id}
        msgs = shown.get("messages")
        if isinstance(msgs, list) and msgs and is_message(msgs[-1]):
            out["reply"] = message(msgs[-1])["text"]
            out["messages"] = len(msgs)
        if "__interrupt__" in shown:
            out["interrupts"] = shown.pop("__interrupt__")
        if event.get("state", True) is not False:
            out["state"] = shown
        return out
