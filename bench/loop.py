"""Benchmark: how long the saver holds the caller's event loop, beside a CPU-heavy
neighbour.

Each run is a fresh process (as a Lambda container): it builds the saver and the
bench chat (``chat.py``), optionally calls ``saver.preload()`` first (the Lambda
handler's init phase), then runs ``--turns`` turns on one event loop in asyncio's
debug mode with ``slow_callback_duration`` at 20 ms. asyncio logs every callback or
task step that ran longer than that without yielding: the loop was held that long,
and no other task (another node's stream output, a health check) could run. Beside
it run as many busy processes as the machine has cores (the neighbour), so the
scheduler takes the CPU away from the saver as a loaded host would. moto runs in a
process of its own.

    python bench/loop.py [--turns 30] [--neighbours N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

SLOW = 0.020
"""asyncio's ``slow_callback_duration`` for the runs: the target's bound."""


def child(url: str, bucket: str, table: str, turns: int, preload: bool) -> None:
    """One run: prints one JSON line, the slow steps seen (seconds, what, turn)."""
    from chat import chat, question
    from langgraph_s3 import AsyncS3Saver

    seen: list[tuple[float, str, int]] = []
    turn = [0]

    class Log(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            args: Any = record.args
            if isinstance(args, tuple) and len(args) == 2 and isinstance(args[1], float):
                what = re.sub(r" wait_for=.*| created at .*", "", str(args[0]))[:160]
                seen.append((args[1], what, turn[0]))

    logging.getLogger("asyncio").addHandler(Log())
    saver = AsyncS3Saver(endpoint_url=url, bucket=bucket, table=table)
    if preload:
        saver.preload()
    graph = chat().compile(checkpointer=saver)

    async def run() -> None:
        asyncio.get_running_loop().slow_callback_duration = SLOW
        async with saver:
            for i in range(1, turns + 1):
                turn[0] = i
                await graph.ainvoke(question(i), {"configurable": {"thread_id": "loop"}})

    asyncio.run(run(), debug=True)
    print(json.dumps(seen))


def busy(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def main(turns: int, neighbours: int) -> None:
    from langgraph_s3 import AsyncS3Saver
    from langgraph_s3.testing.moto import unique_names, use_dummy_credentials
    from langgraph_s3.testing.moto_child import moto_process

    use_dummy_credentials()
    print(
        f"\nthe event loop held longer than {SLOW * 1000:.0f} ms (asyncio debug's slow callback "
        f"log), {turns} turns per fresh process, {neighbours} busy neighbour processes on "
        f"{os.cpu_count()} cores; {time.strftime('%Y-%m-%d')}\n"
    )
    print("| run | steps over 20 ms | in turn 1 | after turn 1 | longest (ms) | what |")
    print("|---|---:|---:|---:|---:|---|")
    with moto_process() as url:
        names = unique_names()

        async def setup() -> None:
            async with AsyncS3Saver(endpoint_url=url, **names) as saver:  # type: ignore[arg-type]
                await saver.setup()

        asyncio.run(setup())
        for preload in (True, False):
            for nb in sorted({0, neighbours}):
                hogs = [
                    subprocess.Popen([sys.executable, __file__, "--busy", "600"]) for _ in range(nb)
                ]
                try:
                    out = (
                        subprocess.run(
                            [
                                sys.executable,
                                __file__,
                                "--child",
                                url,
                                names["bucket"],
                                names["table"],
                                str(turns),
                                "preload" if preload else "lazy",
                            ],
                            capture_output=True,
                            text=True,
                            check=True,
                        )
                        .stdout.strip()
                        .splitlines()[-1]
                    )
                finally:
                    for h in hogs:
                        h.kill()
                        h.wait()
                seen = json.loads(out)
                first = [s for s in seen if s[2] <= 1]
                longest = max(seen, default=[0.0, "-", 0])
                label = f"{'preload()' if preload else 'no preload'}, {nb} neighbours"
                print(
                    f"| {label} | {len(seen)} | {len(first)} | {len(seen) - len(first)} "
                    f"| {longest[0] * 1000:.0f} | {longest[1][:90]} |"
                )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        url, bucket, table, turns, mode = sys.argv[2:7]
        child(url, bucket, table, int(turns), mode == "preload")
    elif sys.argv[1:2] == ["--busy"]:
        busy(float(sys.argv[2]))
    else:
        ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
        ap.add_argument("--turns", type=int, default=30)
        ap.add_argument("--neighbours", type=int, default=os.cpu_count() or 2)
        args = ap.parse_args()
        main(args.turns, args.neighbours)
