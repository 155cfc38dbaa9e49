"""The pytest plugin as a user project meets it: examples/testing_project, run in a subprocess.

That project's pytest config says nothing about pytest-asyncio, and this repository's
own ``asyncio_mode = "auto"`` cannot leak into it (it has its own
``[tool.pytest.ini_options]``, so pytest stops there). The same interpreter runs it,
so the plugin is loaded by its entry point, as after ``pip install langgraph-s3[testing]``.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "examples" / "testing_project"
SAMPLE_TESTS = PROJECT / "tests" / "test_agent.py"
GUIDE = ROOT / "docs" / "testing.md"

LOOP_SCOPE_UNSET = '"asyncio_default_fixture_loop_scope" is unset'
NOT_SUPPORTED = "not natively supported"


@dataclass(frozen=True)
class SampleTests:
    unmarked_async: frozenset[str]
    marked_async: frozenset[str]
    sync: frozenset[str]

    @property
    def all(self) -> frozenset[str]:
        return self.unmarked_async | self.marked_async | self.sync


def sample_tests() -> SampleTests:
    """The sample's test functions, by kind, read from its source."""
    unmarked, marked, sync = set(), set(), set()
    for node in ast.parse(SAMPLE_TESTS.read_text()).body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if not node.name.startswith("test_"):
            continue
        if isinstance(node, ast.FunctionDef):
            sync.add(node.name)
        elif any(ast.unparse(d) == "pytest.mark.asyncio" for d in node.decorator_list):
            marked.add(node.name)
        else:
            unmarked.add(node.name)
    return SampleTests(frozenset(unmarked), frozenset(marked), frozenset(sync))


@dataclass(frozen=True)
class Run:
    returncode: int
    output: str

    @property
    def summary(self) -> dict[str, int]:
        """The final ``N passed, M failed ...`` line, as ``{"passed": N, "failed": M}``."""
        lines = re.findall(r"^=+ (.+?) in [\d.]+s\b.*=+$", self.output, re.M)
        assert lines, self.output
        counts = {}
        for count, outcome in re.findall(r"(\d+) (\w+)", lines[-1]):
            counts[{"warnings": "warning", "errors": "error"}.get(outcome, outcome)] = int(count)
        return counts

    @property
    def outcomes(self) -> dict[str, set[str]]:
        """Test name -> outcomes, from the ``-rA`` short summary."""
        found: dict[str, set[str]] = {}
        for outcome, name in re.findall(
            r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) tests/test_agent\.py::(\w+)",
            self.output,
            re.M,
        ):
            found.setdefault(name, set()).add(outcome)
        return found

    def passed(self) -> set[str]:
        return {name for name, seen in self.outcomes.items() if seen == {"PASSED"}}


PYCACHE = Path(tempfile.gettempdir()) / f"langgraph-s3-sample-pycache-{os.getuid()}"
"""Bytecode of the sample runs, outside examples/ (which must stay clean). Shared by
the runs: pytest rewrites the asserts of every module of each plugin's distribution,
and compiling them again in each run cost ~2.5 s."""


def run_sample(
    *args: str,
    cwd: Path = PROJECT,
    env: dict[str, str] | None = None,
    script: bool = False,
) -> Run:
    """The sample's tests, by ``python -m pytest`` (``script``: the ``pytest`` command,
    which puts no working directory on ``sys.path``)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    clean.pop("PYTHONDONTWRITEBYTECODE", None)
    clean["PYTHONPYCACHEPREFIX"] = str(PYCACHE)  # leave no __pycache__ in examples/
    runner = (
        [str(Path(sys.executable).parent / "pytest")]
        if script
        else [sys.executable, "-m", "pytest"]
    )
    proc = subprocess.run(
        [*runner, "-p", "no:cacheprovider", "-rA", *args],
        cwd=cwd,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )
    return Run(proc.returncode, proc.stdout + proc.stderr)


def assert_all_passed(run: Run) -> None:
    tests = sample_tests()
    assert run.summary == {"passed": len(tests.all)}, run.output
    assert run.passed() == tests.all, run.output
    assert run.returncode == 0, run.output
    for noise in (NOT_SUPPORTED, "PytestUnhandledCoroutineWarning", LOOP_SCOPE_UNSET):
        assert noise not in run.output, run.output


def test_the_sample_is_unconfigured_and_mixed() -> None:
    """What makes the runs below meaningful: no asyncio settings, tests of every kind."""
    config = tomllib.loads((PROJECT / "pyproject.toml").read_text())
    ini = config["tool"]["pytest"]["ini_options"]
    assert not [key for key in ini if key.startswith("asyncio")]
    tests = sample_tests()
    assert tests.unmarked_async and tests.marked_async and tests.sync
    text = SAMPLE_TESTS.read_text()
    for fixture in ("s3_saver", "async_s3_saver", "async_s3_store", "s3_store"):
        assert re.search(rf"def test_\w+\([^)]*\b{fixture}\b", text), fixture
    assert re.search(r"@pytest\.fixture\nasync def ", text)  # the user's own async fixture


def test_zero_config_runs_async_tests_and_fixtures() -> None:
    run = run_sample()
    assert_all_passed(run)
    assert "asyncio_default_fixture_loop_scope=function" in run.output  # pytest-asyncio's header


def test_the_pytest_command_imports_the_projects_own_module() -> None:
    """``pytest`` (not ``python -m pytest``) in a project that sets no pythonpath: its
    tests import ``my_agent`` from the project's root."""
    config = tomllib.loads((PROJECT / "pyproject.toml").read_text())
    assert "pythonpath" not in config["tool"]["pytest"]["ini_options"]
    assert (
        "import my_agent" in SAMPLE_TESTS.read_text() or "from my_agent" in SAMPLE_TESTS.read_text()
    )
    assert_all_passed(run_sample(script=True))


@pytest.mark.parametrize(
    "plugins",
    [
        ["-p", "langgraph_s3.testing", "-p", "pytest_asyncio.plugin"],
        ["-p", "pytest_asyncio.plugin", "-p", "langgraph_s3.testing"],
    ],
    ids=["ours-registered-first", "pytest-asyncio-registered-first"],
)
def test_defaults_do_not_depend_on_plugin_order(plugins: list[str]) -> None:
    """Hooks of later-registered plugins run first; ``tryfirst`` must win either way."""
    run = run_sample(
        *plugins,
        # loading pytest_asyncio.plugin after our module imported it cannot rewrite it
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
        env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert_all_passed(run)


@pytest.mark.parametrize("where", ["config file", "-o", "--asyncio-mode"])
def test_an_explicit_strict_mode_wins(where: str, tmp_path: Path) -> None:
    cwd, args = PROJECT, ["-o", "asyncio_mode=strict"]
    if where == "--asyncio-mode":
        args = ["--asyncio-mode=strict"]
    elif where == "config file":
        cwd, args = tmp_path / "project", []
        shutil.copytree(PROJECT, cwd, ignore=shutil.ignore_patterns("__pycache__"))
        pyproject = cwd / "pyproject.toml"
        section = "[tool.pytest.ini_options]\n"
        assert section in pyproject.read_text()
        pyproject.write_text(
            pyproject.read_text().replace(section, f'{section}asyncio_mode = "strict"\n')
        )
    run = run_sample(*args, cwd=cwd)
    tests = sample_tests()
    # strict: unmarked async tests (and tests needing a plain async fixture) are not run
    # as coroutines; sync tests and the marked one (with our fixtures) still pass
    assert run.passed() == tests.sync | tests.marked_async, run.output
    assert set(run.outcomes) == tests.all, run.output
    assert NOT_SUPPORTED in run.output
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.output


def test_an_explicit_fixture_loop_scope_wins() -> None:
    run = run_sample("-o", "asyncio_default_fixture_loop_scope=module")
    assert "asyncio_default_fixture_loop_scope=module" in run.output, run.output
    assert run.summary == {"passed": len(sample_tests().all)}, run.output


def test_the_guides_example_is_tested_as_written() -> None:
    section = GUIDE.read_text()
    assert section.startswith("# Testing your agents offline\n")
    blocks = re.findall(r"^```python\n(.*?)^```$", section, re.M | re.S)
    assert blocks
    sample = SAMPLE_TESTS.read_text()
    for block in blocks:
        assert "async def test_" in block
        assert block in sample, block
