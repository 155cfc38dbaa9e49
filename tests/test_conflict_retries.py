"""S3's 409 ConditionalRequestConflict (another conditional write of the key in
progress) is sent again by ``objects.py``: callers never see one, a graph runs through
them, and one that never stops is resolved safely."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from helpers import cfg, side_by_side
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.aws.clients import ClientFactory
from langgraph_s3.aws.s3 import CONFLICT_RESENDS, ObjectStore
from langgraph_s3.core.put_mode import CREATE, Update
from langgraph_s3.errors import ConditionFailedError, ConflictError
from langgraph_s3.testing import MotoServer, Names
from langgraph_s3.testing.graphs import ahistory, chat_graph, norm, norm_snapshot


def md5(body: bytes) -> str:
    return f'"{hashlib.md5(body).hexdigest()}"'


@pytest.fixture
async def store(s3_fresh: MotoServer, names: Names) -> AsyncIterator[ObjectStore]:
    clients = ClientFactory(endpoint_url=s3_fresh.url)
    try:
        yield ObjectStore(clients, names["bucket"], concurrency=4, cache_bytes=0)
    finally:
        await clients.aclose()


def puts(log: list[Any]) -> int:
    return sum(1 for r in log if r.operation == "PUT")


async def test_a_409_is_sent_again_until_the_write_lands(
    s3_fresh: MotoServer, store: ObjectStore
) -> None:
    where = f"{store.bucket}/k"
    plan = s3_fresh.conflict_next(where, n=3)
    with s3_fresh.recording() as log:
        assert await store.put("k", b"1", mode=CREATE) == md5(b"1")
    assert plan.answered == 3 and puts(log) == 4
    s3_fresh.conflict_next(where, n=2)
    assert await store.put("k", b"2", mode=Update(md5(b"1"))) == md5(b"2")
    # a 409 then a stale condition: the condition failed, as before (None)
    s3_fresh.conflict_next(where, n=1)
    assert await store.put("k", b"3", mode=Update(md5(b"1"))) is None
    s3_fresh.conflict_next(where, n=1)
    assert await store.put("k", b"3", mode=CREATE) is None
    # conditional deletes too
    s3_fresh.conflict_next(where, n=2)
    assert await store.delete_if_match("k", md5(b"1")) is False
    s3_fresh.conflict_next(where, n=2)
    assert await store.delete_if_match("k", md5(b"2")) is True
    assert await store.get("k") is None


async def test_409s_that_do_not_stop_are_lost_conditions_or_a_conflict_error(
    s3_fresh: MotoServer, store: ObjectStore
) -> None:
    """After CONFLICT_RESENDS more sends: an If-Match write or delete is lost (the
    caller reads again, within its max_conflicts); an If-None-Match write is None only
    when the object is there, else a ConflictError (never a silent "it exists")."""
    sends = CONFLICT_RESENDS + 1
    plan = s3_fresh.conflict_next(f"{store.bucket}/k", n=1000)
    with pytest.raises(ConflictError, match=f"409 ConditionalRequestConflict {sends} times") as e:
        await store.put("k", b"1", mode=CREATE)
    assert not isinstance(e.value, ConditionFailedError)  # no condition was evaluated
    assert await store.get("k") is None
    assert await store.put("k", b"1", mode=Update(md5(b"0"))) is None
    assert await store.delete_if_match("k", md5(b"0")) is False
    assert await store.put("k", b"1") == md5(b"1")  # unconditional: no 409
    assert await store.put("k", b"2", mode=CREATE) is None  # it is there
    assert plan.answered == 4 * sends
    assert await store.get("k") == b"1"


async def test_a_missing_key_deleted_by_if_match_is_gone(store: ObjectStore) -> None:
    """S3 answers a conditional DELETE of a missing key 204 (as strict moto does): the
    version asked for is not there any more, True."""
    assert await store.delete_if_match("never", md5(b"x")) is True


async def chat_with_a_blob(saver: Any) -> Any:
    """A chat whose first message is over INLINE_MAX: the messages go in a blob object,
    written with If-None-Match before the checkpoint that names it."""
    graph = chat_graph().compile(checkpointer=saver)
    outs = []
    for text in ("x" * 300_000, "what is the weather in Oslo?", "thanks!"):
        outs.append(norm(await graph.ainvoke({"messages": [("user", text)]}, cfg())))
    return outs, norm_snapshot(await graph.aget_state(cfg())), await ahistory(graph, cfg())


async def test_a_graph_runs_through_409s_as_on_in_memory_saver(
    s3_fresh: MotoServer, names: Names
) -> None:
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as saver:
        # every conditional write, fewer than a PUT resends (its writes are held: the
        # blob's PUT may meet them all)
        plan = s3_fresh.conflict_next(f"{names['bucket']}/", n=CONFLICT_RESENDS)
        await side_by_side(chat_with_a_blob, saver)
        assert plan.answered == CONFLICT_RESENDS
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as fresh:  # nothing cached
        graph = chat_graph().compile(checkpointer=fresh)
        state = await graph.aget_state(cfg())
        assert state.values["messages"][0].content == "x" * 300_000
