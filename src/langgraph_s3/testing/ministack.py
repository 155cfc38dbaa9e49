"""A ministack server on loopback: a third S3 implementation (a LocalStack-like emulator,
independent of moto) that honours conditional PUT and DELETE.

ministack pins ``botocore==1.43.106``, which no aiobotocore this library supports
accepts, so it cannot share the suite's environment: it runs from a virtual environment
of its own, built once with this interpreter's ``venv`` and ``pip`` (about 7 s and 90 MB,
from PyPI) under ``~/.cache/langgraph-s3/`` (``LANGGRAPH_S3_MINISTACK_HOME`` moves it)
and reused after. It serves on a free port with no signature checks (a request signed
long ago is taken: ``doctor`` says so); objects live in its memory.
"""

from __future__ import annotations

import contextlib
import fcntl
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

__all__ = ["MINISTACK", "ministack_python", "ministack_server"]

MINISTACK = "ministack==1.5.33"
"""The release tested: its S3 answers the conditions the library relies on."""
HOME_ENV = "LANGGRAPH_S3_MINISTACK_HOME"
START_SECONDS = 30.0
INSTALL_SECONDS = 300.0


def _home() -> Path:
    home = os.environ.get(HOME_ENV)
    if home:
        return Path(home)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "langgraph-s3"


def ministack_python() -> str:
    """The interpreter of ministack's own environment, built first if missing (once per
    machine: several sessions wait on one lock, and a half-built one is never used).

    Raises:
        RuntimeError: the build failed (no PyPI, say), with pip's last lines.
    """
    home = _home()
    home.mkdir(parents=True, exist_ok=True)
    env = home / MINISTACK.replace("==", "-")
    python = env / "bin" / "python"
    with open(home / ".ministack.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (env / ".complete").exists():
            return str(python)
        shutil.rmtree(env, ignore_errors=True)
        try:
            subprocess.run(
                [sys.executable, "-m", "venv", str(env)],
                check=True,
                capture_output=True,
                timeout=INSTALL_SECONDS,
            )
            subprocess.run(
                [
                    str(python),
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--disable-pip-version-check",
                    MINISTACK,
                ],
                check=True,
                capture_output=True,
                timeout=INSTALL_SECONDS,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            shutil.rmtree(env, ignore_errors=True)
            out = getattr(exc, "stderr", b"") or b""
            tail = out.decode(errors="replace")[-1500:] if isinstance(out, bytes) else ""
            raise RuntimeError(
                f"could not build ministack's environment in {env} ({MINISTACK} from "
                f"PyPI): {exc}\n{tail}"
            ) from exc
        (env / ".complete").write_text(MINISTACK)
    return str(python)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def ministack_server() -> Iterator[str]:
    """Start ministack (S3 only) on loopback on a free port; yield its URL; stop it
    (SIGTERM, then SIGKILL after 10 s). Starting takes about 2 s once its environment
    is built (:func:`ministack_python`).

    Raises:
        RuntimeError: no environment, or no answer within 30 s (the log's end is in
            the message).
    """
    python = ministack_python()
    workdir = Path(tempfile.mkdtemp(prefix="langgraph-s3-ministack-"))
    port = _free_port()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(workdir),
        "GATEWAY_PORT": str(port),
        "BIND_HOST": "127.0.0.1",
        "SERVICES": "s3",
        "LOG_LEVEL": "WARNING",
    }
    log = open(workdir / "ministack.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [python, "-m", "ministack"],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=workdir,
        env=env,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        if not _wait_ready(url, proc):
            tail = (workdir / "ministack.log").read_bytes()[-2000:].decode(errors="replace")
            raise RuntimeError(f"ministack did not answer on {url} within 30 s:\n{tail}")
        yield url
    finally:
        _stop(proc)
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)


def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            urllib.request.urlopen(url, timeout=1)
        except urllib.error.HTTPError:
            return True
        except OSError:
            time.sleep(0.2)
            continue
        return True
    return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
