"""The manifest on object storage (``manifest="s3"``): the saver and the store on a
bucket alone, with real LangGraph graphs, beside the same graphs on DynamoDB's
manifest, on the session's moto server."""

from __future__ import annotations

from typing import Any

from helpers import THREADS, build_threads, dump
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing import MotoServer, unique_names


def _ops(saver: AsyncS3Saver) -> set[str]:
    return {op.split(".")[0] for op in saver.stats.by_operation}


async def test_threads_on_objects_read_as_on_dynamodb(s3_fresh: MotoServer) -> None:
    names = unique_names()
    url = f"s3://{names['bucket']}/objs?manifest=s3&endpoint_url={s3_fresh.url}"
    async with AsyncS3Saver.from_conn_string(url) as saver:
        await saver.setup()
        saver.stats.reset()
        await build_threads(saver)
        assert _ops(saver) == {"s3"}  # no table anywhere
        on_objects = {t: await dump(saver, t) for t in THREADS}
        listed = sorted([t.thread_id async for t in saver.alist_threads()])
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **unique_names()) as plain:
        await plain.setup()
        await build_threads(plain)
        on_table = {t: await dump(plain, t) for t in THREADS}

    def shape(rows: list[tuple[Any, ...]]) -> list[Any]:  # ids differ: all else alike
        return sorted(
            (r[0].split(":")[0], sorted(r[3]["channel_versions"]), r[5].get("step")) for r in rows
        )

    assert {t: shape(v) for t, v in on_objects.items()} == {
        t: shape(v) for t, v in on_table.items()
    }
    assert listed == sorted(THREADS)
