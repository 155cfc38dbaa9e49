"""Benchmark: the CPU a cold import of the saver (``from langgraph_s3 import
AsyncS3Saver``) costs, against LangGraph's own.

Each figure is the median over ``--runs`` fresh interpreters of the process CPU
(``time.process_time``) that one import statement took, bytecode already compiled
(one warm-up run first). A saver needs ``langgraph.checkpoint.base`` whatever it
stores in, and an agent imports ``langgraph.graph``: those are the floors.

    python bench/imports.py [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CASES = [
    ("langgraph.checkpoint.base (a saver's floor)", "import langgraph.checkpoint.base"),
    ("langgraph.graph (an agent's floor)", "import langgraph.graph"),
    ("import langgraph_s3 (the package alone: its names load lazily)", "import langgraph_s3"),
    ("from langgraph_s3 import AsyncS3Saver", "from langgraph_s3 import AsyncS3Saver"),
    ("from langgraph_s3 import AsyncS3Store", "from langgraph_s3 import AsyncS3Store"),
    (
        "AsyncS3Saver and the AWS SDK (aiobotocore, as a first request loads it)",
        "from langgraph_s3 import AsyncS3Saver; import aiobotocore.session, aiobotocore.client",
    ),
    (
        "langgraph.graph, then AsyncS3Saver",
        "import langgraph.graph; from langgraph_s3 import AsyncS3Saver",
    ),
]

PROBE = """
import time
t = time.process_time()
{stmt}
print((time.process_time() - t) * 1000)
"""


def cpu_ms(stmt: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(stmt=stmt)], capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def main(runs: int) -> None:
    print(
        f"\ncold import CPU, median of {runs} fresh interpreters (ms); "
        f"Python {sys.version.split()[0]}; {time.strftime('%Y-%m-%d')}\n"
    )
    print("| import | CPU ms | min | max |")
    print("|---|---:|---:|---:|")
    for label, stmt in CASES:
        cpu_ms(stmt)  # compile and cache the bytecode first
        samples = [cpu_ms(stmt) for _ in range(runs)]
        print(
            f"| {label} | {statistics.median(samples):.0f} | {min(samples):.0f} "
            f"| {max(samples):.0f} |"
        )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    main(ap.parse_args().runs)
