"""A fault-injecting HTTP reverse proxy between the saver and moto (loopback only)."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import aiohttp
import yarl
from aiohttp import web

from langgraph_s3.testing import free_port

HOP_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "content-encoding"}


@dataclass
class FaultPlan:
    """Every ``every``-th request gets the next fault of ``cycle`` that applies to it."""

    every: int = 3
    cycle: tuple[str, ...] = ("503", "lost", "truncate", "reset")
    must: tuple[str, ...] = ()
    """``fault:target`` pairs injected on the first matching request, whatever the rotation."""
    injected: Counter[str] = field(default_factory=Counter)
    seen: int = 0
    _next: int = 0

    def pick(self, method: str, target: str) -> str | None:
        self.seen += 1
        for pair in self.must:
            fault, _, wanted = pair.partition(":")
            if wanted == target and not self.injected[pair]:
                self.injected[pair] += 1
                self.injected[fault] += 1
                return fault
        if self.seen % self.every:
            return None
        for _ in range(len(self.cycle)):
            fault = self.cycle[self._next % len(self.cycle)]
            self._next += 1
            if fault == "truncate" and method != "GET":
                continue  # a truncated body is a read fault
            self.injected[f"{fault}:{target}"] += 1
            self.injected[fault] += 1
            return fault
        return None


def _target(request: web.Request, body: bytes) -> str:
    amz = request.headers.get("X-Amz-Target", "")
    if amz:
        return amz.split(".")[-1]  # DynamoDB operation
    if request.method == "PUT" and request.headers.get("If-None-Match") == "*":
        return "PutObject-if-none-match"
    return f"{request.method}-s3"


@contextmanager
def fault_proxy(upstream: str, plan: FaultPlan) -> Iterator[str]:
    """Run the proxy on its own loop thread; yields its URL."""
    port = free_port()
    ready = threading.Event()
    loop = asyncio.new_event_loop()
    state: dict[str, object] = {}

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        note = getattr(plan, "note", None)  # a plan may also look at the headers
        if note is not None:
            note(request.headers)
        fault = plan.pick(request.method, _target(request, body))
        if fault == "503":
            return web.Response(status=503, text="<Error><Code>SlowDown</Code></Error>")
        if fault == "reset":
            assert request.transport is not None
            request.transport.abort()  # connection reset before the request is applied
            return web.Response(status=500)
        session = state["session"]
        assert isinstance(session, aiohttp.ClientSession)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        # the Host and the path as signed: a store that checks SigV4 (SeaweedFS) sees
        # the request the client signed, not one the proxy rewrote
        headers["Host"] = request.headers.get("Host", "")
        target = yarl.URL(upstream + request.raw_path, encoded=True)
        async with session.request(request.method, target, headers=headers, data=body) as resp:
            data = await resp.read()
            out_headers = {k: v for k, v in resp.headers.items() if k.lower() not in HOP_HEADERS}
            status = resp.status
        if fault == "lost":
            assert request.transport is not None
            request.transport.abort()  # applied upstream, answer never arrives
            return web.Response(status=500)
        if fault == "truncate" and len(data) > 8:
            stream = web.StreamResponse(status=status, headers=out_headers)
            stream.content_length = len(data)
            await stream.prepare(request)
            await stream.write(data[: len(data) // 2])
            assert request.transport is not None
            request.transport.abort()
            return stream
        return web.Response(status=status, headers=out_headers, body=data)

    async def start() -> None:
        state["session"] = aiohttp.ClientSession(auto_decompress=False)
        app = web.Application(client_max_size=1024**3)
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        state["runner"] = runner
        ready.set()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(10)

    async def stop() -> None:
        runner = state["runner"]
        assert isinstance(runner, web.AppRunner)
        await runner.cleanup()
        session = state["session"]
        assert isinstance(session, aiohttp.ClientSession)
        await session.close()

    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


@dataclass
class CrashPlan(FaultPlan):
    """The writer dies at request ``at`` (1-based, counted since :meth:`arm`).

    ``after=False`` ("before k"): request ``at`` and every later one get a
    connection reset before reaching upstream, so request ``at`` is never applied.
    ``after=True`` ("after k"): request ``at`` is applied upstream and its answer is
    lost (connection reset), and every later request is reset. ``at=0`` passes
    everything through (and still counts requests in ``seen`` / ``targets``).
    """

    at: int = 0
    after: bool = False
    targets: list[str] = field(default_factory=list)
    tags: list[str | None] = field(default_factory=list)
    """Per request, the value of its ``tag_header`` (None when absent)."""
    tag_header: str = "x-crash-tag"

    def arm(self, at: int = 0, *, after: bool = False) -> None:
        self.at, self.after, self.seen = at, after, 0
        self.targets.clear()
        self.tags.clear()
        self.injected.clear()

    def applied(self, n: int) -> bool:
        """Whether request ``n`` (1-based) reached upstream."""
        return not self.at or n < self.at or (self.after and n == self.at)

    dead: set[str] = field(default_factory=set)
    """Threads whose writer crashed. A request of theirs can still arrive after the
    crash (its bytes left before the client cancelled it, or aiohttp re-sent a reset
    PUT once by itself): it is reset whenever it comes, even after ``arm(0)``, and
    not counted (it would shift the next crash point's numbering)."""
    _tag: str | None = None

    def note(self, headers: Mapping[str, str]) -> None:
        self._tag = headers.get(self.tag_header)

    def pick(self, method: str, target: str) -> str | None:
        tag, self._tag = self._tag, None
        if tag is not None and tag.rpartition("#")[0] in self.dead:
            self.injected["straggler"] += 1
            return "reset"
        self.seen += 1
        self.targets.append(target)
        self.tags.append(tag)
        if not self.at or self.seen < self.at:
            return None
        fault = "lost" if self.after and self.seen == self.at else "reset"
        self.injected[fault] += 1
        return fault
