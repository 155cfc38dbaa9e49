"""Benchmark: Lambda's lifecycle with and without the library's extension.

    python bench/lambda_lifecycle.py [--invocations 100] [--latency bench|none]

The handler ``langgraph-s3 lambda build`` generates (``LambdaApp``, the demo agent: a
weather question, 5 checkpoints a turn) runs under AWS's runtime interface client
(``awslambdaric``) on the local Runtime and Extensions APIs of
``langgraph_s3.testing.lambda_host``, which freezes the process (SIGSTOP) once the
runtime and every extension wait, as Lambda does, and reaps it (SIGKILL) at the end.
Two environments, one with the extension and one with ``LANGGRAPH_S3_LAMBDA_EXTENSION=off``,
each on a deployment of its own, take turns (one invocation each, alternately, so the
machine's noise falls on both), in two workloads: every invocation a new conversation,
and 10 conversations of 10 turns.

Per environment: the response time (delivered to the runtime until its response was
posted: what the caller waits), the billed duration (delivered until the environment
froze), what the manifest holds once the last invocation froze (read from the table:
``inline:`` attributes), and what the reaped environment left: copies held, of them
with no S3 object, and whether a fresh saver reads every checkpoint. Against an
embedded moto server with the benchmarks' latency (20 ms an S3 request, 6 ms a
DynamoDB one; ``--latency none``: loopback).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from langgraph_s3 import S3Saver
from langgraph_s3.ops.deploy.packaging import HANDLER, _handler_source
from langgraph_s3.testing.held import Held, held
from langgraph_s3.testing.lambda_host import LambdaHost
from langgraph_s3.testing.moto import (
    BENCH_LATENCY,
    MotoServer,
    ServedRequest,
    moto_server,
    unique_names,
    use_dummy_credentials,
)

WEATHER = "What's the weather?"
CHECKPOINTS_A_TURN = 5
MODES = {"with the extension": "on", "without (off)": "off"}


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


class Env:
    """One execution environment on a deployment of its own."""

    def __init__(self, server: MotoServer, root: Path, switch: str) -> None:
        self.server, self.names = server, unique_names()
        self.conn = f"s3://{self.names['bucket']}/bench?table={self.names['table']}"
        with S3Saver.from_url(self.conn, endpoint_url=server.url) as saver:
            saver.setup()
        env = {
            "LANGGRAPH_S3_CHECKPOINTER": self.conn,
            "AWS_ENDPOINT_URL": server.url,
            "LANGGRAPH_S3_LAMBDA_EXTENSION": switch,
        }
        self.host = LambdaHost(f"{HANDLER}.handler", task_root=root, env=env).start()
        self.response: list[float] = []
        self.billed: list[float] = []
        self.threads: set[str] = set()
        self.windows: list[tuple[float, float]] = []
        """(start, end) of each invocation until the freeze (``perf_counter``): every
        request of the environment starts in one (it is frozen in between)."""

    def invoke(self, thread_id: str) -> None:
        began = time.perf_counter()
        inv = self.host.invoke({"thread_id": thread_id, "message": WEATHER, "state": False})
        if inv.error is not None or "error" in inv.response:
            raise RuntimeError(f"the invocation failed: {inv.error or inv.response}")
        self.host.wait_frozen()
        self.windows.append((began, time.perf_counter()))
        self.response.append(inv.response_ms)
        self.billed.append(inv.billed_ms)
        self.threads.add(thread_id)

    def requests(self, log: list[ServedRequest], operation: str) -> float:
        """``operation``'s requests per invocation, from the server's log."""
        n = sum(
            1
            for r in log
            if r.operation == operation and any(a <= r.start <= b for a, b in self.windows)
        )
        return n / len(self.windows)

    def held(self) -> Held:
        return held(self.server.url, self.names["table"], self.names["bucket"])

    def readable(self) -> int:
        """Checkpoints a fresh saver lists over every thread (held copies included)."""
        with S3Saver.from_url(self.conn, endpoint_url=self.server.url) as saver:
            return sum(
                len(list(saver.list({"configurable": {"thread_id": t}}))) for t in self.threads
            )


def workload(server: MotoServer, root: Path, invocations: int, conversations: int) -> None:
    envs = {name: Env(server, root, switch) for name, switch in MODES.items()}
    try:
        with server.recording() as log:
            for i in range(invocations):
                for env in envs.values():
                    env.invoke(f"c{i % conversations}")
        rows = []
        for name, env in envs.items():
            frozen = env.held()
            env.host.reap()
            left = env.held()
            tail = [b - r for b, r in zip(env.billed, env.response, strict=True)]
            rows.append((name, env, frozen, left, tail, env.readable()))
    finally:
        for env in envs.values():
            env.host.close()
    print(
        "| environment | init ms | response ms p50 / p90 | billed ms p50 / p90 | "
        "billed after the response, ms p50 / max | UpdateItem / PUT per invocation | "
        f"held once frozen after {invocations} | left by the reaped environment | "
        "read back by a fresh saver |"
    )
    print("|---|---:|---:|---:|---:|---:|---|---|---:|")
    for name, env, frozen, left, tail, readable in rows:
        print(
            f"| {name} | {env.host.init_ms:.0f} | {statistics.median(env.response):.0f} / "
            f"{pct(env.response, 90):.0f} | {statistics.median(env.billed):.0f} / "
            f"{pct(env.billed, 90):.0f} | {statistics.median(tail):.1f} / {max(tail):.1f} | "
            f"{env.requests(log, 'UpdateItem'):.2f} / {env.requests(log, 'PUT'):.2f} | "
            f"{frozen.copies} copies in {frozen.items} items ({frozen.bytes / 1024:.1f} KiB) | "
            f"{left.copies} copies, {left.missing} with no S3 object | "
            f"{readable} of {invocations * CHECKPOINTS_A_TURN} |"
        )
    on, off = rows[0][1], rows[1][1]
    print(
        f"the extension adds {statistics.median(on.billed) - statistics.median(off.billed):+.1f}"
        f" ms billed and {statistics.median(on.response) - statistics.median(off.response):+.1f}"
        " ms response time (medians)\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--invocations", type=int, default=100)
    parser.add_argument("--latency", choices=("bench", "none"), default="bench")
    args = parser.parse_args()
    use_dummy_credentials()
    latency = BENCH_LATENCY if args.latency == "bench" else None
    with tempfile.TemporaryDirectory() as tmp, moto_server(latency=latency) as server:
        root = Path(tmp)
        (root / "agent.py").write_text(
            "from langgraph_s3.testing.graphs import chat_graph\ngraph = chat_graph()\n"
        )
        (root / f"{HANDLER}.py").write_text(_handler_source("agent:graph"))
        print(
            f"moto {'with 20 ms an S3 request, 6 ms a DynamoDB one' if latency else 'on loopback'};"
            f" {os.cpu_count()} cores; awslambdaric on the local Lambda host\n"
        )
        for title, conversations in (
            (f"{args.invocations} invocations, each a new conversation", args.invocations),
            (f"{args.invocations} invocations over 10 conversations", 10),
        ):
            print(f"## {title}\n")
            workload(server, root, args.invocations, conversations)


if __name__ == "__main__":
    main()
