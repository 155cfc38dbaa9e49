"""The suite's tiers (``tests/conftest.py``): every test is in exactly one, and the fast
tier the README names (``pytest tests/unit``) is the ``unit`` marker, nothing slower."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIERS = ("unit", "simulation", "sweep", "lambda_host", "deploy", "integration")


def collected(*args: str) -> list[str]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode in (0, 5), proc.stdout[-2000:] + proc.stderr[-2000:]  # 5: none
    return [line for line in proc.stdout.splitlines() if "::" in line]


def test_every_test_is_in_one_tier_and_the_fast_one_is_tests_unit() -> None:
    untiered = collected("-m", " and ".join(f"not {t}" for t in TIERS))
    assert untiered == []
    unit = collected("-m", "unit")
    assert len(unit) > 500 and all(node.startswith("tests/unit/") for node in unit)
    assert set(collected("tests/unit")) == set(unit)
    sweeps = collected("-m", "sweep or simulation or lambda_host")
    assert {node.split("::")[0] for node in sweeps} == {
        "tests/simulation/test_simulation.py",
        "tests/simulation/test_forgetting.py",
        "tests/test_crash_sweep.py",
        "tests/test_forget_crash_sweep.py",
        "tests/test_pack_crash_sweep.py",
        "tests/test_import_crash_sweep.py",
        "tests/test_archiver_crash_sweep.py",
        "tests/test_lambda_host.py",
    }
