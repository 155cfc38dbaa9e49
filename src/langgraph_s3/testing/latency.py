"""What the test server's requests cost: injected latency per service and operation,
the log of served requests, and the critical path through that log.

``critical_path(log)`` counts round trips (the longest chain of requests, each starting
after the previous one ended); ``weighted_path(log, weight)`` weighs each request, so
that ``AWS_LATENCY`` turns one run's real request order into the milliseconds it would
wait on AWS.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AWS_LATENCY",
    "BACKGROUND_HEADER",
    "BENCH_LATENCY",
    "Latency",
    "ServedRequest",
    "background_ended",
    "critical_path",
    "s3_operation",
    "tag_background",
    "weighted_path",
]


@dataclass(frozen=True)
class Latency:
    """Seconds our moto server waits before handling each request, per service, and
    per S3 operation where given (``s3_put``: PutObject and other writes, ``s3_get``:
    GetObject and HeadObject, ``s3_list``: ListObjectsV2; each defaults to ``s3``).

    The wait happens in the request's own thread, before the request is
    handled and outside the lock that makes writes atomic (``atomic_writes``),
    so requests in flight together wait together, as on a real network.
    """

    s3: float = 0.0
    dynamodb: float = 0.0
    s3_put: float | None = None
    s3_get: float | None = None
    s3_list: float | None = None
    background: float = 0.0
    """Seconds more for a request the client tagged as background work
    (:data:`BACKGROUND_HEADER`, sent by :func:`~langgraph_s3.testing.moto.tag_background`):
    a bench's causal probe. Held past the end of the call that began it, a request the
    call did not wait on ends after the call returned (off its critical path), and one
    it did wait on shows in the path and in the call's time."""

    def __post_init__(self) -> None:
        for name in ("s3", "dynamodb", "s3_put", "s3_get", "s3_list", "background"):
            value = getattr(self, name)
            if value is None and name.startswith("s3_"):
                continue
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

    def scaled(self, factor: float) -> Latency:
        """Every latency ``factor`` times as long: a bench injects 10x AWS's so that the
        server's order of requests is the network's, not the client's CPU's, and
        weighs the chain it finds at 1x."""

        def times(v: float | None) -> float | None:
            return None if v is None else v * factor

        return Latency(
            self.s3 * factor,
            self.dynamodb * factor,
            times(self.s3_put),
            times(self.s3_get),
            times(self.s3_list),
            self.background * factor,
        )

    def of_request(self, service: str, operation: str, background: bool = False) -> float:
        """The seconds one request waits (``ServedRequest``'s service and operation;
        ``background``: the client tagged it, it waits :attr:`background` more)."""
        if background:
            return self.of_request(service, operation) + self.background
        if service == "dynamodb":
            return self.dynamodb
        chosen = {"LIST": self.s3_list, "GET": self.s3_get, "HEAD": self.s3_get}.get(
            operation, self.s3_put
        )
        return self.s3 if chosen is None else chosen


BACKGROUND_HEADER = "x-langgraph-s3-background"
"""The header :func:`~langgraph_s3.testing.moto.tag_background` adds to the requests of
background work, for the test server's log and :attr:`Latency.background`."""


def tag_background(clients: Any) -> None:
    """Add :data:`BACKGROUND_HEADER` to every request sent from background work
    (``core.tasks.BACKGROUND``: held objects' PUTs) by the clients of ``clients``
    (a ``ClientFactory``, such as ``saver.clients``): the test server logs them as such
    and holds them :attr:`Latency.background` longer. Unsigned, after signing
    (botocore's ``before-send``); for benches and tests, not for AWS."""
    from langgraph_s3.core.tasks import BACKGROUND

    def tag(request: Any, **_: Any) -> None:
        if BACKGROUND.get():
            request.headers[BACKGROUND_HEADER] = "1"

    clients.add_hook("before-send", tag)


async def background_ended() -> None:
    """Wait until the background work begun on this event loop so far has ended (held
    objects' PUTs and writes' stores): a bench's pause between turns, as a user's would
    be, so that the next turn does not begin beside the last one's PUTs. No request."""
    import asyncio

    from langgraph_s3.core.tasks import BACKGROUND_TASK

    while tasks := [t for t in asyncio.all_tasks() if t.get_name() == BACKGROUND_TASK]:
        await asyncio.gather(*tasks, return_exceptions=True)  # and those they began


BENCH_LATENCY = Latency(s3=0.020, dynamodb=0.006)
"""The benchmarks' standard: 20 ms per S3 request, 6 ms per DynamoDB request."""

AWS_LATENCY = Latency(s3=0.025, dynamodb=0.005, s3_put=0.025, s3_get=0.015, s3_list=0.020)
"""AWS-like latencies per operation (in-region, small objects): PutObject 25 ms,
GetObject 15 ms, ListObjectsV2 20 ms, DynamoDB 5 ms; the model the benchmarks weight
critical paths with (:func:`weighted_path`)."""


@dataclass(frozen=True, slots=True)
class ServedRequest:
    """One request as our moto server saw it; times are ``time.perf_counter()`` seconds."""

    service: str
    """``"s3"`` or ``"dynamodb"``."""
    operation: str
    """The DynamoDB operation (``"GetItem"``), or the S3 request's HTTP method
    (``"LIST"`` for a listing)."""
    start: float
    """When it arrived (before the injected latency)."""
    end: float
    """When its answer had been sent."""
    received: int = 0
    """Bytes of its body (what the client uploaded)."""
    path: str = ""
    """The S3 request's path (bucket and key), for telling requests apart in a trace."""
    units: float = 0.0
    """A DynamoDB request's capacity units, as AWS bills them (write units for a write,
    read units for a read: ``testing/capacity.py``); 0 for S3, or a server not strict."""
    background: bool = False
    """The client tagged it as background work (:data:`BACKGROUND_HEADER`): a held
    object's PUT that may outlive the call that began it."""


def critical_path(requests: Iterable[ServedRequest]) -> int:
    """The longest chain of requests, each starting after the previous one ended.

    That is the number of round trips the requests cost, at one latency per
    request: requests in flight together count once.
    """
    return round(weighted_path(requests, lambda r: 1.0)[0])


def weighted_path(
    requests: Iterable[ServedRequest], weight: Callable[[ServedRequest], float]
) -> tuple[float, list[ServedRequest]]:
    """The heaviest chain of requests, each starting after the previous one ended,
    each weighing ``weight(request)`` (say, its modeled latency): (its weight, the
    chain). With ``AWS_LATENCY.of_request`` it is the milliseconds a turn waits on
    AWS, by the order the requests really went out in."""
    by_start = sorted(requests, key=lambda r: r.start)
    by_end = sorted(range(len(by_start)), key=lambda i: by_start[i].end)
    best = [0.0] * len(by_start)
    came: list[int | None] = [None] * len(by_start)
    ended, ended_at, j = 0.0, None, 0  # the heaviest chain among the requests ended so far
    for i, request in enumerate(by_start):
        while j < len(by_end) and by_start[by_end[j]].end < request.start:
            k = by_end[j]
            if best[k] > ended:
                ended, ended_at = best[k], k
            j += 1
        best[i] = ended + weight(request)
        came[i] = ended_at
    if not by_start:
        return 0.0, []
    top = max(range(len(by_start)), key=lambda i: best[i])
    chain: list[ServedRequest] = []
    at: int | None = top
    while at is not None:
        chain.append(by_start[at])
        at = came[at]
    return best[top], chain[::-1]


def s3_operation(environ: dict[str, Any]) -> str:
    """An S3 request's method, ``LIST`` for a listing (GET with ``list-type``)."""
    method = str(environ.get("REQUEST_METHOD"))
    if method == "GET" and "list-type=" in str(environ.get("QUERY_STRING", "")):
        return "LIST"
    return method
