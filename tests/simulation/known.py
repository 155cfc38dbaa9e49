"""Seeds of the default run that still find a defect: the ratchet of test_seeds.

Each is an open defect of issue 23, found by the simulation and not fixed yet; the
test fails when one of them passes (remove it here: the fix is proven) and when any
other seed fails (a regression). Replay one exactly:
``LANGGRAPH_S3_SIM_SEED=N .venv/bin/pytest tests/simulation -k replay -n 0``.
"""

from __future__ import annotations

KNOWN: dict[int, str] = {
    790: "starvation",
    1029: "spurious-failure",
    1187: "starvation",
    1562: "import-lost",
    1790: "unbounded",
    1973: "copy-not-snapshot",
}
"""Seed -> the kind of its first finding (``checks.py``; see ``WHY``)."""

WHY: dict[str, str] = {
    "import-lost": (
        "delete_for_runs beside an import of the thread: the deletion's stale listing "
        "removes objects the import wrote anew under the same keys"
    ),
    "spurious-failure": (
        "a turn fails with CorruptObjectError: a prune that listed the thread before an "
        "import's replace deletes what the import wrote anew under the same keys"
    ),
    "starvation": (
        "an export or copy beside two packers that repack without pause runs out of rounds"
    ),
    "unbounded": ("a copy beside packers and writers makes over 400 requests"),
    "copy-not-snapshot": (
        "a copy whose first read found a latest still in flight (committed, its object not "
        "landed) and a fork committed before it landed: the copy holds the latest without "
        "the fork, a state no reader saw"
    ),
}
"""What each kind of open finding is, as far as it was traced."""
