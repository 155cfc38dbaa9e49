"""A process killed at its k-th request, for the crash sweeps of one call (an import,
an archiver shard): ``from killing import Killer``.

The victim is a saver talking to moto through the crash proxy (``faults.CrashPlan``):
"before k" resets request k and every later one (k never applied), "after k" applies
request k upstream, loses its answer and resets every later one. With one attempt per
request and small timeouts the victim fails at once, and nothing it tries after the
crash point (a clean-up on its error path, its close's flush) reaches moto: what moto
holds is what a SIGKILL at that point would have left.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import pickle
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiobotocore.session import get_session

from faults import CrashPlan, fault_proxy
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing.moto_child import moto_process

FAST = {"max_attempts": 1, "connect_timeout": 1, "read_timeout": 2, "request_timeout": 3}
"""A reset connection fails the request at once, a stalled one within seconds."""

READS = frozenset({"GET-s3", "HEAD-s3", "GetItem", "Query", "Scan", "DescribeTable"})
"""Requests that change nothing upstream: "after" one of them is "before" the next."""


LANES = 3
"""Crash points run at once, each through a proxy of its own (moto's CPU is in its own
process: the lanes overlap one's waits with another's work)."""

SESSION = get_session()
"""One botocore session for every saver of a sweep: its service models load once."""


@contextlib.contextmanager
def sweep_endpoint() -> Iterator[str]:
    """A moto server in a process of its own for a whole sweep (``AWS_ENDPOINT_URL``
    when set)."""
    external = os.environ.get("AWS_ENDPOINT_URL")
    if external:
        yield external
        return
    with moto_process() as url:
        yield url


async def in_lanes(
    points: Sequence[tuple[int, bool]],
    killers: Sequence[Killer],
    one: Callable[[Killer, int, bool], Awaitable[None]],
) -> None:
    """Every crash point once, each lane taking the next point left."""
    todo = list(points)

    async def lane(killer: Killer) -> None:
        while todo:
            k, after = todo.pop(0)
            await one(killer, k, after)

    await asyncio.gather(*(lane(k) for k in killers))


@dataclass
class Killer:
    """One proxy in front of moto, and the victims it kills."""

    moto: str
    plan: CrashPlan = field(default_factory=lambda: CrashPlan(every=10**9))
    url: str = ""
    seen: list[str] = field(default_factory=list)
    """The requests of the last victim (its close's too), by kind."""

    @contextlib.contextmanager
    def running(self) -> Iterator[Killer]:
        logger = logging.getLogger("aiohttp.server")  # resets of dropped clients: noise
        level = logger.level
        logger.setLevel(logging.CRITICAL)
        try:
            with fault_proxy(self.moto, self.plan) as url:
                self.url = url
                yield self
        finally:
            logger.setLevel(level)

    @contextlib.asynccontextmanager
    async def victim(self, k: int, after: bool, **kw: Any) -> AsyncIterator[AsyncS3Saver]:
        """A saver through the proxy, killed at request ``k`` (0: never). The requests
        are counted from here; once the block is left (the saver closed) the proxy
        passes everything again."""
        self.plan.arm(k, after=after)
        try:
            victim = AsyncS3Saver(endpoint_url=self.url, session=SESSION, **FAST, **kw)
            async with victim as saver:
                yield saver
        except Exception:  # its close failed too: it was dead
            pass
        finally:
            self.seen = list(self.plan.targets)
            self.plan.arm(0)

    async def run(
        self, k: int, after: bool, act: Callable[[AsyncS3Saver], Awaitable[Any]], **kw: Any
    ) -> BaseException | None:
        """Run ``act`` on a victim killed at request ``k``: its error (None: it
        returned); its requests are then in ``seen``."""
        error: BaseException | None = None
        async with self.victim(k, after, **kw) as saver:
            try:
                await act(saver)
            except Exception as exc:
                error = exc
        return error


def crash_points(clean: list[str]) -> list[tuple[int, bool]]:
    """Before every request of a clean run, after every one that writes."""
    points = [(k, False) for k in range(1, len(clean) + 1)]
    points += [(k, True) for k in range(1, len(clean) + 1) if clean[k - 1] not in READS]
    return points


def once_per_run(name: str, compute: Callable[[], Any]) -> Any:
    """``compute()`` once for the whole pytest run: a sweep's module fixture serves
    tests that xdist may hand to several workers, and each worker would run the sweep
    again (a minute or two each). The first worker computes and stores it (pickled,
    under the run's id); the others wait for it and read it. Without xdist: computed
    once in this process."""
    if name in _ONCE:
        return _ONCE[name]
    uid = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if uid is None:
        _ONCE[name] = compute()
        return _ONCE[name]
    path = Path(tempfile.gettempdir()) / f"langgraph-s3-{uid}-{name}.pickle"
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if path.exists():
            _ONCE[name] = pickle.loads(path.read_bytes())
        else:
            _ONCE[name] = compute()
            path.write_bytes(pickle.dumps(_ONCE[name]))
        return _ONCE[name]


_ONCE: dict[str, Any] = {}
"""What :func:`once_per_run` computed or read in this process, by name."""
