"""Benchmark: the wall time of the command line's data commands on a small deployment,
against a local moto server, and where it goes (the imports, the deployment check, the
command's own requests).

Each figure is the median wall time of ``--runs`` fresh ``langgraph-s3`` processes
(python start-up included) on a deployment of 3 threads of one chat turn each; the
breakdown is one ``-X importtime`` run's heaviest imports. A refused endpoint's exit is
timed too (the deployment check makes one attempt).

    python bench/cli.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

from langgraph_s3 import S3Saver
from langgraph_s3.testing.graphs import chat_graph
from langgraph_s3.testing.moto import free_port, moto_server, unique_names, use_dummy_credentials

COMMANDS = [
    ("--help (no SDK, no LangGraph)", ["--help"]),
    ("threads", ["threads"]),
    ("history t0", ["history", "t0"]),
    ("show t0", ["show", "t0"]),
    ("threads --endpoint-url at a refused port (exit 4)", ["threads", "--endpoint-url", "{dead}"]),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    use_dummy_credentials()
    tool = shutil.which("langgraph-s3") or "langgraph-s3"
    with moto_server() as server:
        names = unique_names()
        url = f"s3://{names['bucket']}/bench?table={names['table']}"
        with S3Saver.from_url(url, endpoint_url=server.url) as saver:
            saver.setup()
            graph = chat_graph().compile(checkpointer=saver)
            for i in range(3):
                graph.invoke(
                    {"messages": [("user", "hi")]}, {"configurable": {"thread_id": f"t{i}"}}
                )
        env = {**os.environ, "AWS_ENDPOINT_URL": server.url, "LANGGRAPH_S3_URL": url}
        dead = f"http://127.0.0.1:{free_port()}"
        print(f"median wall of {args.runs} fresh processes (python start-up included), s")
        for label, cmd in COMMANDS:
            cmd = [c.replace("{dead}", dead) for c in cmd]
            walls, codes = [], set()
            for _ in range(args.runs):
                started = time.monotonic()
                done = subprocess.run([tool, *cmd], env=env, capture_output=True)
                walls.append(time.monotonic() - started)
                codes.add(done.returncode)
            print(f"  {label:55s} {statistics.median(walls):5.2f}  (exit {sorted(codes)})")
        probe = [sys.executable, "-X", "importtime", "-m", "langgraph_s3.cli", "threads"]
        err = subprocess.run(probe, env=env, capture_output=True, text=True).stderr
        rows = []
        for line in err.splitlines():
            parts = line.split("|")
            if line.startswith("import time:") and len(parts) == 3 and parts[1].strip().isdigit():
                rows.append((int(parts[1]), parts[2].strip()))
        top = [(us, name) for us, name in rows if "." not in name or name.count(".") <= 1]
        print("heaviest top-level imports of `threads` (cumulative, ms):")
        for us, name in sorted(top, reverse=True)[:8]:
            print(f"  {name:55s} {us / 1000:5.0f}")


if __name__ == "__main__":
    main()
