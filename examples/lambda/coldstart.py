"""Measure the Lambda cold start: handler import time (python -X importtime),
the first invocation (clients, connections) and warm ones (the median), in a
fresh process. Every invocation is the same event on a new thread (a weather
question: a tool call and an answer), so first and warm do the same work.

    python examples/lambda/coldstart.py [--zip-dir DIR] [--warm 5] [--handler MODULE]

With --zip-dir, the handler runs from an unzipped build (build_zip.py) with
``python -S``: no site-packages, exactly what the zip holds. Without it, from
this folder with the installed package. An embedded moto server stands in for
S3 and DynamoDB unless AWS_ENDPOINT_URL is set.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

PROBE = """
import json, statistics, sys, time
import importlib
t0 = time.perf_counter()
handler = importlib.import_module(sys.argv[3])
t1 = time.perf_counter()
event = {"thread_id": sys.argv[1], "message": "What's the weather?"}
first = handler.handler(event, None)
t2 = time.perf_counter()
warm_ms = []
for i in range(int(sys.argv[2])):  # the same work: a new conversation each time
    t = time.perf_counter()
    warm = handler.handler({**event, "thread_id": f"{sys.argv[1]}-{i}"}, None)
    warm_ms.append((time.perf_counter() - t) * 1000)
print(json.dumps({"import_ms": (t1 - t0) * 1000, "first_ms": (t2 - t1) * 1000,
                  "warm_ms": statistics.median(warm_ms), "first": first, "warm": warm,
                  "clients": getattr(handler, "app", handler).saver.clients.created}))
"""


def measure(
    conn: str,
    endpoint: str,
    zip_dir: Path | None,
    thread: str,
    warm: int,
    module: str = "handler",
) -> dict[str, Any]:
    env = {**os.environ, "LANGGRAPH_S3_CHECKPOINTER": conn, "AWS_ENDPOINT_URL": endpoint}
    cmd = [sys.executable, "-X", "importtime"]
    if zip_dir is not None:
        cmd.append("-S")  # no site-packages: only what the zip holds
        env["PYTHONPATH"] = str(zip_dir)
        cwd = zip_dir
    else:
        env["PYTHONPATH"] = str(HERE)
        cwd = HERE
    proc = subprocess.run(
        [*cmd, "-c", PROBE, thread, str(warm), module],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the handler failed:\n{proc.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    out["unclosed"] = proc.stderr.count("Unclosed client session")
    top: dict[str, int] = {}
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cum_us, raw = line.split("|")
        if raw.startswith("   ") and not raw.startswith("     "):  # what handler imports
            top[raw.strip()] = int(cum_us)
    out["top_imports_ms"] = {k: v / 1000 for k, v in sorted(top.items(), key=lambda kv: -kv[1])[:8]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--zip-dir", type=Path, default=None)
    parser.add_argument("--warm", type=int, default=5, help="warm invocations (median shown)")
    parser.add_argument(
        "--handler",
        default="handler",
        help="the handler's module (langgraph_s3_handler for `langgraph-s3 lambda build`)",
    )
    args = parser.parse_args()
    from langgraph_s3 import S3Saver
    from langgraph_s3.testing.moto import endpoint_or_moto, unique_names, use_dummy_credentials

    use_dummy_credentials()
    with endpoint_or_moto() as server:
        names = unique_names()
        conn = f"s3://{names['bucket']}/lambda?table={names['table']}"
        with S3Saver.from_url(conn, endpoint_url=server.url) as saver:
            saver.setup()  # terraform's job in production
        thread = f"cold-{uuid.uuid4().hex[:6]}"
        result = measure(conn, server.url, args.zip_dir, thread, args.warm, args.handler)
    print(
        f"handler import: {result['import_ms']:.0f} ms   first invocation: "
        f"{result['first_ms']:.0f} ms   warm invocation: {result['warm_ms']:.0f} ms "
        f"(median of {args.warm})"
    )
    print(
        f"clients created: {result['clients']} (S3 + DynamoDB, one loop for "
        f"{args.warm + 1} invocations); 'Unclosed client session' warnings: {result['unclosed']}"
    )
    print("what the handler imports (cumulative ms):")
    for name, ms in result["top_imports_ms"].items():
        print(f"  {name:<28}{ms:8.1f}")


if __name__ == "__main__":
    main()
