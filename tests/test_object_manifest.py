"""The manifest on object storage (``manifest="s3"``): the saver and the store on a
bucket alone, with real LangGraph graphs, beside the same graphs on DynamoDB's
manifest, on the session's moto server and its SeaweedFS server."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata

from helpers import THREADS, build_threads, cfg, dump
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing import MotoServer, unique_names


def _ops(saver: AsyncS3Saver) -> set[str]:
    return {op.split(".")[0] for op in saver.stats.by_operation}


async def test_threads_on_objects_read_as_on_dynamodb(s3_fresh: MotoServer) -> None:
    names = unique_names()
    url = f"s3://{names['bucket']}/objs?manifest=s3&endpoint_url={s3_fresh.url}"
    async with AsyncS3Saver.from_conn_string(url) as saver:
        await saver.setup()
        saver.stats.reset()
        await build_threads(saver)
        assert _ops(saver) == {"s3"}  # no table anywhere
        on_objects = {t: await dump(saver, t) for t in THREADS}
        listed = sorted([t.thread_id async for t in saver.alist_threads()])
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **unique_names()) as plain:
        await plain.setup()
        await build_threads(plain)
        on_table = {t: await dump(plain, t) for t in THREADS}

    def shape(rows: list[tuple[Any, ...]]) -> list[Any]:  # ids differ: all else alike
        return sorted(
            (r[0].split(":")[0], sorted(r[3]["channel_versions"]), r[5].get("step")) for r in rows
        )

    assert {t: shape(v) for t, v in on_objects.items()} == {
        t: shape(v) for t, v in on_table.items()
    }
    assert listed == sorted(THREADS)


@pytest.fixture(params=["s3", "seaweed", "ministack"])
def bucket_kind(request: pytest.FixtureRequest) -> str:
    """The manifest in the bucket, on moto, SeaweedFS and ministack."""
    return str(request.param)


@pytest.fixture
def bucket_endpoint(bucket_kind: str, request: pytest.FixtureRequest) -> str:
    if bucket_kind == "s3":
        return str(request.getfixturevalue("s3_fresh").url)
    return str(request.getfixturevalue(f"{bucket_kind}_url"))


async def test_32_processes_fork_one_parent_at_once_and_every_fork_is_kept(
    bucket_endpoint: str,
) -> None:
    """32 savers (32 Lambdas: caches of their own) each commit a child of one parent at
    the same moment: every one is a tip, none is lost, on create-only PUTs alone."""
    names = {"bucket": unique_names()["bucket"], "manifest": "s3"}
    savers = [AsyncS3Saver(endpoint_url=bucket_endpoint, **names) for _ in range(32)]
    try:
        await savers[0].setup()
        root = await savers[0].aput(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
            generate_checkpoint(),
            generate_metadata(step=0),
            {},
        )
        forks = [
            generate_checkpoint(channel_values={"a": i}, channel_versions={"a": 100 + i})
            for i in range(32)
        ]
        await asyncio.gather(
            *(
                s.aput(root, cp, generate_metadata(step=1), {"a": 100 + i})
                for i, (s, cp) in enumerate(zip(savers, forks, strict=True))
            )
        )
        fresh = AsyncS3Saver(endpoint_url=bucket_endpoint, cache_bytes=0, **names)
        savers.append(fresh)
        listed = [t.checkpoint["id"] async for t in fresh.alist(cfg("t"))]
        assert set(listed) == {cp["id"] for cp in forks} | {root["configurable"]["checkpoint_id"]}
        latest = await fresh.aget_tuple(cfg("t"))
        assert latest is not None and latest.checkpoint["id"] == max(cp["id"] for cp in forks)
    finally:
        for s in savers:
            await s.aclose()


async def test_the_store_beside_it_lists_prefix_related_namespaces_as_in_memory(
    bucket_endpoint: str,
) -> None:
    """SeaweedFS lists directory by directory (``user/`` before ``user-1/``): the store's
    namespaces, searches and pages read as the in-memory store's."""
    from langgraph.store.memory import InMemoryStore

    from langgraph_s3 import AsyncS3Store

    names = ("user",), ("user-1",), ("user", "a"), ("user!",), ("user+x",), ("user", "a-b")
    bucket = unique_names()["bucket"]
    async with AsyncS3Store(bucket=bucket, endpoint_url=bucket_endpoint) as store:
        await store.setup()
        memory = InMemoryStore()
        for n, ns in enumerate(names):
            for key in ("k", "k-1", "k/2"):
                await store.aput(ns, key, {"n": n, "key": key})
                await memory.aput(ns, key, {"n": n, "key": key})
        assert await store.alist_namespaces() == await memory.alist_namespaces()
        for ns in names:
            got = {(i.namespace, i.key): i.value for i in await store.asearch(ns, limit=100)}
            want = {(i.namespace, i.key): i.value for i in await memory.asearch(ns, limit=100)}
            assert got == want, ns
        for offset in range(0, 18, 5):
            page = await store.alist_namespaces(limit=5, offset=offset)
            assert page == await memory.alist_namespaces(limit=5, offset=offset)


async def test_a_version_built_on_a_read_older_than_the_fence_is_never_sent(
    s3_fresh: MotoServer,
) -> None:
    """The S3 client's before-send hook: a PUT inside ``based_on`` a read 7 minutes
    old raises before it leaves (the server sees no request), every attempt alike."""
    import time

    from langgraph_s3.core import fence
    from langgraph_s3.errors import StaleBasisError

    names = {"bucket": unique_names()["bucket"], "manifest": "s3"}
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as saver:
        await saver.setup()
        saver.stats.reset()
        with fence.based_on(time.monotonic() - 420), pytest.raises(StaleBasisError):
            await saver.raw_objects.put("manifest/probe", b"x")
        assert "s3.PutObject" not in saver.stats.by_operation
        assert await saver.raw_objects.get("manifest/probe") is None
        with fence.based_on(time.monotonic()):
            assert await saver.raw_objects.put("manifest/probe", b"x") is not None


def _blocks(page: str, language: str) -> list[str]:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / page).read_text()
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def test_the_walkthrough_from_an_empty_bucket_to_a_first_turn_runs_as_written(
    seaweed_url: str, tmp_path: Any
) -> None:
    """docs/object-manifest.md, on the session's SeaweedFS: its setup command, its
    script (as the page prints it) and the commands it names, with its outputs."""
    import os
    import subprocess
    import sys

    bucket = unique_names()["bucket"]
    env = {
        **os.environ,
        "LANGGRAPH_S3_URL": f"s3://{bucket}/prod?manifest=s3&endpoint_url={seaweed_url}",
    }

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "langgraph_s3.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "names no table" not in done.stderr
        return done.stdout

    page_setup = _blocks("object-manifest.md", "text")[0].replace("'agents'", repr(bucket))
    said = cli("setup").replace(bucket, "agents").strip()
    assert said == page_setup.strip().replace(repr(bucket), "'agents'")
    script = next(b for b in _blocks("object-manifest.md", "python") if "LANGGRAPH_S3_URL" in b)
    (tmp_path / "first_turn.py").write_text(script)
    done = subprocess.run(
        [sys.executable, str(tmp_path / "first_turn.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["you said: hello, bucket", "3 checkpoints"]
    assert "first" in cli("threads")
    assert "3 checkpoints" in cli("history", "first")
    doctor = cli("doctor")
    assert "✔ manifest:" in doctor and "✔ conditional PUT: racing creates" in doctor
    assert "✔ signature window: a PUT signed 20 minutes ago: refused" in doctor
    assert "dynamodb" not in doctor.lower()
    # the archiver's shard (TTL sweep, packing) and the viewer, on the bucket's manifest
    import orjson

    cli("archive", "--segment", "0/1", "--pack-after-days", "0")
    (thread,) = orjson.loads(cli("--json", "threads"))
    assert thread["thread_id"] == "first" and thread["packed"], thread
    cli("view", "first", "-o", str(tmp_path / "first.html"))
    assert "hello, bucket" in (tmp_path / "first.html").read_text()
    assert "3 checkpoints" in cli("history", "first")  # read back from its pack


async def test_doctor_fails_a_store_that_takes_a_request_signed_long_ago(
    ministack_url: str, seaweed_url: str
) -> None:
    """The fence of a frozen writer relies on the store refusing requests signed more
    than 15 minutes earlier: plain moto and ministack take them (the doctor says so, and
    fails on that alone); the strict test server and SeaweedFS refuse them, as S3 does
    (it passes)."""
    from langgraph_s3.ops.tools.doctor import FAIL, OK, diagnose
    from langgraph_s3.testing.moto import moto_server

    @contextlib.contextmanager
    def moto(strict: bool) -> Iterator[str]:
        with moto_server(strict=strict) as server:
            yield server.url

    for start, status in (
        (lambda: moto(False), FAIL),
        (lambda: moto(True), OK),
        (lambda: contextlib.nullcontext(ministack_url), FAIL),
        (lambda: contextlib.nullcontext(seaweed_url), OK),
    ):
        with start() as url:
            names = {"bucket": unique_names()["bucket"], "manifest": "s3"}
            async with AsyncS3Saver(endpoint_url=url, **names) as saver:
                await saver.setup()
                checks = {c.name: c for c in await diagnose(saver)}
                window = checks["signature window: a PUT signed 20 minutes ago"]
                assert window.status == status, window
                # nothing else fails: ministack serves no STS, and S3's answers prove
                # the credentials
                failed = {c.name for c in checks.values() if c.status == FAIL}
                assert failed == ({window.name} if status == FAIL else set()), checks
                assert await saver.raw_objects.list_all(f"{saver.layout.root}doctor/") == []
