"""Child servers for a test session (SeaweedFS, ministack): free ports, started so that
they die with the process that started them (a killed pytest leaves none behind),
readiness that knows its own server from another on the same port, and a stop.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = ["Launch", "descriptor_limit", "free_ports", "serve", "start", "stop", "wait_ready"]

_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
"""Loaded here, not in the child: between fork and exec a child calls no loader."""


def free_ports(count: int, *, above: int = 0) -> list[int]:
    """``count`` distinct ports free on loopback now, held open together while chosen
    (another process may still take one before the server binds it: callers retry).
    ``above``: also require ``port + above`` free (a server deriving a second port)."""
    while True:
        socks = [socket.socket() for _ in range(count)]
        try:
            for s in socks:
                s.bind(("127.0.0.1", 0))
            ports = [int(s.getsockname()[1]) for s in socks]
        finally:
            for s in socks:
                s.close()
        if not above or all(_free(p + above) for p in ports):
            return ports


def _free(port: int) -> bool:
    if port > 65535:
        return False
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def descriptor_limit() -> int:
    """The hard limit on open files a child may raise its own to (see :func:`start`)."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def _in_child() -> None:
    """Run in the child before it executes: die with the parent (Linux's parent-death
    signal, so that a SIGKILLed session orphans no server), and raise the soft limit
    on open files to the hard one (a storage server opens a file per volume)."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def start(
    command: Sequence[str], log: IO[bytes], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a server in a process group of its own (so that :func:`stop` reaches all
    of it), bound to this process's life.

    Raises:
        RuntimeError: the command could not be executed (no such file, say).
    """
    try:
        return subprocess.Popen(
            list(command),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
            preexec_fn=_in_child,
        )
    except OSError as exc:
        raise RuntimeError(f"could not start {command[0]}: {exc}") from exc


def wait_ready(
    url: str,
    proc: subprocess.Popen[bytes],
    seconds: float,
    *,
    ours: Callable[[Mapping[str, str], bytes], bool],
) -> bool:
    """Whether ``url`` answers within ``seconds`` and the answer is ``proc``'s server's:
    any HTTP answer counts as up (403 without a signature), and ``ours`` judges its
    headers and body, so that another process that took the port is not mistaken for
    it. False at once if ``proc`` exited (its port taken meanwhile, say)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                headers, body = dict(resp.headers), resp.read()
        except urllib.error.HTTPError as exc:
            headers, body = dict(exc.headers), exc.read()
        except OSError:
            time.sleep(0.2)
            continue
        return proc.poll() is None and ours(headers, body)
    return False


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM its process group, SIGKILL after 10 s."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@dataclass(frozen=True)
class Launch:
    """One start of a server: its command, where it serves, where it answers whose it
    is (``probe``), and its environment (None: this process's)."""

    command: list[str]
    url: str
    probe: str
    env: dict[str, str] | None = None


@contextmanager
def serve(
    name: str,
    workdir: Path,
    launch: Callable[[int], Launch],
    *,
    ours: Callable[[Mapping[str, str], bytes], bool],
    attempts: int = 3,
    seconds: float = 30.0,
) -> Iterator[str]:
    """Start the server ``launch(attempt)`` describes, its output in ``workdir``; yield
    its URL once it answers as ``ours``; stop it after. A start that does not answer
    within ``seconds`` (a free port taken meanwhile, say) is stopped and tried again,
    ``attempts`` times in all.

    Raises:
        RuntimeError: no start answered (the log's end is in the message).
    """
    log_path = workdir / "server.log"
    for attempt in range(1, attempts + 1):
        plan = launch(attempt)
        with open(log_path, "wb") as log:
            proc = start(plan.command, log, workdir, plan.env)
            try:
                if wait_ready(plan.probe, proc, seconds, ours=ours):
                    yield plan.url
                    return
            finally:
                stop(proc)
    tail = log_path.read_bytes()[-2000:].decode(errors="replace")
    raise RuntimeError(f"{name} did not answer within {seconds:.0f} s, {attempts} tries:\n{tail}")
