"""Benchmark: AsyncS3Store (moto on loopback) vs InMemoryStore.

Prints requests, round trips and milliseconds for get, put, and search over
namespaces of growing size (filter only, and with a vector query), beside
InMemoryStore. Run:

    python bench/store.py [--sizes 100 1000 10000] [--s3-ms 20] [--endpoint-url URL]

Without --endpoint-url (or AWS_ENDPOINT_URL) it starts a moto server in a process
of its own, so that the client CPU column (``time.process_time()`` over the call) is
the store's alone. The items are loaded without added latency; each measured call then runs with
20 ms added to every S3 request (``langgraph_s3.local.BENCH_LATENCY``; the
store makes no DynamoDB requests). Round trips are the critical path: the
longest chain of requests each sent after the previous one completed, as the
client counts it (``RequestStats``) and as the server's request log shows it.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import time
from collections.abc import Awaitable, Sequence
from contextlib import ExitStack
from typing import Any, TypeVar

from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore

from langgraph_s3 import AsyncS3Store
from langgraph_s3.testing.moto import (
    BENCH_LATENCY,
    Latency,
    critical_path,
    endpoint_or_moto,
    unique_names,
    use_dummy_credentials,
)
from langgraph_s3.testing.moto_child import moto_child

T = TypeVar("T")
DIMS = 64
SERVER: Any = None
"""Our own moto server, when the bench started one: latency and a request log."""
WORDS = [
    "cat",
    "dog",
    "tea",
    "coffee",
    "oslo",
    "bergen",
    "rain",
    "sun",
    "museum",
    "boat",
    "fjord",
    "train",
    "book",
    "jazz",
]


def embed(texts: Sequence[str]) -> list[list[float]]:
    """Deterministic hashed bag-of-words vectors (no model download)."""
    out = []
    for text in texts:
        vec = [0.0] * DIMS
        for word in text.split():
            vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % DIMS] += 1.0
        out.append(vec)
    return out


def doc(i: int) -> dict[str, Any]:
    words = [WORDS[(i // (j + 1) + j * 5) % len(WORDS)] for j in range(6)]
    return {
        "text": f"{' '.join(words)} item{i}",
        "n": i % 100,
        "kind": ["note", "fact", "pref"][i % 3],
    }


async def timed(store: Any, job: Awaitable[T]) -> tuple[T, dict[str, float]]:
    stats = getattr(store, "stats", None)
    label = f"bench-{time.perf_counter_ns()}"
    t0, c0 = time.perf_counter(), time.process_time()
    if stats is None:
        out = await job
        cpu = (time.process_time() - c0) * 1000
        return out, {"ms": (time.perf_counter() - t0) * 1000, "cpu": cpu}
    with ExitStack() as stack:
        log = None
        if SERVER is not None:
            stack.enter_context(SERVER.delayed(LATENCY))
            log = stack.enter_context(SERVER.recording())
        t0, c0 = time.perf_counter(), time.process_time()
        with stats.label(label):
            out = await job
        ms, cpu = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
    c = stats.labels.pop(label)
    row = {"ms": ms, "cpu": cpu, "requests": c.requests, "round_trips": c.round_trips}
    if log is not None:
        row["server_round_trips"] = critical_path(log)
    return out, row


async def run_size(url: str, n: int) -> list[tuple[str, dict[str, float], dict[str, float]]]:
    index = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    rows = []
    memory = InMemoryStore(index=index)  # type: ignore[arg-type]
    async with AsyncS3Store(
        endpoint_url=url, index=index, **{"bucket": unique_names()["bucket"]}
    ) as store:  # type: ignore[arg-type]
        await store.setup()
        ns = ("bench", "docs")
        ops = [PutOp(ns, f"k{i}", doc(i)) for i in range(n)]
        for i in range(0, n, 500):
            await store.abatch(ops[i : i + 500])
            await memory.abatch(ops[i : i + 500])
        flt = {"kind": "fact", "n": {"$lt": 50}}
        cases: list[tuple[str, Any]] = [
            (
                f"search filter, {n} items, first after the bulk load",
                lambda s: s.asearch(("bench",), filter=flt, limit=10),
            ),
            (f"search filter, {n} items", lambda s: s.asearch(("bench",), filter=flt, limit=10)),
            (
                f"search query, {n} items",
                lambda s: s.asearch(("bench",), query="tea in oslo", limit=10),
            ),
            (
                f"search query+filter, {n} items",
                lambda s: s.asearch(("bench",), query="rain", filter=flt, limit=10),
            ),
        ]
        for name, fn in cases:
            ours, s3row = await timed(store, fn(store))
            _, memrow = await timed(memory, fn(memory))
            if "query" not in name:
                assert {r.key for r in ours} <= {
                    r.key for r in await memory.asearch(("bench",), filter=flt, limit=n)
                }
            rows.append((name, s3row, memrow))
        if n == min(ARGS.sizes):
            fresh = {"text": "brand new"}
            for name, job, mjob in [
                ("get", store.aget(ns, "k1"), memory.aget(ns, "k1")),
                (
                    "put (new item, with vectors)",
                    store.aput(ns, "new", fresh),
                    memory.aput(ns, "new", fresh),
                ),
                (
                    "put (update, item seen)",
                    store.aput(ns, "new", {"text": "v2"}),
                    memory.aput(ns, "new", {"text": "v2"}),
                ),
                ("delete", store.adelete(ns, "new"), memory.adelete(ns, "new")),
            ]:
                _, s3row = await timed(store, job)
                _, memrow = await timed(memory, mjob)
                rows.append((name, s3row, memrow))
    return rows


async def main() -> None:
    global SERVER
    use_dummy_credentials()
    with ExitStack() as stack:
        if ARGS.endpoint_url:  # an outside endpoint: no latency to set, no log
            server: Any = stack.enter_context(endpoint_or_moto())
        else:  # moto in a process of its own: the CPU measured is the client's alone
            server = SERVER = stack.enter_context(moto_child())
        url = ARGS.endpoint_url or server.url
        rows = []
        for n in ARGS.sizes:
            rows += await run_size(url, n)
    where = (
        f"moto on loopback, {LATENCY.s3 * 1000:g} ms per S3 request" if SERVER is not None else url
    )
    print(f"\nAsyncS3Store via {where}; vectors: {DIMS} dims\n")
    print(
        "| operation | requests | round trips | round trips (server log) | ms (S3) "
        "| client CPU ms | ms (InMemoryStore) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, s3row, memrow in rows:
        server_rt = s3row.get("server_round_trips")
        print(
            f"| {name} | {s3row['requests']:.0f} | {s3row['round_trips']:.0f} "
            f"| {'-' if server_rt is None else f'{server_rt:.0f}'} "
            f"| {s3row['ms']:.1f} | {s3row['cpu']:.1f} | {memrow['ms']:.2f} |"
        )
    print(
        "\nThe items are loaded in batches of 500 puts (a batch maintains its namespace's "
        "segment: one GET and one PUT per batch). Every search lists the items (the source "
        "of truth, with ETags) and reads the segments beside them."
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--endpoint-url", default=os.environ.get("AWS_ENDPOINT_URL"))
    parser.add_argument(
        "--s3-ms", type=float, default=BENCH_LATENCY.s3 * 1000, help="latency per S3 request"
    )
    ARGS = parser.parse_args()
    LATENCY = Latency(s3=ARGS.s3_ms / 1000, dynamodb=BENCH_LATENCY.dynamodb)
    asyncio.run(main())
