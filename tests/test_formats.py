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
import re
from pathlib import Path
from typing import Any

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing import MotoServer
from langgraph_s3.testing.graphs import ahistory, chat_graph, delta_graph, nested_graph, norm

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
NAMES = {"bucket": "lgs3-fixture", "prefix": "v1", "table": "lgs3-fixture"}
THREADS = ("chat", "nested", "nested-done", "delta", "packed")


def graph_for(thread: str) -> Any:
    if thread.startswith("nested"):
        return nested_graph()
    if thread == "delta":
        return delta_graph(snapshot_every=3)
    return chat_graph()


def plain(value: Any) -> Any:
    """JSON's view of a normalized value (tuples become lists)."""
    return json.loads(json.dumps(norm(value), sort_keys=True, default=repr))


async def expected_of(saver: AsyncS3Saver, thread: str) -> dict[str, Any]:
    """Every checkpoint as the saver answers it, and the graph's history and state."""
    config: Any = {"configurable": {"thread_id": thread}}
    rows = []
    async for t in saver.alist(config):
        conf = t.config["configurable"]
        rows.append(
            {
                "ns": conf["checkpoint_ns"],
                "id": conf["checkpoint_id"],
                "parent": (t.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
                "checkpoint": plain(t.checkpoint),
                "metadata": plain(t.metadata),
                "writes": sorted(plain(list(w)) for w in t.pending_writes or ()),
            }
        )
    rows.sort(key=lambda r: (r["ns"], r["id"]))
    graph = graph_for(thread).compile(checkpointer=saver)
    state = await graph.aget_state(config, subgraphs=True)
    return {
        "checkpoints": rows,
        "history": plain(await ahistory(graph, config)),
        "state": plain([state.values, list(state.next)]),
    }


def versions_in(checkpoint: dict[str, Any]) -> list[str]:
    seen = [v for node in checkpoint.get("versions_seen", {}).values() for v in node.values()]
    return [*checkpoint.get("channel_versions", {}).values(), *seen]


VERSION = re.compile(r"^0*(\d+)(\.[0-9a-f.]+)$")


def unpadded(value: Any) -> Any:
    """Every channel version with its counter's zero padding removed."""
    if isinstance(value, dict):
        return {k: unpadded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unpadded(v) for v in value]
    if isinstance(value, str) and (m := VERSION.match(value)) and len(value) > 20:
        return m.group(1) + m.group(2)
    return value


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
