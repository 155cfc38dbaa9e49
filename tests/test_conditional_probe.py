"""``setup()`` and ``doctor`` refuse an endpoint that ignores the conditional writes the
library relies on, on servers that emulate such stores (``ignore_conditions``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from helpers import run, url_of
from langgraph_s3 import AsyncS3Saver, AsyncS3Store, S3PersistenceError
from langgraph_s3.aws.probes import store_name
from langgraph_s3.errors import ConditionsIgnoredError
from langgraph_s3.ops.tools.doctor import FAIL, OK, diagnose
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.moto import moto_server

CHECKS = {
    "put": "conditional PUT: If-None-Match",
    "put-if-match": "conditional PUT: If-Match",
    "delete": "conditional DELETE: If-Match (the store's TTL sweep)",
}


@pytest.fixture(params=list(CHECKS))
def ignoring(request: pytest.FixtureRequest) -> Iterator[tuple[str, MotoServer]]:
    """A strict server that ignores one kind of condition."""
    with moto_server(ignore_conditions=request.param) as server:
        yield request.param, server


async def _objects(saver: AsyncS3Saver) -> list[str]:
    return [o.key for o in await saver.raw_objects.list_all("")]


async def test_saver_setup_refuses_ignored_put_conditions(
    ignoring: tuple[str, MotoServer],
) -> None:
    ignored, server = ignoring
    names = unique_names()
    async with AsyncS3Saver(endpoint_url=server.url, prefix="agents", **names) as saver:
        if ignored == "delete":  # writers never delete conditionally: packing does
            await saver.setup()
            assert await _objects(saver) == []
            await saver.aput(
                {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
                empty_checkpoint(),
                {},
                {},
            )
            with pytest.raises(ConditionsIgnoredError, match="If-Match on DELETE"):
                await saver.apack(["t"])  # packing refused: its take-back would trust it
            assert not [k for k in await _objects(saver) if k.startswith("agents/packs/")]
            return
        with pytest.raises(ConditionsIgnoredError) as caught:
            await saver.setup()
        assert await _objects(saver) == []  # the probe's object is gone
    err = caught.value
    assert isinstance(err, S3PersistenceError)
    assert str(err).startswith(f"the S3 endpoint {server.url} (Server: Werkzeug")
    if ignored == "put":
        assert "ignores If-None-Match on writes" in str(err)
        assert "would lose their immutability" in str(err)
    else:
        assert "ignores If-Match on writes" in str(err)
        assert "overwrite concurrent writers' changes" in str(err)
    assert "use a store that honours conditional writes" in str(err)


async def test_store_setup_refuses_every_ignored_condition(
    ignoring: tuple[str, MotoServer],
) -> None:
    ignored, server = ignoring
    bucket = unique_names()["bucket"]
    async with AsyncS3Store(bucket=bucket, prefix="mem", endpoint_url=server.url) as store:
        with pytest.raises(ConditionsIgnoredError) as caught:
            await store.setup()
        assert await store.objects.list_all("") == []
    condition = {
        "put": "If-None-Match on writes",
        "put-if-match": "If-Match on writes",
        "delete": "If-Match on DELETE",
    }[ignored]
    assert caught.value.condition == condition
    assert f"ignores {condition}" in str(caught.value)


async def test_setup_on_an_honest_endpoint_probes_once_and_leaves_nothing(
    s3_fresh: MotoServer,
) -> None:
    names = unique_names()
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, prefix="p", **names) as saver:
        await saver.setup()
        ops = dict(saver.stats.by_operation)
        assert (ops["s3.PutObject"], ops["s3.DeleteObjects"]) == (3, 1)
        assert "s3.DeleteObject" not in ops
        assert await _objects(saver) == []
        await saver.setup()  # once per saver
        again = saver.stats.by_operation
        assert (again["s3.PutObject"], again["s3.DeleteObjects"]) == (3, 1)
    async with AsyncS3Store(bucket=names["bucket"], endpoint_url=s3_fresh.url) as store:
        await store.setup()
        ops = store.stats.by_operation
        assert (ops["s3.PutObject"], ops["s3.DeleteObject"], ops["s3.DeleteObjects"]) == (3, 1, 1)
        assert await store.objects.list_all("") == []


async def test_doctor_fails_the_condition_the_endpoint_ignores(
    ignoring: tuple[str, MotoServer],
) -> None:
    ignored, server = ignoring
    names = unique_names()
    async with AsyncS3Saver(endpoint_url=server.url, **names) as saver:
        await saver.objects.create_bucket()
        await saver.manifest.setup.create()
        checks = {c.name: c for c in await diagnose(saver)}
        assert await _objects(saver) == []  # the doctor's probes are gone too
    failing = {"put": {"put", "put-if-match"}}.get(ignored, {ignored})
    for kind, name in CHECKS.items():
        check = checks[name]
        if kind in failing:
            assert check.status == FAIL, check
            assert check.detail.startswith(f"the S3 endpoint {server.url}")
            assert " ignores If-" in check.detail
            assert check.fix == ConditionsIgnoredError.FIX
        else:
            assert (check.status, check.detail) == (OK, "a stale condition answers 412")


async def test_doctor_on_an_honest_endpoint_passes_the_conditions(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as saver:
        await saver.setup()
        checks = {c.name: c for c in await diagnose(saver)}
        assert await _objects(saver) == []
    assert [checks[name].status for name in CHECKS.values()] == [OK, OK, OK]


def test_doctor_prints_the_failing_condition_with_its_fix() -> None:
    with moto_server(ignore_conditions="put") as server:
        names = unique_names()
        url = url_of(names)

        async def create() -> None:
            async with AsyncS3Saver(endpoint_url=server.url, **names) as saver:
                await saver.objects.create_bucket()
                await saver.manifest.setup.create()

        asyncio.run(create())
        human = run(server, url, "doctor")
        assert human.returncode == 1
        assert "✘ conditional PUT: If-None-Match" in human.stdout.decode()
        as_json = run(server, url, "--json", "doctor")
        checks: dict[str, Any] = {c["name"]: c for c in orjson.loads(as_json.stdout)}
    check = checks["conditional PUT: If-None-Match"]
    assert check["status"] == "fail" and "ignores If-None-Match on writes" in check["detail"]
    assert check["fix"] == ConditionsIgnoredError.FIX


def test_store_names_come_from_the_host_or_the_server_header() -> None:
    assert store_name("https://storage.googleapis.com") == "Google Cloud Storage's XML API"
    assert store_name("https://acct.r2.cloudflarestorage.com") == "Cloudflare R2"
    assert store_name("http://10.0.0.5:9000", "MinIO") == "MinIO"
    assert store_name("https://fly.storage.tigris.dev").startswith("Tigris")
    assert store_name("https://s3.eu-west-1.amazonaws.com") == "Amazon S3"
    assert store_name("http://127.0.0.1:9") == "the S3 endpoint http://127.0.0.1:9"
