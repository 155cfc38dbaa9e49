"""The thread TTL sweeper as a DynamoDB Streams Lambda handler, fed the real stream
records moto's DynamoDB Streams gives for the removal of manifest items (issue 11).

moto never runs TTL itself: the test removes expired items as DynamoDB's TTL would
(DeleteItem), then hands the stream's records to the handler, adding the
``eventSourceARN`` Lambda puts on each record.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from helpers import cfg
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.graphs import CHAT_TURNS, ahistory, chat_graph
from langgraph_s3.keys import encode
from langgraph_s3.manifest import Manifest
from langgraph_s3.sweeper import ahandle, handler
from langgraph_s3.testing import MotoServer, unique_names
from test_retention import chat, keys_of, nest


async def enable_stream(saver: AsyncS3Saver) -> str:
    ddb = await saver.clients.client("dynamodb")
    resp = await ddb.update_table(
        TableName=saver.target.table,
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "OLD_IMAGE"},
    )
    return str(resp["TableDescription"]["LatestStreamArn"])


async def ttl_removes(saver: AsyncS3Saver, thread: str) -> None:
    """What DynamoDB's TTL does to an expired item: it deletes it."""
    ddb = await saver.clients.client("dynamodb")
    await ddb.delete_item(
        TableName=saver.target.table,
        Key={"pk": {"S": saver.manifest.deployment + encode(thread)}, "sk": {"S": encode("")}},
    )


async def stream_records(saver: AsyncS3Saver, arn: str) -> list[dict[str, Any]]:
    streams = await saver.clients.client("dynamodbstreams")
    desc = await streams.describe_stream(StreamArn=arn)
    out: list[dict[str, Any]] = []
    for shard in desc["StreamDescription"]["Shards"]:
        it = await streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )
        resp = await streams.get_records(ShardIterator=it["ShardIterator"])
        out += [{**r, "eventSourceARN": arn} for r in resp["Records"]]
    return out


async def test_the_stream_handler_sweeps_ttl_removals_only(
    s3_fresh: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_fresh.url)
    names = unique_names()
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, thread_ttl_days=1, **names) as saver:
        await saver.setup()
        arn = await enable_stream(saver)
        # written three days ago (by the manifest's clock): expired two days ago
        cast(Manifest, saver.manifest).clock = lambda: time.time() - 3 * 86400
        await chat(saver, "old", *CHAT_TURNS[:2])
        await nest(saver, "nested")
        await chat(saver, "reborn", CHAT_TURNS[0])
        await chat(saver, "deleted", CHAT_TURNS[0])
        cast(Manifest, saver.manifest).clock = time.time
        await chat(saver, "live", CHAT_TURNS[0])
        await saver.adelete_thread("deleted")
        assert await keys_of(saver, "deleted") == []

        for thread in ("old", "nested", "reborn", "live", "deleted"):
            await ttl_removes(saver, thread)  # "live" and "deleted": not TTL's doing
        await chat(saver, "reborn", "a new start")  # before the handler got the record
        await chat(saver, "fresh", "a new start")
        live_keys = await keys_of(saver, "live")

        records = await stream_records(saver, arn)
        removes = [r for r in records if r["eventName"] == "REMOVE"]
        assert len(removes) == 5
        answer = await asyncio.to_thread(handler, {"Records": records})  # asyncio.run inside
        assert answer == {"batchItemFailures": []}

        assert await keys_of(saver, "old") == [] and await keys_of(saver, "nested") == []
        assert await keys_of(saver, "live") == live_keys  # a hand deletion is no sweep order
        # the new conversation on "reborn" keeps everything it stored, and only that
        assert len(await keys_of(saver, "reborn")) == len(await keys_of(saver, "fresh"))
        graph = chat_graph().compile(checkpointer=saver)
        ref = InMemorySaver()
        await chat(ref, "reborn", "a new start")
        assert await ahistory(graph, cfg("reborn")) == await ahistory(
            chat_graph().compile(checkpointer=ref), cfg("reborn")
        )
        # the nested thread's subgraph namespaces went with it ("live" lost its item by hand)
        assert {t.thread_id async for t in saver.alist_threads()} == {"reborn", "fresh"}

        # a record again (Lambda retries a batch): nothing left to do, no failure
        assert await ahandle(removes) == {"batchItemFailures": []}


async def test_the_handler_reports_failed_records_and_ignores_other_deployments(
    s3_fresh: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_fresh.url)
    names = unique_names()
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, thread_ttl_days=1, **names) as saver:
        await saver.setup()
        arn = await enable_stream(saver)
        cast(Manifest, saver.manifest).clock = lambda: time.time() - 3 * 86400
        await chat(saver, "t", CHAT_TURNS[0])
        await ttl_removes(saver, "t")
        (record,) = [r for r in await stream_records(saver, arn) if r["eventName"] == "REMOVE"]

        monkeypatch.setenv("LANGGRAPH_S3_BUCKET", "another-bucket")
        assert await ahandle([record]) == {"batchItemFailures": []}
        assert await keys_of(saver, "t") != []  # not this sweeper's deployment

        monkeypatch.delenv("LANGGRAPH_S3_BUCKET")
        broken = {**record, "eventSourceARN": arn.replace(names["table"], "no-such-table")}
        seq = record["dynamodb"]["SequenceNumber"]
        assert await ahandle([broken]) == {"batchItemFailures": [{"itemIdentifier": seq}]}
        assert await keys_of(saver, "t") != []

        no_image = {
            **record,
            "dynamodb": {k: v for k, v in record["dynamodb"].items() if k != "OldImage"},
        }
        assert await ahandle([no_image]) == {"batchItemFailures": []}
        assert await keys_of(saver, "t") != []

        monkeypatch.setenv("LANGGRAPH_S3_BUCKET", names["bucket"])
        monkeypatch.setenv("LANGGRAPH_S3_PREFIX", names.get("prefix", ""))
        assert await ahandle([record]) == {"batchItemFailures": []}
        assert await keys_of(saver, "t") == []
