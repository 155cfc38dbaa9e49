"""Two writers on one thread, multi-MB state, and Lambda-style event loop reuse."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata

from helpers import IN_BUCKET, cfg, names_of, same_deployment
from langgraph_s3 import AsyncS3Saver, S3Saver
from langgraph_s3.testing.graphs import CHAT_TURNS, chat_graph

pytestmark = pytest.mark.engines  # also on SeaweedFS and ministack (conftest)


@pytest.fixture
def s3_saver(saver_of_kind: AsyncS3Saver) -> AsyncS3Saver:
    """On both manifests: a DynamoDB table, and the bucket alone."""
    return saver_of_kind


async def test_two_writers_on_one_thread_lose_nothing(endpoint: str, manifest_kind: str) -> None:
    names = names_of(manifest_kind)
    async with (
        AsyncS3Saver(endpoint_url=endpoint, **names) as a,
        AsyncS3Saver(endpoint_url=endpoint, **names) as b,
    ):
        await a.setup()

        async def writer(saver: AsyncS3Saver, who: str) -> list[str]:
            parent: str | None = None
            written = []
            for i in range(25):
                cp = generate_checkpoint(
                    channel_values={"who": who, "i": i},
                    channel_versions={"who": f"{who}{i}", "i": f"{who}{i}"},
                )
                out = await saver.aput(
                    cfg("shared", parent),
                    cp,
                    generate_metadata(step=i, writer=who),
                    {"who": f"{who}{i}", "i": f"{who}{i}"},
                )
                await saver.aput_writes(out, [("note", f"{who}-{i}")], f"task-{who}")
                parent = out["configurable"]["checkpoint_id"]
                written.append(parent)
            return written

        ids_a, ids_b = await asyncio.gather(writer(a, "A"), writer(b, "B"))
        everything = set(ids_a) | set(ids_b)
        assert len(everything) == 50
        for saver, ids, who in ((a, ids_a, "A"), (b, ids_b, "B")):
            for i, cid in enumerate(ids):
                tup = await saver.aget_tuple(cfg("shared", cid))
                assert tup is not None
                assert tup.checkpoint["channel_values"] == {"who": who, "i": i}
                assert [w[2] for w in tup.pending_writes or []] == [f"{who}-{i}"]
        latest = await a.aget_tuple({"configurable": {"thread_id": "shared"}})
        assert latest is not None and latest.checkpoint["id"] == max(everything)
        listed = [t.checkpoint["id"] async for t in b.alist(cfg("shared"))]
        assert listed == sorted(everything, reverse=True)


async def test_the_older_of_two_first_writers_committing_last_is_kept(
    endpoint: str,
    manifest_kind: str,
) -> None:
    """Two Lambdas start one new thread; the one that made its first checkpoint
    earlier commits it last (the race the two-writers test hits by chance)."""
    names = names_of(manifest_kind)
    async with (
        AsyncS3Saver(endpoint_url=endpoint, **names) as a,
        AsyncS3Saver(endpoint_url=endpoint, **names) as b,
    ):
        await a.setup()
        first_a = generate_checkpoint(channel_values={"who": "A"}, channel_versions={"who": 1})
        first_b = generate_checkpoint(channel_values={"who": "B"}, channel_versions={"who": 2})
        first_a["id"], first_b["id"] = sorted((first_a["id"], first_b["id"]))
        conf_b = await b.aput(cfg("new"), first_b, generate_metadata(step=-1), {"who": 2})
        conf_a = await a.aput(cfg("new"), first_a, generate_metadata(step=-1), {"who": 1})
        next_a = generate_checkpoint(channel_values={"who": "A2"}, channel_versions={"who": 3})
        conf_a2 = await a.aput(conf_a, next_a, generate_metadata(step=0), {"who": 3})
        listed = {t.checkpoint["id"]: t async for t in b.alist(cfg("new"))}
        assert set(listed) == {first_a["id"], first_b["id"], next_a["id"]}
        parent = listed[next_a["id"]].parent_config
        assert parent is not None and parent["configurable"]["checkpoint_id"] == first_a["id"]
        for conf, who in ((conf_a, "A"), (conf_b, "B"), (conf_a2, "A2")):
            got = await b.aget_tuple(conf)
            assert got is not None and got.checkpoint["channel_values"] == {"who": who}


async def test_two_lambdas_run_graphs_on_one_thread(endpoint: str, manifest_kind: str) -> None:
    names = names_of(manifest_kind)
    async with (
        AsyncS3Saver(endpoint_url=endpoint, **names) as a,
        AsyncS3Saver(endpoint_url=endpoint, **names) as b,
    ):
        await a.setup()
        ga, gb = chat_graph().compile(checkpointer=a), chat_graph().compile(checkpointer=b)
        await asyncio.gather(
            ga.ainvoke({"messages": [("user", "from A")]}, cfg("t")),
            gb.ainvoke({"messages": [("user", "from B")]}, cfg("t")),
        )
        every = [t async for t in a.alist(cfg("t"))]
        ids = [t.checkpoint["id"] for t in every]
        assert ids == sorted(ids, reverse=True) and len(ids) == 6
        for t in every:
            assert await b.aget_tuple(t.config) is not None
        latest = await b.aget_tuple({"configurable": {"thread_id": "t"}})
        assert latest is not None and latest.checkpoint["id"] == ids[0]


async def test_several_megabytes_of_state_round_trip(s3_saver: AsyncS3Saver) -> None:
    big = {"blob": os.urandom(6 * 1024 * 1024), "text": "x" * (2 * 1024 * 1024)}
    cp = generate_checkpoint(channel_values={"big": big}, channel_versions={"big": 1})
    stored = await s3_saver.aput(cfg("big"), cp, generate_metadata(), {"big": 1})
    await s3_saver.aput_writes(stored, [("big", big)], "task")
    async with AsyncS3Saver(
        endpoint_url=s3_saver.clients.endpoint_url,
        cache_bytes=0,
        **same_deployment(s3_saver),
    ) as fresh:
        tup = await fresh.aget_tuple(cfg("big"))
    assert tup is not None
    assert tup.checkpoint["channel_values"]["big"] == big
    assert tup.pending_writes is not None and tup.pending_writes[0][2] == big


# ---------------------------------------------------------------- Lambda
def test_saver_built_outside_a_loop_survives_many_asyncio_runs(
    endpoint: str, manifest_kind: str
) -> None:
    """A warm Lambda: module-scope saver, a new event loop per invocation."""
    saver = AsyncS3Saver(endpoint_url=endpoint, **names_of(manifest_kind))  # no loop here
    graph = chat_graph().compile(checkpointer=saver)

    async def invocation(text: str) -> Any:
        return await graph.ainvoke({"messages": [("user", text)]}, cfg("warm"))

    asyncio.run(saver.setup())
    outs = [asyncio.run(invocation(t)) for t in CHAT_TURNS]
    assert len(outs[-1]["messages"]) == 2 * len(CHAT_TURNS) + 2
    # two clients (S3, DynamoDB) per event loop, none per request; S3's alone on objects
    per_loop = 1 if manifest_kind in IN_BUCKET else 2
    assert saver.clients.created == per_loop * (1 + len(CHAT_TURNS))
    asyncio.run(saver.aclose())


def test_sync_saver_reuses_its_clients_across_invocations(
    endpoint: str, manifest_kind: str
) -> None:
    with S3Saver(endpoint_url=endpoint, **names_of(manifest_kind)) as saver:
        saver.setup()
        graph = chat_graph().compile(checkpointer=saver)
        for t in CHAT_TURNS:
            graph.invoke({"messages": [("user", t)]}, cfg("sync"))
        # one background loop, one client pair (one client: the manifest in the bucket)
        assert saver.clients.created == (1 if manifest_kind in IN_BUCKET else 2)
        state = graph.get_state(cfg("sync"))
        assert len(state.values["messages"]) == 2 * len(CHAT_TURNS) + 2


async def test_checkpoint_ids_are_the_ones_langgraph_gave(s3_saver: AsyncS3Saver) -> None:
    cid = str(uuid6())
    cp = generate_checkpoint(checkpoint_id=cid)
    out = await s3_saver.aput(cfg("ids"), cp, generate_metadata(), {})
    assert out["configurable"]["checkpoint_id"] == cid
