"""A moto server on loopback for offline runs (the demo, tests, benchmarks).

Needs ``moto[server]`` (the ``demo`` or ``testing`` extra); imports it only
when a server is started.
"""

from __future__ import annotations

import logging
import os
import socket
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypedDict

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
