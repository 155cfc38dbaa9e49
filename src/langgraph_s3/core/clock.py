"""The wall clock, read at each call: the default of every injectable clock.

A default of ``time.time`` itself would be bound when the signature is made; these
read ``time.time`` when called, so whatever stands in for it then (a test's virtual
time, the simulation's per-process skew) is what the library sees.
"""

from __future__ import annotations

import time

__all__ = ["wall_clock", "wall_clock_ns"]


def wall_clock() -> float:
    """Epoch seconds now."""
    return time.time()


def wall_clock_ns() -> int:
    """Epoch nanoseconds now (a deletion's stamp)."""
    return time.time_ns()
