"""Seeded simulation of forgetting a subject beside its writers and maintenance
(``forgetting.py``): one seed, one exact interleaving; every seed's findings must be
none.

* ``pytest tests/simulation -k forgetting``: the default seeds, in chunks;
* ``LANGGRAPH_S3_FORGET_SEEDS=5000``: a soak;
* ``LANGGRAPH_S3_FORGET_SEED=1234 .venv/bin/pytest tests/simulation -k forgetting_replay -n 0``:
  one seed again, its findings printed (seed 1 when none is named).
"""

from __future__ import annotations

import os

import pytest

from .forgetting import run_forget_seed

pytestmark = pytest.mark.simulation

SEEDS = int(os.environ.get("LANGGRAPH_S3_FORGET_SEEDS", 240))
CHUNKS = 4
REPLAY = int(os.environ.get("LANGGRAPH_S3_FORGET_SEED", 1))


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_forgetting_beside_writers_and_maintenance_keeps_every_promise(chunk: int) -> None:
    failed = []
    reached = {"forgotten": 0, "refused": 0}
    for seed in range(chunk, SEEDS, CHUNKS):
        result = run_forget_seed(seed)
        reached["forgotten"] += result.forgotten
        reached["refused"] += result.refused > 0
        if result.findings:
            failed.append(f"seed {seed} ({result.shape}): {result.findings[:3]}")
    assert not failed, "\n".join(failed[:12])
    # the worlds reach what they are for: forgettings that ended while writers ran,
    # and writers refused for a subject being forgotten
    assert reached["forgotten"] > SEEDS // CHUNKS // 2 and reached["refused"] > 0, reached


def test_a_forgetting_seed_is_one_interleaving() -> None:
    first, again = run_forget_seed(7), run_forget_seed(7)
    assert (first.turns, first.refused, first.findings) == (
        again.turns,
        again.refused,
        again.findings,
    )
    assert run_forget_seed(8).shape != first.shape or run_forget_seed(8).turns != first.turns


def test_forgetting_replay() -> None:
    """One seed (``LANGGRAPH_S3_FORGET_SEED``, 1 by default) with what it did printed."""
    result = run_forget_seed(REPLAY)
    print(result)
    assert not result.findings and result.turns > 0
