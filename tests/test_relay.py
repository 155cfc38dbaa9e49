"""The test relay in front of a raw TCP protocol: delays each way, and the log of
exchanges a database's round trips are counted from (bench/compare.py's Postgres)."""

from __future__ import annotations

import socket
import threading

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
