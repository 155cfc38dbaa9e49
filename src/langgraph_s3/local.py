"""A moto server on loopback for offline runs (the demo, tests, benchmarks).

Needs ``moto[server]`` (the ``demo`` or ``testing`` extra); imports it only
when a server is started. :class:`TcpRelay` (standard library only) sits in
front of any endpoint and counts the TCP connections clients open through it.

On loopback a request takes a millisecond or two, so how many of them a call
makes one after another hardly shows in its time. ``moto_server(latency=...)``
adds a fixed delay per request (:data:`BENCH_LATENCY`: 20 ms per S3 request,
6 ms per DynamoDB request), and ``server.recording()`` logs when each request
arrived and when its answer left: :func:`critical_path` of that log is the
number of round trips the server saw, the figure
:attr:`~langgraph_s3.RequestStats.round_trips` counts on the client side.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypedDict
from urllib.parse import urlparse

DUMMY_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


@dataclass(frozen=True)
class Latency:
    """Seconds our moto server waits before handling each request, per service.

    The wait happens in the request's own thread, before the request is
    handled and outside the lock that makes writes atomic (``_atomic_writes``),
    so requests in flight together wait together, as on a real network.
    """

    s3: float = 0.0
    dynamodb: float = 0.0

    def __post_init__(self) -> None:
        for name in ("s3", "dynamodb"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"latency {name}= must be a number of seconds >= 0, got {value!r}")

    @classmethod
    def of(cls, value: float | Latency | None) -> Latency:
        """``None`` is no latency; a number is the same latency for both services."""
        if value is None:
            return cls()
        if isinstance(value, Latency):
            return value
        return cls(s3=value, dynamodb=value)


BENCH_LATENCY = Latency(s3=0.020, dynamodb=0.006)
"""The benchmarks' standard: 20 ms per S3 request, 6 ms per DynamoDB request."""


@dataclass(frozen=True, slots=True)
class ServedRequest:
    """One request as our moto server saw it; times are ``time.perf_counter()`` seconds."""

    service: str
    """``"s3"`` or ``"dynamodb"``."""
    operation: str
    """The DynamoDB operation (``"GetItem"``), or the S3 request's HTTP method."""
    start: float
    """When it arrived (before the injected latency)."""
    end: float
    """When its answer had been sent."""
    received: int = 0
    """Bytes of its body (what the client uploaded)."""


def critical_path(requests: Iterable[ServedRequest]) -> int:
    """The longest chain of requests, each starting after the previous one ended.

    That is the number of round trips the requests cost, at one latency per
    request: requests in flight together count once.
    """
    by_start = sorted(requests, key=lambda r: r.start)
    by_end = sorted(range(len(by_start)), key=lambda i: by_start[i].end)
    depth = [0] * len(by_start)
    ended = longest = j = 0  # ended: the greatest depth among the requests ended so far
    for i, request in enumerate(by_start):
        while j < len(by_end) and by_start[by_end[j]].end < request.start:
            ended = max(ended, depth[by_end[j]])  # started earlier: its depth is known
            j += 1
        depth[i] = ended + 1
        longest = max(longest, depth[i])
    return longest


class _Control:
    """What a running server's requests wait for, and the logs they go to."""

    def __init__(self, latency: Latency) -> None:
        self.latency = latency
        self.lock = threading.Condition()
        self.logs: list[list[ServedRequest]] = []
        self.unlogged = 0
        """Requests started while a log was open and not logged yet."""

    def started(self) -> bool:
        """A request arrived: whether it is to be logged."""
        with self.lock:
            if self.logs:
                self.unlogged += 1
            return bool(self.logs)

    def record(self, request: ServedRequest) -> None:
        with self.lock:
            for log in self.logs:
                log.append(request)
            self.unlogged -= 1
            self.lock.notify_all()

    def settle(self, timeout: float) -> None:
        """Wait until the requests started so far are logged: the server logs a
        request just after its answer's last byte, when the client may already
        have it."""
        with self.lock:
            self.lock.wait_for(lambda: self.unlogged <= 0, timeout)


@dataclass(frozen=True)
class MotoServer:
    url: str
    """``http://127.0.0.1:PORT``: pass as ``endpoint_url=``."""
    owned: bool
    """True when we started it (and may reset it)."""
    _control: _Control | None = field(default=None, repr=False, compare=False)

    def reset(self) -> None:
        """Wipe every bucket and table (moto only)."""
        if self.owned:
            req = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")
            with urllib.request.urlopen(req, timeout=10):
                pass

    @property
    def latency(self) -> Latency:
        """The latency injected into each request now (none for an outside endpoint)."""
        return self._control.latency if self._control is not None else Latency()

    def _require_control(self) -> _Control:
        if self._control is None:
            raise RuntimeError(
                f"{self.url} is not a moto server started here: it has no latency to set "
                "and no request log"
            )
        return self._control

    def set_latency(self, latency: float | Latency | None) -> Latency:
        """Inject ``latency`` from the next request on; returns the previous one."""
        control = self._require_control()
        previous, control.latency = control.latency, Latency.of(latency)
        return previous

    @contextmanager
    def delayed(self, latency: float | Latency | None) -> Iterator[Latency]:
        """``with server.delayed(0.1):`` each request waits 0.1 s; restored after."""
        previous = self.set_latency(latency)
        try:
            yield self.latency
        finally:
            self.set_latency(previous)

    @contextmanager
    def recording(self) -> Iterator[list[ServedRequest]]:
        """``with server.recording() as log:`` every request answered inside the
        block is appended to ``log`` (in the order their answers left).
        ``critical_path(log)`` is the server's count of round trips."""
        control = self._require_control()
        log: list[ServedRequest] = []
        with control.lock:
            control.logs.append(log)
        try:
            yield log
        finally:
            control.settle(timeout=2.0)
            with control.lock:
                control.logs.remove(log)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def use_dummy_credentials() -> None:
    """Set dummy AWS credentials and region where none are configured."""
    for key, value in DUMMY_ENV.items():
        os.environ.setdefault(key, value)


def _atomic_writes(app: Any) -> Any:
    """moto checks a write's condition and then applies it without a lock, so two
    concurrent conditional writes can both pass, and a DynamoDB read can see an item
    half-made. S3 and DynamoDB allow neither: serializing conditional S3 writes, S3
    deletes and DynamoDB requests gives the tests the atomicity AWS guarantees (moto is bound by one
    interpreter lock anyway, so throughput barely changes)."""
    lock = threading.Lock()

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        method = environ.get("REQUEST_METHOD")
        serialize = (
            bool(environ.get("HTTP_X_AMZ_TARGET"))  # DynamoDB
            or method in ("POST", "DELETE")  # S3 deletes
            or "HTTP_IF_MATCH" in environ
            or "HTTP_IF_NONE_MATCH" in environ
        )
        if not serialize:
            return app(environ, start_response)
        with lock:
            return list(app(environ, start_response))

    return wrapped


class _Served:
    """A response body that logs its request once the server has it all to send.

    The end is stamped just before the last chunk goes out, not after: a server thread
    descheduled after writing it (a loaded machine) would otherwise stamp an end later
    than the start of the request the client sent on receiving it, and the server's
    critical path would miss a round trip. (werkzeug calls ``close()`` only after
    waiting up to 10 ms for stray request bytes: later still.)
    """

    def __init__(self, body: Iterable[bytes], done: Callable[[], None]) -> None:
        self.body, self.done = body, done
        self.logged = False

    def __iter__(self) -> Iterator[bytes]:
        held: bytes | None = None
        for chunk in self.body:
            if held is not None:
                yield held
            held = chunk
        self._log()
        if held is not None:
            yield held

    def _log(self) -> None:
        if not self.logged:
            self.logged = True
            self.done()

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            self._log()  # a body not sent in full ends here


def _latency_and_log(app: Any, control: _Control) -> Any:
    """Wait the injected latency before each request (in its own thread, outside
    ``_atomic_writes``'s lock) and log it to any recording in progress."""

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        if str(environ.get("PATH_INFO", "")).startswith("/moto-api"):
            return app(environ, start_response)  # reset and the like: not a request of ours
        start = time.perf_counter()
        logged = control.started()
        target = str(environ.get("HTTP_X_AMZ_TARGET") or "")
        latency = control.latency
        wait = latency.dynamodb if target else latency.s3
        if wait > 0:
            time.sleep(wait)
        if not logged:
            return app(environ, start_response)
        service, operation = (
            ("dynamodb", target.rpartition(".")[2])
            if target
            else ("s3", str(environ.get("REQUEST_METHOD")))
        )

        try:
            size = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            size = 0

        def done() -> None:
            control.record(ServedRequest(service, operation, start, time.perf_counter(), size))

        try:
            body = app(environ, start_response)
        except BaseException:
            done()
            raise
        return _Served(body, done)

    return wrapped


@contextmanager
def moto_server(
    port: int | None = None, *, latency: float | Latency | None = None
) -> Iterator[MotoServer]:
    """Start a moto server (S3, DynamoDB, ...) on a free loopback port, with atomic
    conditional writes (see ``_atomic_writes``).

    ``latency``: seconds each request waits before it is handled (a
    :class:`Latency` gives S3 and DynamoDB their own); change it later with
    ``server.set_latency()`` or ``with server.delayed(...)``. Requests are
    logged inside ``with server.recording() as log:``.
    """
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    use_dummy_credentials()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = port or free_port()
    control = _Control(Latency.of(latency))

    class _Dispatcher(DomainDispatcherApplication):
        """moto's dispatcher, remembering which backend serves a host: moto tries
        hundreds of URL patterns per request (~1.5 ms of CPU each time)."""

        def __init__(self) -> None:
            super().__init__(create_backend_app)
            self._hosts: dict[str | None, Any] = {}

        def get_backend_for_host(self, host: str | None) -> Any:
            try:
                return self._hosts[host]
            except KeyError:
                backend = self._hosts[host] = super().get_backend_for_host(host)
                return backend

    app = _latency_and_log(_atomic_writes(_Dispatcher()), control)
    server = make_server("127.0.0.1", port, app, True, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, name="moto", daemon=True)
    thread.start()
    try:
        yield MotoServer(url=f"http://127.0.0.1:{port}", owned=True, _control=control)
    finally:
        server.shutdown()
        thread.join()


_MOTO_CHILD = """
import sys
from langgraph_s3.local import moto_server
with moto_server(int(sys.argv[1])):
    print("ready", flush=True)
    sys.stdin.read()  # serve until the parent closes our stdin
"""


@contextmanager
def moto_process() -> Iterator[str]:
    """A moto server in a process of its own; yields its URL. Its CPU and memory are
    then not the caller's: what the caller measures (``tracemalloc``, process CPU) is
    the client's alone, and its work runs beside the caller's instead of under its GIL."""
    port = free_port()
    child = subprocess.Popen(
        [sys.executable, "-c", _MOTO_CHILD, str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError(f"moto did not start (exit {child.poll()})")
        yield f"http://127.0.0.1:{port}"
    finally:
        assert child.stdin is not None
        child.stdin.close()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(10)


@contextmanager
def endpoint_or_moto(*, latency: float | Latency | None = None) -> Iterator[MotoServer]:
    """The endpoint in ``AWS_ENDPOINT_URL`` if set, else a fresh moto server
    (with ``latency``, see :func:`moto_server`; an outside endpoint has its own)."""
    external = os.environ.get("AWS_ENDPOINT_URL")
    if external:
        yield MotoServer(url=external, owned=False)
        return
    with moto_server(latency=latency) as server:
        yield server


class Names(TypedDict):
    bucket: str
    table: str


def unique_names() -> Names:
    """A bucket and table name no other test uses."""
    suffix = uuid.uuid4().hex[:12]
    return {"bucket": f"lgs3-test-{suffix}", "table": f"lgs3-test-{suffix}"}


class TcpRelay:
    """A loopback relay that counts the TCP connections clients open through it.

    Listens on ``127.0.0.1`` (a free port) and forwards to ``target``
    (``http://host:port`` or ``(host, port)``). Point a client's
    ``endpoint_url`` at :attr:`url` and read :attr:`accepted` before and
    after a call: the difference is how many NEW connections it opened, 0
    when it reused pooled keep-alive connections.

        with TcpRelay(server.url) as relay:
            saver = AsyncS3Saver(..., endpoint_url=relay.url)
            before = relay.accepted
            ...
            new_connections = relay.accepted - before

    moto's server (werkzeug) answers every request with ``Connection: close``,
    so behind it a plain byte relay would count requests, not the client's
    connection reuse. With ``keep_alive=True`` (the default) the relay speaks
    just enough HTTP/1.1 to keep the client's side open: it forwards each
    request over a new upstream connection, streams bodies as they come
    (``Content-Length`` or chunked, ``100 Continue`` passed through) and drops
    the upstream ``Connection: close`` header when the response is
    length-delimited. ``keep_alive=False`` forwards raw bytes both ways, for
    any TCP protocol.

    Standard library only: an asyncio loop on a daemon thread of its own, so it
    works beside any event loop of the caller. Counters are safe to read from
    any thread.
    """

    def __init__(
        self,
        target: str | tuple[str, int],
        *,
        keep_alive: bool = True,
        host: str = "127.0.0.1",
    ) -> None:
        if isinstance(target, str):
            parsed = urlparse(target if "//" in target else f"//{target}")
            if parsed.hostname is None or parsed.port is None:
                raise ValueError(f"target {target!r} needs a host and a port")
            target = (parsed.hostname, parsed.port)
        self.target = target
        self.keep_alive = keep_alive
        self.host = host
        self.port = 0
        self._lock = threading.Lock()
        self._accepted = 0
        self._open = 0
        self._requests = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------- counters
    @property
    def accepted(self) -> int:
        """Client connections accepted since start (or the last :meth:`reset`)."""
        with self._lock:
            return self._accepted

    @property
    def open(self) -> int:
        """Client connections open right now."""
        with self._lock:
            return self._open

    @property
    def requests(self) -> int:
        """HTTP requests relayed since start or :meth:`reset` (``keep_alive`` mode)."""
        with self._lock:
            return self._requests

    def reset(self) -> None:
        """Set :attr:`accepted` and :attr:`requests` to zero (open connections stay)."""
        with self._lock:
            self._accepted = 0
            self._requests = 0

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: pass as ``endpoint_url=``."""
        if not self.port:
            raise RuntimeError("the relay is not started")
        return f"http://{self.host}:{self.port}"

    # ------------------------------------------------------------ lifecycle
    def start(self) -> TcpRelay:
        if self._thread is not None:
            raise RuntimeError("the relay is already started")
        loop = asyncio.new_event_loop()
        started = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            asyncio.set_event_loop(loop)
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._handle, self.host, 0, limit=_HEAD_LIMIT)
                )
                self.port = int(self._server.sockets[0].getsockname()[1])
            except BaseException as exc:
                failure.append(exc)
                started.set()
                loop.close()
                return
            started.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=serve, name="langgraph-s3-relay", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            self._thread.join()
            self._loop = self._thread = None
            raise failure[0]
        return self

    def stop(self) -> None:
        """Close the listener and every relayed connection; wait for the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)

        with suppress(RuntimeError, TimeoutError):  # the loop already stopped
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        self._loop = self._thread = self._server = None

    def __enter__(self) -> TcpRelay:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -------------------------------------------------------------- relaying
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        with self._lock:
            self._accepted += 1
            self._open += 1
        try:
            if self.keep_alive:
                await self._serve_http(reader, writer)
            else:
                up_reader, upstream = await asyncio.open_connection(*self.target)
                try:
                    await asyncio.gather(_pump(reader, upstream), _pump(up_reader, writer))
                finally:
                    await _close(upstream)
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # a broken or malformed connection: drop it
        except asyncio.CancelledError:
            pass  # stop()
        finally:
            with self._lock:
                self._open -= 1
            self._tasks.discard(task)
            await _close(writer)

    async def _serve_http(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Requests on one client connection, each over a new upstream connection."""
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                return  # the client closed its idle connection
            with self._lock:
                self._requests += 1
            method, req_headers = _parse_head(head)
            up_reader, upstream = await asyncio.open_connection(*self.target, limit=_HEAD_LIMIT)
            try:
                upstream.write(head)
                sending = asyncio.ensure_future(_copy_body(reader, upstream, req_headers))
                try:
                    keep = await _relay_response(up_reader, writer, method)
                finally:
                    if not sending.done():  # answered before the body was read: drop it
                        await asyncio.wait({sending}, timeout=1.0)
                    if not sending.done():
                        sending.cancel()
                        keep = False
                if sending.cancelled() or sending.exception() is not None:
                    return
            finally:
                await _close(upstream)
            if not keep or "close" in req_headers.get("connection", "").lower():
                return


_HEAD_LIMIT = 1 << 20


def _parse_head(head: bytes) -> tuple[str, dict[str, str]]:
    """First token of the start line (method, or HTTP version), lowercased headers."""
    lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return lines[0].split(" ", 1)[0].upper(), headers


async def _copy_body(
    src: asyncio.StreamReader,
    dst: asyncio.StreamWriter,
    headers: dict[str, str],
    *,
    until_eof: bool = False,
) -> None:
    """Copy one message body, framed by chunked encoding or Content-Length."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            line = await src.readuntil(b"\r\n")
            dst.write(line)
            size = int(line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while (trailer := await src.readuntil(b"\r\n")) != b"\r\n":
                    dst.write(trailer)
                dst.write(b"\r\n")
                break
            dst.write(await src.readexactly(size + 2))
            await dst.drain()
    elif "content-length" in headers:
        left = int(headers["content-length"].split(",")[0])
        while left > 0:
            data = await src.read(min(left, 65536))
            if not data:
                raise asyncio.IncompleteReadError(b"", left)
            dst.write(data)
            left -= len(data)
            await dst.drain()
    elif until_eof:
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
    await dst.drain()


async def _relay_response(
    src: asyncio.StreamReader, dst: asyncio.StreamWriter, method: str
) -> bool:
    """Relay one response; True when the client connection may stay open."""
    head = await src.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    while 100 <= status < 200 and status != 101:  # 100 Continue: pass it on
        dst.write(head)
        await dst.drain()
        head = await src.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
    _, headers = _parse_head(head)
    no_body = method == "HEAD" or status in (204, 304)
    framed = (
        no_body
        or "content-length" in headers
        or "chunked" in headers.get("transfer-encoding", "").lower()
    )
    if framed:
        lines = head[:-4].split(b"\r\n")
        kept = [ln for ln in lines[1:] if not ln.lower().startswith(b"connection:")]
        head = b"\r\n".join([lines[0], *kept, b"Connection: keep-alive"]) + b"\r\n\r\n"
    dst.write(head)
    if not no_body:
        await _copy_body(src, dst, headers, until_eof=not framed)
    await dst.drain()
    return framed


async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copy bytes until EOF, then half-close ``dst``."""
    with suppress(OSError):
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
    if dst.can_write_eof() and not dst.is_closing():
        with suppress(OSError):
            dst.write_eof()


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with suppress(OSError, asyncio.CancelledError):
        await writer.wait_closed()


@contextmanager
def tcp_relay(target: str | tuple[str, int], *, keep_alive: bool = True) -> Iterator[TcpRelay]:
    """``with tcp_relay(server.url) as relay:`` a started :class:`TcpRelay`."""
    with TcpRelay(target, keep_alive=keep_alive) as relay:
        yield relay
