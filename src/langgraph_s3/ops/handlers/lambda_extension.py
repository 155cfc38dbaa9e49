"""Lambda's lifecycle: an internal extension that stores an invocation's held
checkpoints after the response is sent and before the environment freezes.

A put returns once DynamoDB holds its checkpoint; the S3 object's PUT runs in the
background on the handler's event loop (``checkpoint/inline.py``), and that loop stops
when the handler returns. Lambda freezes an environment only once the runtime and every
extension wait for their next event, so a thread of the runtime process registered
with the Extensions API (``INVOKE`` events only: an internal extension gets no
``SHUTDOWN``) is told of each invocation, waits until the handler has ended it, runs
the flush it was given (the app's ``saver.aflush()``), and only then asks for its next
event. The caller's latency stays on DynamoDB's clock; the flush is billed duration.

Outside Lambda (no ``AWS_LAMBDA_RUNTIME_API``), with ``LANGGRAPH_S3_LAMBDA_EXTENSION=off``,
or when the registration is refused, :func:`start` returns None and says why at debug
level. Standard library only (``http.client``, loaded with the SDK anyway): a cold start
pays one local request, a millisecond.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("langgraph_s3.ops.handlers.lambda_extension")

NAME = "langgraph-s3"
"""The extension's name, as registered (``Lambda-Extension-Name``)."""
ENV_SWITCH = "LANGGRAPH_S3_LAMBDA_EXTENSION"
"""``off`` (or ``0``, ``false``, ``no``): no extension, held copies are stored by the
next invocation, the next writer or maintenance."""
OFF = frozenset({"off", "0", "false", "no"})
BASE = "/2020-01-01/extension"
NO_DEADLINE = 900.0
"""Seconds to wait for the handler when an INVOKE event names no deadline (Lambda's
longest timeout)."""
RETRY_MAX = 1.0
"""Seconds between tries at most when the Extensions API fails (the thread never ends:
an extension that stops asking for events would keep the environment from freezing)."""
MARGIN = 0.2
"""Seconds before the invocation's deadline the flush is cut short by (a flush past
the deadline would time the invocation out after its answer; what is not stored by then
stays held, safely)."""
REMEMBERED = 64
"""Ended invocations remembered (one is in flight at a time: a few is plenty)."""

Flush = Callable[[float], None]
"""Stores what the invocation left held, within the seconds given."""


def enabled(flag: bool | None = None) -> bool:
    """The constructor's ``flag`` when given, else :data:`ENV_SWITCH` (on by default)."""
    if flag is not None:
        return flag
    return os.environ.get(ENV_SWITCH, "on").strip().lower() not in OFF


class Extension:
    """The registered extension: :meth:`ended` is called by the handler (in a
    ``finally``) for each invocation; the thread does the rest."""

    def __init__(self, api: str, identifier: str, flush: Flush) -> None:
        self.api, self.identifier, self.flush = api, identifier, flush
        self._ended: deque[str] = deque(maxlen=REMEMBERED)
        self._cond = threading.Condition()
        self.flushes = 0
        """Flushes run (errors included): what a test or a log reads."""
        self._thread = threading.Thread(target=self._run, name=f"{NAME} extension", daemon=True)

    def begin(self) -> None:
        """Start the thread: its first ``event/next`` tells Lambda the init is done."""
        self._thread.start()

    def ended(self, request_id: str) -> None:
        """The handler is done with ``request_id`` (its context's ``aws_request_id``)."""
        with self._cond:
            self._ended.append(request_id)
            self._cond.notify_all()

    def _run(self) -> None:
        conn: http.client.HTTPConnection | None = None
        pause = 0.01
        while True:
            try:
                conn = conn or http.client.HTTPConnection(self.api)
                event = self._next(conn)
                pause = 0.01
            except Exception as exc:  # the API is the runtime's: never let the thread die
                logger.error("Lambda's Extensions API failed, trying again: %r", exc)
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(pause)
                pause = min(pause * 2, RETRY_MAX)
                continue
            if event.get("eventType") == "INVOKE":
                self._after(event)

    def _next(self, conn: http.client.HTTPConnection) -> dict[str, Any]:
        """The next event (1 long-polled GET: the environment may freeze meanwhile)."""
        conn.request(
            "GET", f"{BASE}/event/next", headers={"Lambda-Extension-Identifier": self.identifier}
        )
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"event/next answered {resp.status}: {body[:200]!r}")
        event = json.loads(body)
        return event if isinstance(event, dict) else {}

    def _after(self, event: dict[str, Any]) -> None:
        """Wait until the handler ended the invocation (until its deadline at most),
        then flush; an error is logged, never raised."""
        request_id = str(event.get("requestId") or "")
        deadline_ms = event.get("deadlineMs")
        left = (
            float(deadline_ms) / 1000 - time.time()
            if isinstance(deadline_ms, (int, float))
            else NO_DEADLINE
        )
        ends = time.monotonic() + max(left, 0.0)
        with self._cond:
            done = self._cond.wait_for(lambda: request_id in self._ended, max(left, 0.0))
            if done:
                self._ended.remove(request_id)
        if not done:
            logger.warning("invocation %s did not end before its deadline: no flush", request_id)
            return
        self.flushes += 1
        try:
            self.flush(max(ends - time.monotonic() - MARGIN, 0.0))
        except Exception:
            logger.exception("storing invocation %s's held checkpoints failed", request_id)


def start(flush: Flush, *, flag: bool | None = None) -> Extension | None:
    """Register the extension and start its thread, in Lambda's init phase: 1 local
    request (the registration), then the thread's first wait. None (and a debug line
    saying why) outside Lambda, when turned off, or when Lambda refuses it."""
    if not enabled(flag):
        logger.debug(
            "the Lambda extension is off (%s): held copies wait for the next writer", ENV_SWITCH
        )
        return None
    api = os.environ.get("AWS_LAMBDA_RUNTIME_API")
    if not api:
        logger.debug("not on Lambda (no AWS_LAMBDA_RUNTIME_API): no extension")
        return None
    try:
        identifier = register(api)
    except Exception as exc:
        logger.debug("Lambda refused the extension, held copies wait for the next writer: %s", exc)
        return None
    ext = Extension(api, identifier, flush)
    ext.begin()
    logger.debug("registered the Lambda extension %s (%s)", NAME, identifier)
    return ext


def register(api: str, name: str = NAME) -> str:
    """``POST /extension/register`` for INVOKE events: the extension's identifier."""
    conn = http.client.HTTPConnection(api, timeout=5)
    try:
        conn.request(
            "POST",
            f"{BASE}/register",
            body=json.dumps({"events": ["INVOKE"]}),
            headers={"Lambda-Extension-Name": name, "Content-Type": "application/json"},
        )
        resp = conn.getresponse()
        body = resp.read()
        identifier = resp.getheader("Lambda-Extension-Identifier")
        if resp.status != 200 or not identifier:
            raise RuntimeError(f"register answered {resp.status}: {body[:200]!r}")
        return identifier
    finally:
        conn.close()
