"""Bulk maintenance calls (apack, aprune, asweep_ttl over many threads): the request
deadline counts from the request, not the queue; one string is not a list of ids; a
failure cancels the siblings, leaves no unretrieved task and says what was done."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from helpers import cfg
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.errors import InvalidIdError, MissingResourceError
from langgraph_s3.testing import MotoServer, Names
from langgraph_s3.testing.moto import Latency


async def _threads(saver: AsyncS3Saver, n: int) -> list[str]:
    ids = [f"bulk-{i}" for i in range(n)]
    for t in ids:
        await saver.aput(cfg(t), empty_checkpoint(), {"step": 0}, {})
    return ids


async def test_time_queued_for_a_permit_is_not_the_requests(
    s3_fresh: MotoServer, names: Names
) -> None:
    # one permit, 50 ms a request: packing 10 threads queues each request behind the
    # other threads' (about 10 s), longer than request_timeout, though each answers 60
    # times faster than it (so a loaded machine does not time one out)
    async with AsyncS3Saver(
        endpoint_url=s3_fresh.url, concurrency=1, request_timeout=3.0, **names
    ) as saver:
        ids = await _threads(saver, 10)
        with s3_fresh.delayed(Latency(s3=0.05, dynamodb=0.05)):
            loop = asyncio.get_running_loop()
            start = loop.time()
            report = await saver.apack(ids)
            took = loop.time() - start
    assert report.threads == 10
    assert took > 3.0  # the queue alone outlasted request_timeout


@pytest.mark.parametrize("call", ["apack", "aprune", "aexport", "adelete_for_runs"])
async def test_one_string_is_refused_not_split_into_characters(
    s3_fresh: MotoServer, names: Names, call: str, tmp_path: object
) -> None:
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as saver:
        await _threads(saver, 1)
        await saver.aput(cfg("b"), empty_checkpoint(), {"step": 0}, {})
        args: tuple[object, ...] = ("b",)
        if call == "aexport":
            args = ("b", str(tmp_path) + "/out.jsonl")
        with pytest.raises(InvalidIdError, match=r"one string \('b'\).*\['b'\]"):
            await getattr(saver, call)(*args)
        assert await saver.aget_tuple(cfg("b")) is not None
        assert (await saver.manifest.reads.latest("b", "")).pack is None  # type: ignore[union-attr]


async def test_a_failed_bulk_call_cancels_the_rest_and_retrieves_every_failure(
    s3_fresh: MotoServer, names: Names, caplog: pytest.LogCaptureFixture
) -> None:
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, concurrency=4, **names) as saver:
        ids = await _threads(saver, 40)
        # the table goes away mid-call: every thread's packing fails at once
        import boto3

        ddb = boto3.client("dynamodb", endpoint_url=s3_fresh.url)
        ddb.delete_table(TableName=names["table"])
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            with pytest.raises(MissingResourceError) as info:
                await saver.apack(ids)
            gc.collect()
            await asyncio.sleep(0)
        assert any("done before this failure" in n for n in info.value.__notes__)
        # no "Task exception was never retrieved" for the siblings that failed too
        assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
