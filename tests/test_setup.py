"""setup(), connection settings, sessions, and clear errors for bad input."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest
from aiobotocore.session import get_session
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata

from helpers import cfg
from langgraph_s3 import (
    AsyncS3Saver,
    CheckpointConflictError,
    ConfigurationError,
    InvalidIdError,
    MissingResourceError,
    S3Saver,
)
from langgraph_s3.aws.clients import parse_conn_string
from langgraph_s3.testing import MotoServer, unique_names


async def test_setup_creates_bucket_and_on_demand_table_idempotently(
    s3_fresh: MotoServer,
) -> None:
    names = unique_names()
    url = f"s3://{names['bucket']}/agents/prod?table={names['table']}"
    async with AsyncS3Saver.from_conn_string(url, endpoint_url=s3_fresh.url) as saver:
        await saver.setup()
        await saver.setup()  # again: leaves what exists alone
        ddb = await saver.clients.client("dynamodb")
        desc = (await ddb.describe_table(TableName=names["table"]))["Table"]
        assert desc["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
        assert {k["AttributeName"] for k in desc["KeySchema"]} == {"pk", "sk"}
        ttl = await ddb.describe_time_to_live(TableName=names["table"])
        assert ttl["TimeToLiveDescription"]["AttributeName"] == "expires_at"
        out = await saver.aput(cfg(), generate_checkpoint(), generate_metadata(), {})
        s3 = await saver.clients.client("s3")
        listed = await s3.list_objects_v2(Bucket=names["bucket"])
        assert all(o["Key"].startswith("agents/prod/threads/") for o in listed["Contents"])
        assert (await saver.aget_tuple(out)) is not None


async def test_missing_bucket_and_table_say_what_to_do(s3_fresh: MotoServer) -> None:
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **unique_names()) as saver:
        with pytest.raises(MissingResourceError, match=r"call setup\(\) or apply the terraform"):
            await saver.aput(cfg(), generate_checkpoint(), generate_metadata(), {})
        # the manifest read and the writes listing go out together: either says it
        with pytest.raises(MissingResourceError, match=r"call setup\(\) or apply the terraform"):
            await saver.aget_tuple(cfg())
        await saver.objects.create_bucket()
        with pytest.raises(MissingResourceError, match="manifest table"):
            await saver.aput(cfg(), generate_checkpoint(), generate_metadata(), {})


def test_conn_string_parsing() -> None:
    t, limits = parse_conn_string(
        "s3://bucket/a/b/?table=tbl&region=eu-west-1&endpoint_url=http://x:1"
    )
    assert limits == {}
    assert (t.bucket, t.prefix, t.table, t.region, t.endpoint_url) == (
        "bucket",
        "a/b",
        "tbl",
        "eu-west-1",
        "http://x:1",
    )
    assert parse_conn_string("s3://bucket")[0].prefix == ""
    for bad in ("bucket/prefix", "http://bucket/x", "s3:///nobucket", "s3://b/p?tabel=t"):
        with pytest.raises(ConfigurationError):
            parse_conn_string(bad)
    with pytest.raises(ConfigurationError):
        AsyncS3Saver(bucket="ab")


async def test_environment_endpoint_is_used(s3_fresh: MotoServer, monkeypatch: Any) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_fresh.url)
    async with AsyncS3Saver(**unique_names()) as saver:
        await saver.setup()
        out = await saver.aput(cfg(), generate_checkpoint(), generate_metadata(), {})
        assert await saver.aget_tuple(out) is not None


@pytest.mark.parametrize("kind", ["aioboto3", "aiobotocore"])
async def test_caller_sessions_are_accepted(s3_fresh: MotoServer, kind: str) -> None:
    session: Any
    if kind == "aioboto3":
        # not in the [dev] extra (it pins an older aiobotocore): CI's second run installs
        # [dev,aioboto3] and sets LANGGRAPH_S3_REQUIRE_AIOBOTO3=1, where a skip would fail
        if os.environ.get("LANGGRAPH_S3_REQUIRE_AIOBOTO3"):
            import aioboto3
        else:
            aioboto3 = pytest.importorskip(
                "aioboto3", reason="aioboto3 not installed; CI's aioboto3 run covers it"
            )
        session = aioboto3.Session(
            aws_access_key_id="k", aws_secret_access_key="s", region_name="eu-west-1"
        )
    else:
        session = get_session()
        session.set_credentials("k", "s")
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, session=session, **unique_names()) as s:
        await s.setup()
        out = await s.aput(cfg(), generate_checkpoint(), generate_metadata(), {})
        assert await s.aget_tuple(out) is not None
    with pytest.raises(ConfigurationError, match="session="):
        await AsyncS3Saver(bucket="abc", session=object()).aget_tuple(cfg())


async def test_bad_input_writes_nothing(s3_saver: AsyncS3Saver) -> None:
    with pytest.raises(InvalidIdError, match="thread_id"):
        await s3_saver.aput({"configurable": {}}, generate_checkpoint(), generate_metadata(), {})
    lock = threading.Lock()  # not serializable
    cp = generate_checkpoint(
        channel_values={"ok": 1, "bad": lock}, channel_versions={"ok": 1, "bad": 1}
    )
    with pytest.raises(TypeError):
        await s3_saver.aput(cfg("bad"), cp, generate_metadata(), {"ok": 1, "bad": 1})
    s3 = await s3_saver.clients.client("s3")
    assert "Contents" not in await s3.list_objects_v2(Bucket=s3_saver.target.bucket)
    assert await s3_saver.aget_tuple(cfg("bad")) is None
    with pytest.raises(InvalidIdError, match="checkpoint_id"):
        await s3_saver.aput_writes(cfg("bad"), [("a", 1)], "task")
    with pytest.raises(InvalidIdError, match="checkpoint_id"):
        await s3_saver.aput(
            cfg(), generate_checkpoint(checkpoint_id="x" * 100), generate_metadata(), {}
        )


async def test_checkpoints_are_immutable_but_replays_are_idempotent(s3_saver: AsyncS3Saver) -> None:
    cp = generate_checkpoint(channel_values={"a": 1}, channel_versions={"a": 1})
    md = generate_metadata(step=1)
    first = await s3_saver.aput(cfg(), cp, md, {"a": 1})
    assert await s3_saver.aput(cfg(), cp, md, {"a": 1}) == first  # a retry/replay
    changed = dict(cp, versions_seen={"x": {"a": 1}})
    with pytest.raises(CheckpointConflictError, match="immutable"):
        await s3_saver.aput(cfg(), changed, md, {"a": 1})  # type: ignore[arg-type]


async def test_writes_first_wins_per_index_and_special_channels_overwrite(
    s3_saver: AsyncS3Saver,
) -> None:
    out = await s3_saver.aput(cfg(), generate_checkpoint(), generate_metadata(), {})
    await s3_saver.aput_writes(out, [("a", 1)], "t1")
    await s3_saver.aput_writes(out, [("a", 2), ("b", 3)], "t1")  # idx 0 kept, idx 1 added
    await s3_saver.aput_writes(out, [("__error__", "first")], "t1")
    await s3_saver.aput_writes(out, [("__error__", "second")], "t1")
    await s3_saver.aput_writes(out, [("z", 0)], "t0", task_path="~early")
    tup = await s3_saver.aget_tuple(out)
    assert tup is not None
    assert tup.pending_writes == [
        ("t1", "__error__", "second"),
        ("t1", "a", 1),
        ("t1", "b", 3),
        ("t0", "z", 0),
    ]


def test_sync_saver_from_conn_string(s3_fresh: MotoServer) -> None:
    names = unique_names()
    with S3Saver.from_conn_string(
        f"s3://{names['bucket']}?table={names['table']}&endpoint_url={s3_fresh.url}"
    ) as saver:
        saver.setup()
        out = saver.put(cfg(), generate_checkpoint(), generate_metadata(), {})
        saver.put_writes(out, [("a", 1)], "task")
        tup = saver.get_tuple(out)
        assert tup is not None and tup.pending_writes == [("task", "a", 1)]
        assert [t.config for t in saver.list(cfg())] == [out]
        saver.copy_thread("t", "t2")
        assert saver.get_tuple(cfg("t2")) is not None
        saver.delete_thread("t")
        assert saver.get_tuple(cfg("t")) is None
