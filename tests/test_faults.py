"""Transient faults never reach the graph and never corrupt a thread."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from faults import FaultPlan, fault_proxy
from helpers import cfg, names_of
from langgraph_s3 import AsyncS3Saver, S3Saver
from langgraph_s3.errors import EndpointUnreachableError, ServiceError
from langgraph_s3.testing import MotoServer, Names, unique_names
from langgraph_s3.testing.graphs import CHAT_TURNS, chat_graph, history, norm

pytestmark = pytest.mark.engines  # also on SeaweedFS and ministack (conftest)


async def run_chat(saver: Any) -> Any:
    graph = chat_graph().compile(checkpointer=saver)
    outs = [norm(await graph.ainvoke({"messages": [("user", t)]}, cfg("f"))) for t in CHAT_TURNS]
    hist = [
        (norm(s.values), s.next, s.metadata.get("step") if s.metadata else None)
        async for s in graph.aget_state_history(cfg("f"))
    ]
    return outs, hist


async def test_graph_through_a_faulty_network_matches_in_memory(
    endpoint: str, manifest_kind: str
) -> None:
    names = names_of(manifest_kind)
    async with AsyncS3Saver(endpoint_url=endpoint, **names) as made:
        await made.setup()
    # the ambiguous cases are guaranteed (a manifest write's answer lost: an UpdateItem's,
    # or a version's create-only PUT); the rest of the rotation adds more of each kind
    manifest_write = "lost:UpdateItem" if manifest_kind == "dynamodb" else None
    must = ["lost:PutObject-if-none-match", "truncate:GET-s3"]
    plan = FaultPlan(every=3, must=(*must, *([manifest_write] if manifest_write else [])))
    with fault_proxy(endpoint, plan) as url:
        async with AsyncS3Saver(endpoint_url=url, cache_bytes=0, **names) as saver:
            actual = await run_chat(saver)
    assert actual == await run_chat(InMemorySaver())
    # every kind of fault happened, including the ambiguous ones
    for kind in ("503", "lost", "truncate", "reset"):
        assert plan.injected[kind] > 0, plan.injected
    assert plan.injected["lost:PutObject-if-none-match"] > 0, plan.injected
    if manifest_write:
        assert plan.injected[manifest_write] > 0, plan.injected
    # and the thread read back without the proxy is whole
    async with AsyncS3Saver(endpoint_url=endpoint, cache_bytes=0, **names) as clean:
        assert await run_history(clean) == actual[1]


async def run_history(saver: Any) -> Any:
    graph = chat_graph().compile(checkpointer=saver)
    return [
        (norm(s.values), s.next, s.metadata.get("step") if s.metadata else None)
        async for s in graph.aget_state_history(cfg("f"))
    ]


def test_sync_graph_through_faults(endpoint: str, manifest_kind: str) -> None:
    names = names_of(manifest_kind)
    plan = FaultPlan(every=4)
    with fault_proxy(endpoint, plan) as url, S3Saver(endpoint_url=url, **names) as saver:
        saver.setup()
        graph = chat_graph().compile(checkpointer=saver)
        for t in CHAT_TURNS[:3]:
            graph.invoke({"messages": [("user", t)]}, cfg("s"))
        got = history(graph, cfg("s"))
    memory_graph = chat_graph().compile(checkpointer=InMemorySaver())
    for t in CHAT_TURNS[:3]:
        memory_graph.invoke({"messages": [("user", t)]}, cfg("s"))
    assert got == history(memory_graph, cfg("s"))
    # every 4th request got a fault (the rotation passes a truncation on to the next
    # kind when the request is a write), and each kind that any request takes came up
    kinds = ("503", "lost", "truncate", "reset")
    assert sum(plan.injected[k] for k in kinds) == plan.seen // plan.every, plan.injected
    assert all(plan.injected[k] > 0 for k in ("503", "lost", "reset")), plan.injected


async def test_failed_put_removes_its_checkpoint_but_a_replay_never_removes_a_stored_one(
    s3_fresh: MotoServer,
) -> None:
    from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata

    names = unique_names()
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as direct:
        await direct.setup()
        conf = {"configurable": {"thread_id": "p", "checkpoint_ns": ""}}
        good = generate_checkpoint(channel_values={"a": 1}, channel_versions={"a": 1})
        stored = await direct.aput(conf, good, generate_metadata(), {"a": 1})
    # every request fails for good (5xx on every attempt): the put must fail...
    plan = FaultPlan(every=1, cycle=("503",))
    with fault_proxy(s3_fresh.url, plan) as url:
        async with AsyncS3Saver(endpoint_url=url, max_attempts=1, **names) as flaky:
            fresh = generate_checkpoint(channel_values={"a": 2}, channel_versions={"a": 2})
            with pytest.raises(ServiceError, match="SlowDown"):
                await flaky.aput(conf, fresh, generate_metadata(), {"a": 2})
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, cache_bytes=0, **names) as reader:
        assert (
            await reader.aget_tuple(
                {"configurable": {**conf["configurable"], "checkpoint_id": fresh["id"]}}
            )
            is None
        )
        # ...and a replay of the stored checkpoint whose upload fails keeps it
        ok = FaultPlan(every=10**9)
        with fault_proxy(s3_fresh.url, ok) as url:
            async with AsyncS3Saver(endpoint_url=url, max_attempts=1, **names) as replay:
                s3 = await replay.clients.client("s3")

                def fail_uploads(request: Any, **kw: Any) -> None:
                    if "/c/" in request.url:
                        raise ConnectionResetError("checkpoint upload fails")

                s3.meta.events.register("before-send.s3.PutObject", fail_uploads)
                with pytest.raises(EndpointUnreachableError, match="checkpoint upload fails"):
                    await replay.aput(conf, good, generate_metadata(), {"a": 1})
        tup = await reader.aget_tuple(stored)
        assert tup is not None and tup.checkpoint["channel_values"] == {"a": 1}


@pytest.mark.parametrize("fault", ["503", "reset", "lost"])
async def test_a_large_body_is_sent_again_whole_after_a_fault(
    s3_fresh: MotoServer, names: Names, fault: str
) -> None:
    """A body over 1 MiB goes out through a reader of the bytes in place (aws.Upload):
    botocore's retry must seek it back and send all of it again."""
    from langgraph.checkpoint.base import empty_checkpoint

    value = "".join(f"{i:07d}" for i in range(300_000))  # 2.1 MB, every byte in place
    plan = FaultPlan(every=1_000_000, must=(f"{fault}:PutObject-if-none-match",))
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as clean:
        first = await clean.aput(cfg("big"), empty_checkpoint(), {"step": -1}, {})
    with fault_proxy(s3_fresh.url, plan) as url:
        async with AsyncS3Saver(endpoint_url=url, cache_bytes=0, **names) as saver:
            cp = empty_checkpoint()
            cp["channel_values"] = {"big": value}
            cp["channel_versions"] = {"big": 1}
            await saver.aput(first, cp, {"step": 0}, {"big": 1})
    assert plan.injected[f"{fault}:PutObject-if-none-match"] == 1, plan.injected
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, cache_bytes=0, **names) as clean:
        tup = await clean.aget_tuple(cfg("big"))
    assert tup is not None and tup.checkpoint["channel_values"]["big"] == value
