"""Maintenance past one machine, on moto over HTTP: shards of the table that N workers
(processes) cover once between them, the idle pass that packs only what its pack does
not hold, the archiver's Lambda handler, and a user's threads by their metadata (the
Scan and the index paths against LangGraph's own ``list(None, filter=...)``)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Any

import orjson
import pytest

from helpers import DAY, cfg, chat, clocked, left_of, saver_on, url_of
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.core.keys import encode
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.graphs import CHAT_TURNS, chat_graph

ARCHIVE = [sys.executable, "-m", "langgraph_s3.cli", "--json", "archive"]


async def expire(saver: AsyncS3Saver, thread: str) -> None:
    """Time passes for one thread: its root item's TTL lies in the past."""
    ddb = await saver.clients.client("dynamodb")
    await ddb.update_item(
        TableName=saver.target.table,
        Key={"pk": {"S": saver.manifest.deployment + encode(thread)}, "sk": {"S": encode("")}},
        UpdateExpression="SET expires_at = :t",
        ExpressionAttributeValues={":t": {"N": "1000"}},
    )


async def age(saver: AsyncS3Saver, thread: str, days: float) -> None:
    """Time passes for one thread: its items were last written ``days`` earlier."""
    ddb = await saver.clients.client("dynamodb")
    pk = {"S": saver.manifest.deployment + encode(thread)}
    found = await ddb.query(
        TableName=saver.target.table,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": pk},
    )
    for item in found["Items"]:
        then = int(item["updated_at"]["N"]) - int(days * DAY)
        await ddb.update_item(
            TableName=saver.target.table,
            Key={"pk": item["pk"], "sk": item["sk"]},
            UpdateExpression="SET updated_at = :t",
            ExpressionAttributeValues={":t": {"N": str(then)}},
        )


async def packs_of(saver: AsyncS3Saver, thread: str) -> list[str]:
    return [o.key for o in await saver.raw_objects.list_all(saver.layout.packs(thread))]


async def test_workers_in_processes_handle_every_thread_once(s3_fresh: MotoServer) -> None:
    names = unique_names()
    threads = [f"t{i:02d}" for i in range(12)]
    async with saver_on(s3_fresh, names, thread_ttl_days=30) as saver:
        await saver.setup()
        for t in threads:
            await chat(saver, t, CHAT_TURNS[0])
        doomed = threads[:3]
        for t in doomed:
            await expire(saver, t)
        for t in threads[3:]:
            await age(saver, t, 2)
        env = {**os.environ, "AWS_ENDPOINT_URL": s3_fresh.url, "LANGGRAPH_S3_URL": url_of(names)}
        workers = [
            subprocess.Popen(
                [*ARCHIVE, "--segment", f"{i}/3", "--pack-after-days", "1"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for i in range(3)
        ]
        reports = []
        for w in workers:
            out, err = w.communicate(timeout=120)
            assert w.returncode == 0, err.decode()
            reports.append(orjson.loads(out))
        assert sorted(r["segment"] for r in reports) == [0, 1, 2]
        assert sum(r["swept"]["threads"] for r in reports) == len(doomed)
        assert sum(r["packed"]["threads"] for r in reports) == len(threads) - len(doomed)
        for t in doomed:
            assert await saver.aget_thread(t) is None
            assert await left_of(saver, t) == []
        for t in threads[3:]:
            assert len(await packs_of(saver, t)) == 1, t  # packed once, by one worker
            info = await saver.aget_thread(t)
            assert info is not None and info.packed
        # a second pass finds nothing to do, and reads no object to find it out
        with saver.stats.label("again"):
            again = [await saver.apack(idle_days=1, segment=i, total_segments=3) for i in range(3)]
        assert sum(r.threads for r in again) == 0
        assert saver.stats.labels["again"].by_operation == {"dynamodb.Scan": 3}


async def test_the_idle_pass_packs_what_was_written_since_the_pack(s3_fresh: MotoServer) -> None:
    async with saver_on(s3_fresh) as saver:
        await saver.setup()
        clock = clocked(saver)
        for t in ("old", "fresh"):
            await chat(saver, t, CHAT_TURNS[0])
        clock.advance(10)
        await chat(saver, "fresh", CHAT_TURNS[1])
        first = await saver.apack(idle_days=5)
        assert first.threads == 1 and await packs_of(saver, "fresh") == []
        assert len(await packs_of(saver, "old")) == 1
        clock.advance(1)
        await chat(saver, "old", CHAT_TURNS[1])  # written since its pack: not packed now
        info = await saver.aget_thread("old")
        assert info is not None and not info.packed
        clock.advance(10)
        graph = chat_graph().compile(checkpointer=saver)
        before = (await graph.aget_state(cfg("old"))).values["messages"]
        second = await saver.apack(idle_days=5)
        assert second.threads == 2  # "old" again (its new turn), "fresh" at last
        assert len(await packs_of(saver, "old")) == 1  # the new pack replaced the first
        after = (await graph.aget_state(cfg("old"))).values["messages"]
        assert after == before and len(after) > 2  # both turns, read through the pack


def test_the_archiver_handler_runs_its_shard(
    s3_fresh: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langgraph_s3 import archiver

    names = unique_names()

    async def threads() -> None:
        async with saver_on(s3_fresh, names) as saver:
            await saver.setup()
            for t in ("a", "b", "c"):
                await chat(saver, t, CHAT_TURNS[0])

    asyncio.run(threads())  # the handler runs its own loop, as on Lambda
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_fresh.url)
    monkeypatch.setenv("LANGGRAPH_S3_BUCKET", names["bucket"])
    monkeypatch.setenv("LANGGRAPH_S3_PREFIX", names.get("prefix", ""))
    monkeypatch.setenv("LANGGRAPH_S3_TABLE", names["table"])
    monkeypatch.setenv("LANGGRAPH_S3_PACK_AFTER_DAYS", "0.000001")
    done = [archiver.handler({"segment": i, "total_segments": 2}) for i in range(2)]
    assert [d["segment"] for d in done] == [0, 1]
    assert sum(d["packed"]["threads"] for d in done) == 3
    assert orjson.loads(orjson.dumps(done))  # what Step Functions gets is JSON
    with pytest.raises(Exception, match="segment must be from 0 to total_segments - 1"):
        archiver.handler({"segment": 2, "total_segments": 2})
    monkeypatch.delenv("LANGGRAPH_S3_BUCKET")
    with pytest.raises(Exception, match="LANGGRAPH_S3_BUCKET"):
        archiver.handler({"segment": 0, "total_segments": 1})


async def users(saver: AsyncS3Saver, *, moved: bool = True) -> dict[str, str]:
    """Six threads of three users through a real graph; "t5" moves from u1 to u2."""
    graph = chat_graph().compile(checkpointer=saver)
    owners = {"t0": "u1", "t1": "u2", "t2": "u1", "t3": "u3", "t4": "u1", "t5": "u1"}
    for thread, user in owners.items():
        config: Any = {**cfg(thread), "metadata": {"user_id": user, "tier": 2}}
        await graph.ainvoke({"messages": [("user", "hi")]}, config)
    if moved:
        config = {**cfg("t5"), "metadata": {"user_id": "u2", "tier": 2}}
        await graph.ainvoke({"messages": [("user", "again")]}, config)
        owners["t5"] = "u2"
    return owners


async def by_filter(saver: AsyncS3Saver, want: dict[str, Any]) -> set[str]:
    """The threads LangGraph's own filter finds: any checkpoint whose metadata matches."""
    return {c.config["configurable"]["thread_id"] async for c in saver.alist(None, filter=want)}


async def test_a_users_threads_by_scan_match_langgraphs_filter(s3_fresh: MotoServer) -> None:
    async with saver_on(s3_fresh) as saver:
        await saver.setup()
        owners = await users(saver)
        for user in ("u1", "u2", "u3", "nobody"):
            with saver.stats.label(user):
                found = {t.thread_id async for t in saver.alist_threads(metadata={"user_id": user})}
            assert found == {t for t, u in owners.items() if u == user}
            assert saver.stats.labels[user].by_operation == {"dynamodb.Scan": 1}
            # LangGraph's filter also finds "t5" for u1: an older checkpoint was u1's
            assert found <= await by_filter(saver, {"user_id": user})
        assert "t5" in await by_filter(saver, {"user_id": "u1"})
        two = {
            t.thread_id async for t in saver.alist_threads(metadata={"user_id": "u1", "tier": 2})
        }
        assert two == {"t0", "t2", "t4"}
        assert [t async for t in saver.alist_threads(metadata={"tier": "2"})] == []  # 2 is no "2"
        info = await saver.aget_thread("t0")
        assert info is not None and info.metadata["user_id"] == "u1"


async def test_an_indexed_key_is_one_query(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names, index_metadata=["user_id"]) as saver:
        made = await saver.setup()
        assert any("meta_user_id" in line for line in made)
        owners = await users(saver)
        for user in ("u1", "u2", "nobody"):
            with saver.stats.label(user):
                found = [t.thread_id async for t in saver.alist_threads(metadata={"user_id": user})]
            expected = sorted(t for t, u in owners.items() if u == user)
            assert sorted(found) == expected
            # one Query of the index, then one Query per thread it names: no Scan
            assert saver.stats.labels[user].by_operation == {"dynamodb.Query": 1 + len(expected)}
        assert await saver.setup() == []  # the index is there: nothing to make
    async with saver_on(s3_fresh, names, index_metadata=["user_id", "tier"]) as saver:
        assert await saver.setup(dry_run=True) == [
            f"index 'meta_tier' of table {names['table']!r} (metadata 'tier')"
        ]
    # another deployment on the table, written before it declared the key: the index is
    # there already, and its older threads' values are put on their items all the same
    other = {**names, "prefix": "other"}
    async with saver_on(s3_fresh, other) as plain:
        await plain.setup()
        await users(plain, moved=False)
    async with saver_on(s3_fresh, other, index_metadata=["user_id"]) as saver:
        assert await saver.setup() == []
        found = [t.thread_id async for t in saver.alist_threads(metadata={"user_id": "u3"})]
        assert found == ["t3"]  # this deployment's, through the index, not the first one's


async def test_shards_split_the_listing_and_the_sweep(s3_fresh: MotoServer) -> None:
    async with saver_on(s3_fresh, thread_ttl_days=30) as saver:
        await saver.setup()
        threads = [f"s{i}" for i in range(9)]
        for t in threads:
            await chat(saver, t, CHAT_TURNS[0])
        listed = [
            [t.thread_id async for t in saver.alist_threads(segment=i, total_segments=4)]
            for i in range(4)
        ]
        assert sorted(t for part in listed for t in part) == threads
        for t in threads[:4]:
            await expire(saver, t)
        swept = [await saver.asweep_ttl(segment=i, total_segments=4) for i in range(4)]
        assert [r.threads for r in swept] == [
            len([t for t in part if t in threads[:4]]) for part in listed
        ]
        with pytest.raises(Exception, match="total_segments needs segment"):
            await saver.asweep_ttl(total_segments=4)
        clock = clocked(saver)
        clock.advance(31)
        assert [t async for t in saver.aexpired_threads(segment=0, total_segments=1)] != []


def test_cli_takes_a_segment_and_where_pairs(
    deployment: tuple[AsyncS3Saver, str], s3_fresh: MotoServer
) -> None:
    from helpers import answer, run

    _, url = deployment
    whole = {t["thread_id"] for t in answer(run(s3_fresh, url, "threads", "--json"))}
    parts = [
        {
            t["thread_id"]
            for t in answer(run(s3_fresh, url, "threads", "--segment", f"{i}/2", "--json"))
        }
        for i in range(2)
    ]
    assert parts[0] | parts[1] == whole and not parts[0] & parts[1]
    bad = run(s3_fresh, url, "threads", "--segment", "2/2")
    assert bad.returncode == 2 and b"segment must be from 0 to total_segments - 1" in bad.stderr
    graph_ids = answer(run(s3_fresh, url, "threads", "--where", "source=loop", "--json"))
    assert {t["thread_id"] for t in graph_ids} <= whole
    none = answer(run(s3_fresh, url, "threads", "--where", "step:=999", "--json"))
    assert none == []
    odd = run(s3_fresh, url, "threads", "--where", "nothing")
    assert odd.returncode == 2 and b"KEY=VALUE" in odd.stderr


def run_of(thread: str, run: str) -> Any:
    return {"configurable": {"thread_id": thread, "run_id": run}}


async def test_a_rollback_reads_only_the_threads_its_runs_wrote(s3_fresh: MotoServer) -> None:
    costs = {}
    for n in (3, 12):
        async with saver_on(s3_fresh) as saver:
            await saver.setup()
            graph = chat_graph().compile(checkpointer=saver)
            for i in range(n):
                await graph.ainvoke({"messages": [("user", "hi")]}, run_of(f"t{i}", f"r{i}"))
            first = await graph.aget_state(cfg("t1"))
            await graph.ainvoke({"messages": [("user", "and then")]}, run_of("t1", "doomed"))
            await saver.aflush()  # what the items hold is stored: the counts are the rollback's
            with saver.stats.label("rollback"):
                report = await saver.adelete_for_runs(["doomed", "never-ran"])
            costs[n] = saver.stats.labels["rollback"].by_operation
            assert report.threads == 1 and report.checkpoints > 0
            assert (await graph.aget_state(cfg("t1"))).values == first.values
    # one Query per run, one per thread it wrote to: the same among 3 threads as among 12
    assert costs[3] == costs[12] and "dynamodb.Scan" not in costs[3], costs
    assert costs[3]["dynamodb.Query"] == 2 + 1


async def test_setup_fills_in_what_older_versions_did_not_keep(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with saver_on(s3_fresh, names) as saver:
        await saver.setup()
        graph = chat_graph().compile(checkpointer=saver)
        for i in range(3):
            config = {**run_of(f"t{i}", f"r{i}"), "metadata": {"user_id": f"u{i}"}}
            await graph.ainvoke({"messages": [("user", "hi")]}, config)
        await graph.ainvoke({"messages": [("user", "more")]}, run_of("t0", "late"))
        await saver.apack(["t0"])  # packed before the upgrade: its keys are in its pack
        # as an older version left it: no run index, no metadata, no word of either
        ddb = await saver.clients.client("dynamodb")
        table, dep = names["table"], saver.manifest.deployment
        for item in (await ddb.scan(TableName=table))["Items"]:
            key = {"pk": item["pk"], "sk": item["sk"]}
            if item["pk"]["S"].startswith(dep + "~runs/"):
                await ddb.delete_item(TableName=table, Key=key)
            elif "md" in item:
                await ddb.update_item(TableName=table, Key=key, UpdateExpression="REMOVE md")
        await ddb.update_item(
            TableName=table,
            Key={"pk": {"S": dep}, "sk": {"S": "~layout"}},
            UpdateExpression="REMOVE runs_indexed, metadata_recorded",
        )
        assert [t async for t in saver.alist_threads(metadata={"user_id": "u1"})] == []
        with saver.stats.label("unindexed"):
            await saver.adelete_for_runs(["r2"])  # without the index: a Scan finds t2
        assert "dynamodb.Scan" in saver.stats.labels["unindexed"].by_operation
        assert await saver.aget_thread("t2") is None
        made = await saver.setup()
        assert made == [
            f"the run index of the deployment's threads in table {table!r}",
            f"the latest metadata of the deployment's threads in table {table!r}",
        ]
        assert await saver.setup() == []
    async with saver_on(s3_fresh, names) as fresh:  # another process: nothing in memory
        found = [t.thread_id async for t in fresh.alist_threads(metadata={"user_id": "u1"})]
        assert found == ["t1"]
        with fresh.stats.label("indexed"):
            report = await fresh.adelete_for_runs(["late"])  # in the packed thread
        assert "dynamodb.Scan" not in fresh.stats.labels["indexed"].by_operation
        assert report.threads == 1
        state = await chat_graph().compile(checkpointer=fresh).aget_state(cfg("t0"))
        assert [m.content for m in state.values["messages"]][-1] != "more"


async def test_a_run_is_indexed_before_its_first_checkpoint_is_visible(
    s3_fresh: MotoServer,
) -> None:
    async with saver_on(s3_fresh) as saver:
        await saver.setup()
        graph = chat_graph().compile(checkpointer=saver)
        await graph.ainvoke({"messages": [("user", "hi")]}, run_of("t", "r1"))
        before = await saver.aget_tuple(cfg("t"))
        real = saver.manifest.commits.note_run

        async def refused(thread_id: str, run_token: str) -> None:
            raise RuntimeError("the index write failed")

        saver.manifest.commits.note_run = refused  # type: ignore[method-assign]
        with pytest.raises(RuntimeError, match="the index write failed"):
            await graph.ainvoke({"messages": [("user", "again")]}, run_of("t", "r2"))
        after = await saver.aget_tuple(cfg("t"))
        assert after is not None and before is not None
        assert after.config == before.config  # nothing of r2 was committed
        saver.manifest.commits.note_run = real  # type: ignore[method-assign]
        # a copy names its runs too: rolling r1 back reaches both threads
        await saver.acopy_thread("t", "t-copy")
        report = await saver.adelete_for_runs(["r1"])
        assert report.threads == 2


async def test_a_rollback_records_the_metadata_of_the_new_latest(s3_fresh: MotoServer) -> None:
    async with saver_on(s3_fresh, index_metadata=["user_id"]) as saver:
        await saver.setup()
        graph = chat_graph().compile(checkpointer=saver)
        first = {**run_of("t", "r1"), "metadata": {"user_id": "u1"}}
        await graph.ainvoke({"messages": [("user", "hi")]}, first)
        second = {**run_of("t", "r2"), "metadata": {"user_id": "u2"}}
        await graph.ainvoke({"messages": [("user", "again")]}, second)
        assert [t.thread_id async for t in saver.alist_threads(metadata={"user_id": "u2"})] == ["t"]
        await saver.adelete_for_runs(["r2"])
        info = await saver.aget_thread("t")
        assert info is not None and info.metadata["user_id"] == "u1"
        assert [t.thread_id async for t in saver.alist_threads(metadata={"user_id": "u1"})] == ["t"]
        assert [t async for t in saver.alist_threads(metadata={"user_id": "u2"})] == []
