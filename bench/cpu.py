"""Benchmark: client CPU per put and per get, at 100 messages of state.

The bench chat (``chat.py``: ~1 KB messages) runs until its state holds 100
messages; then one more step's put, and reads of the latest, are timed with
``time.process_time()`` (this process's CPU: moto runs in a process of its own, so
its CPU is not counted, behind a relay that keeps connections open as AWS does).
Beside them, InMemorySaver doing the same calls, in interleaved rounds.

    python bench/cpu.py [--messages 100] [--repeat 50] [--rounds 5]
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


Jobs = dict[str, Callable[[], Awaitable[Any]]]


async def prepared(saver: Any, messages: int, thread: str) -> Jobs:
    """The calls to time on ``saver``, once ``thread`` holds ``messages`` messages."""
    graph = chat().compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": thread}}
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

    return {"put": put, "get latest (warm)": get}


async def interleaved(
    ours: Any, theirs: Any, messages: int, repeat: int, rounds: int
) -> dict[str, tuple[float, float, float, list[float]]]:
    """Per call: our median CPU and wall ms, InMemorySaver's median CPU ms, and the ratio
    of each round. A round builds a thread of ``messages`` messages on each saver, then
    times ``repeat`` calls of ours and as many of InMemorySaver's (the puts grow it by
    ``repeat`` messages): a machine's load moves both sides of a round alike, where two
    runs minutes apart moved InMemorySaver's put twofold."""
    cpu: dict[str, list[float]] = {}
    wall: dict[str, list[float]] = {}
    mem: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}
    for r in range(rounds):
        mine = await prepared(ours, messages, f"cpu-{r}")
        other = await prepared(theirs, messages, f"cpu-{r}")
        for name in mine:
            c, w = await cpu_ms(repeat, mine[name])
            m, _ = await cpu_ms(repeat, other[name])
            cpu.setdefault(name, []).append(c)
            wall.setdefault(name, []).append(w)
            mem.setdefault(name, []).append(m)
            ratios.setdefault(name, []).append(c / m)
    median = statistics.median
    return {n: (median(cpu[n]), median(wall[n]), median(mem[n]), ratios[n]) for n in cpu}


def _next(job: Callable[[int], Awaitable[Any]], count: Iterator[int]) -> Awaitable[Any]:
    return job(next(count))


async def per_request(saver: Any, repeat: int) -> dict[str, tuple[float, float, float]]:
    """Median CPU and wall milliseconds of one hot request through the library's door
    (``aws.door.call``: the permit, the deadline, botocore's signer, retries and parser,
    aiohttp), each after its first: the templated path (``aws/hot.py``); and the median
    CPU of its SDK part alone, the attempt loop (``aws/exchange.py``: the request made
    and signed, sent on aiobotocore's session, parsed, the retry policy asked)."""
    from langgraph_s3.aws import exchange

    objects, body = saver.raw_objects, bytes(range(256)) * 4  # 1 KiB
    jobs: dict[str, Callable[[int], Awaitable[Any]]] = {
        "s3 PutObject (1 KiB)": lambda i: objects.put(f"cpu/k{i % 50}", body),
        "s3 GetObject (1 KiB)": lambda i: objects.get(f"cpu/k{i % 50}"),
        "dynamodb GetItem": lambda i: saver.manifest.reads.latest("cpu-bench", ""),
    }
    sdk: list[float] = []
    loop = exchange.make_request

    async def timed(*args: Any) -> Any:  # nothing else runs meanwhile: the loop's CPU
        c0 = time.process_time()
        try:
            return await loop(*args)
        finally:
            sdk.append((time.process_time() - c0) * 1000)

    out = {}
    exchange.make_request = timed  # type: ignore[assignment]
    try:
        for name, job in jobs.items():
            for i in range(50):  # the objects, the templates
                await job(i)
            count = iter(range(10**9))
            sdk.clear()
            cpu, wall = await cpu_ms(repeat * 4, functools.partial(_next, job, count))
            assert len(sdk) == repeat * 4, (name, len(sdk))  # every one templated
            out[name] = (cpu, wall, statistics.median(sdk))
    finally:
        exchange.make_request = loop  # type: ignore[method-assign]
    return out


async def main(messages: int, repeat: int, rounds: int) -> None:
    use_dummy_credentials()
    with moto_child() as server:  # keep-alive connections, as AWS's endpoints keep them
        async with AsyncS3Saver(endpoint_url=server.url, **unique_names()) as saver:  # type: ignore[arg-type]
            await saver.setup()
            both = await interleaved(saver, InMemorySaver(), messages, repeat, rounds)
            hot = await per_request(saver, repeat)
    print(
        f"\nclient CPU per call at {messages} messages of state ({rounds} interleaved rounds "
        f"of {repeat} calls each; medians):\n"
    )
    print("| call | langgraph-s3 CPU ms | wall ms | InMemorySaver CPU ms | ratio (rounds) |")
    print("|---|---:|---:|---:|---|")
    for name, (cpu, wall, m, ratios) in both.items():
        spread = f"{min(ratios):.1f}-{max(ratios):.1f}"
        print(
            f"| {name} | {cpu:.2f} | {wall:.1f} | {m:.2f} | "
            f"{statistics.median(ratios):.1f}x ({spread}) |"
        )
    print(f"\nclient CPU per hot request (median of {repeat * 4}, after the first of each):\n")
    print("| request | CPU ms | of which the SDK's attempt loop | wall ms |")
    print("|---|---:|---:|---:|")
    for name, (cpu, wall, sdk) in hot.items():
        print(f"| {name} | {cpu:.2f} | {sdk:.2f} | {wall:.1f} |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    asyncio.run(main(args.messages, args.repeat, args.rounds))
