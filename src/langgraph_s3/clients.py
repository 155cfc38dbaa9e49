"""Sessions, connection strings, and one S3 + DynamoDB client pair per event loop.

A saver may be built at import time (Lambda module scope) and then used from
many event loops in turn (``asyncio.run`` per invocation). aiohttp clients are
bound to the loop that created them, so clients are created lazily, once per
loop, and forgotten when that loop is gone.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlparse

from .errors import ConfigurationError

DEFAULT_MAX_CONNECTIONS = 64


@dataclass(frozen=True)
class Target:
    """Where the data lives: bucket, key prefix, manifest table."""

    bucket: str
    prefix: str = ""
    table: str | None = None
    region: str | None = None
    endpoint_url: str | None = None


def parse_conn_string(conn_string: str) -> Target:
    """Parse ``s3://BUCKET/PREFIX?table=TABLE&region=R&endpoint_url=URL``."""
    parsed = urlparse(conn_string)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise ConfigurationError(
            f"connection string {conn_string!r} must look like 's3://BUCKET/PREFIX?table=TABLE'"
        )
    query = parse_qs(parsed.query, keep_blank_values=True)
    unknown = set(query) - {"table", "region", "endpoint_url"}
    if unknown:
        raise ConfigurationError(
            f"unknown connection string parameter(s) {sorted(unknown)}; "
            "use table=, region= or endpoint_url="
        )

    def one(name: str) -> str | None:
        values = query.get(name)
        return values[-1] if values else None

    return Target(
        bucket=parsed.netloc,
        prefix=parsed.path.strip("/"),
        table=one("table"),
        region=one("region"),
        endpoint_url=one("endpoint_url"),
    )


_LABELS: ContextVar[tuple[str, ...]] = ContextVar("langgraph_s3_labels", default=())


def conn_kwargs(conn_string: str, overrides: dict[str, Any], *, with_table: bool) -> dict[str, Any]:
    """Constructor arguments from a connection string; explicit keywords win."""
    t = parse_conn_string(conn_string)
    if t.table and not with_table:
        raise ConfigurationError(
            "the store needs no table: drop '?table=' from its connection string"
        )
    out: dict[str, Any] = {"bucket": t.bucket, "prefix": t.prefix}
    if with_table:
        out["table"] = t.table
    if t.region:
        out["region"] = t.region
    if t.endpoint_url:
        out["endpoint_url"] = t.endpoint_url
    out.update(overrides)
    return out


@dataclass
class Counts:
    requests: int = 0
    round_trips: int = 0
    bytes_sent: int = 0
    in_flight: int = 0
    by_operation: dict[str, int] = field(default_factory=dict)


@dataclass
class RequestStats:
    """Counts every HTTP attempt the clients make (retries included).

    ``round_trips`` counts waves: a wave starts when a request is sent while
    none is in flight, so requests sent together count once. That is the
    number of sequential round trips a caller waits for.

    ``with stats.label("name"):`` also attributes the requests made inside
    the block (and the tasks it starts) to ``name``, exactly, even while
    other operations run concurrently: see :attr:`labels`.
    """

    requests: dict[str, int] = field(default_factory=dict)
    bytes_sent: int = 0
    round_trips: int = 0
    labels: dict[str, Counts] = field(default_factory=dict)
    _in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.labels.clear()
            self.bytes_sent = 0
            self.round_trips = 0

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "requests": self.total,
                "by_operation": dict(self.requests),
                "round_trips": self.round_trips,
                "bytes_sent": self.bytes_sent,
            }

    @contextmanager
    def label(self, name: str) -> Iterator[None]:
        token = _LABELS.set((*_LABELS.get(), name))
        try:
            yield
        finally:
            _LABELS.reset(token)

    def _sent(self, operation: str, nbytes: int) -> None:
        with self._lock:
            self.requests[operation] = self.requests.get(operation, 0) + 1
            self.bytes_sent += nbytes
            if self._in_flight == 0:
                self.round_trips += 1
            self._in_flight += 1
            for name in _LABELS.get():
                c = self.labels.setdefault(name, Counts())
                c.requests += 1
                c.by_operation[operation] = c.by_operation.get(operation, 0) + 1
                c.bytes_sent += nbytes
                if c.in_flight == 0:
                    c.round_trips += 1
                c.in_flight += 1

    def _done(self) -> None:
        with self._lock:
            self._in_flight = max(0, self._in_flight - 1)
            for name in _LABELS.get():
                c = self.labels.get(name)
                if c is not None:
                    c.in_flight = max(0, c.in_flight - 1)


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


class ClientFactory:
    """Creates and caches one client per (service, event loop)."""

    def __init__(
        self,
        *,
        session: Any = None,
        endpoint_url: str | None = None,
        region: str | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_attempts: int = 8,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
    ) -> None:
        self._session = session
        self.endpoint_url = endpoint_url
        self.region = region
        self.max_connections = max_connections
        self.max_attempts = max_attempts
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.stats = RequestStats()
        self.created = 0
        """How many clients were built: one per service per event loop."""
        self._per_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[dict[str, Any], AsyncExitStack]
        ] = weakref.WeakKeyDictionary()
        self._creating: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._hooks: list[tuple[str, Any]] = []

    def add_hook(self, event: str, handler: Any) -> None:
        """Register a botocore event handler on every client, now and later."""
        self._hooks.append((event, handler))
        for clients, _ in list(self._per_loop.values()):
            for client in clients.values():
                client.meta.events.register(event, handler)

    def preload(self) -> None:
        """Import the SDK and load the S3 and DynamoDB models now, without a loop.

        On Lambda, call it at module scope: the init phase runs with a full CPU
        and is not billed to the first request.
        """
        loader = self._aio_session().get_component("data_loader")  # sync, cached
        for service in ("s3", "dynamodb"):
            loader.load_service_model(service, "service-2")
            loader.load_service_model(service, "endpoint-rule-set-1")
        from aiobotocore.config import AioConfig  # noqa: F401

    def _aio_session(self) -> Any:
        if self._session is None:
            from aiobotocore.session import get_session

            self._session = get_session()
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
            "retries": {"mode": "standard", "max_attempts": self.max_attempts},
            "max_pool_connections": self.max_connections,
            "connect_timeout": self.connect_timeout,
            "read_timeout": self.read_timeout,
            "tcp_keepalive": True,
        }
        if service == "s3" and self._custom_endpoint(service):
            kwargs["s3"] = {"addressing_style": "path"}
        return AioConfig(**kwargs)

    def _custom_endpoint(self, service: str) -> bool:
        env = "AWS_ENDPOINT_URL_S3" if service == "s3" else "AWS_ENDPOINT_URL_DYNAMODB"
        return bool(self.endpoint_url or os.environ.get(env) or os.environ.get("AWS_ENDPOINT_URL"))

    async def client(self, service: str) -> Any:
        loop = asyncio.get_running_loop()
        entry = self._per_loop.get(loop)
        if entry is not None and service in entry[0]:
            return entry[0][service]
        lock = self._creating.setdefault(loop, asyncio.Lock())
        async with lock:
            entry = self._per_loop.get(loop)
            if entry is None:
                entry = ({}, AsyncExitStack())
                self._per_loop[loop] = entry
            clients, stack = entry
            if service not in clients:
                session = self._aio_session()
                kwargs: dict[str, Any] = {"config": self._config(service)}
                if self.endpoint_url:
                    kwargs["endpoint_url"] = self.endpoint_url
                if self.region:
                    kwargs["region_name"] = self.region
                elif not (session.get_config_variable("region")):
                    kwargs["region_name"] = "us-east-1"
                client = await stack.enter_async_context(session.create_client(service, **kwargs))
                self._instrument(client, service)
                clients[service] = client
                self.created += 1
            return clients[service]

    def _instrument(self, client: Any, service: str) -> None:
        stats = self.stats

        def before_send(request: Any, **kw: Any) -> None:
            op = kw.get("event_name", "").split(".")[-1]
            stats._sent(f"{service}.{op}", _body_len(request))

        def after_attempt(**kw: Any) -> None:
            stats._done()

        client.meta.events.register("before-send", before_send)
        client.meta.events.register("needs-retry", after_attempt)
        for event, handler in self._hooks:
            client.meta.events.register(event, handler)

    async def aclose(self) -> None:
        """Close the clients of the running loop (others close with their loop)."""
        loop = asyncio.get_running_loop()
        entry = self._per_loop.pop(loop, None)
        if entry is not None:
            await entry[1].aclose()
