"""Benchmark: the manifest on object storage (``manifest="s3"``) beside the DynamoDB
manifest, in one process on one moto server with AWS-like latencies.

Prints, per turn of a chat (plain turns, then turns with a tool call), for the same
graph on a saver whose manifest is a DynamoDB table and one whose manifest is in the
bucket: requests by kind, round trips (the client's critical path), the milliseconds a
turn waits on AWS (the server's heaviest chain of requests the turn waited for, each
weighted by ``AWS_LATENCY``: PutObject 25 ms, GetObject 15, ListObjectsV2 20, DynamoDB
5), client CPU (the event loop's thread), and dollars per 1,000 turns at us-east-1
list prices from the requests the server saw; then a cold ``get_tuple`` of the latest
(a new process); then the same object manifest's requests priced and timed as S3
Express One Zone would (modeled: it is refused by ``manifest=s3`` today). Run:

    python bench/manifests.py [--turns 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing.graphs import chat_graph
from langgraph_s3.testing.latency import AWS_LATENCY, Latency, weighted_path
from langgraph_s3.testing.moto import (
    ServedRequest,
    moto_server,
    unique_names,
    use_dummy_credentials,
)
from saver import PUT_CLASS, request_price

EXPRESS_PUT = 0.00113 / 1000
"""S3 Express One Zone, per PUT-class request (AWS's price list since April 2025)."""
EXPRESS_GET = 0.00003 / 1000
"""S3 Express One Zone, per GET-class request (the same)."""
EXPRESS_LATENCY = Latency(s3=0.005, dynamodb=0.005, s3_put=0.005, s3_get=0.003, s3_list=0.005)
"""Express One Zone's "single-digit millisecond" requests, modeled: PUT 5, GET 3, LIST 5."""
KINDS = {"DynamoDB table": {}, "in the bucket": {"manifest": "s3"}}


def price(requests: list[ServedRequest], *, express: bool = False) -> float:
    """The requests' list price; ``express``: S3's at Express One Zone's prices."""

    def one(r: ServedRequest) -> float:
        if not express or r.service != "s3":
            return request_price(r)
        if r.operation == "DELETE":
            return 0.0
        return EXPRESS_PUT if r.operation in PUT_CLASS else EXPRESS_GET

    return sum(one(r) for r in requests)


class Run:
    """One saver's turns of one kind: the server's requests per turn, the client's
    round trips and CPU."""

    def __init__(self) -> None:
        self.turns: list[list[ServedRequest]] = []
        self.cpu: list[float] = []
        self.round_trips: list[int] = []

    def waited(self, latency: Latency) -> float:
        """Mean milliseconds a turn waited on AWS (its background requests aside)."""
        ms = []
        for requests in self.turns:
            fg = [r for r in requests if not r.background]
            ms.append(weighted_path(fg, lambda r: latency.of_request(r.service, r.operation))[0])
        return statistics.mean(ms) * 1000

    def every(self) -> list[ServedRequest]:
        return [r for t in self.turns for r in t]


async def turns(
    saver: AsyncS3Saver, log: list[ServedRequest], thread: str, texts: list[str]
) -> Run:
    run = Run()
    graph = chat_graph().compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": thread}}
    await graph.ainvoke({"messages": [("user", "warm up")]}, config)  # clients, caches
    await saver.aflush()
    for text in texts:
        await asyncio.sleep(0.2)  # the turn before's background PUTs answered
        start = len(log)
        saver.stats.reset()
        t0 = time.thread_time()
        await graph.ainvoke({"messages": [("user", text)]}, config)
        run.cpu.append(time.thread_time() - t0)
        run.round_trips.append(saver.stats.round_trips)
        await saver.aflush()
        await asyncio.sleep(0.2)
        run.turns.append(log[start:])
    return run


async def cold_latest(url: str, kw: dict[str, Any], thread: str, log: list[ServedRequest]) -> Run:
    run = Run()
    async with AsyncS3Saver(endpoint_url=url, cache_bytes=0, **kw) as cold:
        await cold.aget_tuple({"configurable": {"thread_id": "warm-clients"}})  # clients only
        start = len(log)
        cold.stats.reset()
        t0 = time.thread_time()
        await cold.aget_tuple({"configurable": {"thread_id": thread}})
        run.cpu.append(time.thread_time() - t0)
        run.round_trips.append(cold.stats.round_trips)
        run.turns.append(log[start:])
    return run


async def main(n: int) -> None:
    use_dummy_credentials()
    plain = [f"turn {i}: tell me more" for i in range(n)]
    tool = [f"turn {i}: what's the weather in Paris?" for i in range(n)]
    runs: dict[tuple[str, str], Run] = {}
    with moto_server(latency=AWS_LATENCY) as server, server.recording() as log:
        for label, where in KINDS.items():
            names = unique_names()
            kw: dict[str, Any] = {"bucket": names["bucket"], **(where or {"table": names["table"]})}
            async with AsyncS3Saver(endpoint_url=server.url, **kw) as saver:
                await saver.setup()
                runs[label, "plain"] = await turns(saver, log, "plain", plain)
                runs[label, "tool"] = await turns(saver, log, "tool", tool)
            runs[label, "cold"] = await cold_latest(server.url, kw, "tool", log)
    report(runs, n)


def report(runs: dict[tuple[str, str], Run], n: int) -> None:
    print(f"\none moto server, AWS-like latencies, {n} turns of each kind per manifest\n")
    print(
        "| per turn | manifest | requests | round trips | waited ms (AWS model) "
        "| client CPU ms | $ / 1,000 turns |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for kind in ("plain", "tool", "cold"):
        for label in KINDS:
            run = runs[label, kind]
            every = run.every()
            count = len(run.turns)
            what = {"plain": "plain turn", "tool": "tool turn", "cold": "cold latest"}[kind]
            print(
                f"| {what} | {label} | {len(every) / count:.1f} | "
                f"{statistics.mean(run.round_trips):.1f} | {run.waited(AWS_LATENCY):.0f} | "
                f"{statistics.mean(run.cpu) * 1000:.1f} | {price(every) / count * 1000:.4f} |"
            )
    print("\nrequests per turn, by kind:\n")
    for kind in ("plain", "tool"):
        for label in KINDS:
            run = runs[label, kind]
            kinds = Counter(f"{r.service} {r.operation}" for r in run.every())
            said = ", ".join(f"{k} {v / len(run.turns):.1f}" for k, v in sorted(kinds.items()))
            print(f"- {kind}, {label}: {said}")
    print(
        "\nS3 Express One Zone, modeled (manifest=s3 refuses it today: its listings are not "
        "sorted and take no StartAfter):\n"
    )
    print("| per turn | requests | waited ms (5/3/5 ms model) | $ / 1,000 turns |")
    print("|---|---:|---:|---:|")
    for kind in ("plain", "tool"):
        run = runs["in the bucket", kind]
        every = run.every()
        count = len(run.turns)
        print(
            f"| {kind} turn | {len(every) / count:.1f} | {run.waited(EXPRESS_LATENCY):.0f} | "
            f"{price(every, express=True) / count * 1000:.4f} |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    asyncio.run(main(parser.parse_args().turns))
