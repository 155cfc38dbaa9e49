"""Your own graph as an AWS Lambda handler, persisted with langgraph-s3.

``langgraph-s3 lambda build path/to/graph.py:graph`` writes a handler module that is
just::

    from langgraph_s3.ops.handlers.lambda_app import LambdaApp
    handler = LambdaApp("graph:graph").handler

At init (Lambda's init phase has a full CPU) it reads the secrets ``LANGGRAPH_S3_SECRETS``
names into the environment (:mod:`.secrets`: a model's key), imports the graph, builds the saver
from ``LANGGRAPH_S3_CHECKPOINTER`` (the terraform module's ``environment`` output),
preloads the SDK, and opens one event loop (``asyncio.Runner``) for the container's
life, so warm invocations reuse the clients and their open connections. Each
invocation runs the graph on that loop. The event::

    {"thread_id": "user-42", "message": "Hi"}          # a chat turn (MessagesState)
    {"thread_id": "user-42", "input": {...}}           # any input
    {"thread_id": "user-42", "resume": "yes"}          # answer an interrupt

The answer: ``thread_id``, the last message's text as ``reply`` when the state has
messages (when the run stopped at an interrupt, its value: the question it asks),
``interrupts`` when the run stopped at one, and the state's channels
(JSON-able views) as ``state`` unless ``"state": false`` is asked.

On Lambda it registers an internal extension (:mod:`.lambda_extension`) that, after each
invocation's response and before the environment freezes, stores the checkpoints the
manifest still holds (``saver.aflush()`` on the same loop): a frozen or reaped
environment leaves none held. ``extension=False`` or ``LANGGRAPH_S3_LAMBDA_EXTENSION=off``
turns it off (then the next writer or maintenance stores them).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from typing import Any

from langgraph_s3.ops.graph_spec import load_graph, with_saver
from langgraph_s3.ops.handlers import lambda_extension

ENV_URL = "LANGGRAPH_S3_CHECKPOINTER"


class LambdaApp:
    """A graph behind a Lambda handler: see the module docstring. Built once per
    container (module scope); ``handler`` is what Lambda calls. ``extension``: register
    the extension that stores held checkpoints before the freeze (None: unless
    ``LANGGRAPH_S3_LAMBDA_EXTENSION=off``; outside Lambda there is none either way)."""

    def __init__(
        self,
        spec: str,
        *,
        url: str | None = None,
        root: str | None = None,
        extension: bool | None = None,
    ) -> None:
        from langgraph_s3.checkpoint.saver import AsyncS3Saver
        from langgraph_s3.ops.handlers import secrets

        secrets.load()  # before the graph's module: it may build its model client at import
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
        self._lock = threading.Lock()  # the loop runs one call at a time: handler or flush
        self.extension = lambda_extension.start(self._flush, flag=extension)
        """The registered extension (None: outside Lambda, or turned off)."""

    def handler(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        """One invocation: a bad event is answered with an ``error``, not raised (a
        raise would make Lambda retry an event that cannot succeed). However it ends,
        the extension is told (its thread then stores what the invocation left held)."""
        try:
            return self._handle(event)
        finally:
            request_id = getattr(context, "aws_request_id", None)
            if self.extension is not None and isinstance(request_id, str):
                self.extension.ended(request_id)

    def _handle(self, event: dict[str, Any]) -> dict[str, Any]:
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
            with self._lock:
                return self.runner.run(self._run(thread_id, event))
        except (EmptyInputError, InvalidUpdateError) as exc:  # the input, not the service
            return {"error": f"the graph refused the input: {exc}"}

    def _flush(self, seconds: float) -> None:
        """The extension's flush, from its thread, once an invocation ended: the held
        copies' PUTs and 1 UpdateItem per item holding any, on the app's loop (idle:
        the runtime waits for its next event), cut short at ``seconds`` (what is not
        stored by then stays held, safely)."""
        with self._lock:
            self.runner.run(asyncio.wait_for(self.saver.aflush(), timeout=seconds))

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
        if "__interrupt__" in shown:  # the run waits on its question: that is the reply
            out["interrupts"] = shown.pop("__interrupt__")
            out["reply"] = _question(out["interrupts"])
        if event.get("state", True) is not False:
            out["state"] = shown
        return out


def _question(interrupts: Any) -> str:
    """The first interrupt's value as text: what the graph asks the user."""
    first = interrupts[0] if isinstance(interrupts, list) and interrupts else interrupts
    value = first.get("value", first) if isinstance(first, dict) else first
    if isinstance(value, str):
        return value
    import orjson

    return orjson.dumps(value, default=str).decode()
