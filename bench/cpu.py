"""Benchmark: client CPU per put and per get, at 100 messages of state.

The bench chat (``chat.py``: ~1 KB messages) runs until its state holds 100
messages; then one more step's put, and reads of the latest, are timed with
``time.process_time()`` (this process's CPU: moto runs in a process of its own, so
its CPU is not counted, behind a relay that keeps connections open as AWS does).
Beside them, InMemorySaver doing the same calls.

    python bench/cpu.py [--messages 100] [--repeat 50]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing.moto import unique_names, use_dummy_credentials
from langgraph_s3.testing.moto_child import moto_child

sys.path.insert(0, str(Path(__file__).parent))
from chat import chat, question


async def cpu_ms(repeat: int, job: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """Median CPU and wall milliseconds of ``job`` over ``repeat`` runs."""
    cpu, wall = [], []
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        await job()
        cpu.append((time.process_time() - c0) * 1000)
        wall.append((time.perf_counter() - w0) * 1000)
    return statistics.median(cpu), statistics.median(wall)


async def measure(saver: Any, messages: int, repeat: int) -> dict[str, tuple[float, float]]:
    graph = chat().compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "cpu"}}
    turn = 0
    while True:
        turn += 1
        await graph.ainvoke(question(turn), cfg)
        state = await graph.aget_state(cfg)
        if len(state.values["messages"]) >= messages:
            break
    top = await saver.aget_tuple(cfg)
    assert top is not None
    chain = {"config": top.config, "checkpoint": top.checkpoint, "step": top.metadata["step"]}

    async def put() -> None:  # the next step: one new ~1 KB message, a new checkpoint
        from langchain_core.messages import AIMessage
        from langgraph.checkpoint.base import create_checkpoint

        cp = chain["checkpoint"]
        new = create_checkpoint(cp, None, chain["step"] + 1)
        msgs = [*cp["channel_values"]["messages"], AIMessage(content="x" * 1000)]
        new["channel_values"] = {**cp["channel_values"], "messages": msgs}
        v = saver.get_next_version(cp["channel_versions"].get("messages"), None)
        new["channel_versions"] = {**cp["channel_versions"], "messages": v}
        md = {"source": "loop", "step": chain["step"] + 1, "parents": {}}
        chain["config"] = await saver.aput(chain["config"], new, md, {"messages": v})
        chain["checkpoint"], chain["step"] = new, chain["step"] + 1

    async def get() -> None:
        await saver.aget_tuple(cfg)

    return {"put": await cpu_ms(repeat, put), "get latest (warm)": await cpu_ms(repeat, get)}


def _next(job: Callable[[int], Awaitable[Any]], count: Iterator[int]) -> Awaitable[Any]:
    return job(next(count))


async def per_request(saver: Any, repeat: int) -> dict[str, tuple[float, float]]:
    """Median CPU and wall milliseconds of one hot request through the library's door
    (``aws.door.call``: the permit, the deadline, botocore's signer, retries and parser,
    aiohttp), each after its first: the templated path (``aws/hot.py``)."""
    objects, body = saver.raw_objects, bytes(range(256)) * 4  # 1 KiB
    jobs: dict[str, Callable[[int], Awaitable[Any]]] = {
        "s3 PutObject (1 KiB)": lambda i: objects.put(f"cpu/k{i % 50}", body),
        "s3 GetObject (1 KiB)": lambda i: objects.get(f"cpu/k{i % 50}"),
        "dynamodb GetItem": lambda i: saver.manifest.reads.latest("cpu-bench", ""),
    }
    out = {}
    for name, job in jobs.items():
        for i in range(50):  # the objects, the templates
            await job(i)
        count = iter(range(10**9))
        out[name] = await cpu_ms(repeat * 4, functools.partial(_next, job, count))
    return out


async def main(messages: int, repeat: int) -> None:
    use_dummy_credentials()
    with moto_child() as server:  # keep-alive connections, as AWS's endpoints keep them
        async with AsyncS3Saver(endpoint_url=server.url, **unique_names()) as saver:  # type: ignore[arg-type]
            await saver.setup()
            ours = await measure(saver, messages, repeat)
            hot = await per_request(saver, repeat)
    mem = await measure(InMemorySaver(), messages, repeat)
    print(f"\nclient CPU per call at {messages} messages of state (median of {repeat}):\n")
    print("| call | langgraph-s3 CPU ms | wall ms | InMemorySaver CPU ms |")
    print("|---|---:|---:|---:|")
    for name, (cpu, wall) in ours.items():
        print(f"| {name} | {cpu:.2f} | {wall:.1f} | {mem[name][0]:.2f} |")
    print(f"\nclient CPU per hot request (median of {repeat * 4}, after the first of each):\n")
    print("| request | CPU ms | wall ms |")
    print("|---|---:|---:|")
    for name, (cpu, wall) in hot.items():
        print(f"| {name} | {cpu:.2f} | {wall:.1f} |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    asyncio.run(main(args.messages, args.repeat))
