"""Benchmark: the client memory a large state costs to put and to get.

A checkpoint whose one channel holds a string of ``--mb`` megabytes is put, then read
by a fresh saver (no cache). moto runs in a process of its own, so what
``tracemalloc`` sees (the peak of Python allocations above what was held before the
call) is the saver's, the SDK's and aiohttp's alone: the serialized value, the bodies
and any copy of them.

    python bench/memory.py [--mb 100]
"""

from __future__ import annotations

import argparse
import asyncio
import tracemalloc
from collections.abc import Awaitable
from typing import Any, TypeVar

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing.moto import unique_names, use_dummy_credentials
from langgraph_s3.testing.moto_child import moto_process

T = TypeVar("T")


async def peak(job: Awaitable[T]) -> tuple[T, float]:
    """``job``'s result and the peak MB it allocated above what was held before."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    out = await job
    top = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, (top - before) / 1e6


async def measure(url: str, mb: int) -> dict[str, float]:
    names: dict[str, Any] = dict(unique_names())
    value = "x" * (mb * 1_000_000)
    cfg = {"configurable": {"thread_id": "m", "checkpoint_ns": ""}}

    async def serialize() -> Any:
        return JsonPlusSerializer().dumps_typed(value)

    _, serde_mb = await peak(serialize())
    async with AsyncS3Saver(endpoint_url=url, cache_bytes=0, **names) as saver:
        await saver.setup()
        first = await saver.aput(cfg, empty_checkpoint(), {"step": -1}, {})  # clients warm
        cp = empty_checkpoint()
        cp["channel_values"] = {"big": value}
        cp["channel_versions"] = {"big": 1}
        _, put_mb = await peak(saver.aput(first, cp, {"step": 0}, {"big": 1}))
    async with AsyncS3Saver(endpoint_url=url, cache_bytes=0, **names) as reader:
        await reader.aget_tuple({"configurable": {"thread_id": "none"}})  # clients warm
        tup, get_mb = await peak(reader.aget_tuple(cfg))
        assert tup is not None and len(tup.checkpoint["channel_values"]["big"]) == len(value)
    return {"put": put_mb, "get": get_mb, "serde": serde_mb}


def main(mb: int) -> None:
    use_dummy_credentials()
    with moto_process() as url:
        got = asyncio.run(measure(url, mb))
    print(f"\na state of one {mb} MB string (its serialized size is {mb} MB):\n")
    print("| call | client memory above the state itself (tracemalloc peak) | target |")
    print("|---|---:|---:|")
    print(f"| put | +{got['put']:,.0f} MB | +{mb * 1.3:,.0f} MB |")
    alone = "the serializer alone, for comparison (a large str is stored without it)"
    print(f"| {alone} | +{got['serde']:,.0f} MB | |")
    print(f"| get (fresh saver, no cache) | +{got['get']:,.0f} MB | +{mb * 2.3:,.0f} MB |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=100)
    main(ap.parse_args().mb)
