"""The test relay in front of a raw TCP protocol: delays each way, and the log of
exchanges a database's round trips are counted from (bench/compare.py's Postgres)."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Callable

from langgraph_s3.testing import MotoServer
from langgraph_s3.testing.relay import TcpRelay


def test_a_raw_relay_logs_each_exchange_and_what_the_client_sent() -> None:
    """A request/response protocol through a raw relay: one exchange per question
    answered (however the bytes are chunked), the client's bytes counted, none of the
    server's; a reset empties the log."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def echo() -> None:
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data.upper() * 2)

    threading.Thread(target=echo, daemon=True).start()
    with TcpRelay(("127.0.0.1", port), keep_alive=False, delay=0.001, service="db") as relay:
        with socket.create_connection(("127.0.0.1", relay.port)) as c:
            for question in (b"one", b"three", b"seven"):
                c.sendall(question)
                got = b""
                while len(got) < 2 * len(question):
                    got += c.recv(4096)
                assert got == question.upper() * 2
            c.sendall(b"x")  # the third answer's exchange ends when the client speaks again
            c.recv(16)
            log = relay.exchanges()
        assert [(r.service, r.operation, r.received) for r in log[:3]] == [
            ("db", "exchange", 3),
            ("db", "exchange", 5),
            ("db", "exchange", 5),
        ]
        assert all(r.end >= r.start for r in log)
        relay.reset()
        assert relay.exchanges() == []
    server.close()


def test_a_keep_alive_relay_logs_how_long_a_connection_sat_idle_before_the_client_closed_it(
    s3_fresh: MotoServer,
) -> None:
    """What tells a pool's keep-alive expiry from a connection closed after use: the idle
    time logged when the client closes between requests, and nothing logged for one still
    open."""
    with TcpRelay(s3_fresh.url) as relay:
        first = http.client.HTTPConnection("127.0.0.1", relay.port)
        kept = http.client.HTTPConnection("127.0.0.1", relay.port)
        for conn in (first, kept):
            conn.request("GET", "/")
            conn.getresponse().read()
        first.close()  # at once after its answer
        _until(lambda: relay.open == 1)
        assert len(relay.idle_closes()) == 1 and relay.idle_closes()[0] < 1.0
        time.sleep(0.3)  # the idle time measured, not a race waited out
        kept.close()
        _until(lambda: relay.open == 0)
        assert relay.accepted == 2
        assert relay.idle_closes()[1] >= 0.3, relay.idle_closes()
        relay.reset()
        assert relay.idle_closes() == []


def _until(done: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "the relay did not see the close"
        time.sleep(0.01)


def test_a_body_sent_late_after_an_early_answer_keeps_the_connection() -> None:
    """A server may answer before it reads a body (a refused condition) and close; a
    client starved of CPU sends the body seconds later all the same. The relay reads it
    off the client's connection and keeps that connection for the next request."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def answer_at_once() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                head = b""
                while b"\r\n\r\n" not in head:
                    head += conn.recv(4096)
                conn.sendall(b"HTTP/1.1 412 Precondition Failed\r\nContent-Length: 0\r\n\r\n")

    threading.Thread(target=answer_at_once, daemon=True).start()
    with TcpRelay(("127.0.0.1", port)) as relay:
        with socket.create_connection(("127.0.0.1", relay.port)) as c:
            for _ in range(2):
                c.sendall(b"PUT /k HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n")
                got = b""
                while b"\r\n\r\n" not in got:
                    got += c.recv(4096)
                assert got.startswith(b"HTTP/1.1 412") and b"keep-alive" in got, got
                time.sleep(1.5)  # the body comes after the relay's old one-second wait
                c.sendall(b"hello")
            assert relay.requests == 2 and relay.accepted == 1 and relay.open == 1
        _until(lambda: relay.open == 0)
        assert relay.other_closes() == [] and len(relay.idle_closes()) == 1
    server.close()
