"""The thread TTL sweeper as a DynamoDB Streams Lambda handler, fed the real stream
records moto's DynamoDB Streams gives for the removal of manifest items.

moto never runs TTL itself: the test removes expired items as DynamoDB's TTL would
(DeleteItem), then hands the stream's records to the handler, adding the
``eventSourceARN`` Lambda puts on each record.
"""

from __future__ import annotations

import asyncio
import io
import logging
import math
import time
from typing import Any, cast

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from helpers import cfg, chat, keys_of, nest, ttl_removes
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.checkpoint.transfer import aexport_threads
from langgraph_s3.errors import ServiceError
from langgraph_s3.manifest import Manifest
from langgraph_s3.manifest.decide import (
    LATE_SK,
)
from langgraph_s3.manifest.stage_items import (
    STAGE_MARK,
    STAGE_SK,
)
from langgraph_s3.ops.handlers.sweeper import ahandle, handler
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.graphs import CHAT_TURNS, ahistory, chat_graph


async def enable_stream(saver: AsyncS3Saver) -> str:
    ddb = await saver.clients.client("dynamodb")
    resp = await ddb.update_table(
        TableName=saver.target.table,
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "OLD_IMAGE"},
    )
    return str(resp["TableDescription"]["LatestStreamArn"])


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


@pytest.mark.usefixtures("writes_in_s3")  # held writes never land after a deletion
async def test_the_stream_handler_runs_a_deletions_late_pass(
    s3_fresh: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task's writes land after its thread's deletion (the task ended as the user
    deleted the thread); with no sweep running, the removal of the deletion's late-pass
    record by DynamoDB's TTL reaches the handler, which removes them."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_fresh.url)
    names = unique_names()
    async with (
        AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as writer,
        AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as admin,
    ):
        await writer.setup()
        arn = await enable_stream(writer)
        await chat(writer, "t", CHAT_TURNS[0])
        latest = await writer.aget_tuple(cfg("t"))
        assert latest is not None
        # deleted two days ago (by its clock): the late-pass record has expired since
        cast(Manifest, admin.manifest).clock = lambda: time.time() - 2 * 86400
        await admin.adelete_thread("t")
        cast(Manifest, admin.manifest).clock = time.time
        assert [k for k in await keys_of(admin, "t") if "/w/" in k] == []
        await writer.aput_writes(latest.config, [("messages", "the user's secret")], "task-1")
        late = [k for k in await keys_of(admin, "t") if "/w/" in k]
        assert len(late) == 1  # the deleted conversation's content, back in S3

        ddb = await admin.clients.client("dynamodb")
        (record,) = [
            i
            for i in (await ddb.scan(TableName=names["table"]))["Items"]
            if i["sk"]["S"] == LATE_SK
        ]
        await ddb.delete_item(TableName=names["table"], Key={k: record[k] for k in ("pk", "sk")})
        removes = [r for r in await stream_records(admin, arn) if r["eventName"] == "REMOVE"]
        assert len(removes) == 1
        assert await ahandle(removes) == {"batchItemFailures": []}
        assert [k for k in await keys_of(admin, "t") if "/w/" in k] == []


async def test_the_stream_handler_drops_an_import_that_died(
    s3_fresh: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import dies midway, its clean-up failing too (its process lost the network):
    what it committed is staged, never readable; with no sweep running, the removal
    of its claim by DynamoDB's TTL reaches the handler, which drops the stage and the
    objects it wrote; the id is free for the next import."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_fresh.url)
    names = unique_names()
    async with (
        AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as importer,
        AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as admin,
    ):
        await importer.setup()
        arn = await enable_stream(importer)
        source = InMemorySaver()
        await chat(source, "t", *CHAT_TURNS[:3])
        export = io.BytesIO()
        await aexport_threads(source, ["t"], export)
        puts, real_put = 0, importer.aput

        async def put(*args: Any) -> Any:
            nonlocal puts
            puts += 1
            if puts == 4:
                raise ServiceError("the network went away")
            return await real_put(*args)

        async def unstage(*args: Any, **kw: Any) -> Any:
            raise ServiceError("the network went away")

        importer.aput = put  # type: ignore[method-assign]
        importer.manifest.staging.unstage = unstage  # type: ignore[method-assign]
        # two days ago (by its clock): its claim's TTL (a day after its hold) has passed
        cast(Manifest, importer.manifest).clock = lambda: time.time() - 2 * 86400
        with pytest.raises(ServiceError):
            await importer.aimport(io.BytesIO(export.getvalue()))
        assert await admin.aget_tuple(cfg("t")) is None
        assert [t async for t in admin.alist_threads()] == []
        assert await keys_of(admin, "t") != []  # what it wrote, staged, no reader sees

        ddb = await admin.clients.client("dynamodb")
        items = (await ddb.scan(TableName=names["table"]))["Items"]
        staged = [i for i in items if STAGE_MARK in i["pk"]["S"]]
        (claim,) = [i for i in staged if i["sk"]["S"] == STAGE_SK]
        assert len(staged) >= 2  # the claim, and the items of what it committed
        await ddb.delete_item(TableName=names["table"], Key={k: claim[k] for k in ("pk", "sk")})
        removes = [r for r in await stream_records(admin, arn) if r["eventName"] == "REMOVE"]
        assert len(removes) == 1
        assert await ahandle(removes) == {"batchItemFailures": []}
        items = (await ddb.scan(TableName=names["table"]))["Items"]
        assert [i for i in items if STAGE_MARK in i["pk"]["S"]] == []
        assert await keys_of(admin, "t") == []

        await admin.aimport(io.BytesIO(export.getvalue()))
        graph = chat_graph().compile(checkpointer=admin)
        assert await ahistory(graph, cfg("t")) == await ahistory(
            chat_graph().compile(checkpointer=source), cfg("t")
        )


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


async def test_malformed_records_are_dropped_and_the_records_behind_them_still_swept(
    s3_fresh: MotoServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A record of a shape DynamoDB never sends is dropped with a warning naming it and
    why: never a batch item failure (Lambda would retry it until it aged out, blocking
    its shard), never an exception out of the handler; ``nan`` is no time. A real
    failure (an AWS error) is still reported, and a good record behind them is swept."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_fresh.url)
    names = unique_names()
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, thread_ttl_days=1, **names) as saver:
        await saver.setup()
        arn = await enable_stream(saver)
        cast(Manifest, saver.manifest).clock = lambda: time.time() - 3 * 86400
        await chat(saver, "t", CHAT_TURNS[0])
        await ttl_removes(saver, "t")
        (record,) = [r for r in await stream_records(saver, arn) if r["eventName"] == "REMOVE"]
        stored = await keys_of(saver, "t")
        assert stored
        change, old = record["dynamodb"], record["dynamodb"]["OldImage"]

        def image(n: int, **attributes: Any) -> dict[str, Any]:
            dynamodb = {**change, "SequenceNumber": f"{n:021}", "OldImage": {**old, **attributes}}
            return {**record, "eventID": f"bad-{n}", "dynamodb": dynamodb}

        def dynamodb(n: int, **fields: Any) -> dict[str, Any]:
            return {**record, "eventID": f"bad-{n}", "dynamodb": {**change, **fields}}

        malformed: list[tuple[Any, str]] = [  # (record, what the warning says)
            (image(1, expires_at={"N": "soon"}), "'expires_at' is 'soon', not a time"),
            (image(2, expires_at={"N": "nan"}), "'expires_at' is 'nan', not a time"),
            (image(3, expires_at={"N": "-inf"}), "'expires_at' is '-inf', not a time"),
            (image(4, expires_at="12"), "'expires_at' is 12, not a {\"N\": string}"),
            (image(5, pk="a/b/c"), "'pk' is a/b/c, not a {\"S\": string}"),
            (image(6, pk={"N": "1"}), "'pk' is {'N': '1'}"),
            (image(7, thread_id=["t"]), "'thread_id' is ['t']"),
            (dynamodb(8, OldImage=[old]), "its OldImage is a list, not an item"),
            (dynamodb(9, ApproximateCreationDateTime="now"), "ApproximateCreationDateTime"),
            (dynamodb(10, ApproximateCreationDateTime=math.nan), "ApproximateCreationDateTime"),
            ({**record, "eventID": "bad-11", "dynamodb": None}, '"dynamodb" is null'),
            ({**record, "eventID": "bad-12", "dynamodb": [change]}, '"dynamodb" is a list'),
            (
                {**record, "eventID": "bad-13", "dynamodb": {**change, "SequenceNumber": None}},
                "no SequenceNumber",
            ),
            ("a string", "#0 of the batch: a str, not an object"),
            (None, "#0 of the batch: a NoneType, not an object"),
        ]
        for bad, says in malformed:
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="langgraph_s3.ops.handlers.sweeper"):
                assert await ahandle([bad]) == {"batchItemFailures": []}, says
            (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
            text = warning.getMessage()
            assert "dropped stream record" in text and says in text, (says, text)
            if isinstance(bad, dict):
                assert f"eventID {bad['eventID']}" in text
                if isinstance(bad["dynamodb"], dict) and bad["dynamodb"]["SequenceNumber"]:
                    assert f"sequence number {bad['dynamodb']['SequenceNumber']}" in text
            assert await keys_of(saver, "t") == stored, says  # nan, -inf: not expired either

        for event in ({"Records": None}, {}, {"Records": {"a": 1}}, None):
            answer = await asyncio.to_thread(handler, event)  # type: ignore[arg-type]
            assert answer == {"batchItemFailures": []}

        # a real failure behind them is reported; the rest is not
        broken = {**record, "eventSourceARN": arn.replace(names["table"], "no-such-table")}
        batch = [*(bad for bad, _ in malformed), broken]
        assert await ahandle(batch) == {
            "batchItemFailures": [{"itemIdentifier": change["SequenceNumber"]}]
        }
        assert await keys_of(saver, "t") == stored
        # and the good record behind them all is swept
        answer = await asyncio.to_thread(handler, {"Records": [*batch[:-1], record]})
        assert answer == {"batchItemFailures": []}
        assert await keys_of(saver, "t") == []
