"""Every failure a caller sees is ours: named, bounded in time, and never half-written."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata

from faults import FaultPlan, fault_proxy
from helpers import cfg
from langgraph_s3 import (
    AsyncS3Saver,
    AsyncS3Store,
    ConfigurationError,
    InvalidIdError,
    MissingResourceError,
    S3PersistenceError,
)
from langgraph_s3.aws.clients import ClientFactory, Limits, one_attempt, parse_conn_string
from langgraph_s3.core.values import INLINE_MAX
from langgraph_s3.errors import (
    AccessDeniedError,
    ConflictError,
    CorruptObjectError,
    EndpointTimeoutError,
    EndpointUnreachableError,
    InvalidRequestError,
    ServiceError,
)
from langgraph_s3.testing import MotoServer, free_port, unique_names


@pytest.fixture
def black_hole() -> Iterator[str]:
    """An endpoint that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                held.append(conn)  # read nothing, answer nothing
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(2)
        for conn in held:
            conn.close()
        server.close()


def test_default_limits_bound_a_call_for_lambda() -> None:
    limits = Limits()
    assert limits.request_timeout <= 30  # a stalled endpoint fails a call within this
    assert limits.connect_timeout < limits.request_timeout
    assert limits.read_timeout < limits.request_timeout
    with pytest.raises(ConfigurationError, match="read_timeout"):
        Limits(read_timeout=0)
    with pytest.raises(ConfigurationError, match="max_attempts"):
        Limits(max_attempts=0)


async def test_black_hole_endpoint_fails_within_the_deadline(black_hole: str) -> None:
    saver = AsyncS3Saver(
        endpoint_url=black_hole,
        read_timeout=30,
        max_attempts=5,
        request_timeout=1.5,
        **unique_names(),
    )
    started = time.monotonic()
    with pytest.raises(EndpointTimeoutError) as info:
        await saver.aget_tuple(cfg())
    elapsed = time.monotonic() - started
    assert elapsed < 10  # 5 attempts x 30 s without the deadline
    message = str(info.value)
    assert black_hole in message and "request_timeout=1.5" in message
    assert isinstance(info.value, TimeoutError) and info.value.__cause__ is not None
    await saver.aclose()


async def test_black_hole_read_timeout_names_the_setting(black_hole: str) -> None:
    store = AsyncS3Store(
        endpoint_url=black_hole,
        read_timeout=0.5,
        max_attempts=2,
        request_timeout=20,
        bucket=unique_names()["bucket"],
    )
    started = time.monotonic()
    with pytest.raises(EndpointTimeoutError, match=r"read_timeout=0\.5s, 2 attempts") as info:
        await store.aget(("a",), "k")
    assert time.monotonic() - started < 10
    assert black_hole in str(info.value)
    await store.aclose()


async def test_unreachable_endpoint() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    saver = AsyncS3Saver(endpoint_url=url, max_attempts=2, **unique_names())
    with pytest.raises(EndpointUnreachableError, match="could not connect") as info:
        await saver.aput(cfg(), generate_checkpoint(), generate_metadata(), {})
    assert url in str(info.value) and "endpoint_url" in str(info.value)
    await saver.aclose()


async def test_inside_one_attempt_a_request_is_sent_once_and_outside_it_the_policy_holds() -> None:
    """``one_attempt`` (the command line's deployment check): botocore's retries and the
    door's own stop after the first attempt, and the error says so; the same saver's
    requests outside it keep ``max_attempts``."""
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    saver = AsyncS3Saver(endpoint_url=url, max_attempts=3, **unique_names())
    try:
        with one_attempt(), pytest.raises(EndpointUnreachableError, match=r"\(1 attempt\)"):
            await saver.averify()  # HeadBucket and GetItem side by side, each once
        once = {"s3.HeadBucket": 1, "dynamodb.GetItem": 1}
        assert saver.clients.stats.requests == once and saver.clients.stats.retries == 0
        with pytest.raises(EndpointUnreachableError, match=r"\(3 attempts\)"):
            await saver.averify()
        assert saver.clients.stats.requests == {"s3.HeadBucket": 4, "dynamodb.GetItem": 4}
    finally:
        await saver.aclose()


async def test_inside_one_attempt_an_error_answer_is_not_retried(s3_fresh: MotoServer) -> None:
    """A 503 (which botocore retries) ends a call inside ``one_attempt`` at once, as the
    error the client raises for it, on both SDK combinations; outside it is retried."""
    plan = FaultPlan(every=1, cycle=("503",))
    with fault_proxy(s3_fresh.url, plan) as url:
        saver = AsyncS3Saver(endpoint_url=url, max_attempts=3, **unique_names())
        try:
            with one_attempt(), pytest.raises(S3PersistenceError):
                await saver.averify()
            assert plan.injected["503"] == 2  # HeadBucket and GetItem, once each
            with pytest.raises(S3PersistenceError):
                await saver.averify()
            assert plan.injected["503"] == 2 + 2 * 3
        finally:
            await saver.aclose()


async def test_inside_one_attempt_s3s_region_redirect_is_still_followed() -> None:
    """A bucket in another region answers 301 with its region: botocore's redirector
    follows it inside ``one_attempt`` as outside (the CLI's check on a laptop whose
    default region is not the bucket's)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[str] = []

    class Moved(BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            seen.append(self.path)
            self.send_response(301 if len(seen) % 2 else 200)
            self.send_header("x-amz-bucket-region", "eu-west-1")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Moved)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    clients = ClientFactory(endpoint_url=f"http://127.0.0.1:{server.server_port}")
    try:
        s3 = await clients.client("s3")
        with one_attempt():
            answer = await s3.head_bucket(Bucket="bkt")
        assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200 and seen == ["/bkt", "/bkt"]
    finally:
        await clients.aclose()
        server.shutdown()


async def test_access_denied_names_action_resource_and_the_tls_policy(
    s3_fresh: MotoServer,
) -> None:
    names = unique_names()
    async with AsyncS3Store(bucket=names["bucket"], endpoint_url=s3_fresh.url) as store:
        await store.setup()
        await store.aput(("a",), "k", {"v": 1})
        s3 = await store.clients.client("s3")
        arn = f"arn:aws:s3:::{names['bucket']}"
        policy = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "TLSOnly",  # what the terraform module installs
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "s3:*",
                    "Resource": [arn, f"{arn}/*"],
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                }
            ],
        }
        import json

        await s3.put_bucket_policy(Bucket=names["bucket"], Policy=json.dumps(policy))
        with pytest.raises(AccessDeniedError) as info:
            await store.aget(("a",), "k")
        message = str(info.value)
        assert "s3.get_object" in message and f"s3://{names['bucket']}/" in message
        assert "enforce_tls = false" in message and "http://" in message
        assert isinstance(info.value, PermissionError)


async def test_missing_bucket_on_store_delete(s3_fresh: MotoServer) -> None:
    async with AsyncS3Store(bucket=unique_names()["bucket"], endpoint_url=s3_fresh.url) as store:
        with pytest.raises(MissingResourceError, match=r"call setup\(\)"):
            await store.adelete(("a",), "k")
        with pytest.raises(MissingResourceError, match="bucket"):
            await store.asearch(("a",))


async def test_huge_thread_id_is_refused_before_any_request(s3_saver: AsyncS3Saver) -> None:
    s3_saver.stats.reset()
    cp = generate_checkpoint(channel_values={"a": 1}, channel_versions={"a": 1})
    with pytest.raises(InvalidIdError, match=r"thread_id .* at most 16,384"):
        await s3_saver.aput(cfg("x" * 500_000), cp, generate_metadata(), {"a": 1})
    with pytest.raises(InvalidIdError, match="checkpoint_ns"):
        await s3_saver.aput(
            {"configurable": {"thread_id": "t", "checkpoint_ns": "n" * 20_000}},
            cp,
            generate_metadata(),
            {"a": 1},
        )
    with pytest.raises(InvalidIdError, match="not valid unicode"):
        await s3_saver.aput(cfg("\ud800"), cp, generate_metadata(), {"a": 1})
    assert s3_saver.stats.total == 0  # nothing was sent, so nothing is half-written


async def test_corrupt_objects_are_named_never_served(s3_saver: AsyncS3Saver) -> None:
    big = "x" * (INLINE_MAX + 1)  # a blob
    values = {"a": 1, "b": "held", "big": big}
    cp = generate_checkpoint(channel_values=values, channel_versions={"a": 1, "b": 1, "big": 1})
    first = await s3_saver.aput(cfg(), cp, generate_metadata(), {"a": 1, "b": 1, "big": 1})
    cp2 = generate_checkpoint(
        channel_values={**values, "a": 2}, channel_versions={"a": 2, "b": 1, "big": 1}
    )
    out = await s3_saver.aput(first, cp2, generate_metadata(step=1), {"a": 2})
    await s3_saver.aput_writes(out, [("ch", 1)], "task")
    await s3_saver.aflush()  # stored: read from S3, not from the manifest's copies
    listed = await s3_saver.objects.list_all(s3_saver.layout.thread("t"))
    s3 = await s3_saver.clients.client("s3")
    async with AsyncS3Saver(
        endpoint_url=s3_saver.clients.endpoint_url,
        bucket=s3_saver.target.bucket,
        table=s3_saver.target.table or "",
        cache_bytes=0,
    ) as reader:
        for obj in listed:
            original = await s3_saver.objects.get(obj.key)
            await s3.put_object(Bucket=s3_saver.target.bucket, Key=obj.key, Body=b"\xc1garbage")
            if "/w/" in obj.key:  # the latest's writes are still held by its item: read
                got = await reader.aget_tuple(cfg())  # from there, the garbage never served
                assert got is not None and got.pending_writes == [("task", "ch", 1)]
                await s3.put_object(Bucket=s3_saver.target.bucket, Key=obj.key, Body=original)
                continue
            with pytest.raises(CorruptObjectError) as info:
                await reader.aget_tuple(cfg())
            assert obj.key in str(info.value) and info.value.key == obj.key
            assert original is not None
            await s3.put_object(Bucket=s3_saver.target.bucket, Key=obj.key, Body=original)
        tup = await reader.aget_tuple(cfg())
        assert tup is not None
        assert tup.checkpoint["channel_values"] == {"a": 2, "b": "held", "big": big}
    # the latest, the first (holding b), the blob of big, the writes: each corrupted in turn
    assert len(listed) == 4


async def test_corrupt_store_item_is_named(s3_fresh: MotoServer) -> None:
    async with AsyncS3Store(bucket=unique_names()["bucket"], endpoint_url=s3_fresh.url) as store:
        await store.setup()
        await store.aput(("a",), "k", {"v": 1})
        key = store.layout.store_item(("a",), "k")
        s3 = await store.clients.client("s3")
        await s3.put_object(Bucket=store.bucket, Key=key, Body=b"{not json")
        with pytest.raises(CorruptObjectError, match="store/i/a/"):
            await store.aget(("a",), "k")
        assert await store.asearch(("a",)) == []  # skipped and logged, never served


async def test_truncated_error_body_is_retried(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with AsyncS3Store(bucket=names["bucket"], endpoint_url=s3_fresh.url) as setup:
        await setup.setup()
    plan = FaultPlan(every=10**9, must=("truncate:GET-s3",))
    with fault_proxy(s3_fresh.url, plan) as url:
        async with AsyncS3Store(bucket=names["bucket"], endpoint_url=url) as store:
            assert await store.aget(("a",), "missing") is None  # a 404 whose body was cut
    assert plan.injected["truncate"] == 1


async def test_bad_arguments_are_our_errors(s3_saver: AsyncS3Saver, s3_fresh: MotoServer) -> None:
    with pytest.raises(InvalidRequestError, match="prune strategy"):
        await s3_saver.aprune(["t"], strategy="everything")
    async with AsyncS3Store(bucket=unique_names()["bucket"], endpoint_url=s3_fresh.url) as store:
        with pytest.raises(InvalidRequestError, match="filter operator"):
            await store.asearch(("a",), filter={"x": {"$regex": "."}})
    assert issubclass(ConflictError, S3PersistenceError)


@pytest.mark.parametrize(
    ("conn", "match"),
    [
        ("s3://bucket?table=", "table= is blank"),
        ("s3://bucket?table=t&table=u", "given twice"),
        ("s3://Bad_Bucket!/p", "not a valid S3 bucket name"),
        ("s3://bucket:9000/p", "bare bucket name"),
        ("s3://192.168.0.1/p", "IP address"),
        ("s3://my..bucket", "'..'"),
        ("s3://bucket?read_timeout=soon", "not a number"),
        ("s3://bucket?max_attempts=0", "max_attempts"),
        ("s3://bucket?region=Mars", "region"),
        ("s3://bucket?endpoint_url=ftp://x", "endpoint_url"),
        ("s3://bucket/tenant#1/app?table=tbl", "'#'"),
    ],
)
def test_connection_strings_are_validated(conn: str, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        AsyncS3Saver.from_url(conn)


@pytest.mark.parametrize(
    "conn",
    [
        "s3://user:SECRETPW@bucket/p",
        "https://AKIAXXXX:SECRETPW@bucket.s3.amazonaws.com/p?table=t",
        "s3://bucket/p?endpoint_url=http://user:SECRETPW@host:9000",
        "s3://bucket/p?endpoint_url=ftp://user:SECRETPW@host",
        "s3://user:SECRETPW@bucket#frag",
    ],
)
def test_errors_never_echo_secrets(conn: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        AsyncS3Saver.from_url(conn)
    assert "SECRETPW" not in str(info.value)


def test_limits_come_from_the_connection_string_and_keywords_win() -> None:
    target, limits = parse_conn_string(
        "s3://bucket/p?connect_timeout=1.5&read_timeout=4&max_attempts=2&request_timeout=9"
    )
    assert target.bucket == "bucket"
    assert limits == {
        "connect_timeout": 1.5,
        "read_timeout": 4.0,
        "max_attempts": 2,
        "request_timeout": 9.0,
    }
    saver = AsyncS3Saver.from_url("s3://bucket/p?read_timeout=4&max_attempts=2", max_attempts=3)
    assert saver.clients.limits == Limits(read_timeout=4.0, max_attempts=3)
    store = AsyncS3Store.from_url("s3://bucket/p?request_timeout=9")
    assert store.clients.limits.request_timeout == 9.0


async def test_every_failure_is_ours_even_through_the_sync_facade(
    black_hole: str,
) -> None:
    from langgraph_s3 import S3Saver

    saver = S3Saver(endpoint_url=black_hole, request_timeout=1, **unique_names())
    try:
        with pytest.raises(S3PersistenceError):
            await asyncio.to_thread(saver.get_tuple, cfg())
    finally:
        saver.close()


def test_names_real_deployments_use_are_accepted() -> None:
    for conn in (
        "s3://my.dotted.bucket/p?region=auto",  # Cloudflare R2's region
        "s3://myap-abc123-s3alias/p?region=us-gov-west-1",  # an access point alias
        "s3://bucket/p?endpoint_url=http://localhost:4566&region=cn-north-1",
    ):
        assert AsyncS3Saver.from_url(conn).target.bucket == conn[5:].split("/")[0]


async def test_a_query_secret_in_the_endpoint_never_reaches_a_message() -> None:
    url = f"http://127.0.0.1:{free_port()}/?X-Amz-Security-Token=SECRETTOKEN"
    saver = AsyncS3Saver(endpoint_url=url, max_attempts=1, **unique_names())
    # the manifest read (unreachable) and the writes listing (S3 refuses a query in an
    # endpoint) go out together: whichever fails first is raised, neither with the secret
    with pytest.raises((EndpointUnreachableError, ServiceError)) as info:
        await saver.aget_tuple(cfg())
    assert "SECRETTOKEN" not in str(info.value)
    await saver.aclose()


async def test_stopping_the_sweeper_never_swallows_the_callers_cancellation(
    s3_fresh: MotoServer,
) -> None:
    store = AsyncS3Store(bucket=unique_names()["bucket"], endpoint_url=s3_fresh.url)
    await store.setup()
    await store.start_ttl_sweeper(sweep_interval_minutes=60)

    async def stop() -> bool:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # the caller itself is cancelled while it stops the sweeper
        return await store.stop_ttl_sweeper(timeout=5)

    with pytest.raises(asyncio.CancelledError):
        await asyncio.create_task(stop())
    await store.aclose()


def test_closing_a_sync_saver_mid_call_never_hangs_the_caller(black_hole: str) -> None:
    from langgraph_s3 import S3Saver

    saver = S3Saver(endpoint_url=black_hole, request_timeout=60, **unique_names())
    outcome: list[BaseException | None] = []

    def call() -> None:
        try:
            saver.get_tuple(cfg())
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=call)
    worker.start()
    time.sleep(0.5)  # the call is now waiting on the black hole
    saver.close()
    worker.join(15)
    assert not worker.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], S3PersistenceError)
    assert "closed while this call was running" in str(outcome[0])


async def test_a_request_cut_off_by_close_says_so(black_hole: str) -> None:
    from langgraph_s3 import ClosedError

    saver = AsyncS3Saver(endpoint_url=black_hole, request_timeout=20, **unique_names())
    call = asyncio.create_task(saver.aget_tuple(cfg()))
    await asyncio.sleep(0.5)  # the request now waits on the black hole
    started = time.monotonic()
    await saver.aclose()
    with pytest.raises(ClosedError, match="closed while this call was running"):
        await call
    assert time.monotonic() - started < 10  # not the 20 s deadline, nor "check the endpoint"
