"""One S3 + DynamoDB client pair per event loop, from a session (the connection strings,
limits and names they take are :mod:`.config`'s, re-exported here).

A saver may be built at import time (Lambda module scope) and then used from
many event loops in turn (``asyncio.run`` per invocation). aiohttp clients are
bound to the loop that created them, so clients are created lazily, once per
loop, and closed when that loop shuts down: a suspended async generator per
loop is finalized by ``loop.shutdown_asyncgens()`` (which ``asyncio.run`` and
``asyncio.Runner`` call), and closes the loop's clients there, on their own
loop. A loop closed without that is noticed on the next call and forgotten.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import threading
import weakref
from collections.abc import AsyncGenerator, Iterator
from contextlib import AsyncExitStack
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from langgraph_s3.aws import hot
from langgraph_s3.aws.config import (
    COUNT_LIMITS,
    DEFAULT_MAX_CONNECTIONS,
    LIMIT_NAMES,
    Limits,
    Target,
    check_bucket_name,
    check_endpoint_url,
    check_region,
    check_table_name,
    conn_kwargs,
    parse_conn_string,
    redact,
)
from langgraph_s3.aws.stats import CURRENT_ATTEMPT, RequestStats
from langgraph_s3.aws.telemetry import abandon_request_span, request_hooks
from langgraph_s3.core import fence
from langgraph_s3.errors import ClosedError, ConfigurationError

__all__ = [
    "COUNT_LIMITS",
    "DEFAULT_MAX_CONNECTIONS",
    "LIMIT_NAMES",
    "ClientFactory",
    "Limits",
    "Target",
    "abandon_attempt",
    "check_bucket_name",
    "check_endpoint_url",
    "check_region",
    "check_table_name",
    "conn_kwargs",
    "one_attempt",
    "parse_conn_string",
    "redact",
]


_ONE_ATTEMPT: ContextVar[bool] = ContextVar("langgraph_s3_one_attempt", default=False)


@contextlib.contextmanager
def one_attempt() -> Iterator[None]:
    """Requests made inside (in this task and the tasks it starts) are sent once, never
    retried: a probe that says at once whether the endpoint answers (the command line's
    deployment check fails within one ``connect_timeout``, not after the retry policy's
    attempts and backoff). Every other request keeps the policy."""
    token = _ONE_ATTEMPT.set(True)
    try:
        yield
    finally:
        _ONE_ATTEMPT.reset(token)


def single_attempt() -> bool:
    """Whether the current request is inside :func:`one_attempt`."""
    return _ONE_ATTEMPT.get()


def _one_attempt_ends(client: Any) -> Any:
    """``needs-retry.<service>``, asked before botocore's retry handler: inside
    :func:`one_attempt`, a failed attempt ends the call with its own error (a 5xx or
    429 answer, as the client would raise it). Not by answering False: aiobotocore
    before 2.26 reads a False there as "retry at once", and would loop until the
    deadline."""

    def ends(
        caught_exception: BaseException | None = None,
        response: Any = None,
        operation: Any = None,
        **_: Any,
    ) -> None:
        if not _ONE_ATTEMPT.get():
            return
        if caught_exception is not None:
            raise caught_exception
        http, parsed = response if isinstance(response, tuple) else (None, None)
        status = getattr(http, "status_code", 0)
        # what the retry policy would send again (5xx, throttling); a 3xx or 4xx is left
        # to the handlers after this one: S3's region redirector follows a 301 to the
        # bucket's region, as it does outside
        if (status >= 500 or status == 429) and isinstance(parsed, dict):
            code = parsed.get("Error", {}).get("Code") or str(status)
            raise client.exceptions.from_code(code)(parsed, getattr(operation, "name", ""))

    return ends


def abandon_attempt(error: str) -> None:
    """Close the books on an attempt this task left in flight: cut off by a cancel
    or a deadline, it never reports back (botocore emits no ``needs-retry``), so it
    would stay counted as in flight, and its span open."""
    attempt = CURRENT_ATTEMPT.get()
    if attempt is not None:
        CURRENT_ATTEMPT.set(None)
        attempt.stats.done(attempt)
    abandon_request_span(error)


def _body_len(request: Any) -> int:
    """Bytes on the wire: Content-Length when set (S3 bodies are file objects)."""
    headers = getattr(request, "headers", None) or {}
    length = headers.get("x-amz-decoded-content-length") or headers.get("Content-Length")
    if length is not None:
        return int(length)
    body = getattr(request, "body", None)
    if isinstance(body, (bytes, bytearray, memoryview)):
        return len(body)
    if isinstance(body, str):
        return len(body.encode("utf-8"))
    return 0


_LOADER_LOCK = threading.Lock()
_LOADERS: dict[str | None, Any] = {}
_FROZEN = False
"""``preload`` froze the process's objects (once per process)."""
_WARM: set[tuple[int, str]] = set()
"""(id of a data loader, service) whose models and SDK modules are loaded."""
_SHARED_DATA = ("endpoints", "partitions", "sdk-default-configuration", "_retry")
"""The data files every client's creation reads, besides its service's models."""


def _shared_loader(data_path: str | None) -> Any:
    """One botocore data loader for every session this process makes for itself.

    The loader reads and caches the service models (S3's alone is ~1 MB of
    JSON): with one per session, each new saver or store spent ~0.2 s of CPU
    loading them again. The models are read-only data, so sharing is safe;
    sessions passed in with ``session=`` keep their own. Keyed by the data path
    (``AWS_DATA_PATH``), which is where botocore looks for models.
    """
    with _LOADER_LOCK:
        loader = _LOADERS.get(data_path)
        if loader is None:
            from botocore.loaders import create_loader

            loader = _LOADERS[data_path] = create_loader(data_path)
        return loader


def warmed(session: Any, service: str) -> bool:
    """Whether :func:`warm` ran for this session's loader and ``service`` (no I/O)."""
    return (id(session.get_component("data_loader")), service) in _WARM


def warm(session: Any, service: str) -> None:
    """Import what a client's creation imports and load the files it reads (the
    loader caches them: ~150 ms of CPU the first time in a process). Blocking: run in
    a thread, never on a loop."""
    loader = session.get_component("data_loader")  # sync, cached
    if (id(loader), service) in _WARM:
        return
    import aiobotocore.client
    import aiobotocore.endpoint
    import aiobotocore.httpsession  # noqa: F401
    from aiobotocore.config import AioConfig  # noqa: F401

    loader.load_service_model(service, "service-2")
    loader.load_service_model(service, "endpoint-rule-set-1")
    for name in _SHARED_DATA:
        with contextlib.suppress(Exception):  # an SDK without the file reads it never
            loader.load_data(name)
    # the session's endpoint resolver (botocore's internal component: get_component()
    # warns), built from the partitions once per session
    resolver = getattr(session, "_get_internal_component", None)
    if resolver is not None:
        with contextlib.suppress(Exception):
            resolver("endpoint_resolver")
    with _LOADER_LOCK:
        _WARM.add((id(loader), service))


def _freeze_once() -> None:
    """One full collection, then ``gc.freeze()``: once per process (each freeze would
    also keep whatever garbage that moment held)."""
    global _FROZEN
    with _LOADER_LOCK:
        if _FROZEN:
            return
        _FROZEN = True
    gc.collect()
    gc.freeze()


@dataclass(eq=False)
class _LoopClients:
    """The clients of one event loop, and the hook that closes them with it."""

    loop: asyncio.AbstractEventLoop
    stack: AsyncExitStack = field(default_factory=AsyncExitStack)
    clients: dict[str, Any] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    guard: AsyncGenerator[None, None] | None = None
    retired: bool = False
    """Closed (or abandoned) already: the guard must not close again."""


class ClientFactory:
    """Creates one client per (service, event loop) and closes it with its loop.

    Entries are keyed by ``id(loop)`` and hold the loop: they leave the map
    when the loop shuts down (the guard), when it is found closed, or on
    :meth:`aclose`. A cache keyed weakly by loop would never let go, since the
    clients in it reference their loop.
    """

    def __init__(
        self,
        *,
        session: Any = None,
        endpoint_url: str | None = None,
        region: str | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        limits: Limits | None = None,
    ) -> None:
        self._session = session
        self._own_session = session is None
        """The session is the library's (S3's object requests may go from templates)."""
        self.endpoint_url = check_endpoint_url(endpoint_url) if endpoint_url is not None else None
        if region is not None:
            check_region(region)
        self.region = region
        self.max_connections = max_connections
        self.limits = limits or Limits()
        self.stats = RequestStats()
        self.created = 0
        """How many clients were built: one per service per event loop."""
        self._per_loop: dict[int, _LoopClients] = {}
        self._closed: weakref.WeakSet[Any] = weakref.WeakSet()
        self._mutex = threading.Lock()
        self._hooks: list[tuple[str, Any]] = []

    @property
    def open_loops(self) -> int:
        """Event loops that hold clients right now (flat across asyncio.run calls)."""
        return len(self._per_loop)

    def add_hook(self, event: str, handler: Any) -> None:
        """Register a botocore event handler on every client, now and later. A handler of
        an event DynamoDB's templated requests skip (``hot.SKIPPED``) turns the templates
        off, so that it sees every request."""
        self._hooks.append((event, handler))
        for entry in list(self._per_loop.values()):
            for client in entry.clients.values():
                client.meta.events.register(event, handler)
                if hot.skips(event):
                    hot.detach(client)

    def preload(self) -> None:
        """Import the SDK and load the S3 and DynamoDB models now, without a loop, then
        run one full garbage collection and freeze what survives (``gc.freeze``).

        On Lambda, call it at module scope: the init phase runs with a full CPU and is
        not billed to the first request. The freeze keeps the SDK's models (hundreds of
        thousands of objects) out of every later full collection, which would otherwise
        hold the event loop ~60 ms once the process has allocated enough to run one.
        Without ``preload``, the first client of each service loads the models in a
        thread (the loop is not held for it) and nothing is frozen.
        """
        for service in ("s3", "dynamodb"):
            warm(self.session, service)
        _freeze_once()

    @property
    def session(self) -> Any:
        """The aiobotocore session clients are made from (the one passed in, or
        one of our own that shares the process's botocore models)."""
        if self._session is None:
            with self._mutex:  # a first client on two loops at once: one session
                if self._session is None:
                    from aiobotocore.session import get_session

                    from langgraph_s3.aws.parsing import PlannedParserFactory

                    session = get_session()
                    session.register_component(
                        "data_loader", _shared_loader(session.get_config_variable("data_path"))
                    )
                    session.register_component("response_parser_factory", PlannedParserFactory())
                    self._session = session
        # an aioboto3.Session wraps an aiobotocore session in ``_session``
        inner = getattr(self._session, "_session", None)
        if inner is not None and hasattr(inner, "create_client"):
            return inner
        if hasattr(self._session, "create_client"):
            return self._session
        raise ConfigurationError(
            "session= must be an aioboto3.Session or an aiobotocore session, "
            f"got {type(self._session).__name__}"
        )

    def _config(self, service: str) -> Any:
        from aiobotocore.config import AioConfig

        kwargs: dict[str, Any] = {
            "retries": {"mode": "standard", "total_max_attempts": self.limits.max_attempts},
            "max_pool_connections": self.max_connections,
            "connect_timeout": self.limits.connect_timeout,
            "read_timeout": self.limits.read_timeout,
            "tcp_keepalive": True,
        }
        if service == "s3":
            # No CRC on every PutObject and GetObject (~0.4 ms of CPU each): the
            # checksums only requests that need one get (DeleteObjects). Objects are
            # checked by what they hold (each envelope is parsed and names its key), and
            # S3-compatible stores that refuse the new checksum headers work as well.
            kwargs["request_checksum_calculation"] = "when_required"
            kwargs["response_checksum_validation"] = "when_required"
            if self._custom_endpoint(service):
                kwargs["s3"] = {"addressing_style": "path"}
        return AioConfig(**kwargs)

    def _configured_endpoint(self, service: str) -> str | None:
        """The endpoint set for ``service`` (``endpoint_url=`` or the endpoint
        variables, which botocore skips when told to ignore configured endpoints)."""
        if self.endpoint_url:
            return self.endpoint_url
        ignore = self.session.get_config_variable("ignore_configured_endpoint_urls")
        if str(ignore).strip().lower() == "true":
            return None
        env = f"AWS_ENDPOINT_URL_{service.upper()}"  # botocore's per-service variable
        return os.environ.get(env) or os.environ.get("AWS_ENDPOINT_URL") or None

    def _custom_endpoint(self, service: str) -> bool:
        return self._configured_endpoint(service) is not None

    def _plain_http(self, service: str) -> str | None:
        """The ``http://`` endpoint the client will talk to, when that is certain."""
        url = (self._configured_endpoint(service) or "").strip()
        return url if url.lower().startswith("http://") else None

    def endpoint_for(self, service: str) -> str:
        """The endpoint a service's requests go to, safe to print."""
        url = self._configured_endpoint(service)
        if url:
            return redact(url)
        region = (
            self.region
            or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
        )
        return f"https://{service}.{region}.amazonaws.com"

    async def client(self, service: str) -> Any:
        loop = asyncio.get_running_loop()
        entry = self._per_loop.get(id(loop))
        if entry is not None and entry.loop is loop and service in entry.clients:
            return entry.clients[service]
        if entry is None or entry.loop is not loop:
            entry = self._entry_for(loop)
        async with entry.lock:
            if service not in entry.clients:
                # the SDK's first client in a process reads ~1 MB of JSON: in a thread,
                # so the caller's loop is not held for it (once per process and service)
                if self._session is None or not warmed(self.session, service):
                    # the SDK's import and session too (~100 ms on a cold process)
                    try:
                        await asyncio.to_thread(lambda: warm(self.session, service))
                    except RuntimeError:  # no executor (a loop shutting down): here
                        warm(self.session, service)
                if entry.guard is None:
                    entry.guard = self._guard(entry)
                    await entry.guard.__anext__()  # registered with the loop's asyncgens now
                session = self.session
                kwargs: dict[str, Any] = {"config": self._config(service)}
                if self.endpoint_url:
                    kwargs["endpoint_url"] = self.endpoint_url
                plain = self._plain_http(service)
                if plain:
                    # No TLS to verify; without this, aiobotocore loads the CA
                    # bundle for every new client (~40 ms per loop, per service).
                    # The endpoint is passed too: verify=False goes with it only.
                    kwargs["endpoint_url"] = plain
                    kwargs["verify"] = False
                if self.region:
                    kwargs["region_name"] = self.region
                elif not (session.get_config_variable("region")):
                    kwargs["region_name"] = "us-east-1"
                client = await entry.stack.enter_async_context(
                    session.create_client(service, **kwargs)
                )
                self._instrument(client, service)
                entry.clients[service] = client
                self.created += 1
            return entry.clients[service]

    def _entry_for(self, loop: asyncio.AbstractEventLoop) -> _LoopClients:
        with self._mutex:
            for key, old in list(self._per_loop.items()):
                if old.loop.is_closed():  # closed without shutdown_asyncgens: forget it
                    del self._per_loop[key]
                    _abandon(old)
            entry = self._per_loop.get(id(loop))
            if entry is None or entry.loop is not loop:
                entry = _LoopClients(loop)
                self._per_loop[id(loop)] = entry
            return entry

    async def _guard(self, entry: _LoopClients) -> AsyncGenerator[None, None]:
        """Suspended for the loop's life; finalized by ``loop.shutdown_asyncgens()``."""
        try:
            yield
        finally:
            if not entry.retired:
                await self._retire(entry)

    async def _retire(self, entry: _LoopClients) -> None:
        """Close one loop's clients, on that loop.

        ``retired`` is set only once they are closed: a close cancelled half-way
        (a loop shutting down) is finished by the guard.
        """
        with self._mutex:
            if self._per_loop.get(id(entry.loop)) is entry:
                del self._per_loop[id(entry.loop)]
        self._closed.update(entry.clients.values())
        await entry.stack.aclose()
        entry.retired = True
        entry.clients.clear()
        guard, entry.guard = entry.guard, None
        if guard is not None and _suspended(guard):
            await guard.aclose()

    def _instrument(self, client: Any, service: str) -> None:
        stats = self.stats

        # Each HTTP attempt emits before-send, then needs-retry once its answer (or
        # error) is in, before any backoff: both in the task that makes the call, which
        # has one attempt in flight at a time, so a context variable pairs them.
        def before_send(request: Any, **kw: Any) -> None:
            op = kw.get("event_name", "").split(".")[-1]
            CURRENT_ATTEMPT.set(stats.sent(f"{service}.{op}", _body_len(request)))

        def after_attempt(**kw: Any) -> None:
            attempt = CURRENT_ATTEMPT.get()
            if attempt is not None and attempt.stats is stats:
                CURRENT_ATTEMPT.set(None)
                # botocore numbers the attempts of one request: past the first, a retry
                stats.done(attempt, retry=int(kw.get("attempts") or 1) > 1)

        closed, me = self._closed, weakref.ref(client)

        def no_retry_once_closed(**kw: Any) -> None:
            # botocore would retry a request cut off by our own close, with backoff,
            # for seconds: stop it at once and say why
            if me() in closed:
                raise ClosedError()

        client.meta.events.register("before-send", before_send)
        client.meta.events.register("needs-retry", after_attempt)
        for event, handler in request_hooks(service):  # a span per attempt, when traced
            client.meta.events.register(event, handler)
        client.meta.events.register("needs-retry", no_retry_once_closed)
        # botocore's retry handler is on needs-retry.<service>: first there, asked before it
        service_event = client.meta.service_model.service_id.hyphenize()
        client.meta.events.register_first(f"needs-retry.{service_event}", _one_attempt_ends(client))
        if service == "s3":
            client.meta.events.register("before-call.s3", hot.continue_for_large_bodies)
            # after signing, every attempt: a manifest version's create built on a read
            # older than the fence allows is not sent (core/fence.py)
            client.meta.events.register_first("before-send.s3", _fenced)
        if not any(hot.skips(event) for event, _ in self._hooks):
            hot.attach(client, service, objects=self._own_session)
        for event, handler in self._hooks:
            client.meta.events.register(event, handler)

    def was_closed(self, client: Any) -> bool:
        """Closed by this factory (a request that fails on it was cut off by a close)."""
        return client in self._closed

    async def aclose_running(self) -> None:
        """Close the running loop's clients (a loop winding down)."""
        entry = self._per_loop.get(id(asyncio.get_running_loop()))
        if entry is not None and not entry.retired:
            await self._retire(entry)

    async def aclose(self, *, blocked: asyncio.AbstractEventLoop | None = None) -> None:
        """Close every client this factory opened, on every loop.

        The caller's loop closes its own; a loop running in another thread (the
        sync façade's) is asked to close its own and waited for; an idle loop,
        or ``blocked`` (a loop whose thread waits for this call: a sync
        ``close()`` made from async code), gets the close queued for its next
        run; a closed loop's clients are dropped.
        """
        here = asyncio.get_running_loop()
        with self._mutex:
            entries = list(self._per_loop.values())
        for entry in entries:
            if entry.retired:
                continue
            loop = entry.loop
            if loop is here:
                await self._retire(entry)
            elif loop.is_closed():
                with self._mutex:
                    self._per_loop.pop(id(loop), None)
                _abandon(entry)
            elif loop.is_running() and loop is not blocked:
                fut = asyncio.run_coroutine_threadsafe(self._retire(entry), loop)
                try:
                    await asyncio.wait_for(asyncio.wrap_future(fut), self.limits.request_timeout)
                except TimeoutError:  # that loop is busy: it closes them when it gets to it
                    with self._mutex:
                        self._per_loop.pop(id(loop), None)
            else:
                # an idle loop of another owner is never driven from here: the close is
                # queued for its next run (asyncio.Runner.close() runs it, too)
                with self._mutex:
                    self._per_loop.pop(id(loop), None)
                try:
                    loop.call_soon_threadsafe(_queue_retire, loop, self._retire, entry)
                except RuntimeError:  # closed meanwhile
                    _abandon(entry)


def _queue_retire(loop: asyncio.AbstractEventLoop, retire: Any, entry: _LoopClients) -> None:
    loop.create_task(retire(entry))


def _abandon(entry: _LoopClients) -> None:
    """Let go of a closed loop's clients without touching the loop again."""
    entry.retired = True
    entry.clients.clear()
    guard, entry.guard = entry.guard, None
    if guard is not None and _suspended(guard):
        closing = guard.aclose()  # the guard sees ``retired`` and returns at once
        try:
            closing.send(None)
        except StopIteration:
            pass
        except RuntimeError:  # pragma: no cover - it was being closed elsewhere
            closing.close()


def _suspended(guard: AsyncGenerator[None, None]) -> bool:
    """Started, not finished, and not the generator running right now."""
    return getattr(guard, "ag_frame", None) is not None and not getattr(guard, "ag_running", True)


def _fenced(**_: Any) -> None:
    fence.check()
