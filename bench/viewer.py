"""Benchmark: what ``langgraph-s3 view`` writes and how long it takes, by thread length.

For each ``--turns`` count it builds one chat (every fifth turn asks for the weather
tool) on AsyncS3Saver against moto, then runs what ``view`` runs: one ``alist`` of
the whole thread, the page's model, and its HTML. It prints the checkpoints, the
sum of every checkpoint's state as JSON (what a page storing each state whole
would hold), the page's bytes, and the milliseconds of the read and of the
rendering. Run:

    python bench/viewer.py [--turns 25 100 400] [--endpoint-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import orjson

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.ops.tools.viewer import model, render
from langgraph_s3.ops.views import plain
from langgraph_s3.testing.graphs import CHAT_TURNS, chat_graph
from langgraph_s3.testing.moto import endpoint_or_moto, unique_names, use_dummy_credentials


async def one(endpoint: str, turns: int) -> dict[str, float]:
    names = unique_names()
    config = {"configurable": {"thread_id": "chat"}}
    async with AsyncS3Saver(endpoint_url=endpoint, **names) as saver:
        await saver.setup()
        graph = chat_graph().compile(checkpointer=saver)
        for i in range(turns):
            text = CHAT_TURNS[1] if i % 5 == 4 else f"turn {i}: {CHAT_TURNS[0]}"
            await graph.ainvoke({"messages": [("user", text)]}, config)
    async with AsyncS3Saver(endpoint_url=endpoint, **names) as cold:
        start = time.perf_counter()
        tuples = [t async for t in cold.alist(config)]
        read_ms = (time.perf_counter() - start) * 1000
        requests = cold.stats.snapshot()["requests"]
    start = time.perf_counter()
    page = render(model("chat", tuples)).encode()
    render_ms = (time.perf_counter() - start) * 1000
    whole = sum(len(orjson.dumps(plain(t.checkpoint["channel_values"]))) for t in tuples)
    return {
        "turns": turns,
        "checkpoints": len(tuples),
        "states_whole": whole,
        "page": len(page),
        "requests": requests,
        "read_ms": read_ms,
        "render_ms": render_ms,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[25, 100, 400])
    parser.add_argument("--endpoint-url")
    args = parser.parse_args()
    use_dummy_credentials()
    if args.endpoint_url:
        os.environ["AWS_ENDPOINT_URL"] = args.endpoint_url
    with endpoint_or_moto() as server:
        endpoint = server.url
        print(
            f"{'turns':>6} {'checkpoints':>11} {'states whole':>13} {'page':>11} "
            f"{'page/turn':>9} {'read':>15} {'model+html':>10}"
        )
        for turns in args.turns:
            r = await one(endpoint, turns)
            print(
                f"{r['turns']:>6} {r['checkpoints']:>11} {r['states_whole']:>13,} "
                f"{r['page']:>11,} {r['page'] / r['turns']:>9,.0f} "
                f"{r['read_ms']:>7,.0f} ms {r['requests']:>3}rq {r['render_ms']:>7,.0f} ms"
            )


if __name__ == "__main__":
    asyncio.run(main())
