"""A local stand-in for AWS Lambda's host: the Runtime and Extensions APIs on 127.0.0.1,
a runtime process started on them, and Lambda's freeze and reaping, for tests and
benchmarks of a handler's lifecycle.

    with LambdaHost("app.handler", task_root=folder, env={...}) as host:
        done = host.invoke({"thread_id": "t", "message": "hi"})   # its response
        host.wait_frozen()          # the environment froze: done.billed_ms is known
        host.reap()                 # SIGKILL, as Lambda reaps an idle environment

The process is ``python -m awslambdaric MODULE.FUNCTION`` (AWS's runtime interface
client, the ``test`` extra) with ``AWS_LAMBDA_RUNTIME_API`` pointing here. As on
Lambda, an extension registers during the init phase only, and the environment freezes
(here ``SIGSTOP``) once the runtime and every registered extension wait for their next
event; the next invocation thaws it (``SIGCONT``). Each :class:`Invocation` records its
response time (delivered to the runtime until its response was posted) and its billed
duration (delivered until the environment froze: what Lambda bills, an extension's
work after the response included). Only the standard library: it serves one runtime.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

RUNTIME = "/2018-06-01/runtime"
EXTENSION = "/2020-01-01/extension"
FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:langgraph-s3-local"


class LambdaHostError(RuntimeError):
    """The runtime process failed (its init, an invocation, or it died): the message
    carries the end of its output."""


@dataclass
class Invocation:
    """One invocation as the host saw it (times from ``time.monotonic()``)."""

    request_id: str
    event: Any
    deadline_ms: int
    """Lambda's epoch deadline of the invocation, in milliseconds."""
    delivered: float | None = None
    responded: float | None = None
    frozen: float | None = None
    response: Any = None
    error: dict[str, Any] | None = None

    @property
    def response_ms(self) -> float:
        """Delivered to the runtime until its response (or error) was posted."""
        if self.delivered is None or self.responded is None:
            raise LambdaHostError(f"invocation {self.request_id} has not been answered")
        return (self.responded - self.delivered) * 1000

    @property
    def billed_ms(self) -> float:
        """Delivered until the environment froze (call ``wait_frozen`` first)."""
        if self.delivered is None or self.frozen is None:
            raise LambdaHostError(f"the environment has not frozen after {self.request_id}")
        return (self.frozen - self.delivered) * 1000


@dataclass
class _Ext:
    name: str
    events: list[str]
    waiting: bool = False
    queue: deque[dict[str, Any]] = field(default_factory=deque)


class LambdaHost:
    """The host of one execution environment: see the module docstring. ``env`` is
    added to this process's environment for the runtime; ``timeout`` is each
    invocation's (its deadline, and how long the host waits for it)."""

    def __init__(
        self,
        handler: str,
        *,
        task_root: Path,
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        python: str = sys.executable,
    ) -> None:
        self.handler, self.task_root, self.timeout, self.python = (
            handler,
            task_root,
            timeout,
            python,
        )
        self.env = dict(env or {})
        self.extensions: dict[str, _Ext] = {}
        """Registered extensions, by identifier."""
        self.invocations: list[Invocation] = []
        self.init_error: dict[str, Any] | None = None
        self.init_ms: float | None = None
        """Process start until the environment first froze (the init phase)."""
        self.frozen = False
        self._cond = threading.Condition()
        self._runtime_waiting = False
        self._initialized = False
        self._queue: deque[Invocation] = deque()
        self._proc: subprocess.Popen[bytes] | None = None
        self._closing = False
        self._log_fd, self._log_path = tempfile.mkstemp(prefix="lambda-host-", suffix=".log")
        self._server = _Server(("127.0.0.1", 0), _Api)
        self._server.host = self
        self._serving = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def api(self) -> str:
        """``127.0.0.1:PORT``: the ``AWS_LAMBDA_RUNTIME_API`` the runtime is given."""
        return f"127.0.0.1:{self._server.server_address[1]}"

    @property
    def log(self) -> str:
        """What the runtime process printed so far."""
        return Path(self._log_path).read_text(errors="replace")

    # ----------------------------------------------------------------- lifecycle
    def start(self, timeout: float = 60.0) -> LambdaHost:
        """Start the runtime process and wait for its init phase to end (it froze).
        Raises :class:`LambdaHostError` (and closes) on an init error or a process
        that exits."""
        self._serving.start()
        env = {
            **os.environ,
            "AWS_LAMBDA_FUNCTION_NAME": "langgraph-s3-local",
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024",
            "LAMBDA_TASK_ROOT": str(self.task_root),
            "_HANDLER": self.handler,
            **self.env,
            "AWS_LAMBDA_RUNTIME_API": self.api,
        }
        started = time.monotonic()
        self._proc = subprocess.Popen(
            [self.python, "-m", "awslambdaric", self.handler],
            cwd=self.task_root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log_fd,
            stderr=subprocess.STDOUT,
        )
        threading.Thread(target=self._watch, args=(self._proc,), daemon=True).start()
        try:
            self._wait(lambda: self.frozen, timeout, "the init phase to end")
        except BaseException:
            self.close()
            raise
        self.init_ms = (time.monotonic() - started) * 1000
        return self

    def invoke(self, event: Any, *, timeout: float | None = None) -> Invocation:
        """Thaw the environment once it froze, deliver ``event`` to the runtime (and
        INVOKE to every extension) and wait for its response. The invocation is
        returned answered; its ``billed_ms`` is known after :meth:`wait_frozen`."""
        timeout = self.timeout if timeout is None else timeout
        self._wait(lambda: self.frozen, timeout, "the environment to be ready")
        inv = Invocation(_request_id(), event, int((time.time() + timeout) * 1000))
        with self._cond:
            self._signal(signal.SIGCONT)
            self.frozen = False
            self.invocations.append(inv)
            self._queue.append(inv)
            for ext in self.extensions.values():
                ext.queue.append(
                    {
                        "eventType": "INVOKE",
                        "deadlineMs": inv.deadline_ms,
                        "requestId": inv.request_id,
                        "invokedFunctionArn": FUNCTION_ARN,
                        "tracing": {"type": "X-Amzn-Trace-Id", "value": f"Root={inv.request_id}"},
                    }
                )
            self._cond.notify_all()
        self._wait(lambda: inv.responded is not None, timeout, f"the response to {event!r}")
        return inv

    def wait_frozen(self, timeout: float | None = None) -> Invocation:
        """Wait until the environment froze after the last invocation: that invocation,
        its billed duration known."""
        inv = self.invocations[-1]
        self._wait(lambda: inv.frozen is not None, timeout or self.timeout, "the freeze")
        return inv

    def reap(self) -> None:
        """``SIGKILL`` the runtime process, frozen or not, as Lambda reaps an
        environment: nothing it has not sent is sent."""
        with self._cond:
            self._closing = True
            self.frozen = False
            self._cond.notify_all()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(10)

    def close(self) -> None:
        """Reap the process, stop serving, remove the log."""
        self.reap()
        if self._serving.is_alive():
            self._server.shutdown()
        self._server.server_close()
        if self._log_fd >= 0:
            os.close(self._log_fd)
            self._log_fd = -1
            Path(self._log_path).unlink(missing_ok=True)

    def __enter__(self) -> LambdaHost:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------- internals
    def _signal(self, sig: signal.Signals) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self._proc.pid, sig)

    def _watch(self, proc: subprocess.Popen[bytes]) -> None:
        proc.wait()
        with self._cond:
            self._cond.notify_all()

    def _wait(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        """Wait for ``ready()``; raise with the process's output when it cannot come."""
        ends = time.monotonic() + timeout
        with self._cond:
            while not ready():
                failed = self._failure()
                if failed:
                    raise LambdaHostError(f"{failed} while waiting for {what}:\n{self.log[-4000:]}")
                left = ends - time.monotonic()
                if left <= 0:
                    raise LambdaHostError(
                        f"timed out after {timeout:.0f} s waiting for {what} ({self._state()}):\n"
                        f"{self.log[-4000:]}"
                    )
                self._cond.wait(min(left, 0.5))

    def _failure(self) -> str | None:
        if self.init_error is not None:
            return f"the init failed: {self.init_error}"
        if self._proc is not None and self._proc.poll() is not None:
            return f"the runtime process exited ({self._proc.returncode})"
        return None

    def _state(self) -> str:
        waiting = [e.name for e in self.extensions.values() if e.waiting]
        others = [e.name for e in self.extensions.values() if not e.waiting]
        return (
            f"runtime {'waits' if self._runtime_waiting else 'busy'}, "
            f"extensions waiting {waiting}, busy {others}, frozen {self.frozen}"
        )

    def _settle(self) -> None:
        """Under the lock: freeze when the runtime and every extension wait and
        nothing is queued for the runtime."""
        if (
            self.frozen
            or not self._initialized
            or not self._runtime_waiting
            or self._queue
            or self._proc is None
            or self._proc.poll() is not None
            or not all(e.waiting for e in self.extensions.values())
        ):
            return
        self._signal(signal.SIGSTOP)
        self.frozen = True
        now = time.monotonic()
        if self.invocations and self.invocations[-1].frozen is None:
            self.invocations[-1].frozen = now
        self._cond.notify_all()

    def _take(self, queue: deque[Any], mark: Callable[[bool], None]) -> Any:
        """Under the lock: wait (the caller marked as waiting) for the next item of
        ``queue``; None when the host closes."""
        mark(True)
        self._settle()
        while not queue and not self._closing:
            self._cond.wait()
        mark(False)
        return queue.popleft() if queue else None

    def _next_invocation(self) -> Invocation | None:
        with self._cond:
            self._initialized = True

            def mark(waiting: bool) -> None:
                self._runtime_waiting = waiting

            inv: Invocation | None = self._take(self._queue, mark)
            if inv is not None:
                inv.delivered = time.monotonic()
            return inv

    def _next_event(self, ext: _Ext) -> dict[str, Any] | None:
        with self._cond:

            def mark(waiting: bool) -> None:
                ext.waiting = waiting

            event: dict[str, Any] | None = self._take(ext.queue, mark)
            return event

    def _answer(self, request_id: str, body: bytes, error: bool) -> bool:
        with self._cond:
            inv = next((i for i in self.invocations if i.request_id == request_id), None)
            if inv is None or inv.responded is not None:
                return False
            try:
                value = json.loads(body) if body else None
            except ValueError:
                value = body.decode(errors="replace")
            if error:
                inv.error = value if isinstance(value, dict) else {"errorMessage": value}
            else:
                inv.response = value
            inv.responded = time.monotonic()
            self._cond.notify_all()
            return True

    def _register(self, name: str, events: list[str]) -> tuple[int, dict[str, Any], str]:
        with self._cond:
            if self._initialized:
                return 403, _error("Extension.RegistrationAfterInit", "the init phase is over"), ""
            if not name:
                return 400, _error("InvalidRequest", "Lambda-Extension-Name is missing"), ""
            if any(e != "INVOKE" for e in events):
                return (
                    403,
                    _error(
                        "ShutdownEventNotSupportedForInternalExtension",
                        "an internal extension may register for INVOKE only",
                    ),
                    "",
                )
            identifier = _request_id()
            self.extensions[identifier] = _Ext(name, list(events))
            info = {"functionName": "langgraph-s3-local", "functionVersion": "$LATEST"}
            return 200, {**info, "handler": self.handler}, identifier


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    host: LambdaHost

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection the runtime dropped (reaped, or closing) is no error here."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"errorType": kind, "errorMessage": message}


class _Api(BaseHTTPRequestHandler):
    """The Runtime and Extensions APIs' routes, over the host's state."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the runtime's own output is the log

    @property
    def host(self) -> LambdaHost:
        return self.server.host

    def _send(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(body).encode() if not isinstance(body, bytes) else body
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self) -> None:
        if self.path == f"{RUNTIME}/invocation/next":
            inv = self.host._next_invocation()
            if inv is None:
                return self._send(500, _error("HostClosing", "the host is closing"))
            body = json.dumps(inv.event).encode()
            return self._send(
                200,
                body,
                {
                    "Lambda-Runtime-Aws-Request-Id": inv.request_id,
                    "Lambda-Runtime-Deadline-Ms": str(inv.deadline_ms),
                    "Lambda-Runtime-Invoked-Function-Arn": FUNCTION_ARN,
                    "Lambda-Runtime-Trace-Id": f"Root={inv.request_id}",
                },
            )
        if self.path == f"{EXTENSION}/event/next":
            ext = self.host.extensions.get(self.headers.get("Lambda-Extension-Identifier", ""))
            if ext is None:
                return self._send(403, _error("Extension.UnknownExtensionIdentifier", "register"))
            event = self.host._next_event(ext)
            if event is None:
                return self._send(500, _error("HostClosing", "the host is closing"))
            return self._send(200, event, {"Lambda-Extension-Event-Identifier": _request_id()})
        self._send(404, _error("NotFound", self.path))

    def do_POST(self) -> None:
        body = self._body()
        parts = self.path.split("/")
        if self.path == f"{RUNTIME}/init/error":
            with self.host._cond:
                self.host.init_error = json.loads(body or b"{}")
                self.host._cond.notify_all()
            return self._send(202, {"status": "OK"})
        if self.path.startswith(f"{RUNTIME}/invocation/") and parts[-1] in ("response", "error"):
            if self.host._answer(parts[-2], body, parts[-1] == "error"):
                return self._send(202, {"status": "OK"})
            return self._send(400, _error("InvalidRequestID", parts[-2]))
        if self.path == f"{EXTENSION}/register":
            events = json.loads(body or b"{}").get("events", [])
            status, answer, identifier = self.host._register(
                self.headers.get("Lambda-Extension-Name", ""), list(events)
            )
            headers = {"Lambda-Extension-Identifier": identifier} if identifier else {}
            return self._send(status, answer, headers)
        self._send(404, _error("NotFound", self.path))


def _request_id() -> str:
    """A request id as Lambda makes them (a random UUID; not ``uuid.uuid4``, which a
    test may patch for deterministic ids)."""
    return str(uuid.UUID(bytes=secrets.token_bytes(16), version=4))
