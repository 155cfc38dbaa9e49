"""Runs the benchmark's chat on one peer saver, turn by turn, for compare.py.

Started by ``compare.py`` in the peer's own venv (``bench/.venv-peers-*``: their pins
conflict with each other), against compare.py's moto server, which logs and times each
request. Protocol on stdin/stdout, one line each: it prints ``ready``; then for each
``turn N`` it runs turn N and prints ``ok CPU``, the milliseconds of this process's CPU
the turn took (the client's: moto runs in compare.py's process); ``stored`` prints
``stored BYTES`` when the adapter can tell what its saver stores (``-1``: it cannot);
``quit`` ends it.

    python bench/peers/child.py ADAPTER ENDPOINT_URL BUCKET TABLE
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))  # chat.py
sys.path.insert(0, str(HERE))  # _common.py, for the adapters

from chat import chat, question  # noqa: E402


async def main(adapter: str, url: str, bucket: str, table: str) -> None:
    spec = importlib.util.spec_from_file_location(adapter, HERE / f"{adapter}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    async with module.make(url, {"bucket": bucket, "table": table}) as saver:
        graph = chat().compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": "bench"}}
        print("ready", flush=True)
        loop = asyncio.get_running_loop()
        while True:
            line = (await loop.run_in_executor(None, sys.stdin.readline)).split()
            if not line or line[0] == "quit":
                return
            if line[0] == "stored":
                measure = getattr(module, "stored", None)
                size = await measure(saver) if measure is not None else -1
                print(f"stored {size}", flush=True)
                continue
            c0 = time.process_time()
            await graph.ainvoke(question(int(line[1])), cfg)
            print(f"ok {(time.process_time() - c0) * 1000:.3f}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
