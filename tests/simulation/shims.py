"""Test-side shims that make one simulated run a function of its seed alone.

Nothing in ``src/`` is edited; for the length of a run (and restored after it):

* ``time.time``/``time.time_ns`` give virtual epoch time plus the current process's
  skew: the saver's clock (``SaverContext.clock``, ``core.clock.wall_clock``) reads
  ``time.time()`` at each call (copy's lease check, delete_for_runs' in-flight
  window) and LangGraph's uuid6 checkpoint ids read
  ``time.time_ns()``; ``time.monotonic`` gives virtual time (context.py's listing
  cache ages by it);
* the global ``random`` is seeded (retry.backoff's jitter, ``get_next_version``'s
  random part, uuid6's random bits); ``uuid.uuid4`` and ``secrets``' tokens (the
  library's lives, packs and marks) draw from seeded generators;
* the cyclic garbage collector is off (it would finalize abandoned async generators
  at a moment that depends on the whole process's allocations);
* LangGraph's uuid6 keeps one monotonic guard per process (``_last_v6_timestamp`` is
  a module global: shared, it would order the ids of separate Lambdas).
"""

from __future__ import annotations

import contextvars
import gc
import random
import secrets
import sys
import time
import uuid
from collections.abc import Callable
from types import TracebackType
from typing import Any

import langgraph.checkpoint.base.id as lg_id

from .loop import Process, VirtualClock

PROCESS: contextvars.ContextVar[Process | None] = contextvars.ContextVar(
    "sim_process", default=None
)
"""The process whose code is running (inherited by the tasks it starts)."""


_IMPORTERS: list[Any] = []


def _importers(original: Callable[..., uuid.UUID]) -> list[Any]:
    """The modules that imported LangGraph's uuid6 by name (found once: a scan of
    ``sys.modules`` costs milliseconds)."""
    if not _IMPORTERS:
        _IMPORTERS.extend(
            m for m in list(sys.modules.values()) if getattr(m, "uuid6", None) is original
        )
    return [m for m in _IMPORTERS if getattr(m, "uuid6", None) is original]


class Deterministic:
    """Install the shims (a context manager); ``clock`` is the run's virtual clock."""

    def __init__(self, clock: VirtualClock, seed: int) -> None:
        self.clock = clock
        self.seed = seed
        self._saved: list[tuple[Any, str, Any]] = []
        self._random_state: Any = None
        self._gc = True

    def _now(self) -> float:
        proc = PROCESS.get()
        return self.clock.time() + (proc.skew if proc is not None else 0.0)

    def _patch(self, owner: Any, name: str, value: Any) -> None:
        self._saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    def __enter__(self) -> Deterministic:
        clock = self.clock
        uuids = random.Random(f"{self.seed}/uuid4")
        self._patch(time, "time", self._now)
        self._patch(time, "time_ns", lambda: int(self._now() * 1e9))
        self._patch(time, "monotonic", lambda: clock.elapsed)
        self._patch(uuid, "uuid4", lambda: uuid.UUID(int=uuids.getrandbits(128), version=4))
        tokens = random.Random(f"{self.seed}/tokens")  # the library's own (lives, packs)
        self._patch(secrets, "token_bytes", lambda n=32: tokens.randbytes(n))
        self._patch(secrets, "token_hex", lambda n=32: tokens.randbytes(n).hex())
        original: Callable[..., uuid.UUID] = lg_id.uuid6

        def uuid6(*args: Any, **kwargs: Any) -> uuid.UUID:
            proc = PROCESS.get()
            if proc is None:
                return original(*args, **kwargs)
            setattr(lg_id, "_last_v6_timestamp", proc.last_v6)  # noqa: B010 - typed None there
            try:
                return original(*args, **kwargs)
            finally:
                proc.last_v6 = getattr(lg_id, "_last_v6_timestamp", None)

        for module in _importers(original):
            self._patch(module, "uuid6", uuid6)
        self._patch(lg_id, "_last_v6_timestamp", None)
        self._random_state = random.getstate()
        random.seed(f"{self.seed}/random")
        self._gc = gc.isenabled()
        gc.disable()  # a cyclic collection would finalize async generators at its own time
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for owner, name, value in reversed(self._saved):
            setattr(owner, name, value)
        self._saved.clear()
        random.setstate(self._random_state)
        if self._gc:
            gc.enable()
