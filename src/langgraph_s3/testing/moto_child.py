"""A moto server in a process of its own, driven over a pipe: its latency set and its
requests logged as an in-process :class:`~langgraph_s3.testing.moto.MotoServer`'s are,
while its CPU, its memory and its GIL are not the caller's.

Benchmarks measure through it: in the caller's process moto's slow handlers (an
``UpdateItem`` takes milliseconds of CPU) hold the caller's GIL and reorder what the
caller sends (a background PUT before the commit it went out beside), and the caller's
CPU counts moto's. The request log's times are ``time.perf_counter()`` seconds, which on
Linux is the machine's monotonic clock: the caller's ``perf_counter()`` reads the same
clock, so a call's start and end compare with the requests' as in one process.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict

from langgraph_s3.testing.latency import Latency, ServedRequest
from langgraph_s3.testing.moto import free_port, use_dummy_credentials

__all__ = ["ChildMoto", "moto_child", "moto_process"]

_CHILD = """
import json, signal, sys
from dataclasses import asdict
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it closes our stdin
from contextlib import nullcontext
from langgraph_s3.local import moto_server
from langgraph_s3.testing.latency import Latency
from langgraph_s3.testing.relay import TcpRelay
with moto_server(int(sys.argv[1]), strict=sys.argv[2] == "strict") as server:
    relay = TcpRelay(server.url) if sys.argv[3] == "keep-alive" else None
    with relay if relay is not None else nullcontext():
        print("ready", relay.url if relay is not None else server.url, flush=True)
        recordings = {}
        for line in sys.stdin:  # serve until the parent closes our stdin
            command, _, arg = line.strip().partition(" ")
            if command == "latency":
                server.set_latency(Latency(**json.loads(arg)))
                print("ok", flush=True)
            elif command == "record":
                recording = server.recording()
                recordings[arg] = (recording, recording.__enter__())
                print("ok", flush=True)
            elif command == "stop":
                recording, log = recordings.pop(arg)
                recording.__exit__(None, None, None)
                print(json.dumps([asdict(r) for r in log]), flush=True)
            else:
                print("unknown " + command, flush=True)
"""


class ChildMoto:
    """A moto server in a child process (:func:`moto_child`): the in-process server's
    ``url``, ``latency``, ``set_latency``, ``delayed``, ``recording`` and ``reset``."""

    owned = True
    """Started by us: :meth:`reset` may wipe it."""

    def __init__(self, url: str, child: subprocess.Popen[str], latency: Latency) -> None:
        self.url = url
        self._child = child
        self._latency = latency
        self._lock = threading.Lock()
        self._tokens = itertools.count()

    def _ask(self, line: str) -> str:
        """Send one command; the child's one-line answer."""
        assert self._child.stdin is not None and self._child.stdout is not None
        with self._lock:
            self._child.stdin.write(line + "\n")
            self._child.stdin.flush()
            answer = self._child.stdout.readline()
        if not answer:
            raise RuntimeError(f"the moto child ended (exit {self._child.poll()})")
        return answer.strip()

    @property
    def latency(self) -> Latency:
        """The latency injected into each request now."""
        return self._latency

    def set_latency(self, latency: float | Latency | None) -> Latency:
        """Inject ``latency`` from the next request on; returns the previous one."""
        previous, self._latency = self._latency, Latency.of(latency)
        if self._ask("latency " + json.dumps(asdict(self._latency))) != "ok":
            raise RuntimeError("the moto child refused a latency")
        return previous

    @contextmanager
    def delayed(self, latency: float | Latency | None) -> Iterator[Latency]:
        """``with server.delayed(0.1):`` each request waits 0.1 s; restored after."""
        previous = self.set_latency(latency)
        try:
            yield self._latency
        finally:
            self.set_latency(previous)

    @contextmanager
    def recording(self) -> Iterator[list[ServedRequest]]:
        """``with server.recording() as log:`` the requests answered inside the block,
        in the order their answers left; filled when the block ends."""
        token = str(next(self._tokens))
        if self._ask(f"record {token}") != "ok":
            raise RuntimeError("the moto child could not record")
        log: list[ServedRequest] = []
        try:
            yield log
        finally:
            log.extend(ServedRequest(**r) for r in json.loads(self._ask(f"stop {token}")))

    def reset(self) -> None:
        """Wipe every bucket and table."""
        req = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(req, timeout=10):
            pass


@contextmanager
def moto_child(
    *, latency: float | Latency | None = None, strict: bool = True, keep_alive: bool = True
) -> Iterator[ChildMoto]:
    """A strict (or not) moto server in a child process on a free loopback port, with
    ``latency`` injected (see :func:`~langgraph_s3.testing.moto.moto_server`); stopped
    when the block ends. Cost: a process start and moto's import, about 2 s.

    ``keep_alive`` (the default): clients reach it through a
    :class:`~langgraph_s3.testing.relay.TcpRelay` in the child that keeps their
    connections open, as AWS's endpoints do (moto's server closes each after one
    answer, which would cost a client a TCP connection and its CPU per request)."""
    use_dummy_credentials()
    port = free_port()
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _CHILD,
            str(port),
            "strict" if strict else "lenient",
            "keep-alive" if keep_alive else "close",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        word, _, url = child.stdout.readline().strip().partition(" ")
        if word != "ready":
            raise RuntimeError(f"moto did not start (exit {child.poll()})")
        server = ChildMoto(url, child, Latency())
        server.set_latency(latency)
        yield server
    finally:
        assert child.stdin is not None
        child.stdin.close()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(10)


@contextmanager
def moto_process(*, strict: bool = True) -> Iterator[str]:
    """A moto server in a process of its own, without latency; yields its URL. What the
    caller measures (``tracemalloc``, process CPU) is then the client's alone.
    ``strict``: as in :func:`~langgraph_s3.testing.moto.moto_server`; connections are
    closed after each answer, as moto closes them."""
    with moto_child(strict=strict, keep_alive=False) as server:
        yield server.url
