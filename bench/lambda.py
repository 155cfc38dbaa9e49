"""Benchmark: three ways to run a LangGraph agent on Lambda, each in a fresh process.

    python bench/lambda.py [--invocations 300] [--graph agent|node] [--endpoint-url URL]

Patterns, each with the saver and the graph built at module scope, as a Lambda
handler module would:

* ``asyncio.run``: ``AsyncS3Saver``, ``asyncio.run(graph.ainvoke(...))`` per
  invocation (a new event loop, so new clients, every time);
* ``asyncio.Runner``: ``AsyncS3Saver``, ``runner.run(graph.ainvoke(...))`` on one
  module-level ``asyncio.Runner()`` (examples/lambda/handler.py);
* ``sync S3Saver``: ``S3Saver`` and ``graph.invoke`` (the saver's own background loop).

For each: the handler module's init (imports, saver, graph), the first
invocation after it (the cold one), the median warm invocation, the process RSS
after 0/100/200/300 warm invocations (after a ``gc.collect()``), new TCP
connections per invocation, aiohttp sessions left open at the end, and the
"Unclosed client session" warnings printed. Every invocation is a new thread
(a new conversation), so warm invocations all do the same work.

Connections are counted by a relay (``langgraph_s3.local.TcpRelay``) between
the clients and the endpoint, in this process; the patterns run in child
processes, so their RSS is the client's alone. Without --endpoint-url (or
AWS_ENDPOINT_URL) an embedded moto server stands in for S3 and DynamoDB, so
milliseconds are loopback + moto figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

PATTERNS = {
    "run": "asyncio.run per invocation",
    "runner": "asyncio.Runner at module scope",
    "sync": "sync S3Saver + graph.invoke",
}
GRAPHS = {
    "agent": "the demo agent (langgraph_s3.graphs.chat_graph), a weather question: "
    "agent -> tools -> agent, 3 steps",
    "node": "a one-node graph (n -> n + 1)",
}
UNCLOSED = "Unclosed client session"


# ------------------------------------------------------------------ the child
def rss_mb() -> float:
    gc.collect()
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def connections() -> int:
    """Connections the relay has accepted so far (asked of the parent)."""
    sys.stdout.write("?\n")
    sys.stdout.flush()
    return int(sys.stdin.readline())


def child(pattern: str, graph_kind: str, invocations: int) -> None:
    """One Lambda container: module-scope init, then a cold and warm invocations."""
    conn = os.environ["LGS3_BENCH_CONN"]
    t0 = time.perf_counter()
    import asyncio

    from langgraph_s3 import AsyncS3Saver, S3Saver

    saver: Any = (S3Saver if pattern == "sync" else AsyncS3Saver).from_url(conn)
    saver.preload()
    if graph_kind == "agent":
        from langgraph_s3.testing.graphs import chat_graph

        graph = chat_graph().compile(checkpointer=saver)

        def event(i: int) -> dict[str, Any]:
            return {"messages": [("user", "What's the weather?")]}

        def check(out: dict[str, Any]) -> None:
            assert len(out["messages"]) == 4, out  # question, tool call, tool, answer

    else:
        from typing import TypedDict

        from langgraph.graph import END, START, StateGraph

        class State(TypedDict):
            n: int

        b = StateGraph(State)
        b.add_node("inc", lambda s: {"n": s["n"] + 1})
        b.add_edge(START, "inc")
        b.add_edge("inc", END)
        graph = b.compile(checkpointer=saver)

        def event(i: int) -> dict[str, Any]:
            return {"n": i}

        def check(out: dict[str, Any]) -> None:
            assert "n" in out, out

    runner = asyncio.Runner() if pattern == "runner" else None
    init_ms = (time.perf_counter() - t0) * 1000
    prefix = uuid.uuid4().hex[:8]

    def invoke(i: int) -> None:
        config = {"configurable": {"thread_id": f"{prefix}-{i}"}}
        if pattern == "run":
            out = asyncio.run(graph.ainvoke(event(i), config))
        elif pattern == "runner":
            assert runner is not None
            out = runner.run(graph.ainvoke(event(i), config))
        else:
            out = graph.invoke(event(i), config)
        check(out)

    def timed(i: int) -> tuple[float, int]:
        before = connections()
        t = time.perf_counter()
        invoke(i)
        ms = (time.perf_counter() - t) * 1000
        return ms, connections() - before

    cold_ms, cold_conns = timed(0)
    rss = [rss_mb()]
    warm_ms: list[float] = []
    warm_conns: list[int] = []
    for i in range(1, invocations + 1):
        ms, new = timed(i)
        warm_ms.append(ms)
        warm_conns.append(new)
        if i % 100 == 0 or i == invocations:
            rss.append(rss_mb())

    import aiohttp

    gc.collect()
    sessions = [o for o in gc.get_objects() if isinstance(o, aiohttp.ClientSession)]
    open_sessions = sum(not s.closed for s in sessions)
    result = {
        "init_ms": init_ms,
        "cold_ms": cold_ms,
        "cold_conns": cold_conns,
        "warm_ms": warm_ms,
        "warm_conns": warm_conns,
        "rss_mb": rss,
        "open_sessions": open_sessions,
        "clients_created": saver.clients.created,
    }
    # shut down as a container would be: the loop (and so its clients) closed
    if runner is not None:
        runner.close()
    elif pattern == "sync":
        saver.close()
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


# ----------------------------------------------------------------- the parent
def run_pattern(
    pattern: str, graph_kind: str, invocations: int, conn: str, count: Callable[[], int]
) -> dict[str, Any]:
    env = {**os.environ, "LGS3_BENCH_CONN": conn, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", pattern]
    cmd += ["--graph", graph_kind, "--invocations", str(invocations)]
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True
        )
        assert proc.stdin is not None and proc.stdout is not None
        result: dict[str, Any] | None = None
        for line in proc.stdout:
            if line == "?\n":
                proc.stdin.write(f"{count()}\n")
                proc.stdin.flush()
            elif line.startswith("{"):
                result = json.loads(line)
        proc.stdin.close()
        rc = proc.wait()
        err.seek(0)
        stderr = err.read()
    if rc != 0 or result is None:
        raise RuntimeError(f"pattern {pattern!r} failed (exit {rc}):\n{stderr[-3000:]}")
    result["unclosed_warnings"] = stderr.count(UNCLOSED)
    return result


def table(results: dict[str, dict[str, Any]], invocations: int) -> str:
    rows = [
        (
            "pattern",
            "init ms",
            "cold ms",
            "warm ms p50",
            "warm p90",
            "new conns cold",
            "new conns/warm",
            "RSS MB at 0/100/200/300 warm",
            "MB per 100",
            "open sessions",
            "unclosed warnings",
        )
    ]
    for pattern, r in results.items():
        warm = sorted(r["warm_ms"])
        conns = r["warm_conns"]
        rss = r["rss_mb"]
        per_100 = (rss[-1] - rss[0]) / (invocations / 100)
        rows.append(
            (
                PATTERNS[pattern],
                f"{r['init_ms']:.0f}",
                f"{r['cold_ms']:.0f}",
                f"{statistics.median(warm):.0f}",
                f"{warm[int(len(warm) * 0.9)]:.0f}",
                str(r["cold_conns"]),
                f"{statistics.mean(conns):.2f} ({min(conns)}-{max(conns)})",
                " / ".join(f"{v:.0f}" for v in rss),
                f"{per_100:+.1f}",
                str(r["open_sessions"]),
                str(r["unclosed_warnings"]),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("| " + " | ".join(cells) + " |")
        if n == 0:
            dashes = ["-" * w if i == 0 else "-" * (w - 1) + ":" for i, w in enumerate(widths)]
            lines.append("| " + " | ".join(dashes) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--invocations", type=int, default=300, help="warm invocations")
    parser.add_argument("--graph", choices=sorted(GRAPHS), default="agent")
    parser.add_argument("--patterns", default=",".join(PATTERNS), help="comma-separated")
    parser.add_argument("--endpoint-url", default=None)
    parser.add_argument("--child", choices=sorted(PATTERNS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.graph, args.invocations)
        return

    from langgraph_s3 import S3Saver
    from langgraph_s3.testing.moto import (
        TcpRelay,
        endpoint_or_moto,
        unique_names,
        use_dummy_credentials,
    )

    use_dummy_credentials()
    if args.endpoint_url:
        os.environ["AWS_ENDPOINT_URL"] = args.endpoint_url
    with endpoint_or_moto() as server:
        names = unique_names()
        with S3Saver(endpoint_url=server.url, **names) as saver:
            saver.setup()  # terraform's job in production
        results: dict[str, dict[str, Any]] = {}
        with TcpRelay(server.url) as relay:
            conn = f"s3://{names['bucket']}/bench?table={names['table']}&endpoint_url={relay.url}"
            for pattern in args.patterns.split(","):
                t = time.perf_counter()
                results[pattern] = run_pattern(
                    pattern, args.graph, args.invocations, conn, lambda: relay.accepted
                )
                print(f"  {PATTERNS[pattern]}: {time.perf_counter() - t:.0f} s", file=sys.stderr)
    where = "embedded moto" if server.owned else server.url
    print(
        f"graph: {GRAPHS[args.graph]}; 1 cold + {args.invocations} warm invocations per pattern, "
        f"each a new thread, each pattern in a fresh process; endpoint: {where} behind a "
        "connection-counting relay; RSS after gc.collect()"
    )
    print(table(results, args.invocations))
    print(
        "init: handler module import (langgraph_s3, the graph, saver.preload()); cold: the first "
        "invocation after it; new conns: TCP connections the clients opened (0 = all reused); "
        "open sessions: aiohttp sessions still open after the last invocation, before shutdown; "
        "unclosed warnings: 'Unclosed client session' lines printed, shutdown included."
    )


if __name__ == "__main__":
    main()
