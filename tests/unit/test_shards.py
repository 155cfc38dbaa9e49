"""Shards of a deployment on the manifest's fakes: for any number of shards and any set
of threads (subgraph namespaces, pages that split a thread, another deployment beside),
the shards' listings are disjoint and together the whole listing; ``I/N`` as the
command line takes it; what a worker's reports add up to."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langgraph_s3.core.report import Report
from langgraph_s3.core.shards import Shard, shard_of
from langgraph_s3.errors import ConfigurationError, InvalidRequestError
from langgraph_s3.ops.handlers.archiver import ShardReport, settings_from_env
from langgraph_s3.testing.memory_manifest import MemoryManifest
from langgraph_s3.testing.table import MemoryTable

pytestmark = pytest.mark.unit


async def _listing(table: MemoryTable, deployment: str, shard: Shard | None) -> list[str]:
    manifest = MemoryManifest(table, deployment=deployment, page_items=2)
    return [t.thread_id async for page in manifest.reads.threads(shard=shard) for t in page]


async def _fill(table: MemoryTable, deployment: str, threads: dict[str, int]) -> None:
    manifest = MemoryManifest(table, deployment=deployment)
    for thread, subgraphs in threads.items():
        for ns in ["", *(f"sub{i}:x" for i in range(subgraphs))]:
            await manifest.commits.advance(thread, ns, "1f0-0001", f"1f0-0001.{thread}", None)


@settings(max_examples=40, deadline=None)
@given(
    threads=st.dictionaries(
        st.text("abcxyz-é0", min_size=1, max_size=6), st.integers(0, 2), max_size=25
    ),
    total=st.integers(1, 9),
)
def test_the_shards_of_any_table_are_disjoint_and_whole(
    threads: dict[str, int], total: int
) -> None:
    async def run() -> None:
        table = MemoryTable()
        await _fill(table, "d1/", threads)
        await _fill(table, "d2/", {"other": 1})  # a deployment beside: never listed
        whole = await _listing(table, "d1/", None)
        parts = [await _listing(table, "d1/", Shard(i, total)) for i in range(total)]
        seen = [t for part in parts for t in part]
        assert sorted(seen) == sorted(whole) == sorted(threads)
        assert len(seen) == len(set(seen))  # each thread in one shard only

    asyncio.run(run())


@given(key=st.text(max_size=40), total=st.integers(1, 50))
def test_every_key_falls_in_exactly_one_shard(key: str, total: int) -> None:
    assert sum(Shard(i, total).holds(key) for i in range(total)) == 1


def test_segments_read_as_dynamodb_names_them() -> None:
    assert Shard.parse("0/4") == Shard(0, 4) and str(Shard.parse(" 3 / 4 ")) == "3/4"
    for bad, said in (
        ("4/4", "from 0 to total_segments - 1 = 3"),
        ("1/0", "total_segments must be from 1 to 1,000,000"),
        ("a/b", "I/N"),
        ("-1/4", "I/N"),
    ):
        with pytest.raises(InvalidRequestError, match=said):
            Shard.parse(bad)
    assert shard_of(None, None) is None
    with pytest.raises(InvalidRequestError, match="segment needs total_segments"):
        shard_of(1, None)
    with pytest.raises(InvalidRequestError, match="must be an integer"):
        Shard(True, 2)


def test_reports_of_shards_add_up() -> None:
    a = ShardReport(1, Report(threads=2), Report(threads=1, checkpoints=5), 3)
    b = ShardReport(1, Report(threads=1), Report(), 0)
    assert a + b == ShardReport(2, Report(threads=3), Report(threads=1, checkpoints=5), 3)


def test_the_workers_settings_come_from_its_environment() -> None:
    got = settings_from_env(
        {
            "LANGGRAPH_S3_BUCKET": "b",
            "LANGGRAPH_S3_PREFIX": "/p/",
            "LANGGRAPH_S3_PACK_AFTER_DAYS": "30",
            "LANGGRAPH_S3_INDEX_METADATA": "user_id, org",
        }
    )
    assert (got.bucket, got.prefix, got.pack_after_days, got.index_metadata) == (
        "b",
        "p",
        30.0,
        ("user_id", "org"),
    )
    assert (
        settings_from_env(
            {"LANGGRAPH_S3_BUCKET": "b", "LANGGRAPH_S3_PACK_AFTER_DAYS": "0"}
        ).pack_after_days
        is None
    )
    with pytest.raises(InvalidRequestError, match="number of days"):
        settings_from_env({"LANGGRAPH_S3_BUCKET": "b", "LANGGRAPH_S3_PACK_AFTER_DAYS": "soon"})
    # the manifest in the bucket (the module's manifest = "s3"): no table
    bucket = settings_from_env({"LANGGRAPH_S3_BUCKET": "b", "LANGGRAPH_S3_MANIFEST": "s3"})
    assert (bucket.manifest, bucket.table) == ("s3", None)
    assert settings_from_env({"LANGGRAPH_S3_BUCKET": "b"}).manifest == "dynamodb"
    with pytest.raises(ConfigurationError, match="not a manifest kind"):
        settings_from_env({"LANGGRAPH_S3_BUCKET": "b", "LANGGRAPH_S3_MANIFEST": "S3"})
