"""A TCP relay in front of any endpoint (standard library only): it counts the TCP
connections clients open through it and, forwarding raw bytes, can add a delay each
way and log each exchange (a database's round trip) for the critical path."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import TracebackType
from urllib.parse import urlparse

from langgraph_s3.testing.latency import ServedRequest


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
    any TCP protocol; there ``delay`` seconds are added before each chunk is passed on,
    each way (a database a millisecond away: ``delay=0.001``), and every exchange (the
    client's bytes up to the server's answer, on one connection) is logged in
    :meth:`exchanges` as a :class:`ServedRequest`, so ``critical_path`` counts a
    database's round trips as it does the moto server's requests.

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
        delay: float = 0.0,
        service: str = "tcp",
    ) -> None:
        if delay and keep_alive:
            raise ValueError("delay= is for raw relays (keep_alive=False)")
        if isinstance(target, str):
            parsed = urlparse(target if "//" in target else f"//{target}")
            if parsed.hostname is None or parsed.port is None:
                raise ValueError(f"target {target!r} needs a host and a port")
            target = (parsed.hostname, parsed.port)
        self.target = target
        self.keep_alive = keep_alive
        self.host = host
        self.delay = delay
        self.service = service
        self._log: list[ServedRequest] = []
        self.port = 0
        self._lock = threading.Lock()
        self._accepted = 0
        self._open = 0
        self._requests = 0
        self._idle_closes: list[float] = []
        self._other_closes: list[str] = []
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

    def idle_closes(self) -> list[float]:
        """For each connection the client closed between requests (``keep_alive`` mode),
        the seconds it had been idle: a pool's keep-alive expiry (aiobotocore's 12 s)
        shows here, a connection dropped after use shows near 0."""
        with self._lock:
            return list(self._idle_closes)

    def other_closes(self) -> list[str]:
        """Why each connection that did not end idle ended (``keep_alive`` mode): the
        client left mid-request, asked to close, the server's answer had no length, or
        the connection broke."""
        with self._lock:
            return list(self._other_closes)

    def _closed(self, why: str) -> None:
        with self._lock:
            self._other_closes.append(why)

    def exchanges(self) -> list[ServedRequest]:
        """The exchanges ended since start or :meth:`reset` (raw mode): when the client's
        first byte arrived and the server's last byte left, with the client's bytes."""
        with self._lock:
            return list(self._log)

    def reset(self) -> None:
        """Set :attr:`accepted` and :attr:`requests` to zero and empty :meth:`exchanges`
        (open connections stay)."""
        with self._lock:
            self._accepted = 0
            self._requests = 0
            self._idle_closes.clear()
            self._other_closes.clear()
            self._log.clear()

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
                try:
                    await self._serve_http(reader, writer)
                except BaseException as error:
                    self._closed(f"broken: {type(error).__name__}")
                    raise
            else:
                up_reader, upstream = await asyncio.open_connection(*self.target)
                talk = _Exchange(self)
                try:
                    await asyncio.gather(
                        _pump(reader, upstream, self.delay, talk.asked),
                        _pump(up_reader, writer, self.delay, talk.answered),
                    )
                finally:
                    talk.close()
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
        idle_since = time.monotonic()
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as error:
                if not error.partial:  # the client closed its idle connection
                    with self._lock:
                        self._idle_closes.append(time.monotonic() - idle_since)
                else:
                    self._closed("client left mid-head")
                return
            with self._lock:
                self._requests += 1
            method, req_headers = _parse_head(head)
            up_reader, upstream = await asyncio.open_connection(*self.target, limit=_HEAD_LIMIT)
            try:
                upstream.write(head)
                sending = asyncio.ensure_future(_copy_body(reader, _Sink(upstream), req_headers))
                answer = asyncio.ensure_future(_relay_response(up_reader, writer, method))
                try:
                    await asyncio.wait({sending, answer}, return_when=asyncio.FIRST_COMPLETED)
                    if sending.done() and sending.exception() is not None:
                        self._closed("client left mid-body")
                        return  # the server would wait for the rest
                    keep = await answer
                finally:
                    if not answer.done():
                        answer.cancel()
                    if not sending.done():  # answered before the body was all read
                        # The client still sends it (a starved process may take seconds);
                        # the connection is reusable once it has. One that asked for
                        # 100 Continue and got a final answer instead sends no body (and
                        # aiohttp closes the connection).
                        expects = "100-continue" in req_headers.get("expect", "").lower()
                        await asyncio.wait({sending}, timeout=1.0 if expects else 30.0)
                    if not sending.done():
                        sending.cancel()
                        keep = False
                    await asyncio.gather(sending, answer, return_exceptions=True)
                if sending.cancelled() or sending.exception() is not None:
                    self._closed("the body did not follow an early answer")
                    return
            finally:
                await _close(upstream)
            if not keep:
                self._closed("answer without a length")
                return
            if "close" in req_headers.get("connection", "").lower():
                self._closed("client asked to close")
                return
            idle_since = time.monotonic()


_HEAD_LIMIT = 1 << 20


class _Sink:
    """The upstream side of a request body: a server that answered early and closed
    makes the rest go nowhere, while the client's bytes are still read off its
    connection (so the next request on it starts where it should)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.broken = False

    def write(self, data: bytes) -> None:
        if not self.broken:
            try:
                self.writer.write(data)
            except (OSError, RuntimeError):
                self.broken = True

    async def drain(self) -> None:
        if not self.broken:
            try:
                await self.writer.drain()
            except OSError:
                self.broken = True


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
    dst: asyncio.StreamWriter | _Sink,
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


class _Exchange:
    """One raw connection's exchanges: the client's bytes open one (unless one is
    waiting for its answer), the server's extend it; the next client bytes after an
    answer end it, in the relay's log."""

    def __init__(self, relay: TcpRelay) -> None:
        self.relay = relay
        self.start = self.end = 0.0
        self.sent = 0
        self.open = self.answered_yet = False

    def asked(self, size: int) -> None:
        if self.open and self.answered_yet:
            self.close()
        if not self.open:
            self.open, self.answered_yet = True, False
            self.start, self.sent = time.perf_counter(), 0
        self.sent += size

    def answered(self, size: int) -> None:
        if self.open:
            self.answered_yet, self.end = True, time.perf_counter()

    def close(self) -> None:
        if self.open and self.answered_yet:
            with self.relay._lock:
                self.relay._log.append(
                    ServedRequest(self.relay.service, "exchange", self.start, self.end, self.sent)
                )
        self.open = False


async def _pump(
    src: asyncio.StreamReader,
    dst: asyncio.StreamWriter,
    delay: float = 0.0,
    seen: Callable[[int], None] | None = None,
) -> None:
    """Copy bytes until EOF (each chunk ``delay`` seconds later), then half-close
    ``dst``; ``seen`` hears of each chunk's size as it is passed on."""
    with suppress(OSError):
        while data := await src.read(65536):
            if delay:
                await asyncio.sleep(delay)
            dst.write(data)
            await dst.drain()
            if seen is not None:
                seen(len(data))
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
