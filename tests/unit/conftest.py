"""The unit tier: the saver's logic on the in-memory fakes (``langgraph_s3.memory``),
and the contract tests that hold the fakes to the real classes on moto (the table's
and the manifest's contracts also on the manifest kept in the bucket, ``tables``).

Run it alone with ``pytest tests/unit`` (or ``pytest -m unit``: the same tests); the
plain ``pytest`` runs it with everything else. Budget: under 40 s in all (878 tests in
37 s on 2 cores, as measured).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from unit_helpers import KINDS, TABLE_KINDS, Backend, reset

from langgraph_s3.core.ports import ManifestPort, ObjectStorePort

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.unit)


async def _backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    url = request.getfixturevalue("s3_endpoint").url if request.param.endswith("moto") else None
    b = Backend(request.param, url)
    if b.objects and b.kind == "moto":
        await b.store().create_bucket()
    try:
        yield b
    finally:
        await b.aclose()


@pytest.fixture(params=KINDS)
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """One kind of object store and manifest: ``memory`` (the fakes) or ``moto`` (the
    real classes over HTTP, on new names in the session's moto server)."""
    async for b in _backend(request):
        yield b


@pytest.fixture(params=TABLE_KINDS)
async def tables(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """As ``backend``, and also the object manifest (``manifest="s3"``) over each: for
    the contracts of the table and the manifest."""
    async for b in _backend(request):
        yield b


@pytest.fixture
async def store(backend: Backend) -> ObjectStorePort:
    """An object store on a new, created bucket; its request counts start at zero."""
    s = backend.store()
    await s.create_bucket()
    reset(s)
    return s


@pytest.fixture
async def manifest(backend: Backend) -> ManifestPort:
    """A manifest on a new, created table; its request counts start at zero."""
    m = backend.manifest()
    await m.setup.create()
    reset(m)
    return m
