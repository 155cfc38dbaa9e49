"""Benchmark: what an archive of 1,000 threads of 100 turns costs, before and after packing.

Builds ``--sample`` threads of ``--turns`` chat turns (every fifth asks for the
weather tool) on AsyncS3Saver against moto, measures each thread's S3 objects
and bytes before and after ``apack``, and scales the mean thread to
``--threads`` threads. Then prices a month of that at the list prices below
(us-east-1, per GB-month; Standard-IA and Glacier Instant Retrieval bill an
object under 128 KB as 128 KB), and the one-time lifecycle transition requests.
Run:

    python bench/archive.py [--threads 1000] [--turns 100] [--sample 3] [--endpoint-url URL]

The 128 KB rule is why the small objects cannot usefully move: S3 skips them by
default, and forcing them would bill each few-KB object as 128 KB.

Last, it reads a ``--read-turns`` chat from a new process, plain and packed: a pack
up to 1 MB is read whole, so a packed thread's cold reads take fewer requests.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
from dataclasses import dataclass

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing.graphs import CHAT_TURNS, chat_graph
from langgraph_s3.testing.moto import endpoint_or_moto, unique_names, use_dummy_credentials

GB = 1024**3
MIN_BILLED = 128 * 1024
PRICE_PER_GB_MONTH = {"STANDARD": 0.023, "STANDARD_IA": 0.0125, "GLACIER_IR": 0.004}
TRANSITION_PER_1000 = {"STANDARD_IA": 0.01, "GLACIER_IR": 0.02}


@dataclass
class Shape:
    objects: int
    bytes: int
    sizes: list[int]


async def one_thread(saver: AsyncS3Saver, thread: str, turns: int) -> tuple[Shape, Shape]:
    graph = chat_graph().compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": thread}}
    for i in range(turns):
        text = CHAT_TURNS[1] if i % 5 == 4 else f"turn {i}: {CHAT_TURNS[0]}"
        await graph.ainvoke({"messages": [("user", text)]}, cfg)
    before = await shape(saver, [saver.layout.thread(thread)])
    await saver.apack([thread])
    after = await shape(saver, [saver.layout.thread(thread), saver.layout.packs(thread)])
    return before, after


async def shape(saver: AsyncS3Saver, prefixes: list[str]) -> Shape:
    sizes = [o.size for p in prefixes for o in await saver.raw_objects.list_all(p)]
    return Shape(len(sizes), sum(sizes), sizes)


def monthly(sizes: list[int], threads: int, storage: str) -> float:
    billed = sum(max(s, MIN_BILLED) if storage != "STANDARD" else s for s in sizes)
    return billed * threads / GB * PRICE_PER_GB_MONTH[storage]


def report(before: Shape, after: Shape, threads: int, turns: int) -> None:
    print(f"\n{threads:,} threads of {turns} turns (the measured mean thread, times {threads:,})")
    print(f"{'':34} {'objects':>12} {'bytes':>14}")
    n, b = before.objects * threads, before.bytes * threads
    print(f"{'before packing (threads/)':34} {n:>12,} {b:>14,}")
    print(
        f"{'after packing (packs/)':34} {after.objects * threads:>12,} {after.bytes * threads:>14,}"
    )
    print(
        f"mean object before: {before.bytes / max(before.objects, 1) / 1024:.1f} KB; "
        f"objects over 128 KB before: {sum(s > MIN_BILLED for s in before.sizes)} of "
        f"{before.objects} per thread; pack: {after.bytes / 1024:.0f} KB"
    )
    head = f"{'Standard':>10} {'Standard-IA':>12} {'Glacier IR':>11}"
    print(f"\n{'$/month at list prices (us-east-1)':38} {head}")
    rows = [
        ("before, as S3 keeps it (all Standard)", before, ("STANDARD",)),
        ("before, transitions forced", before, ("STANDARD", "STANDARD_IA", "GLACIER_IR")),
        ("after packing", after, ("STANDARD", "STANDARD_IA", "GLACIER_IR")),
    ]
    for label, s, classes in rows:
        cells = [
            f"{monthly(s.sizes, threads, c):>10.4f}" if c in classes else f"{'-':>10}"
            for c in ("STANDARD", "STANDARD_IA", "GLACIER_IR")
        ]
        print(f"{label:38} {cells[0]} {cells[1]:>12} {cells[2]:>11}")
    gets = before.objects * threads
    print(
        f"packing itself: {gets:,} GETs (${gets / 1000 * 0.0004:,.2f}), {threads:,} PUTs "
        f"(${threads / 1000 * 0.005:,.2f}), DeleteObjects free"
    )
    for c in ("STANDARD_IA", "GLACIER_IR"):
        once_before = before.objects * threads / 1000 * TRANSITION_PER_1000[c]
        once_after = after.objects * threads / 1000 * TRANSITION_PER_1000[c]
        print(
            f"one-time transition to {c}: ${once_before:,.2f} for the small objects, "
            f"${once_after:,.2f} for the packs"
        )


async def cold_reads(server_url: str, names: dict[str, str], turns: int) -> None:
    """Requests and round trips of a cold process reading a plain and a packed thread."""
    async with AsyncS3Saver(endpoint_url=server_url, **names) as saver:
        graph = chat_graph().compile(checkpointer=saver)
        for thread in ("plain", "packed"):
            for i in range(turns):
                text = CHAT_TURNS[1] if i % 5 == 4 else f"turn {i}: {CHAT_TURNS[0]}"
                await graph.ainvoke(
                    {"messages": [("user", text)]}, {"configurable": {"thread_id": thread}}
                )
        await saver.apack(["packed"])
    print(f"\ncold reads of a {turns}-turn chat (a new process each): requests / round trips")
    print(f"{'':22} {'plain':>10} {'packed':>10}")
    for what in ("latest", "list(limit=10)", "full history"):
        cells = []
        for thread in ("plain", "packed"):
            async with AsyncS3Saver(endpoint_url=server_url, **names) as cold:
                cfg = {"configurable": {"thread_id": thread}}
                with cold.stats.label(what):
                    if what == "latest":
                        await cold.aget_tuple(cfg)
                    elif what == "list(limit=10)":
                        [t async for t in cold.alist(cfg, limit=10)]
                    else:
                        g = chat_graph().compile(checkpointer=cold)
                        [s async for s in g.aget_state_history(cfg)]
                c = cold.stats.labels[what]
                cells.append(f"{c.requests} / {c.round_trips}")
        print(f"{what:22} {cells[0]:>10} {cells[1]:>10}")


async def main(args: argparse.Namespace) -> None:
    use_dummy_credentials()
    if args.endpoint_url:
        os.environ["AWS_ENDPOINT_URL"] = args.endpoint_url
    with endpoint_or_moto() as server:
        async with AsyncS3Saver(endpoint_url=server.url, **unique_names()) as saver:
            await saver.setup()
            pairs = [
                await one_thread(saver, f"archive-{i}", args.turns) for i in range(args.sample)
            ]
    for i, (b, a) in enumerate(pairs):
        got = f"{a.objects} pack, {a.bytes:,} bytes"
        print(f"thread {i}: {b.objects} objects, {b.bytes:,} bytes -> {got}")
    mean_before = Shape(
        round(statistics.mean(b.objects for b, _ in pairs)),
        round(statistics.mean(b.bytes for b, _ in pairs)),
        pairs[0][0].sizes,
    )
    mean_after = Shape(1, round(statistics.mean(a.bytes for _, a in pairs)), pairs[0][1].sizes)
    report(mean_before, mean_after, args.threads, args.turns)
    with endpoint_or_moto() as server:
        names = unique_names()
        async with AsyncS3Saver(endpoint_url=server.url, **names) as saver:
            await saver.setup()
        await cold_reads(server.url, names, args.read_turns)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--sample", type=int, default=3)
    parser.add_argument("--read-turns", type=int, default=20)
    parser.add_argument("--endpoint-url", default=None)
    asyncio.run(main(parser.parse_args()))
