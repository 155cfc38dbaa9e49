"""Offline testing helpers: a moto server on loopback, and pytest fixtures.

Installed as a pytest plugin (entry point ``langgraph_s3``), so a project that
depends on ``langgraph-s3[testing]`` gets these fixtures without a conftest:

* ``s3_endpoint``: URL of a moto server started once per session (or of the
  endpoint in ``AWS_ENDPOINT_URL`` when set, for running against real AWS or
  another implementation);
* ``s3_saver``: a ready :class:`~langgraph_s3.AsyncS3Saver` on fresh state;
* ``s3_saver_sync``: the same as a :class:`~langgraph_s3.S3Saver`.

Nothing here imports moto until a server is actually started.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from .local import (
    MotoServer,
    Names,
    endpoint_or_moto,
    free_port,
    moto_server,
    unique_names,
    use_dummy_credentials,
)

__all__ = [
    "MotoServer",
    "Names",
    "endpoint_or_moto",
    "free_port",
    "moto_server",
    "unique_names",
    "use_dummy_credentials",
]


# --------------------------------------------------------------------- fixtures
@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[MotoServer]:
    """One S3/DynamoDB endpoint for the whole test session."""
    with endpoint_or_moto() as server:
        yield server


@pytest.fixture
def s3_fresh(s3_endpoint: MotoServer) -> MotoServer:
    """The endpoint, wiped before the test when it is our own moto server."""
    s3_endpoint.reset()
    return s3_endpoint


@pytest.fixture
def s3_saver_sync(s3_fresh: MotoServer) -> Iterator[Any]:
    """A set-up :class:`~langgraph_s3.S3Saver` on a new bucket and table."""
    from .sync import S3Saver

    with S3Saver(endpoint_url=s3_fresh.url, **unique_names()) as saver:
        saver.setup()
        yield saver


try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - the async fixture needs pytest-asyncio
    pass
else:

    @pytest_asyncio.fixture
    async def s3_saver(s3_fresh: MotoServer) -> AsyncIterator[Any]:
        """A set-up :class:`~langgraph_s3.AsyncS3Saver` on a new bucket and table."""
        from .saver import AsyncS3Saver

        async with AsyncS3Saver(endpoint_url=s3_fresh.url, **unique_names()) as saver:
            await saver.setup()
            yield saver
