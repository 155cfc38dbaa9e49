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

import logging
import os
import socket
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypedDict

import pytest

DUMMY_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


@dataclass(frozen=True)
class MotoServer:
    url: str
    """``http://127.0.0.1:PORT``: pass as ``endpoint_url=``."""
    owned: bool
    """True when we started it (and may reset it)."""

    def reset(self) -> None:
        """Wipe every bucket and table (moto only)."""
        if self.owned:
            req = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")
            with urllib.request.urlopen(req, timeout=10):
                pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def use_dummy_credentials() -> None:
    """Set dummy AWS credentials and region where none are configured."""
    for key, value in DUMMY_ENV.items():
        os.environ.setdefault(key, value)


@contextmanager
def moto_server(port: int | None = None) -> Iterator[MotoServer]:
    """Start a moto server (S3, DynamoDB, ...) on a free loopback port."""
    from moto.server import ThreadedMotoServer

    use_dummy_credentials()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = port or free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield MotoServer(url=f"http://127.0.0.1:{port}", owned=True)
    finally:
        server.stop()


@contextmanager
def endpoint_or_moto() -> Iterator[MotoServer]:
    """The endpoint in ``AWS_ENDPOINT_URL`` if set, else a fresh moto server."""
    external = os.environ.get("AWS_ENDPOINT_URL")
    if external:
        yield MotoServer(url=external, owned=False)
        return
    with moto_server() as server:
        yield server


class Names(TypedDict):
    bucket: str
    table: str


def unique_names() -> Names:
    """A bucket and table name no other test uses."""
    suffix = uuid.uuid4().hex[:12]
    return {"bucket": f"lgs3-test-{suffix}", "table": f"lgs3-test-{suffix}"}


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
