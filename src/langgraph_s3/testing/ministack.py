"""A ministack server on loopback: a third S3 implementation (a LocalStack-like emulator,
independent of moto) that honours conditional PUT and DELETE.

ministack pins ``botocore==1.43.106``, which no aiobotocore this library supports
accepts, so it cannot share the suite's environment: it runs from a virtual environment
of its own, built once with this interpreter's ``venv`` and ``pip`` (about 7 s and 90 MB,
from PyPI, every package pinned: ``PINS``) under ``~/.cache/langgraph-s3/``
(``LANGGRAPH_S3_MINISTACK_HOME`` moves it) and reused after, by every interpreter of the
same build. It serves on a free port with no signature checks (a request signed long ago
is taken: ``doctor`` says so); objects live in its memory; it dies with the process
that started it (``testing/servers.py``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from langgraph_s3.testing.servers import Launch, free_ports, serve

__all__ = ["MINISTACK", "PINS", "ministack_python", "ministack_server"]

MINISTACK = "1.5.33"
"""The release tested: its S3 answers the conditions the library relies on."""
PINS = (
    f"ministack=={MINISTACK}",
    "botocore==1.43.106",
    "defusedxml==0.7.1",
    "graphql-core==3.2.12",
    "h11==0.16.0",
    "h2==4.4.1",
    "hpack==4.2.0",
    "Hypercorn==0.18.0",
    "hyperframe==6.1.0",
    "jmespath==1.1.0",
    "jsonata-python==0.7.1",
    "priority==2.0.0",
    "python-dateutil==2.9.0.post0",
    "PyYAML==6.0.4",
    "six==1.17.0",
    "urllib3==2.8.0",
    "wsproto==1.3.2",
)
"""Its environment, whole: the same packages on every machine (``pip freeze`` of a
build)."""
HOME_ENV = "LANGGRAPH_S3_MINISTACK_HOME"
START_SECONDS = 30.0
ATTEMPTS = 3
"""Starts tried: a port found free may be taken by another process before it binds."""
INSTALL_SECONDS = 300.0
LOCK_SECONDS = 330.0
"""How long a session waits for another one building the environment."""


def _home() -> Path:
    home = os.environ.get(HOME_ENV)
    if home:
        return Path(home)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "langgraph-s3"


def _env_dir() -> Path:
    """Named by the release and the interpreter that builds it (a venv links to its base
    interpreter: another Python, or this one gone, needs an environment of its own)."""
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    build = hashlib.sha256(f"{base} {sys.version}".encode()).hexdigest()[:10]
    v = sys.version_info
    return _home() / f"ministack-{MINISTACK}-py{v.major}.{v.minor}-{build}"


def _works(env: Path) -> bool:
    """Whether a built environment still runs ministack (its marker written last)."""
    python = env / "bin" / "python"
    if not (env / ".complete").exists() or not python.exists():
        return False
    try:
        probe = [str(python), "-c", "import ministack"]
        return subprocess.run(probe, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def ministack_python() -> str:
    """The interpreter of ministack's own environment, built first if missing or broken
    (once per machine: sessions building at once wait on one lock, up to 330 s, and a
    half-built one is never used).

    Raises:
        RuntimeError: the build failed (no PyPI, an unwritable cache, say), with the
            reason and pip's last lines.
    """
    env = _env_dir()
    python = env / "bin" / "python"
    if _works(env):
        return str(python)
    try:
        env.parent.mkdir(parents=True, exist_ok=True)
        with open(env.parent / f".{env.name}.lock", "w") as lock:
            _lock(lock.fileno(), env)
            if not _works(env):
                _build(env)
    except OSError as exc:
        raise RuntimeError(f"could not build ministack's environment in {env}: {exc}") from exc
    return str(python)


def _lock(fd: int, env: Path) -> None:
    deadline = time.monotonic() + LOCK_SECONDS
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"another process has been building ministack's environment in {env} "
                    f"for over {LOCK_SECONDS:.0f} s (stopped?): end it, or remove {env}"
                ) from None
            time.sleep(0.5)


def _build(env: Path) -> None:
    shutil.rmtree(env, ignore_errors=True)
    python = env / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    try:
        for step in (
            [sys.executable, "-m", "venv", str(env)],
            [*pip, "--timeout", "15", "--retries", "2", *PINS],
        ):
            subprocess.run(step, check=True, capture_output=True, timeout=INSTALL_SECONDS)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(env, ignore_errors=True)
        out = exc.stderr if isinstance(exc.stderr, bytes) else b""
        raise RuntimeError(
            f"could not build ministack's environment in {env} (ministack {MINISTACK} "
            f"from PyPI): {exc}\n{out.decode(errors='replace')[-1500:]}"
        ) from exc
    (env / ".complete").write_text(MINISTACK)


@contextmanager
def ministack_server() -> Iterator[str]:
    """Start ministack (S3 only) on loopback on a free port; yield its URL; stop it
    (SIGTERM, then SIGKILL after 10 s). Starting takes about 2 s once its environment
    is built (:func:`ministack_python`).

    Raises:
        RuntimeError: no environment, or no ministack answer within 30 s in 3 tries
            (the log's end is in the message).
    """
    python = ministack_python()
    workdir = Path(tempfile.mkdtemp(prefix="langgraph-s3-ministack-"))

    def launch(_attempt: int) -> Launch:
        (port,) = free_ports(1)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(workdir),
            "GATEWAY_PORT": str(port),
            "BIND_HOST": "127.0.0.1",
            "SERVICES": "s3",
            "LOG_LEVEL": "WARNING",
        }
        url = f"http://127.0.0.1:{port}"
        return Launch([python, "-m", "ministack"], url, f"{url}/_ministack/health", env)

    try:
        with serve(
            "ministack", workdir, launch, ours=_is_ours, attempts=ATTEMPTS, seconds=START_SECONDS
        ) as url:
            yield url
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _is_ours(_headers: Mapping[str, str], body: bytes) -> bool:
    """Its health answer names its release (another server on the port would not)."""
    try:
        return bool(json.loads(body).get("version") == MINISTACK)
    except (ValueError, AttributeError):
        return False
