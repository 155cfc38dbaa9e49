"""Seeds of the default run that still find a defect: the ratchet of test_seeds.

Each is an open defect of issue 23, found by the simulation and not fixed yet; the
test fails when one of them passes (remove it here: the fix is proven) and when any
other seed fails (a regression). Replay one exactly:
``LANGGRAPH_S3_SIM_SEED=N .venv/bin/pytest tests/simulation -k replay -n 0``.
"""

from __future__ import annotations

KNOWN: dict[int, str] = {
    1790: "unbounded",
    1973: "copy-not-snapshot",
}
"""Seed -> the kind of its first finding (``checks.py``; see ``WHY``)."""

WHY: dict[str, str] = {
    "unbounded": (
        "a copy beside two packers that pack and unpack the source without pause starts "
        "over at each change of its pack and makes over 400 requests"
    ),
    "copy-not-snapshot": (
        "a copy whose first read found a latest still in flight (committed, its object not "
        "landed) and a fork committed before it landed: the copy holds the latest without "
        "the fork, a state no reader saw"
    ),
}
"""What each kind of open finding is, as far as it was traced."""
