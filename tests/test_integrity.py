"""Integrity: tenants kept apart, no phantom or resurrected checkpoints, maintenance that
never races a writer into data loss, corruption named and never served."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata
from langgraph.checkpoint.memory import InMemorySaver

from helpers import cfg, until_stored, value_holders
from langgraph_s3 import (
    AsyncS3Saver,
    CheckpointConflictError,
    ConfigurationError,
    CorruptObjectError,
)
from langgraph_s3.core.keys import encode
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.graphs import CHAT_TURNS, ahistory, chat_graph, delta_graph, norm


async def turn(saver: AsyncS3Saver | InMemorySaver, thread: str, text: str) -> None:
    await (
        chat_graph()
        .compile(checkpointer=saver)
        .ainvoke({"messages": [("user", text)]}, cfg(thread))
    )


async def messages(saver: AsyncS3Saver | InMemorySaver, thread: str) -> list[Any]:
    state = await chat_graph().compile(checkpointer=saver).aget_state(cfg(thread))
    return list(norm(state.values.get("messages", [])))


def uncached(saver: AsyncS3Saver) -> AsyncS3Saver:
    """Another saver on the same deployment that reads S3 itself (no object cache)."""
    t = saver.target
    return AsyncS3Saver(
        endpoint_url=saver.clients.endpoint_url,
        bucket=t.bucket,
        prefix=t.prefix,
        table=t.table,
        cache_bytes=0,
    )


async def count_objects(saver: AsyncS3Saver, prefix: str = "") -> int:
    return len(await saver.objects.list_all(saver.layout.root + prefix))


def entry_key(saver: AsyncS3Saver, thread: str, ns: str = "") -> dict[str, Any]:
    """The DynamoDB key of a thread's manifest item, as :class:`Manifest` lays it out:
    ``pk`` = the deployment, then the encoded thread id; ``sk`` = the encoded namespace."""
    return {"pk": {"S": saver.manifest.deployment + encode(thread)}, "sk": {"S": encode(ns)}}


# ------------------------------------------------------------------ tenancy
@pytest.mark.parametrize("split", ["prefix", "bucket"])
async def test_deployments_sharing_one_table_never_touch_each_other(
    s3_fresh: MotoServer, split: str
) -> None:
    """Two savers that differ only by prefix, or only by bucket, share one table and
    run the same thread ids: each keeps its own history through delete, prune, copy."""
    names = unique_names()
    a_kw: dict[str, Any] = {"bucket": names["bucket"], "table": names["table"]}
    b_kw = dict(a_kw)
    if split == "prefix":
        a_kw["prefix"], b_kw["prefix"] = "tenant-a", "tenant-b"
    else:
        b_kw["bucket"] = names["bucket"] + "-b"
    async with (
        AsyncS3Saver(endpoint_url=s3_fresh.url, **a_kw) as a,
        AsyncS3Saver(endpoint_url=s3_fresh.url, **b_kw) as b,
    ):
        await a.setup()
        await b.setup()
        for saver, who in ((a, "A"), (b, "B")):
            for thread in ("user-1", "user-2", "user-3"):
                for text in CHAT_TURNS[:2]:
                    await turn(saver, thread, f"{who} {text}")
        ref = InMemorySaver()
        for text in CHAT_TURNS[:2]:
            await turn(ref, "x", f"B {text}")
        b_before = {
            t: await ahistory(chat_graph().compile(checkpointer=b), cfg(t))
            for t in ("user-1", "user-2", "user-3")
        }
        b_objects = await count_objects(b)

        await a.adelete_thread("user-1")
        await a.aprune(["user-2"])
        await a.acopy_thread("user-3", "user-1")
        await turn(a, "user-3", "A again")

        for thread, hist in b_before.items():
            assert await ahistory(chat_graph().compile(checkpointer=b), cfg(thread)) == hist
            assert await messages(b, thread) == await messages(ref, "x")
        assert await count_objects(b) == b_objects
        listed = [t.config["configurable"]["thread_id"] async for t in b.alist(None)]
        assert sorted(set(listed)) == ["user-1", "user-2", "user-3"]
        for thread in ("user-1", "user-2", "user-3"):
            assert all("A " not in str(m) for m in await messages(b, thread))
        # A's own view followed its own operations, untouched by B's data
        assert len([t async for t in a.alist(cfg("user-2"))]) == 1  # pruned to the latest
        assert await messages(a, "user-1") == (await messages(a, "user-3"))[:-2]


def test_blank_table_is_an_error() -> None:
    with pytest.raises(ConfigurationError, match="table"):
        AsyncS3Saver(bucket="some-bucket", table="")
    with pytest.raises(ConfigurationError, match="table"):
        AsyncS3Saver.from_url("s3://some-bucket/p?table=")


async def test_setup_adopts_entries_of_the_legacy_layout(s3_fresh: MotoServer) -> None:
    """0.1 keyed entries by thread alone: setup() gives them this deployment's key when
    their latest checkpoint lies in this deployment, and leaves the others alone."""
    names = unique_names()
    async with (
        AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as mine,
        AsyncS3Saver(endpoint_url=s3_fresh.url, **names, prefix="other") as other,
    ):
        await mine.setup()
        await turn(mine, "old", "hello there")
        entry = await mine.manifest.reads.latest("old", "")
        assert entry is not None
        ddb = await mine.clients.client("dynamodb")
        # rewrite the entry as 0.1 stored it, and forget that this deployment migrated
        await ddb.delete_item(TableName=names["table"], Key=entry_key(mine, "old"))
        await ddb.delete_item(
            TableName=names["table"],
            Key={"pk": {"S": mine.manifest.deployment}, "sk": {"S": "~layout"}},
        )
        legacy = {
            "pk": {"S": encode("old")},
            "sk": {"S": encode("")},
            "thread_id": {"S": "old"},
            "checkpoint_ns": {"S": ""},
            "latest_id": {"S": entry.latest_id},
            "latest_tail": {"S": entry.latest_tail},
        }
        await ddb.put_item(TableName=names["table"], Item=legacy)
        assert await mine.aget_tuple(cfg("old")) is None  # not yet migrated
        await other.setup()  # another deployment does not hold that checkpoint
        assert await other.aget_tuple(cfg("old")) is None
        await mine.setup()
        tup = await mine.aget_tuple(cfg("old"))
        assert tup is not None and tup.config["configurable"]["checkpoint_id"] == entry.latest_id
        assert len(await messages(mine, "old")) == 2
        calls = mine.stats.snapshot()["requests"]
        await mine.setup()  # migrated once: setup reads the marker and stops
        assert mine.stats.snapshot()["requests"] - calls == 3  # HeadBucket, Describe, Get


# --------------------------------------------------------- phantoms and reuse
async def test_objects_without_a_manifest_commit_are_not_history(s3_saver: AsyncS3Saver) -> None:
    """A writer that crashed after storing a checkpoint but before the manifest moved
    left a phantom: no reader sees it, and the next turn adds no duplicate step."""
    await turn(s3_saver, "t", "hello there")
    before = await ahistory(chat_graph().compile(checkpointer=s3_saver), cfg("t"))
    latest = await s3_saver.aget_tuple(cfg("t"))
    assert latest is not None
    cp = generate_checkpoint(channel_values={"x": 1}, channel_versions={"x": "9"})
    nsp = s3_saver.layout.namespace("t", "")
    key = nsp.checkpoint(cp["id"], latest.config["configurable"]["checkpoint_id"], None)
    real_advance = s3_saver.manifest.commits.advance

    async def crash(*args: Any, **kwargs: Any) -> None:
        await until_stored(s3_saver, args)  # the object lands...
        raise KeyboardInterrupt  # ...and the process dies before its manifest update

    s3_saver.manifest.commits.advance = crash  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        await s3_saver.aput(latest.config, cp, generate_metadata(step=99), {"x": "9"})
    s3_saver.manifest.commits.advance = real_advance  # type: ignore[method-assign]
    assert await s3_saver.objects.get(key) is not None  # the phantom is stored
    assert await ahistory(chat_graph().compile(checkpointer=s3_saver), cfg("t")) == before
    assert await s3_saver.aget_tuple(cfg("t", cp["id"])) is None
    assert [t async for t in s3_saver.alist(cfg("t"), filter={"step": 99})] == []
    await turn(s3_saver, "t", "thanks!")
    ref = InMemorySaver()
    for text in ("hello there", "thanks!"):
        await turn(ref, "t", text)
    assert await ahistory(chat_graph().compile(checkpointer=s3_saver), cfg("t")) == await ahistory(
        chat_graph().compile(checkpointer=ref), cfg("t")
    )


async def test_a_deleted_thread_stays_deleted_when_its_id_is_reused(s3_saver: AsyncS3Saver) -> None:
    """delete_thread hides the thread before removing objects: when the removal fails,
    reusing the id starts clean and none of the old conversation comes back."""
    for text in CHAT_TURNS[:3]:
        await turn(s3_saver, "t", text)
    await s3_saver.aflush()  # the turns' objects landed (held ones are PUT off their path)
    stored = await count_objects(s3_saver, "threads/")
    real_delete = s3_saver.raw_objects.delete

    async def fail(keys: Any) -> int:
        raise ConnectionError("S3 went away mid-delete")

    s3_saver.raw_objects.delete = fail  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        await s3_saver.adelete_thread("t")
    s3_saver.raw_objects.delete = real_delete  # type: ignore[method-assign]
    assert await count_objects(s3_saver, "threads/") == stored  # every object is still there
    assert await s3_saver.aget_tuple(cfg("t")) is None
    assert [t async for t in s3_saver.alist(cfg("t"))] == []
    # the failed deletion's lease blocks a new life briefly; let it lapse
    await _expire_lease(s3_saver, "t")
    await turn(s3_saver, "t", "a new start")
    ref = InMemorySaver()
    await turn(ref, "t", "a new start")
    graph = chat_graph().compile(checkpointer=s3_saver)
    assert await ahistory(graph, cfg("t")) == await ahistory(
        chat_graph().compile(checkpointer=ref), cfg("t")
    )


async def test_an_expired_thread_is_gone_for_every_reader(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, thread_ttl_days=30, **names) as saver:
        await saver.setup()
        for text in CHAT_TURNS[:2]:
            await turn(saver, "t", text)
        old = [t.config["configurable"]["checkpoint_id"] async for t in saver.alist(cfg("t"))]
        ddb = await saver.clients.client("dynamodb")
        await ddb.update_item(  # what time does: DynamoDB deletes expired items lazily
            TableName=names["table"],
            Key=entry_key(saver, "t"),
            UpdateExpression="SET expires_at = :past",
            ExpressionAttributeValues={":past": {"N": "1000"}},
        )
        assert await saver.aget_tuple(cfg("t")) is None
        assert await saver.aget_tuple(cfg("t", old[0])) is None
        assert [t async for t in saver.alist(cfg("t"))] == []
        assert [t async for t in saver.alist(None)] == []
        await turn(saver, "t", "fresh")
        now = [t.config["configurable"]["checkpoint_id"] async for t in saver.alist(cfg("t"))]
        assert not set(now) & set(old) and len(now) == 3
        assert await messages(saver, "t") == [
            ("human", "fresh", []),
            ("ai", "reply #1 to 'fresh'", []),
        ]


async def _expire_lease(saver: AsyncS3Saver, thread: str) -> None:
    ddb = await saver.clients.client("dynamodb")
    await ddb.update_item(
        TableName=saver.manifest.table,
        Key=entry_key(saver, thread),
        UpdateExpression="SET lease_until = :zero",
        ExpressionAttributeValues={":zero": {"N": "0"}},
    )


# ----------------------------------------------- maintenance racing a writer
class Interleaver:
    """Runs ``action`` before the k-th call a maintenance operation makes to the
    saver's object store or manifest: a deterministic await point, no sleep."""

    METHODS = {
        # the store under the pack layer: every request of a call, whichever way it goes
        "raw_objects": (
            "list_all",
            "list_pages",
            "get",
            "get_with_etag",
            "get_many",
            "delete",
            "copy",
        ),
        "manifest.reads": ("latest", "namespaces"),
        "manifest.upkeep": ("raise_floor", "replace", "merge"),
        "manifest.deletions": ("tombstone", "release"),
    }

    def __init__(self, saver: AsyncS3Saver, k: int, action: Callable[[], Awaitable[None]]) -> None:
        self.saver, self.k, self.action, self.calls, self.fired = saver, k, action, 0, False
        for part, names in self.METHODS.items():
            target: Any = saver
            for step in part.split("."):
                target = getattr(target, step)
            for name in names:
                setattr(target, name, self._wrap(getattr(target, name)))

    def _wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        if getattr(fn, "__name__", "") == "list_pages":

            async def pages(*args: Any, **kwargs: Any) -> Any:
                await self._point()
                async for page in fn(*args, **kwargs):
                    yield page

            return pages

        async def call(*args: Any, **kwargs: Any) -> Any:
            await self._point()
            return await fn(*args, **kwargs)

        return call

    async def _point(self) -> None:
        self.calls += 1
        if self.calls == self.k and not self.fired:
            self.fired = True
            await self.action()


async def test_prune_never_loses_a_turn_run_at_any_of_its_await_points(
    s3_fresh: MotoServer,
) -> None:
    ref = InMemorySaver()  # what the thread holds after both turns, whatever k
    for text in [CHAT_TURNS[0], "thanks!"]:
        await turn(ref, "r", text)
    expected = await messages(ref, "r")
    names = unique_names()
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as writer:
        await writer.setup()
        points = 0
        for k in range(1, 40):
            thread = f"t{k}"
            await turn(writer, thread, CHAT_TURNS[0])
            async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as pruner:
                hook = Interleaver(pruner, k, lambda t=thread: turn(writer, t, "thanks!"))
                await pruner.aprune([thread])
                if not hook.fired:
                    break
                points += 1
            async with uncached(writer) as reader:  # S3 as it is, not the writer's cache
                assert await messages(reader, thread) == expected, k
                # the history that is left reads without error, and the thread goes on
                assert [t async for t in reader.alist(cfg(thread))]
                await turn(reader, thread, "one more")
                assert len(await messages(reader, thread)) == len(expected) + 2
        assert points >= 5
        print(f"prune: a whole turn interleaved at {points} await points, none lost")


async def test_delete_racing_a_new_conversation_never_removes_it(s3_fresh: MotoServer) -> None:
    """A turn started at any await point of delete_thread: before the tombstone it is
    deleted with the thread; after it, it is a new conversation that stays whole."""
    names = unique_names()
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as writer:
        await writer.setup()
        outcomes: list[str] = []
        for k in range(1, 20):
            thread = f"d{k}"
            await turn(writer, thread, CHAT_TURNS[0])
            started: list[asyncio.Task[None]] = []

            async def start(thread: str = thread, started: list[Any] = started) -> None:
                task = asyncio.create_task(turn(writer, thread, "a new start"))
                started.append(task)
                # let it run until it completes or waits for the deletion to finish
                for _ in range(200):
                    if task.done():
                        return
                    await asyncio.sleep(0.01)

            async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as deleter:
                hook = Interleaver(deleter, k, start)
                await deleter.adelete_thread(thread)
                if not hook.fired:
                    break
            # a turn begun before the tombstone may be refused (its writes or its next
            # put: the thread was deleted while it ran); one begun after it is whole
            ended = await asyncio.gather(*started, return_exceptions=True)
            assert all(e is None or isinstance(e, CheckpointConflictError) for e in ended), ended
            async with uncached(writer) as reader:
                got = await messages(reader, thread)
                if got:
                    assert got == [
                        ("human", "a new start", []),
                        ("ai", "reply #1 to 'a new start'", []),
                    ]
                    hist = await ahistory(chat_graph().compile(checkpointer=reader), cfg(thread))
                    assert len(hist) == 3  # the new conversation alone, nothing of the old one
                    outcomes.append("new")
                else:
                    assert [t async for t in reader.alist(cfg(thread))] == []
                    outcomes.append("deleted")
        # the tombstone is the first step: a turn before it is deleted with the thread,
        # a turn at any later point is a new conversation, whole
        assert outcomes == ["deleted"] + ["new"] * (len(outcomes) - 1) and len(outcomes) >= 4
        print(f"delete: a turn started at {len(outcomes)} await points: {outcomes}")


# ------------------------------------------------------------------ corruption
async def test_a_missing_value_holder_is_named_never_a_shorter_state(
    s3_saver: AsyncS3Saver,
) -> None:
    """The older checkpoint holding the first messages (a run the latest's state is
    made of) is gone: every read that needs it names it."""
    for text in CHAT_TURNS[:2]:
        await turn(s3_saver, "t", text)
    blob = (await value_holders(s3_saver, "t", "messages"))[0]
    await s3_saver.objects.delete([blob])
    async with AsyncS3Saver(
        endpoint_url=s3_saver.clients.endpoint_url,
        bucket=s3_saver.target.bucket,
        table=s3_saver.target.table,
    ) as fresh:
        with pytest.raises(CorruptObjectError, match="missing") as err:
            await fresh.aget_tuple(cfg("t"))
        assert blob in str(err.value)
        with pytest.raises(CorruptObjectError):
            await (
                chat_graph()
                .compile(checkpointer=fresh)
                .ainvoke({"messages": [("user", "x")]}, cfg("t"))
            )
        with pytest.raises(CorruptObjectError):
            [t async for t in fresh.alist(cfg("t"))]


async def test_garbage_objects_are_named(
    s3_saver: AsyncS3Saver, caplog: pytest.LogCaptureFixture
) -> None:
    await turn(s3_saver, "t", "hello there")
    await turn(s3_saver, "u", "hello there")
    await s3_saver.aflush()  # stored: read from S3, not from the manifest's copies
    latest = await s3_saver.aget_tuple(cfg("t"))
    assert latest is not None
    nsp = s3_saver.layout.namespace("t", "")
    s3 = await s3_saver.clients.client("s3")
    bucket = s3_saver.target.bucket
    ckey = nsp.checkpoint_at((await s3_saver.manifest.reads.latest("t", "")).latest_tail)  # type: ignore[union-attr]
    blob = (await value_holders(s3_saver, "t", "messages"))[0]  # an older checkpoint
    for key in (ckey, blob):
        good = await s3_saver.objects.get(key)
        await s3.put_object(Bucket=bucket, Key=key, Body=b"\x93garbage")
        async with AsyncS3Saver(
            endpoint_url=s3_saver.clients.endpoint_url, bucket=bucket, table=s3_saver.target.table
        ) as fresh:
            with pytest.raises(CorruptObjectError, match="corrupt") as err:
                await fresh.aget_tuple(cfg("t"))
            assert err.value.key == key
            assert await fresh.aget_tuple(cfg("u")) is not None  # that thread alone
        await s3.put_object(Bucket=bucket, Key=key, Body=good)
    # a foreign key under the namespace is ignored, with one warning
    await s3.put_object(Bucket=bucket, Key=f"{nsp.checkpoints}README.txt", Body=b"hello")
    caplog.set_level(logging.WARNING)
    hist = await ahistory(chat_graph().compile(checkpointer=s3_saver), cfg("t"))
    assert len(hist) == 3
    assert sum("README.txt" in r.getMessage() for r in caplog.records) == 1


# ------------------------------------------ maintenance beside a run still writing
async def test_a_rolled_back_run_cannot_revive_itself(s3_saver: AsyncS3Saver) -> None:
    """delete_for_runs (LangGraph's rollback) while the run still writes: the run's
    next put continues a removed checkpoint and is refused, never half-stored."""
    graph = chat_graph().compile(checkpointer=s3_saver)
    await graph.ainvoke({"messages": [("user", "first turn")]}, cfg("t"))
    run = "00000000-0000-4000-8000-000000000001"
    puts = 0
    real_put = s3_saver.aput

    async def aput(*args: Any, **kwargs: Any) -> Any:
        nonlocal puts
        puts += 1
        if puts == 3:  # mid-run: the rollback deletes the run
            async with uncached(s3_saver) as other:
                await other.adelete_for_runs([run])
        return await real_put(*args, **kwargs)

    s3_saver.aput = aput  # type: ignore[method-assign]
    with pytest.raises(CheckpointConflictError, match="removed while this run was writing"):
        await graph.ainvoke(
            {"messages": [("user", "what is the weather in Oslo?")]},
            {"configurable": {"thread_id": "t", "checkpoint_ns": "", "run_id": run}},
        )
    async with uncached(s3_saver) as reader:
        assert await messages(reader, "t") == [
            ("human", "first turn", []),
            ("ai", "reply #1 to 'first turn'", []),
        ]
        assert len(await ahistory(chat_graph().compile(checkpointer=reader), cfg("t"))) == 3
        await turn(reader, "t", "thanks!")  # the thread goes on from what is left
        assert len(await messages(reader, "t")) == 4


async def test_a_writer_on_a_pruned_branch_is_refused(s3_saver: AsyncS3Saver) -> None:
    """A DeltaChannel thread with a fork: prune keeps the latest's seed chain (a floor
    older than the other branch) and removes that branch; a writer continuing it is
    refused instead of committing a checkpoint whose ancestors are gone."""
    graph = delta_graph(snapshot_every=100).compile(checkpointer=s3_saver)
    for i in range(4):
        await graph.ainvoke({"messages": [("user", f"m{i}")]}, cfg("d"))
    head = (await graph.aget_state(cfg("d"))).config
    old = [h async for h in graph.aget_state_history(cfg("d"))][3].config
    await graph.ainvoke({"messages": [("user", "fork")]}, old)  # the old latest is a head now
    entry = await s3_saver.manifest.reads.latest("d", "")
    assert entry is not None and head["configurable"]["checkpoint_id"] in entry.heads
    expected = await messages_of(graph, cfg("d"))
    real_put = s3_saver.aput
    pruned: list[bool] = []

    async def aput(*args: Any, **kwargs: Any) -> Any:
        if not pruned:
            async with uncached(s3_saver) as other:
                await other.aprune(["d"])
            pruned.append(True)
        return await real_put(*args, **kwargs)

    s3_saver.aput = aput  # type: ignore[method-assign]
    with pytest.raises(CheckpointConflictError, match="removed while this run was writing"):
        await graph.ainvoke({"messages": [("user", "continue the head")]}, head)
    async with uncached(s3_saver) as reader:
        fresh = delta_graph(snapshot_every=100).compile(checkpointer=reader)
        assert await messages_of(fresh, cfg("d")) == expected


async def test_copy_of_a_source_deleted_meanwhile_leaves_no_broken_target(
    s3_saver: AsyncS3Saver,
) -> None:
    for text in CHAT_TURNS[:2]:
        await turn(s3_saver, "src", text)
    real = s3_saver.manifest.reads.namespaces
    deleted: list[bool] = []

    async def racing(thread: str) -> Any:
        out = await real(thread)
        if thread == "src" and not deleted:
            deleted.append(True)
            async with uncached(s3_saver) as other:  # another process deletes the source
                await other.adelete_thread("src")
        return out

    s3_saver.manifest.reads.namespaces = racing  # type: ignore[method-assign]
    await s3_saver.acopy_thread("src", "dst")
    async with uncached(s3_saver) as reader:
        assert await reader.manifest.reads.latest("dst", "") is None
        assert await messages(reader, "dst") == []
        await turn(reader, "dst", "next turn")
        assert len(await messages(reader, "dst")) == 2


async def messages_of(graph: Any, config: Any) -> list[Any]:
    return list(norm((await graph.aget_state(config)).values.get("messages", [])))


def test_removed_ids_are_kept_only_while_a_writer_can_hold_them() -> None:
    """A rollback after every run must not grow the manifest entry forever."""
    from langgraph.checkpoint.base.id import uuid6

    from langgraph_s3.core.records import uuid6_time
    from langgraph_s3.manifest import GONE_LIMIT, GONE_SECONDS, trim_gone

    now_id = str(uuid6(clock_seq=1))
    now = uuid6_time(now_id)
    assert now is not None and abs(now - __import__("time").time()) < 5
    fresh = {str(uuid6(clock_seq=i)) for i in range(3 * GONE_LIMIT)}
    kept = trim_gone(fresh, "", now)
    assert len(kept) == GONE_LIMIT and kept == set(sorted(fresh)[-GONE_LIMIT:])
    assert trim_gone(fresh, "", now + GONE_SECONDS + 60) == set()  # an hour on: all gone
    below = min(fresh)
    assert below not in trim_gone({below}, max(fresh), now)  # the floor covers it


async def test_copy_of_a_pruned_delta_thread_onto_another_reads_back(
    s3_saver: AsyncS3Saver,
) -> None:
    graph = delta_graph(snapshot_every=100).compile(checkpointer=s3_saver)
    for i in range(2):
        await graph.ainvoke({"messages": [("user", f"t{i}")]}, cfg("target"))
    for i in range(5):
        await graph.ainvoke({"messages": [("user", f"s{i}")]}, cfg("source"))
    await s3_saver.aprune(["source"])
    expected = await messages_of(graph, cfg("source"))
    await s3_saver.acopy_thread("source", "target")
    async with uncached(s3_saver) as reader:
        fresh = delta_graph(snapshot_every=100).compile(checkpointer=reader)
        assert await messages_of(fresh, cfg("target")) == expected  # the newer latest wins
        await fresh.ainvoke({"messages": [("user", "more")]}, cfg("target"))
        assert len(await messages_of(fresh, cfg("target"))) == len(expected) + 2
