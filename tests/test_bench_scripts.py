"""Every bench under ``bench/`` still imports against the library as it is now (a moved
helper breaks a bench without any test of the library noticing), and the side-by-side
bench's ``--help`` answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

BENCH = Path(__file__).resolve().parents[1] / "bench"
SCRIPTS = sorted(p.stem for p in BENCH.glob("*.py"))

PROBE = """
import importlib
for name in {names!r}:
    importlib.import_module(name)
print("imported", len({names!r}))
"""


def test_every_bench_imports() -> None:
    assert {"compare", "saver", "cpu", "imports"} <= set(SCRIPTS)
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(names=SCRIPTS)],
        cwd=BENCH,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == f"imported {len(SCRIPTS)}"


def test_the_side_by_side_bench_says_how_to_run_it() -> None:
    out = subprocess.run(
        [sys.executable, "compare.py", "--help"],
        cwd=BENCH,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "usage:" in out.stdout
