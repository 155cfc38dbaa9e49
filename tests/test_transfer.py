"""Export, import and migration between savers, over HTTP on moto.

InMemorySaver is the oracle: threads with forks, subgraph namespaces, an
interrupt and pending writes go from it to S3, to a file, to SQLite (sync and
async) and back, and every saver answers the same history, ids included.
"""

from __future__ import annotations

import asyncio
import gzip
import io
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from helpers import THREADS, build_threads, cfg, dump, graph_views
from langgraph_s3 import AsyncS3Saver, CorruptObjectError, InvalidRequestError, NewerFormatError
from langgraph_s3.checkpoint.transfer import aexport_threads, aimport_threads, amigrate
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.graphs import chat_graph


class _Replied:
    """The last two messages of a turn the graph ran: the input and its reply."""

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, list)
            and other[0] == "one more"
            and str(other[1]).endswith("to 'one more'")
        )


REPLIED = _Replied()


async def next_turn(saver: Any) -> list[Any]:
    """One more chat turn on the migrated thread: the graph must run it."""
    graph = chat_graph().compile(checkpointer=saver)
    try:
        out = await graph.ainvoke({"messages": [("user", "one more")]}, cfg("chat"))
    except NotImplementedError:  # a sync-only saver
        turn = {"messages": [("user", "one more")]}
        out = await asyncio.to_thread(graph.invoke, turn, cfg("chat"))
    assert out is not None, "the graph ignored the input: versions sort wrong"
    return [m.content for m in out["messages"][-2:]]


def s3(server: MotoServer) -> AsyncS3Saver:
    return AsyncS3Saver(endpoint_url=server.url, **unique_names())


async def test_export_then_import_gives_the_same_threads(
    s3_fresh: MotoServer, tmp_path: Path
) -> None:
    async with s3(s3_fresh) as source, s3(s3_fresh) as target:
        await source.setup()
        await target.setup()
        await build_threads(source)
        seen: list[tuple[int, int]] = []
        file = tmp_path / "threads.jsonl.gz"
        out = await source.aexport(None, file, progress=lambda r, d, t: seen.append((d, t)))
        assert (out.threads, out.writes > 0) == (3, True)
        assert seen == [(1, 3), (2, 3), (3, 3)]
        assert out.bytes == len(gzip.decompress(file.read_bytes()))
        first = orjson.loads(gzip.decompress(file.read_bytes()).split(b"\n", 1)[0])
        assert (first["format"], first["version"]) == ("langgraph-checkpoint-export", 1)

        back = await target.aimport(file)
        assert (back.threads, back.checkpoints, back.writes) == (3, out.checkpoints, out.writes)
        assert back.namespaces == out.namespaces
        for thread in THREADS:
            assert await dump(target, thread) == await dump(source, thread)
            assert await graph_views(target, thread) == await graph_views(source, thread)
        # and the imported threads go on like the originals
        for saver in (source, target):
            await (
                chat_graph()
                .compile(checkpointer=saver)
                .ainvoke({"messages": [("user", "one more")]}, cfg("chat"))
            )
        assert (await graph_views(target, "chat"))[0][0] == (await graph_views(source, "chat"))[0][
            0
        ]


async def test_migration_from_memory_through_s3_to_sqlite_and_back(
    s3_fresh: MotoServer, tmp_path: Path
) -> None:
    memory = InMemorySaver()
    await build_threads(memory)
    reference = {t: await dump(memory, t) for t in THREADS}
    views = {t: await graph_views(memory, t) for t in THREADS}
    async with s3(s3_fresh) as bucket:
        await bucket.setup()
        report = await amigrate(memory, bucket, list(THREADS))
        assert report.threads == 3
        for t in THREADS:
            assert await dump(bucket, t) == reference[t]
            assert await graph_views(bucket, t) == views[t]

        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.db")) as asqlite:
            await amigrate(bucket, asqlite)  # every thread the bucket has
            for t in THREADS:
                assert await dump(asqlite, t) == reference[t]
                assert await graph_views(asqlite, t) == views[t]
            assert await next_turn(asqlite) == REPLIED

        conn = sqlite3.connect(tmp_path / "s.db", check_same_thread=False)
        sync_sqlite = SqliteSaver(conn)  # sync only: its async methods raise
        try:
            await amigrate(bucket, sync_sqlite, list(THREADS))
            for t in THREADS:
                assert await dump(sync_sqlite, t) == reference[t]
            back = InMemorySaver()
            await amigrate(sync_sqlite, back, list(THREADS))
            for t in THREADS:
                assert await dump(back, t) == reference[t]
            assert await next_turn(sync_sqlite) == REPLIED
            assert await next_turn(back) == REPLIED
        finally:
            conn.close()
        # a turn the S3 saver wrote itself (its own versions), then out to LangGraph's savers
        assert await next_turn(bucket) == REPLIED
        out = InMemorySaver()
        await amigrate(bucket, out, ["chat"])
        assert await dump(out, "chat") == await dump(bucket, "chat")
        assert await next_turn(out) == REPLIED
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "b.db")) as again:
            await amigrate(bucket, again, ["chat"])
            assert await next_turn(again) == REPLIED


async def test_a_cut_or_damaged_file_imports_whole_threads_only(s3_fresh: MotoServer) -> None:
    memory = InMemorySaver()
    await build_threads(memory)
    whole = io.BytesIO()
    await aexport_threads(memory, list(THREADS), whole)
    lines = whole.getvalue().splitlines(keepends=True)
    second = [i for i, line in enumerate(lines) if b'"kind":"thread"' in line][1]
    async with s3(s3_fresh) as target:
        await target.setup()
        with pytest.raises(CorruptObjectError, match="cut off"):
            await target.aimport(io.BytesIO(b"".join(lines[: second + 3])))
        assert await dump(target, "chat") == await dump(memory, "chat")  # the whole first
        assert await dump(target, "waiting") == []  # never half a thread

        with pytest.raises(InvalidRequestError, match="replace=True"):
            await target.aimport(io.BytesIO(whole.getvalue()))
        assert await dump(target, "waiting") == []  # the refusal wrote nothing
        await target.aimport(io.BytesIO(whole.getvalue()), replace=True)
        for t in THREADS:
            assert await dump(target, t) == await dump(memory, t)

        header = orjson.loads(lines[0])
        newer = orjson.dumps({**header, "version": 2}) + b"\n" + b"".join(lines[1:])
        with pytest.raises(NewerFormatError, match="upgrade"):
            await aimport_threads(InMemorySaver(), io.BytesIO(newer))
        for bad in (b"not json\n", b'{"format": "something else"}\n', b""):
            with pytest.raises(CorruptObjectError):
                await aimport_threads(InMemorySaver(), io.BytesIO(bad))
        record = orjson.loads(lines[2])
        record["checkpoint"]["data"] = "!!!"
        damaged = b"".join([*lines[:2], orjson.dumps(record) + b"\n", *lines[3:]])
        with pytest.raises(CorruptObjectError):
            await aimport_threads(InMemorySaver(), io.BytesIO(damaged))
