"""Request accounting: every HTTP attempt counted, by operation, by label, and as
round trips (the critical path). The clients count through the SDK's hooks; the
in-memory fakes count the same way (``RequestStats.sent`` and ``done``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CALL_LABEL", "CURRENT_ATTEMPT", "LABELS", "Attempt", "Counts", "RequestStats"]


LABELS: ContextVar[tuple[str, ...]] = ContextVar("langgraph_s3_labels", default=())


@dataclass
class Counts:
    """The requests made under one :meth:`RequestStats.label`; fields as there."""

    requests: int = 0
    """HTTP attempts (an int here; :attr:`RequestStats.by_operation` there)."""
    round_trips: int = 0
    """The critical path of these requests alone (see :class:`RequestStats`)."""
    bytes_sent: int = 0
    in_flight: int = 0
    by_operation: dict[str, int] = field(default_factory=dict)
    retries: int = 0
    """Attempts that repeated a request botocore retried (each also counts in requests)."""
    _completed: int = field(default=0, repr=False)
    """The greatest depth among this label's completed requests."""


@dataclass(frozen=True, eq=False)
class Attempt:
    """One HTTP attempt in flight: its depth, overall and in each label."""

    stats: RequestStats
    generation: int
    depth: int
    labels: tuple[tuple[Counts, int], ...]


CURRENT_ATTEMPT: ContextVar[Attempt | None] = ContextVar("langgraph_s3_attempt", default=None)


CALL_LABEL = "langgraph_s3.call."
"""The labels telemetry.py opens per call: counted only while the call is open."""


@dataclass
class RequestStats:
    """Counts every HTTP attempt the clients make: each retry is a request of its own.

    ``round_trips`` is the critical path: the length of the longest chain of
    requests in which each one was sent after the previous one had completed
    (its response received). A request's depth is 1 + the greatest depth
    among the requests already completed when it is sent (1 when none has),
    and ``round_trips`` is the greatest depth so far. Requests in flight
    together never extend each other's chain; a retry, sent after the failed
    attempt's answer, extends it by one. This is the number of latencies a
    caller waits for, and what a server that logs each request's start and
    end finds as its longest chain.

    ``by_operation`` counts requests per ``"service.Operation"`` (``requests``
    is an older name for the same dict); :attr:`total` sums it.

    ``with stats.label("name"):`` also attributes the requests made inside
    the block (and the tasks it starts) to ``name``, exactly, even while
    other operations run concurrently: see :attr:`labels`. A label's
    ``round_trips`` is the critical path of its own requests.
    """

    by_operation: dict[str, int] = field(default_factory=dict)
    bytes_sent: int = 0
    round_trips: int = 0
    retries: int = 0
    """Attempts that repeated a request botocore retried (also counted as requests)."""
    labels: dict[str, Counts] = field(default_factory=dict)
    _in_flight: int = 0
    _completed: int = 0
    _generation: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def requests(self) -> dict[str, int]:
        """Alias of :attr:`by_operation` (requests per operation)."""
        return self.by_operation

    @property
    def total(self) -> int:
        return sum(self.by_operation.values())

    @property
    def in_flight(self) -> int:
        """Attempts sent since the last reset whose answer is not in yet."""
        with self._lock:
            return self._in_flight

    def reset(self) -> None:
        """Start counting afresh; requests in flight now count for nothing."""
        with self._lock:
            self.by_operation.clear()
            self.labels.clear()
            self.bytes_sent = 0
            self.round_trips = 0
            self.retries = 0
            self._in_flight = 0
            self._completed = 0
            self._generation += 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "requests": self.total,
                "by_operation": dict(self.by_operation),
                "round_trips": self.round_trips,
                "bytes_sent": self.bytes_sent,
            }

    @contextmanager
    def label(self, name: str) -> Iterator[None]:
        token = LABELS.set((*LABELS.get(), name))
        try:
            yield
        finally:
            LABELS.reset(token)

    def sent(self, operation: str, nbytes: int) -> Attempt:
        """Record one attempt being sent; hand what this returns to :meth:`done`.

        The clients call this from botocore's ``before-send`` hook; a transport
        of your own (or a fake) calls it to be counted the same way.
        """
        with self._lock:
            self.by_operation[operation] = self.by_operation.get(operation, 0) + 1
            self.bytes_sent += nbytes
            depth = self._completed + 1
            self.round_trips = max(self.round_trips, depth)
            self._in_flight += 1
            labelled = []
            for name in dict.fromkeys(LABELS.get()):  # a label nested in itself counts once
                if name.startswith(CALL_LABEL) and name not in self.labels:
                    continue  # a traced call that ended: a task it left behind is not its
                c = self.labels.setdefault(name, Counts())
                c.requests += 1
                c.by_operation[operation] = c.by_operation.get(operation, 0) + 1
                c.bytes_sent += nbytes
                c_depth = c._completed + 1
                c.round_trips = max(c.round_trips, c_depth)
                c.in_flight += 1
                labelled.append((c, c_depth))
            return Attempt(self, self._generation, depth, tuple(labelled))

    def done(self, attempt: Attempt, *, retry: bool = False) -> None:
        """Record that the attempt's answer (or failure) is in: later requests chain onto it.
        ``retry``: it repeated a request botocore retried."""
        with self._lock:
            if attempt.generation == self._generation:  # else sent before a reset
                self._in_flight = max(0, self._in_flight - 1)
                self._completed = max(self._completed, attempt.depth)
                self.retries += retry
            for c, depth in attempt.labels:  # a reset dropped these Counts: harmless
                c.in_flight = max(0, c.in_flight - 1)
                c._completed = max(c._completed, depth)
                c.retries += retry
