"""Seeds of the default run that still find a defect: the ratchet of test_seeds.

Each is an open defect the simulation found and that is not fixed yet; the
test fails when one of them passes (remove it here: the fix is proven) and when any
other seed fails (a regression). Replay one exactly:
``LANGGRAPH_S3_SIM_SEED=N .venv/bin/pytest tests/simulation -k replay -n 0``.
"""

from __future__ import annotations

KNOWN: dict[int, str] = {}
"""Seed -> the kind of its first finding (``checks.py``; see ``WHY``): none open today."""

WHY: dict[str, str] = {}
"""What each kind of open finding is, as far as it was traced."""
