"""The simulation's summary at the end of the run: seeds, invariants checked, failures.

Each seeded test records its counts in ``user_properties`` (they travel from
pytest-xdist workers to the controller with the test's report); this hook adds them up.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest


def pytest_terminal_summary(terminalreporter: Any) -> None:
    seeds = 0
    failed: list[int] = []
    known: list[int] = []
    checks: Counter[str] = Counter()
    seconds = 0.0
    for reports in terminalreporter.stats.values():
        for report in reports:
            if not isinstance(report, pytest.TestReport) or report.when != "call":
                continue
            props: dict[str, Any] = dict(report.user_properties)
            if "sim_seeds" not in props:
                continue
            seeds += int(props["sim_seeds"])
            failed += list(props["sim_failed"])
            known += list(props.get("sim_known", ()))
            checks.update(props["sim_checks"])
            seconds += float(props["sim_seconds"])
    if not seeds:
        return
    terminalreporter.section("deterministic simulation")
    terminalreporter.write_line(
        f"{seeds} seeds in {seconds:.1f} s of test time, "
        f"{sum(checks.values())} invariant checks, {len(failed)} seeds failed "
        f"({len(set(failed) & set(known))} of them the {len(known)} seeds of open defects "
        "in known.py)"
    )
    for name, n in sorted(checks.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"  {n:>9}  {name}")
    if failed:
        shown = ", ".join(str(s) for s in sorted(failed)[:40])
        terminalreporter.write_line(f"failing seeds: {shown}{' ...' if len(failed) > 40 else ''}")
        terminalreporter.write_line(
            f"replay one: LANGGRAPH_S3_SIM_SEED={min(failed)} "
            ".venv/bin/pytest tests/simulation -k replay -n 0"
        )
