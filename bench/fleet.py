"""Benchmark: maintenance past one machine (shards, the idle pass, the run index, metadata).

On a moto server, builds ``--threads`` chat threads of ``--turns`` turns (each turn a
run with its own id, every thread one of ``--users`` users), then measures:

1. per worker, threads per second for ``alist_threads``, ``asweep_ttl`` and
   ``apack(idle_days=...)`` over one shard of ``--segments``, and what one thread
   packed costs (requests, GETs, round trips, dollars at list prices); then the model
   for N workers (each shard's work is independent: time = threads / (N x rate));
2. one ``delete_for_runs`` among ``--rollback-threads`` threads, through the run
   index and, for comparison, through the Scan an unindexed deployment needs;
3. one user's threads: ``alist_threads(metadata=...)`` through the Scan and through
   an index (``index_metadata``), against LangGraph's ``alist(None, filter=...)``;
4. what a Scan of the manifest costs per million items of a shared table.

Run:

    python bench/fleet.py [--threads 200] [--turns 3] [--segments 4] [--rollback-threads 300,3000]

moto answers on this machine in about a millisecond and shares its cores with the
workers, so its rates are a floor for AWS's, where a worker waits on the network and
runs its threads concurrently (see the model printed at the end).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing.graphs import CHAT_TURNS, chat_graph
from langgraph_s3.testing.moto import endpoint_or_moto, unique_names, use_dummy_credentials

GET_PER_1000 = 0.0004  # S3 Standard, us-east-1
PUT_PER_1000 = 0.005
DDB_READ_PER_MILLION = 0.125  # on-demand read request units (4 KB strongly consistent)
DDB_WRITE_PER_MILLION = 0.625  # on-demand write request units (1 KB)
AWS_RTT = 0.020  # seconds, one S3 request seen from Lambda in the same region


async def build(saver: AsyncS3Saver, threads: int, turns: int, users: int) -> list[str]:
    graph = chat_graph().compile(checkpointer=saver)
    ids = [f"thread-{i:05d}" for i in range(threads)]
    gate = asyncio.Semaphore(16)

    async def one(i: int, thread: str) -> None:
        async with gate:
            for turn in range(turns):
                config: Any = {
                    "configurable": {"thread_id": thread, "run_id": f"run-{i}-{turn}"},
                    "metadata": {"user_id": f"user-{i % users}"},
                }
                text = f"turn {turn}: {CHAT_TURNS[0]}"
                await graph.ainvoke({"messages": [("user", text)]}, config)

    await asyncio.gather(*(one(i, t) for i, t in enumerate(ids)))
    return ids


async def expire_all(saver: AsyncS3Saver, threads: list[str]) -> None:
    from langgraph_s3.core.keys import encode

    ddb = await saver.clients.client("dynamodb")
    gate = asyncio.Semaphore(32)

    async def one(thread: str) -> None:
        async with gate:
            await ddb.update_item(
                TableName=saver.target.table,
                Key={"pk": {"S": saver.manifest.deployment + encode(thread)}, "sk": {"S": "~"}},
                UpdateExpression="SET expires_at = :t",
                ExpressionAttributeValues={":t": {"N": "1000"}},
            )

    await asyncio.gather(*(one(t) for t in threads))


async def per_worker(saver: AsyncS3Saver, segments: int, what: str, threads: int) -> float:
    """Threads per second of one worker over shard 0..N-1 in turn (the mean)."""
    started = time.perf_counter()
    done = 0
    for i in range(segments):
        if what == "list":
            done += len([t async for t in saver.alist_threads(segment=i, total_segments=segments)])
        elif what == "pack":
            done += (await saver.apack(idle_days=0, segment=i, total_segments=segments)).threads
        else:
            done += (await saver.asweep_ttl(segment=i, total_segments=segments)).threads
    assert done == threads, (what, done, threads)
    return done / (time.perf_counter() - started)


async def throughput(url: str, args: argparse.Namespace) -> None:
    names = unique_names()
    async with AsyncS3Saver(endpoint_url=url, thread_ttl_days=30, **names) as saver:
        await saver.setup()
        threads = await build(saver, args.threads, args.turns, args.users)
        rates = {"list": await per_worker(saver, args.segments, "list", len(threads))}
        one = threads[0]
        with saver.stats.label("one"):  # one thread's pack, alone: its requests and path
            await saver.apack([one])
        cost = saver.stats.labels["one"]
        rates["pack"] = await per_worker(saver, args.segments, "pack", len(threads) - 1)
        with saver.stats.label("again"):  # every thread packed: the pass reads no object
            again = await saver.apack(idle_days=0)
        await expire_all(saver, threads)
        rates["sweep"] = await per_worker(saver, args.segments, "sweep", len(threads))
    ops = cost.by_operation
    gets = ops.get("s3.GetObject", 0)
    puts = sum(v for k, v in ops.items() if k in ("s3.PutObject", "s3.DeleteObjects"))
    dollars = gets * GET_PER_1000 / 1000 + puts * PUT_PER_1000 / 1000
    print(f"{len(threads)} threads of {args.turns} turns; {args.segments} shards, one worker")
    print(f"{'per worker (moto)':<28}{'threads/s':>10}")
    for what, rate in rates.items():
        print(f"{what:<28}{rate:>10,.0f}")
    print(
        f"one thread packed: {cost.requests} requests in {cost.round_trips} round trips "
        f"({gets} GETs, {ops.get('s3.PutObject', 0)} PUT, "
        f"{ops.get('s3.ListObjectsV2', 0)} LISTs), ${dollars * 1e6:,.0f} per million threads"
    )
    print(
        f"the idle pass again, all packed: {again.threads} packed, "
        f"{saver.stats.labels['again'].by_operation} (no S3 request)"
    )
    per_thread = cost.round_trips * AWS_RTT
    aws_rate = 32 / per_thread  # a worker packs 32 threads at once (its concurrency)
    print(
        f"\nmodel on AWS: a packing takes {cost.round_trips} round trips "
        f"(~{per_thread * 1000:.0f} ms at {AWS_RTT * 1000:.0f} ms each); a worker packs 32 "
        f"threads at once: ~{aws_rate:,.0f} threads/s; N shards run apart"
    )
    print(f"{'a million threads to pack':<28}{'moto rate':>14}{'AWS model':>14}")
    for workers in (1, 16, 64, 256):
        moto_h = 1e6 / (rates["pack"] * workers) / 3600
        aws_h = 1e6 / (aws_rate * workers) / 3600
        print(f"{f'{workers} worker(s)':<28}{moto_h:>12.1f} h{aws_h:>12.2f} h")


async def rollback(url: str, threads: int) -> tuple[dict[str, int], dict[str, int]]:
    """(indexed, unindexed) requests of one delete_for_runs among ``threads`` threads."""
    names = unique_names()
    async with AsyncS3Saver(endpoint_url=url, **names) as saver:
        await saver.setup()
        gate = asyncio.Semaphore(64)

        async def put(i: int) -> None:
            async with gate:
                config: Any = {"configurable": {"thread_id": f"t{i}", "checkpoint_ns": ""}}
                ck = empty_checkpoint()
                await saver.aput(config, ck, {"run_id": f"run-{i}", "step": 0}, {})

        await asyncio.gather(*(put(i) for i in range(threads)))
        with saver.stats.label("indexed"):
            await saver.adelete_for_runs(["run-7"])
        ddb = await saver.clients.client("dynamodb")
        await ddb.update_item(
            TableName=names["table"],
            Key={"pk": {"S": saver.manifest.deployment}, "sk": {"S": "~layout"}},
            UpdateExpression="REMOVE runs_indexed",
        )
        with saver.stats.label("scan"):
            await saver.adelete_for_runs(["run-8"])
        return (
            dict(saver.stats.labels["indexed"].by_operation),
            dict(saver.stats.labels["scan"].by_operation),
        )


async def users(url: str, args: argparse.Namespace) -> None:
    names = unique_names()
    async with AsyncS3Saver(endpoint_url=url, index_metadata=["user_id"], **names) as saver:
        await saver.setup()
        await build(saver, args.threads, 1, args.users)
        want = {"user_id": "user-3"}
        async with AsyncS3Saver(endpoint_url=url, **names) as plain:
            with plain.stats.label("scan"):
                by_scan = {t.thread_id async for t in plain.alist_threads(metadata=want)}
            with plain.stats.label("filter"):
                by_filter = {
                    c.config["configurable"]["thread_id"]
                    async for c in plain.alist(None, filter=want)
                }
        with saver.stats.label("index"):
            by_index = {t.thread_id async for t in saver.alist_threads(metadata=want)}
        assert by_scan == by_index == by_filter, (by_scan, by_index, by_filter)
        print(f"\none user's threads ({len(by_index)} of {args.threads}; {args.users} users)")
        for label, stats in (("scan", plain), ("filter", plain), ("index", saver)):
            got = stats.stats.labels[label]
            name = {
                "scan": "alist_threads(metadata=...) by Scan",
                "filter": "alist(None, filter=...) (LangGraph's)",
                "index": "alist_threads(metadata=...) by index",
            }[label]
            print(f"{name:<42}{got.requests:>8,} requests  {dict(got.by_operation)}")


async def scan_price(url: str) -> None:
    """Bytes of the manifest items of a chat thread, as DynamoDB bills a Scan of them."""
    names = unique_names()
    async with AsyncS3Saver(endpoint_url=url, **names) as saver:
        await saver.setup()
        await build(saver, 20, 3, 5)
        ddb = await saver.clients.client("dynamodb")
        items = (await ddb.scan(TableName=names["table"]))["Items"]
    from langgraph_s3.manifest.evaluate import item_size as _size

    sizes = [sum(len(k) + _size(v) for k, v in i.items()) for i in items]
    mean = sum(sizes) / len(sizes)
    units = 1e6 * mean / 4096
    print(
        f"\na Scan of a million manifest items (mean {mean:,.0f} bytes here): "
        f"{units:,.0f} read units, ${units * DDB_READ_PER_MILLION / 1e6:.3f} "
        "(strongly consistent; every deployment's items in a shared table are read)"
    )


def shown(ops: dict[str, int]) -> str:
    total = sum(ops.values())
    return f"{total:,} = " + ", ".join(f"{v} {k.split('.')[1]}" for k, v in sorted(ops.items()))


async def main(args: argparse.Namespace) -> None:
    use_dummy_credentials()
    if args.endpoint_url:
        os.environ["AWS_ENDPOINT_URL"] = args.endpoint_url
    with endpoint_or_moto() as server:
        await throughput(server.url, args)
        print("\none delete_for_runs (its run wrote one checkpoint to one thread): requests")
        for n in (int(x) for x in args.rollback_threads.split(",")):
            indexed, scanned = await rollback(server.url, n)
            print(f"among {n:,} threads, through the run index: {shown(indexed)}")
            print(f"among {n:,} threads, through a Scan (unindexed): {shown(scanned)}")
        await users(server.url, args)
        await scan_price(server.url)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--segments", type=int, default=4)
    parser.add_argument("--rollback-threads", default="300,3000")
    parser.add_argument("--endpoint-url", default=None)
    asyncio.run(main(parser.parse_args()))
