"""Format fixtures: a deployment and an export written by langgraph-s3 on 2026-12-01
(checkpoint and writes envelopes, zstd dictionary frames, runs, DeltaChannel logs,
a pack, manifest items, the export format), committed under tests/fixtures/formats/
and read by today's code. An archive written then must read the same for years:
a change that breaks one of these breaks the compatibility promise in the README.
"""

from __future__ import annotations

import base64
import gzip
import json

from format_spec import FIXTURES, NAMES, THREADS, expected_of, unpadded, versions_in
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing import MotoServer
from langgraph_s3.testing.graphs import chat_graph


async def restore(saver: AsyncS3Saver) -> None:
    """The fixture deployment's objects and manifest items, as they were stored."""
    dump = json.loads(gzip.decompress((FIXTURES / "deployment-v1.json.gz").read_bytes()))
    s3 = await saver.clients.client("s3")
    ddb = await saver.clients.client("dynamodb")
    for key, body in dump["objects"].items():
        await s3.put_object(Bucket=NAMES["bucket"], Key=key, Body=base64.b64decode(body))
    for item in dump["items"]:
        await ddb.put_item(TableName=NAMES["table"], Item=item)


async def test_a_deployment_written_in_format_v1_reads_the_same(s3_fresh: MotoServer) -> None:
    expected = json.loads((FIXTURES / "expected-v1.json").read_text())
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **NAMES) as saver:
        await saver.setup()
        await restore(saver)
        packs = await saver.raw_objects.list_all("v1/packs/")
        assert len(packs) == 1  # the packed thread is read from its pack
        for thread in THREADS:
            assert await expected_of(saver, thread) == expected[thread], thread
        # and it goes on: a new turn on the old chat, as on a thread of today
        graph = chat_graph().compile(checkpointer=saver)
        out = await graph.ainvoke(
            {"messages": [("user", "still there?")]}, {"configurable": {"thread_id": "chat"}}
        )
        assert len(out["messages"]) == len(expected["chat"]["state"][0]["messages"]) + 2


async def test_an_export_written_in_format_v1_imports_the_same(s3_fresh: MotoServer) -> None:
    expected = json.loads((FIXTURES / "expected-v1.json").read_text())
    async with AsyncS3Saver(
        endpoint_url=s3_fresh.url, bucket="lgs3-import", prefix="v1", table="lgs3-import"
    ) as saver:
        await saver.setup()
        report = await saver.aimport(FIXTURES / "export-v1.jsonl.gz")
        assert report.threads == len(THREADS)
        for thread in THREADS:
            got = await expected_of(saver, thread)
            # import writes versions in the saver's own form (32 digits since 0.1, as
            # LangGraph pads them; the export holds 12): the same versions otherwise
            padded = {v for row in got["checkpoints"] for v in versions_in(row["checkpoint"])}
            assert padded and all(len(v.split(".")[0]) == 32 for v in padded)
            assert unpadded(got) == unpadded(expected[thread]), thread
