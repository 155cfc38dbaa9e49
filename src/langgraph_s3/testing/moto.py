"""A moto server on loopback for offline runs (the demo, tests, benchmarks).

The strict rules are :mod:`.strict`'s, the relay :mod:`.relay`'s (both re-exported here).

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

The server is strict by default (``moto_server(strict=True)``): where moto answers
otherwise than AWS, it answers as AWS does (keys over 1,024 bytes, 409
ConditionalRequestConflict, 204 for a conditional DELETE of a missing key, SSE-KMS
ETags that are no MD5, DynamoDB's 400 KB on every update); ``server.conflict_next()``
arms 409s for a test. ``ignore_conditions=`` emulates stores that ignore conditions.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypedDict

from langgraph_s3.testing.capacity import UNITS
from langgraph_s3.testing.latency import (
    AWS_LATENCY,
    BACKGROUND_HEADER,
    BENCH_LATENCY,
    Latency,
    ServedRequest,
    background_ended,
    critical_path,
    s3_operation,
    tag_background,
    weighted_path,
)
from langgraph_s3.testing.relay import TcpRelay, tcp_relay
from langgraph_s3.testing.strict import (
    IGNORABLE,
    MAX_KEY_BYTES,
    ConflictPlan,
    Strict,
    ignoring_conditions,
    kms_etag,
    strict_behind,
    strict_front,
)
from langgraph_s3.testing.strict_dynamodb import MAX_ITEM_BYTES
from langgraph_s3.testing.wsgi import Served, atomic_writes

__all__ = [
    "AWS_LATENCY",
    "BENCH_LATENCY",
    "DUMMY_ENV",
    "IGNORABLE",
    "MAX_ITEM_BYTES",
    "MAX_KEY_BYTES",
    "ConflictPlan",
    "Latency",
    "MotoServer",
    "Names",
    "ServedRequest",
    "TcpRelay",
    "background_ended",
    "critical_path",
    "endpoint_or_moto",
    "free_port",
    "kms_etag",
    "moto_server",
    "tag_background",
    "tcp_relay",
    "unique_names",
    "use_dummy_credentials",
    "weighted_path",
]

DUMMY_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


class _Control:
    """What a running server's requests wait for, and the logs they go to."""

    def __init__(self, latency: Latency, strict: Strict | None = None) -> None:
        self.latency = latency
        self.strict = strict
        """Strict mode's state; None when the server is not strict."""
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
        """Wipe every bucket and table (moto only), and disarm ``conflict_next``."""
        if self.owned:
            req = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")
            with urllib.request.urlopen(req, timeout=10):
                pass
        strict = self._control.strict if self._control is not None else None
        if strict is not None:
            with strict.lock:
                strict.plans.clear()

    @property
    def strict(self) -> bool:
        """Whether it answers as AWS does where moto alone would not (see
        :func:`moto_server`); an outside endpoint is what it is: False."""
        return self._control is not None and self._control.strict is not None

    def conflict_next(self, match: str, n: int = 1) -> ConflictPlan:
        """Make the next ``n`` conditional writes (PUT with ``If-None-Match`` or
        ``If-Match``, DELETE with ``If-Match``) of keys whose ``bucket/key`` contains
        ``match`` answer 409 ConditionalRequestConflict, as S3 does while a conflicting
        write is in progress. The plan counts what it answered (``answered``)."""
        control = self._require_control()
        if control.strict is None:
            raise RuntimeError(f"{self.url} is not strict: start it with moto_server(strict=True)")
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n!r}")
        plan = ConflictPlan(match, n)
        with control.strict.lock:
            control.strict.plans.append(plan)
        return plan

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


_BACKGROUND_ENV = "HTTP_" + BACKGROUND_HEADER.upper().replace("-", "_")
""":data:`BACKGROUND_HEADER` as WSGI names it."""


def _latency_and_log(app: Any, control: _Control) -> Any:
    """Wait the injected latency before each request (in its own thread, outside
    ``atomic_writes``'s lock) and log it to any recording in progress."""

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        if str(environ.get("PATH_INFO", "")).startswith("/moto-api"):
            return app(environ, start_response)  # reset and the like: not a request of ours
        start = time.perf_counter()
        logged = control.started()
        target = str(environ.get("HTTP_X_AMZ_TARGET") or "")
        service, operation = (
            ("dynamodb", target.rpartition(".")[2]) if target else ("s3", s3_operation(environ))
        )
        background = _BACKGROUND_ENV in environ
        wait = control.latency.of_request(service, operation, background)
        if wait > 0:
            time.sleep(wait)
        if not logged:
            return app(environ, start_response)

        try:
            size = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            size = 0

        def done() -> None:
            control.record(
                ServedRequest(
                    service,
                    operation,
                    start,
                    time.perf_counter(),
                    size,
                    "" if target else str(environ.get("PATH_INFO", "")),
                    float(environ.get(UNITS, 0.0)),
                    background,
                )
            )

        try:
            body = app(environ, start_response)
        except BaseException:
            done()
            raise
        return Served(body, done)

    return wrapped


@contextmanager
def moto_server(
    port: int | None = None,
    *,
    latency: float | Latency | None = None,
    strict: bool = True,
    ignore_conditions: str | Iterable[str] = (),
) -> Iterator[MotoServer]:
    """Start a moto server (S3, DynamoDB, ...) on a free loopback port, with atomic
    conditional writes (see ``atomic_writes``).

    ``latency``: seconds each request waits before it is handled (a
    :class:`Latency` gives S3 and DynamoDB their own); change it later with
    ``server.set_latency()`` or ``with server.delayed(...)``. Requests are
    logged inside ``with server.recording() as log:``.

    ``strict`` (the default) answers as AWS does where moto alone does not: object
    keys over 1,024 bytes of UTF-8 are refused (400 KeyTooLongError, per key in a
    DeleteObjects); a conditional write or delete of a key while another is in flight,
    or armed by ``server.conflict_next()``, answers 409 ConditionalRequestConflict; a
    conditional DELETE of a missing key answers 204; SSE-KMS objects' ETags are not
    the MD5 of their bodies (``kms_etag``), in every answer and in conditions; and an
    UpdateItem that grows an item over 400 KB (``ADD`` to a set, which moto lets
    through) is refused. ``strict=False`` is plain moto (plus ``atomic_writes``).

    ``ignore_conditions``: any of ``"put"``, ``"put-if-match"``, ``"delete"``: emulate
    a store that ignores ``If-None-Match`` and ``If-Match`` on object PUTs (Google Cloud
    Storage's XML API), ``If-Match`` alone on PUTs, or ``If-Match`` on DELETEs (MinIO),
    by dropping those headers (see :data:`IGNORABLE`).
    """
    ignore = frozenset(
        [ignore_conditions] if isinstance(ignore_conditions, str) else ignore_conditions
    )
    if not ignore <= IGNORABLE.keys():
        raise ValueError(
            f"ignore_conditions= takes {sorted(IGNORABLE)}, got {sorted(ignore - IGNORABLE.keys())}"
        )
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    use_dummy_credentials()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = port or free_port()
    control = _Control(Latency.of(latency), Strict() if strict else None)

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

    app: Any = _Dispatcher()
    if control.strict is not None:
        app = strict_front(atomic_writes(strict_behind(app)), control.strict)
    else:
        app = atomic_writes(app)
    if ignore:
        app = ignoring_conditions(app, ignore)
    app = _latency_and_log(app, control)
    server = make_server("127.0.0.1", port, app, True, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, name="moto", daemon=True)
    thread.start()
    try:
        yield MotoServer(url=f"http://127.0.0.1:{port}", owned=True, _control=control)
    finally:
        server.shutdown()
        thread.join()


@contextmanager
def endpoint_or_moto(
    *, latency: float | Latency | None = None, strict: bool = True
) -> Iterator[MotoServer]:
    """The endpoint in ``AWS_ENDPOINT_URL`` if set, else a fresh moto server
    (with ``latency`` and ``strict``, see :func:`moto_server`; an outside endpoint
    has its own)."""
    external = os.environ.get("AWS_ENDPOINT_URL")
    if external:
        yield MotoServer(url=external, owned=False)
        return
    with moto_server(latency=latency, strict=strict) as server:
        yield server


class Names(TypedDict):
    bucket: str
    table: str


def unique_names() -> Names:
    """A bucket and table name no other test uses."""
    suffix = secrets.token_hex(6)
    return {"bucket": f"lgs3-test-{suffix}", "table": f"lgs3-test-{suffix}"}
