"""Benchmark: a 20-turn conversation on AsyncS3Saver (moto on loopback) vs InMemorySaver.

Prints, per saver operation: requests, round trips, bytes uploaded and
milliseconds, with InMemorySaver's milliseconds beside them. Run:

    python bench/saver.py [--turns 20] [--s3-ms 20] [--dynamodb-ms 6] [--endpoint-url URL]

Without --endpoint-url (or AWS_ENDPOINT_URL) it starts an embedded moto server
that waits 20 ms before each S3 request and 6 ms before each DynamoDB request
(``langgraph_s3.local.BENCH_LATENCY``), so milliseconds are those latencies
plus loopback, moto and client CPU. Requests and bytes are what real S3 and
DynamoDB would see. Round trips are the critical path: the longest chain of
requests each sent after the previous one completed, as the client counts it
(``RequestStats``) and, beside it, as the server's request log shows it (the
requests that arrived during the call). With latencies like these, client CPU
shows: a wide fan-out takes long enough to send that its first answers are
back before its last requests leave, and those then chain.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Awaitable, Sequence
from contextlib import ExitStack
from typing import Any, TypeVar

from langgraph.checkpoint.memory import InMemorySaver

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing.graphs import approval_graph, chat_graph, delta_graph
from langgraph_s3.testing.moto import (
    AWS_LATENCY,
    BENCH_LATENCY,
    Latency,
    ServedRequest,
    background_ended,
    critical_path,
    endpoint_or_moto,
    tag_background,
    unique_names,
    use_dummy_credentials,
    weighted_path,
)

T = TypeVar("T")
BACKGROUND_HOLD = 0.5
"""Seconds the server holds a request of background work (``tag_background``) more: one
a call did not wait on ends after the call returned (off its modeled path), one it
waited on (a process's first put) shows in the path and in the call's time."""
DELTA_SNAPSHOT_EVERY = 100  # LangGraph's default
Row = dict[str, float]


class Recorder:
    def __init__(self) -> None:
        self.rows: dict[str, list[Row]] = defaultdict(list)
        self.enabled = True
        self.calls = 0
        self.by_operation: dict[str, dict[str, int]] = {}

    async def measure(self, name: str, saver: Any, job: Awaitable[T]) -> T:
        if not self.enabled:
            return await job
        stats = getattr(saver, "stats", None)
        if stats is None:  # InMemorySaver: time only
            t0 = time.perf_counter()
            out = await job
            self.rows[name].append({"ms": (time.perf_counter() - t0) * 1000})
            return out
        self.calls += 1
        label = f"{name}#{self.calls}"  # exact per call, even when calls overlap
        t0 = time.perf_counter()
        with stats.label(label):
            out = await job
        ms = (time.perf_counter() - t0) * 1000
        counts = stats.labels.pop(label, None)
        if counts is not None:
            ops = self.by_operation.setdefault(name, {})
            for op, n in counts.by_operation.items():
                ops[op] = ops.get(op, 0) + n
        self.rows[name].append(
            {
                "ms": ms,
                "requests": counts.requests if counts else 0,
                "round_trips": counts.round_trips if counts else 0,
                "bytes": counts.bytes_sent if counts else 0,
                "t0": t0,
                "t1": t0 + ms / 1000,
            }
        )
        return out

    def add_server_figures(self, log: Sequence[ServedRequest]) -> None:
        """Each call's critical path in the server's log: the requests that arrived
        while it ran (a call nested in another, such as a put in a turn, also gets
        whatever else ran beside it)."""
        for rows in self.rows.values():
            for row in rows:
                if "t0" in row:
                    mine = [r for r in log if row["t0"] <= r.start <= row["t1"]]
                    row["server_round_trips"] = critical_path(mine)
                    row["server_bytes"] = sum(r.received for r in mine)
                    waited = [r for r in mine if r.end <= row["t1"]]  # not a background PUT
                    row["modeled"] = weighted_path(
                        waited, lambda r: AWS_LATENCY.of_request(r.service, r.operation) * 1000
                    )[0]


def measured(base: type, rec: Recorder) -> type:
    """A subclass of ``base`` whose saver methods are recorded."""

    class Measured(base):  # type: ignore[misc,valid-type]
        async def aput(self, *a: Any, **k: Any) -> Any:
            return await rec.measure("put", self, super().aput(*a, **k))

        async def aput_writes(self, *a: Any, **k: Any) -> Any:
            return await rec.measure("put_writes", self, super().aput_writes(*a, **k))

        async def aget_tuple(self, *a: Any, **k: Any) -> Any:
            return await rec.measure("get_tuple", self, super().aget_tuple(*a, **k))

        async def aget_delta_channel_history(self, **k: Any) -> Any:
            return await rec.measure("delta_history", self, super().aget_delta_channel_history(**k))

    return Measured


INTERRUPTED = {"configurable": {"thread_id": "approval"}}
"""A thread stopped at an interrupt: its latest checkpoint has pending writes."""

TURNS = [
    "hello there",
    "what is the weather in Oslo?",
    "and tomorrow?",
    "tell me a story about a lighthouse keeper who collects shells",
    "thanks!",
]


async def workload(
    saver: Any, rec: Recorder, turns: int, durability: str = "sync"
) -> dict[str, Any]:
    cfg = {"configurable": {"thread_id": "bench"}}
    graph = chat_graph().compile(checkpointer=saver)
    for i in range(turns):
        text = TURNS[i % len(TURNS)] + f" (turn {i + 1})"
        await rec.measure(
            "turn", saver, graph.ainvoke({"messages": [("user", text)]}, cfg, durability=durability)
        )
        await background_ended()  # a user's pause: the next turn is not beside these PUTs
    await rec.measure("list(limit=10)", saver, _drain(saver.alist(cfg, limit=10)))
    n = await rec.measure("full history", saver, _count(graph.aget_state_history(cfg)))
    state = await graph.aget_state(cfg)
    if isinstance(saver, AsyncS3Saver):  # a thread waiting on a human: its latest has writes
        approval = approval_graph().compile(checkpointer=saver)
        rec.enabled = False  # not a call of the chat's rows
        await approval.ainvoke({"request": "a refund"}, INTERRUPTED, durability=durability)
        await background_ended()
        rec.enabled = True
    return {"history": n, "messages": len(state.values["messages"])}


async def delta_workload(saver: Any, rec: Recorder, turns: int) -> None:
    cfg = {"configurable": {"thread_id": f"delta-{turns}"}}
    graph = delta_graph(DELTA_SNAPSHOT_EVERY).compile(checkpointer=saver)
    for i in range(turns):
        await graph.ainvoke({"messages": [("user", f"turn {i}")]}, cfg)


# us-east-1 list prices (S3 Standard; DynamoDB on-demand after the Nov 2024 reduction)
S3_PUT_CLASS = 0.005 / 1000  # PUT, COPY, POST, LIST
S3_GET_CLASS = 0.0004 / 1000  # GET and the rest
S3_STORAGE_GB_MONTH = 0.023
DDB_WRU = 0.625 / 1e6  # one write unit (a KB of the larger of the item before and after)
DDB_RRU = 0.125 / 1e6  # one read unit (4 KB strongly consistent)
PUT_CLASS = {"PUT", "POST", "LIST", "COPY"}
"""S3 request kinds billed at the PUT price (the server logs a request's HTTP method, a
listing as LIST): GET and HEAD are billed at the GET price, DELETE is free."""
DDB_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}


def request_price(r: ServedRequest) -> float:
    """One request's list price: S3 by its class (a DELETE is free), DynamoDB at the
    capacity units the server billed it (as AWS bills on-demand)."""
    if r.service == "s3":
        if r.operation == "DELETE":
            return 0.0
        return S3_PUT_CLASS if r.operation in PUT_CLASS else S3_GET_CLASS
    return r.units * (DDB_WRU if r.operation in DDB_WRITES else DDB_RRU)


def turn_requests(rec: Recorder, log: Sequence[ServedRequest]) -> list[ServedRequest]:
    """The requests the turns made, background PUTs included: those that arrived from
    the first turn's start until the next call after the turns (``list(limit=10)``)."""
    turns = rec.rows.get("turn", [])
    after = [r["t0"] for r in rec.rows.get("list(limit=10)", []) if "t0" in r]
    if not turns:
        return []
    start, end = turns[0]["t0"], min(after) if after else turns[-1]["t1"] + 2.0
    return [r for r in log if start <= r.start < end]


def print_costs(requests: Sequence[ServedRequest], turns: int, uploaded: int) -> None:
    """Dollars per 1,000 agent turns, from the requests the server saw the turns make,
    each DynamoDB request at the capacity units the server billed it (as AWS bills
    on-demand: ``testing/capacity.py``)."""
    per = 1000 / turns
    rows: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for r in requests:
        if r.service == "s3" and r.operation == "DELETE":
            continue
        name = f"s3 {r.operation}" if r.service == "s3" else f"dynamodb.{r.operation}"
        price = request_price(r)
        rows[name][0] += 1
        rows[name][1] += price
    total = sum(cost for _, cost in rows.values())
    print("\ncost per 1,000 agent turns (this workload; us-east-1 list prices, as billed):\n")
    print("| request | per 1,000 turns | capacity units each (DynamoDB) | dollars |")
    print("|---|---:|---:|---:|")
    for name, (n, cost) in sorted(rows.items()):
        ddb = name.startswith("dynamodb.")
        each = [r.units for r in requests if ddb and f"dynamodb.{r.operation}" == name]
        unit_txt = f"{statistics.mean(each):.2f}" if each else "-"
        print(f"| {name} | {n * per:,.0f} | {unit_txt} | ${cost * per:.4f} |")
    print(f"| **requests, total** | {len(requests) * per:,.0f} | | **${total * per:.4f}** |")
    gb_month = uploaded * per / 1e9 * S3_STORAGE_GB_MONTH
    print(
        f"| storage of what 1,000 turns upload, per month | {uploaded * per / 1e6:,.1f} MB "
        f"| $0.023 per GB | ${gb_month:.5f} |"
    )


async def _clients(saver: Any) -> None:
    await saver.clients.client("s3")
    await saver.clients.client("dynamodb")


async def _drain(agen: Any) -> list[Any]:
    return [x async for x in agen]


async def _count(agen: Any) -> int:
    return len([x async for x in agen])


def summarize(rows: Sequence[Row], key: str) -> float:
    vals = [r[key] for r in rows if key in r]
    return statistics.mean(vals) if vals else float("nan")


async def main(
    turns: int, endpoint_url: str | None, latency: Latency, delta_turns: Sequence[int] = (20,)
) -> None:
    use_dummy_credentials()
    s3_rec, mem_rec = Recorder(), Recorder()
    with ExitStack() as stack:
        server = stack.enter_context(endpoint_or_moto(latency=latency))
        own = server.owned and not endpoint_url
        log = stack.enter_context(server.recording()) if own else None
        url = endpoint_url or server.url
        names = unique_names()
        S3 = measured(AsyncS3Saver, s3_rec)
        async with S3(endpoint_url=url, **names) as saver:
            tag_background(saver.clients)
            await saver.setup()
            saver.stats.reset()
            facts = await workload(saver, s3_rec, turns, durability="sync")
            uploaded = saver.stats.bytes_sent
            s3_rec.enabled = False
            for n in delta_turns:
                await delta_workload(saver, s3_rec, n)
            s3_rec.enabled = True
        # cold reads: a new process (fresh saver, empty cache); clients timed apart
        async with S3(endpoint_url=url, cache_bytes=0, **names) as cold:
            await s3_rec.measure("client creation (once per event loop)", cold, _clients(cold))
            cfg = {"configurable": {"thread_id": "bench"}}
            await s3_rec.measure("get_tuple latest (cold)", cold, cold.aget_tuple(cfg))
            s3_rec.rows["get_tuple"].clear()
        async with S3(endpoint_url=url, cache_bytes=0, **names) as cold:
            await _clients(cold)
            name = "get_tuple latest with pending writes (cold; an interrupt)"
            waiting = await s3_rec.measure(name, cold, cold.aget_tuple(INTERRUPTED))
            assert waiting is not None and waiting.pending_writes, "the interrupt is pending"
            s3_rec.rows["get_tuple"].clear()
        async with S3(endpoint_url=url, cache_bytes=0, **names) as cold:
            await _clients(cold)
            graph = chat_graph().compile(checkpointer=cold)
            label = "full history (cold; target 5 round trips, 1.5 requests per checkpoint)"
            await s3_rec.measure(label, cold, _count(graph.aget_state_history(cfg)))
        for n in delta_turns:  # each from a new process
            async with S3(endpoint_url=url, cache_bytes=0, **names) as cold:
                await _clients(cold)
                graph = delta_graph(DELTA_SNAPSHOT_EVERY).compile(checkpointer=cold)
                dcfg = {"configurable": {"thread_id": f"delta-{n}"}}
                label = f"DeltaChannel state at turn {n} (cold aget_state; target 4 / 12)"
                state = await s3_rec.measure(label, cold, graph.aget_state(dcfg))
                assert len(state.values["messages"]) == 2 * n
                if "delta_history" in s3_rec.rows:  # none at a snapshot step
                    walk = f"  of which the history call, turn {n}"
                    s3_rec.rows[walk] = s3_rec.rows.pop("delta_history")
                s3_rec.rows["get_tuple"].clear()
    turned: list[ServedRequest] = []
    if log is not None:
        s3_rec.add_server_figures(log)
        turned = turn_requests(s3_rec, log)
        uploaded = sum(r.received for r in turned)  # what the server received

    mem = measured(InMemorySaver, mem_rec)()
    await workload(mem, mem_rec, turns)
    await mem_rec.measure(
        "get_tuple latest (cold)", mem, mem.aget_tuple({"configurable": {"thread_id": "bench"}})
    )
    mem_rec.rows["get_tuple"].pop()

    order = [
        "turn",
        "put",
        "put_writes",
        "get_tuple",
        "client creation (once per event loop)",
        "get_tuple latest (cold)",
        "get_tuple latest with pending writes (cold; an interrupt)",
        "list(limit=10)",
        "full history",
    ]
    order += [k for k in s3_rec.rows if k not in order]
    where = (
        f"moto on loopback, {latency.s3 * 1000:g} ms per S3 request and "
        f"{latency.dynamodb * 1000:g} ms per DynamoDB request"
        if log is not None
        else url
    )
    print(
        f"\n{turns}-turn conversation, {facts['messages']} messages, "
        f"{facts['history']} checkpoints; S3 via {where}"
    )
    print(
        f"bytes uploaded in total: {uploaded:,} ({uploaded / max(1, turns):,.0f} per turn; "
        f"{'as the server received them' if log is not None else 'as the client counts'})\n"
    )
    head = (
        "| operation | calls | requests | round trips | round trips (server log) "
        "| ms modeled on AWS latencies | bytes uploaded | ms (S3) | ms (InMemorySaver) | ratio |"
    )
    print(head)
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in order:
        rows = s3_rec.rows.get(name)
        if not rows:
            continue
        mem_ms = summarize(mem_rec.rows.get(name, []), "ms")
        ms = summarize(rows, "ms")
        ratio = f"{ms / mem_ms:,.0f}x" if mem_ms == mem_ms and mem_ms > 0 else "-"
        mem_txt = f"{mem_ms:.2f}" if mem_ms == mem_ms else "-"
        server_rt = summarize(rows, "server_round_trips")
        server_txt = f"{server_rt:.1f}" if server_rt == server_rt else "-"
        modeled = summarize(rows, "modeled")
        modeled_txt = f"{modeled:.0f}" if modeled == modeled else "-"
        print(
            f"| {name} | {len(rows)} | {summarize(rows, 'requests'):.1f} "
            f"| {summarize(rows, 'round_trips'):.1f} | {server_txt} | {modeled_txt} "
            f"| {summarize(rows, 'server_bytes' if log is not None else 'bytes'):,.0f} "
            f"| {ms:.1f} | {mem_txt} | {ratio} |"
        )
    print(
        "\nper-call means. 'turn' is one graph.ainvoke(durability='sync'); its put, put_writes "
        "and get_tuple calls are also counted in their own rows. get_tuple inside a turn is "
        f"warm (in-process cache of immutable objects). DeltaChannel: snapshot every "
        f"{DELTA_SNAPSHOT_EVERY} updates (LangGraph's default). Round trips: the critical path "
        "(longest chain of requests each sent after the previous one completed), counted by "
        "the client and, beside it, found in the server's log. Modeled: that path with each "
        "request weighed by AWS-like latencies (PutObject 25, GetObject 15, ListObjectsV2 20, "
        "DynamoDB 5 ms), leaving out requests that ended after the call returned."
    )
    if log is not None:
        print_costs(turned, turns, uploaded)
    else:
        print("\n(costs are priced from the bench's own server's log: run without --endpoint-url)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument(
        "--delta-turns",
        type=int,
        nargs="*",
        default=[20, 199, 200],
        help="DeltaChannel chat lengths",
    )
    parser.add_argument("--endpoint-url", default=os.environ.get("AWS_ENDPOINT_URL"))
    parser.add_argument(
        "--s3-ms", type=float, default=BENCH_LATENCY.s3 * 1000, help="latency per S3 request"
    )
    parser.add_argument(
        "--dynamodb-ms",
        type=float,
        default=BENCH_LATENCY.dynamodb * 1000,
        help="latency per DynamoDB request",
    )
    args = parser.parse_args()
    latency = Latency(
        s3=args.s3_ms / 1000, dynamodb=args.dynamodb_ms / 1000, background=BACKGROUND_HOLD
    )
    asyncio.run(main(args.turns, args.endpoint_url, latency, args.delta_turns))
