"""Benchmark: what subjects cost (sealing each user's threads with their own key), side
by side with the same saver without them, in one process on one moto server.

Prints, per turn of a chat (plain turns, then turns with a tool call), for a saver
without subjects and one with ``subjects="user_id"``: requests by kind, round trips
(the client's critical path), bytes uploaded, client CPU (the event loop's thread: the
embedded moto server's threads are not counted), and dollars per 1,000 turns at
us-east-1 list prices from the requests the server saw; then what a cold start adds
(a new process reading a user's thread and writing a turn: KMS and DynamoDB requests),
what a thread's first put adds, and dollars per subject per month; then the store's calls
(put, get, a user's search, a cold search across ten users) without and with
``subjects=1`` (the namespace label naming the user). Run:

    python bench/subjects.py [--turns 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import boto3

sys.path.insert(0, str(Path(__file__).resolve().parent))
from langgraph_s3 import AsyncS3Saver, AsyncS3Store
from langgraph_s3.testing.graphs import chat_graph
from langgraph_s3.testing.moto import (
    ServedRequest,
    moto_server,
    unique_names,
    use_dummy_credentials,
)
from saver import request_price

KMS_REQUEST = 0.03 / 10_000
"""KMS: $0.03 per 10,000 requests (GenerateDataKey, Decrypt)."""
KMS_KEY_MONTH = 1.0
"""KMS: $1 per customer managed key per month (one per deployment, not per subject)."""
DDB_GB_MONTH = 0.25
"""DynamoDB standard table storage, per GB-month."""


KMS_OPERATIONS = {"Decrypt", "GenerateDataKey"}


def kind(r: ServedRequest) -> str:
    """A request's service and operation (the server logs KMS's JSON requests beside
    DynamoDB's: their operation tells them apart)."""
    return f"{'kms' if r.operation in KMS_OPERATIONS else r.service} {r.operation}"


def dollars(requests: Sequence[ServedRequest]) -> float:
    total = 0.0
    for r in requests:
        total += KMS_REQUEST if r.operation in KMS_OPERATIONS else request_price(r)
    return total


class Run:
    """One saver's turns: the server's requests, the client's counts and CPU."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.requests: list[ServedRequest] = []
        self.cpu: list[float] = []
        self.round_trips: list[int] = []
        self.uploaded = 0
        self.kms: Counter[str] = Counter()
        self.turns = 0


async def turns(
    saver: AsyncS3Saver,
    run: Run,
    log: list[ServedRequest],
    config: dict[str, Any],
    texts: list[str],
) -> None:
    graph = chat_graph().compile(checkpointer=saver)
    await graph.ainvoke({"messages": [("user", "warm up")]}, config)  # clients, keys, caches
    await saver.aflush()
    start = len(log)
    saver.stats.reset()
    for text in texts:
        before = saver.stats.round_trips
        t0 = time.thread_time()
        await graph.ainvoke({"messages": [("user", text)]}, config)
        run.cpu.append(time.thread_time() - t0)
        run.round_trips.append(saver.stats.round_trips - before)
        saver.stats.reset()
    await saver.aflush()
    await asyncio.sleep(0.3)  # background PUTs answered
    run.requests = log[start:]
    run.turns = len(texts)
    run.uploaded = sum(r.received for r in run.requests)


def per_turn(run: Run) -> dict[str, float]:
    kinds = Counter(kind(r) for r in run.requests)
    out = {k: n / run.turns for k, n in sorted(kinds.items())}
    out["requests"] = len(run.requests) / run.turns
    return out


async def main(n: int) -> None:
    use_dummy_credentials()
    with moto_server() as server:
        kms = boto3.client("kms", endpoint_url=server.url, region_name="us-east-1")
        key = kms.create_key(Description="bench subjects")["KeyMetadata"]["KeyId"]
        names = unique_names()
        sealed_kw = {"subjects": "user_id", "kms_key": key}
        texts = [f"turn {i}: what's the weather in Paris?" for i in range(n)]
        plain_texts = [f"turn {i}: tell me more" for i in range(n)]
        runs: dict[str, Run] = {}
        with server.recording() as log:
            async with AsyncS3Saver(endpoint_url=server.url, **names) as setup:
                await setup.setup()
            for label, kw in (("without subjects", {}), ("with subjects", sealed_kw)):
                async with AsyncS3Saver(endpoint_url=server.url, **names, **kw) as saver:
                    for kind, words in (("plain", plain_texts), ("tool", texts)):
                        run = runs[f"{label}, {kind}"] = Run(label)
                        user = "alice" if kw else None
                        thread = f"{label}-{kind}"
                        config = {"configurable": {"thread_id": thread}}
                        if user:
                            config["configurable"]["user_id"] = user
                        await turns(saver, run, log, config, words)
            cold = await cold_start(server.url, names, sealed_kw, log)
            first = await first_put(server.url, names, sealed_kw, log)
            store = await store_calls(server.url, names, key, log)
    report(runs, cold, first)
    report_store(store)


STORE_CALLS = ("put", "get", "search (one user's 20 items)", "cold search (10 users)")


async def store_calls(
    url: str, names: Any, key: str, log: list[ServedRequest]
) -> dict[str, dict[str, tuple[float, ...]]]:
    """The store's calls without and with subjects: per call, requests, KB uploaded and
    client CPU ms (means over 20 puts and gets; a search each)."""
    out: dict[str, dict[str, tuple[float, ...]]] = {}
    for label, kw in (("without subjects", {}), ("with subjects", {"subjects": 1, "kms_key": key})):
        prefix = "s-" + label.split()[0]
        rows: dict[str, tuple[float, ...]] = {}

        async def timed(
            name: str, job: Any, n: int = 1, rows: dict[str, tuple[float, ...]] = rows
        ) -> None:
            start, t0 = len(log), time.thread_time()
            await job
            cpu = (time.thread_time() - t0) * 1000 / n
            await asyncio.sleep(0.2)
            done = log[start:]
            rows[name] = (len(done) / n, sum(r.received for r in done) / n / 1000, cpu)

        async with AsyncS3Store(endpoint_url=url, prefix=prefix, **names, **kw) as store:
            await store.aput(("users", "u0", "m"), "warm", {"text": "warm up"})
            value = {"text": "a memory of about a hundred bytes " * 3}

            async def puts(value: dict[str, str] = value) -> None:
                for i in range(20):
                    await store.aput(("users", "u1", "m"), f"k{i}", value)

            async def gets() -> None:
                for i in range(20):
                    await store.aget(("users", "u1", "m"), f"k{i}")

            await timed("put", puts(), 20)
            await timed("get", gets(), 20)
            await timed("search (one user's 20 items)", store.asearch(("users", "u1"), limit=50))
            for u in range(2, 11):
                await store.aput(("users", f"u{u}", "m"), "k", value)
        async with AsyncS3Store(endpoint_url=url, prefix=prefix, **names, **kw) as cold:
            await timed("cold search (10 users)", cold.asearch(("users",), limit=100))
        out[label] = rows
    return out


def report_store(out: dict[str, dict[str, tuple[float, ...]]]) -> None:
    print("\nthe store's calls, without / with subjects (one server):\n")
    print("| call | requests | KB uploaded | client CPU ms |")
    print("|---|---:|---:|---:|")
    a, b = out["without subjects"], out["with subjects"]
    for call in STORE_CALLS:
        print(
            f"| {call} | {a[call][0]:.1f} / {b[call][0]:.1f} | {a[call][1]:.2f} / "
            f"{b[call][1]:.2f} | {a[call][2]:.1f} / {b[call][2]:.1f} |"
        )


async def cold_start(
    url: str, names: Any, sealed_kw: dict[str, Any], log: list[ServedRequest]
) -> dict[str, Any]:
    """A new process (a Lambda's cold start) reading a user's thread and writing a turn,
    with and without subjects: its requests, KMS's among them."""
    out: dict[str, Any] = {}
    for label, kw, config in (
        ("without subjects", {}, {"configurable": {"thread_id": "without subjects-plain"}}),
        (
            "with subjects",
            sealed_kw,
            {"configurable": {"thread_id": "with subjects-plain", "user_id": "alice"}},
        ),
    ):
        start = len(log)
        async with AsyncS3Saver(endpoint_url=url, **names, **kw) as saver:
            graph = chat_graph().compile(checkpointer=saver)
            await graph.ainvoke({"messages": [("user", "back again")]}, config)
            await saver.aflush()
            kms = {k: v for k, v in saver.stats.by_operation.items() if k.startswith("kms.")}
        await asyncio.sleep(0.3)
        out[label] = (Counter(kind(r) for r in log[start:]), kms)
    return out


async def first_put(
    url: str, names: Any, sealed_kw: dict[str, Any], log: list[ServedRequest]
) -> dict[str, Counter[str]]:
    """A new thread's first turn, with and without subjects (a warm process)."""
    out: dict[str, Counter[str]] = {}
    for label, kw in (("without subjects", {}), ("with subjects", sealed_kw)):
        async with AsyncS3Saver(endpoint_url=url, **names, **kw) as saver:
            graph = chat_graph().compile(checkpointer=saver)
            warm = {"configurable": {"thread_id": f"{label}-warm", "user_id": "bob"}}
            await graph.ainvoke({"messages": [("user", "hi")]}, warm)
            await saver.aflush()
            await asyncio.sleep(0.3)
            start = len(log)
            config = {"configurable": {"thread_id": f"{label}-new", "user_id": "bob"}}
            await graph.ainvoke({"messages": [("user", "hi")]}, config)
            await saver.aflush()
            await asyncio.sleep(0.3)
            out[label] = Counter(kind(r) for r in log[start:])
    return out


def report(runs: dict[str, Run], cold: dict[str, Any], first: dict[str, Counter[str]]) -> None:
    print("\nper turn of a chat, a saver without subjects beside one with them (one server):\n")
    print("| turn | requests | round trips | KB uploaded | client CPU ms | $ per 1,000 turns |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, run in runs.items():
        cpu = statistics.median(run.cpu) * 1000
        print(
            f"| {name} | {len(run.requests) / run.turns:.1f} "
            f"| {statistics.mean(run.round_trips):.1f} "
            f"| {run.uploaded / run.turns / 1000:.2f} | {cpu:.1f} "
            f"| ${dollars(run.requests) / run.turns * 1000:.4f} |"
        )
    for kind in ("plain", "tool"):
        a, b = runs[f"without subjects, {kind}"], runs[f"with subjects, {kind}"]
        ratio = statistics.median(b.cpu) / statistics.median(a.cpu)
        extra = (b.uploaded - a.uploaded) / b.turns
        more = per_turn(b)["requests"] - per_turn(a)["requests"]
        print(
            f"\n{kind} turn with subjects: {more:+.1f} requests, {extra:+.0f} bytes uploaded, "
            f"client CPU x{ratio:.2f}"
        )
    print("\na cold start (a new process: reads the user's thread, writes one turn):\n")
    for label, (counts, kms) in cold.items():
        print(
            f"- {label}: {sum(counts.values())} requests {dict(sorted(counts.items()))}; KMS {kms}"
        )
    print("\na new thread's first turn (a warm process):\n")
    for label, counts in first.items():
        print(f"- {label}: {sum(counts.values())} requests {dict(sorted(counts.items()))}")
    print("\nper subject per month (us-east-1 list prices):\n")
    for starts in (10, 100):
        decrypts = starts * 30
        cost = decrypts * KMS_REQUEST + 300 / 1e9 * DDB_GB_MONTH
        print(
            f"- a user whose threads {starts} cold processes a day open: {decrypts:,} KMS "
            f"Decrypts (one per process and bound) = ${cost:.4f} a month, plus one "
            f"GenerateDataKey per life (${KMS_REQUEST:.6f}); the deployment's KMS key "
            f"${KMS_KEY_MONTH:.2f} a month whatever its number of users"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.turns))
