"""The strict moto server (``moto_server(strict=True)``, the suite's default): it answers
as AWS does where moto alone does not, and a lenient server shows each difference."""

from __future__ import annotations

import functools
import hashlib
import socket
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pytest
from botocore.exceptions import ClientError

from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.moto import MAX_KEY_BYTES, kms_etag, moto_server


@functools.cache
def _session() -> Any:
    import boto3

    return boto3.session.Session()


def s3_client(url: str) -> Any:
    return _session().client("s3", endpoint_url=url)


def ddb_client(url: str) -> Any:
    return _session().client("dynamodb", endpoint_url=url)


def md5(body: bytes) -> str:
    return f'"{hashlib.md5(body).hexdigest()}"'


def code_of(call: Any, **params: Any) -> tuple[int, str]:
    """The HTTP status and error code ``call(**params)`` answers (200 and "" when it
    succeeds)."""
    try:
        resp = call(**params)
    except ClientError as exc:
        return exc.response["ResponseMetadata"]["HTTPStatusCode"], exc.response["Error"]["Code"]
    return resp["ResponseMetadata"]["HTTPStatusCode"], ""


@pytest.fixture
def bucket(s3_fresh: MotoServer) -> str:
    name = unique_names()["bucket"]
    s3_client(s3_fresh.url).create_bucket(Bucket=name)
    return name


@pytest.fixture(scope="module")
def lenient() -> Iterator[MotoServer]:
    """Plain moto (with atomic writes): what strict mode changes."""
    with moto_server(strict=False) as server:
        yield server


def test_the_suite_runs_strict(s3_endpoint: MotoServer, lenient: MotoServer) -> None:
    assert s3_endpoint.strict or not s3_endpoint.owned  # an outside endpoint is itself
    assert not lenient.strict


# ---------------------------------------------------------------- key length
def test_keys_over_1024_utf8_bytes_are_refused_on_every_object_request(
    s3_fresh: MotoServer, bucket: str
) -> None:
    s3 = s3_client(s3_fresh.url)
    longest = "ü" * (MAX_KEY_BYTES // 2)  # 512 characters, 1,024 bytes: allowed
    too_long = "a" + longest  # 513 characters, 1,025 bytes
    assert len(too_long) < MAX_KEY_BYTES < len(too_long.encode())
    s3.put_object(Bucket=bucket, Key=longest, Body=b"x")
    refused = (400, "KeyTooLongError")
    assert code_of(s3.put_object, Bucket=bucket, Key=too_long, Body=b"x") == refused
    assert code_of(s3.get_object, Bucket=bucket, Key=too_long) == refused
    assert code_of(s3.head_object, Bucket=bucket, Key=too_long) == (400, "400")
    assert code_of(s3.delete_object, Bucket=bucket, Key=too_long) == refused
    for source, target in ((longest, too_long), (too_long, "k")):
        copy = {"Bucket": bucket, "Key": source}
        assert code_of(s3.copy_object, Bucket=bucket, Key=target, CopySource=copy) == (refused)
    try:
        s3.put_object(Bucket=bucket, Key=too_long, Body=b"x")
    except ClientError as exc:
        assert exc.response["Error"]["Message"] == "Your key is too long"
    # DeleteObjects: the long key comes back in an <Error>, the others are deleted
    s3.put_object(Bucket=bucket, Key="short", Body=b"x")
    resp = s3.delete_objects(
        Bucket=bucket, Delete={"Objects": [{"Key": too_long}, {"Key": "short"}], "Quiet": True}
    )
    assert [(e["Key"], e["Code"]) for e in resp["Errors"]] == [(too_long, "KeyTooLongError")]
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == [longest]
    alone = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": too_long}]})
    assert [e["Code"] for e in alone["Errors"]] == ["KeyTooLongError"]
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 1


def test_plain_moto_takes_a_key_over_1024_bytes(lenient: MotoServer) -> None:
    s3 = s3_client(lenient.url)
    name = unique_names()["bucket"]
    s3.create_bucket(Bucket=name)
    assert code_of(s3.put_object, Bucket=name, Key="k" * 1025, Body=b"x") == (200, "")


# -------------------------------------------------------- DynamoDB item size
def _table(url: str) -> tuple[Any, str]:
    ddb = ddb_client(url)
    name = unique_names()["table"]
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return ddb, name


def _too_big(call: Any) -> str:
    with pytest.raises(ClientError) as caught:
        call()
    err = caught.value.response["Error"]
    assert err["Code"] == "ValidationException"
    return str(err["Message"])


def test_items_over_400_kb_are_refused_on_every_write_path(s3_fresh: MotoServer) -> None:
    ddb, table = _table(s3_fresh.url)
    big = {"S": "x" * 410_000}
    half = {"S": "y" * 300_000}
    # moto enforces these itself (the note says so; this proves it)
    for call in (
        lambda: ddb.put_item(TableName=table, Item={"pk": {"S": "a"}, "v": big}),
        lambda: ddb.batch_write_item(
            RequestItems={table: [{"PutRequest": {"Item": {"pk": {"S": "b"}, "v": big}}}]}
        ),
        lambda: ddb.transact_write_items(
            TransactItems=[{"Put": {"TableName": table, "Item": {"pk": {"S": "c"}, "v": big}}}]
        ),
    ):
        assert _too_big(call) == "Item size has exceeded the maximum allowed size"
    grow = {
        "SET": ("SET w = :w", {":w": half}),
        "list_append": ("SET l = list_append(l, :w)", {":w": {"L": [half]}}),
        "ADD to a set": ("ADD ss :w", {":w": {"SS": [half["S"]]}}),  # strict mode's own
    }
    for i, (expression, values) in enumerate(grow.values()):
        for transact in (False, True):
            key = {"pk": {"S": f"u{i}{transact}"}}
            item = {**key, "v": half, "l": {"L": [{"S": "q"}]}, "ss": {"SS": ["a"]}}
            ddb.put_item(TableName=table, Item=item)
            update = {
                "TableName": table,
                "Key": key,
                "UpdateExpression": expression,
                "ExpressionAttributeValues": values,
            }
            if transact:
                message = _too_big(
                    lambda u=update: ddb.transact_write_items(TransactItems=[{"Update": u}])
                )
            else:
                message = _too_big(lambda u=update: ddb.update_item(**u))
            assert message == "Item size to update has exceeded the maximum allowed size"
            assert ddb.get_item(TableName=table, Key=key)["Item"] == item  # unchanged
    # an update creating an item over the limit leaves none (moto alone leaves its key)
    new = {"pk": {"S": "new"}}
    _too_big(
        lambda: ddb.update_item(
            TableName=table,
            Key=new,
            UpdateExpression="SET w = :w",
            ExpressionAttributeValues={":w": big},
        )
    )
    assert "Item" not in ddb.get_item(TableName=table, Key=new)
    # growing within the limit is fine
    ddb.update_item(
        TableName=table,
        Key={"pk": {"S": "u2False"}},
        UpdateExpression="ADD ss :w",
        ExpressionAttributeValues={":w": {"SS": ["b" * 1000]}},
    )


def test_plain_moto_lets_add_grow_an_item_over_400_kb(lenient: MotoServer) -> None:
    ddb, table = _table(lenient.url)
    key = {"pk": {"S": "k"}}
    ddb.put_item(TableName=table, Item={**key, "ss": {"SS": ["a" * 300_000]}})
    ddb.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="ADD ss :w",
        ExpressionAttributeValues={":w": {"SS": ["b" * 300_000]}},
    )
    assert len(ddb.get_item(TableName=table, Key=key)["Item"]["ss"]["SS"]) == 2


# ---------------------------------------------------- 409 ConditionalRequestConflict
def _raw_put_head(url: str, bucket: str, key: str, length: int) -> socket.socket:
    """A conditional PUT whose body is not sent yet: in flight until it is."""
    parsed = urlparse(url)
    sock = socket.create_connection((parsed.hostname, parsed.port), timeout=10)
    head = (
        f"PUT /{bucket}/{key} HTTP/1.1\r\n"
        f"Host: {parsed.netloc}\r\n"
        "Authorization: AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/s3/"
        "aws4_request, SignedHeaders=host, Signature=00\r\n"
        "If-None-Match: *\r\n"
        f"Content-Length: {length}\r\n\r\n"
    )
    sock.sendall(head.encode())
    return sock


def _answered(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return bool(sock.recv(1, socket.MSG_PEEK))
    except BlockingIOError:
        return False
    finally:
        sock.setblocking(True)


def test_a_conditional_write_while_another_is_in_flight_answers_409(
    s3_fresh: MotoServer, bucket: str
) -> None:
    s3 = s3_client(s3_fresh.url)
    for attempt in range(5):
        key = f"busy-{attempt}"
        first = _raw_put_head(s3_fresh.url, bucket, key, 4)
        try:
            deadline = time.monotonic() + 10
            seen = (0, "")
            while seen != (409, "ConditionalRequestConflict") and time.monotonic() < deadline:
                time.sleep(0.05)  # a probe that writes nothing: If-Match on a missing key
                seen = code_of(s3.put_object, Bucket=bucket, Key=key, IfMatch='"0"')
            if _answered(first):  # a probe was in flight when it arrived: again
                continue
            assert seen == (409, "ConditionalRequestConflict")
            # a conditional PUT of the key meanwhile writes nothing
            busy = code_of(s3.put_object, Bucket=bucket, Key=key, IfNoneMatch="*")
            assert busy == (409, "ConditionalRequestConflict")
            first.sendall(b"body")
            status = first.recv(4096).split(b" ", 2)[1]
            assert status == b"200"
        finally:
            first.close()
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"body"
        assert code_of(s3.put_object, Bucket=bucket, Key=key, IfNoneMatch="*") == (
            412,
            "PreconditionFailed",
        )
        return
    pytest.fail("the in-flight PUT kept arriving while a probe was in flight")


def test_conflict_next_answers_409_to_the_next_conditional_writes_of_a_key(
    s3_fresh: MotoServer, bucket: str, lenient: MotoServer
) -> None:
    s3 = s3_client(s3_fresh.url)
    s3.put_object(Bucket=bucket, Key="other", Body=b"x")
    plan = s3_fresh.conflict_next(f"{bucket}/hot", n=3)
    busy = (409, "ConditionalRequestConflict")
    assert code_of(s3.put_object, Bucket=bucket, Key="hot", Body=b"1", IfNoneMatch="*") == busy
    # unconditional writes and other keys are not affected
    assert code_of(s3.put_object, Bucket=bucket, Key="hot", Body=b"1") == (200, "")
    assert code_of(s3.put_object, Bucket=bucket, Key="other", Body=b"y", IfMatch=md5(b"x")) == (
        200,
        "",
    )
    assert code_of(s3.put_object, Bucket=bucket, Key="hot", Body=b"2", IfMatch=md5(b"1")) == busy
    assert code_of(s3.delete_object, Bucket=bucket, Key="hot", IfMatch=md5(b"1")) == busy
    assert (plan.answered, plan.left) == (3, 0)
    assert s3.get_object(Bucket=bucket, Key="hot")["Body"].read() == b"1"  # none applied
    assert code_of(s3.put_object, Bucket=bucket, Key="hot", Body=b"2", IfMatch=md5(b"1")) == (
        200,
        "",
    )
    s3_fresh.conflict_next("hot")
    s3_fresh.reset()  # disarms
    s3.create_bucket(Bucket=bucket)
    assert code_of(s3.put_object, Bucket=bucket, Key="hot", Body=b"1", IfNoneMatch="*") == (
        200,
        "",
    )
    with pytest.raises(RuntimeError, match="not strict"):
        lenient.conflict_next("x")


# ------------------------------------------------ conditional DELETE, missing key
def test_a_conditional_delete_of_a_missing_key_answers_204(
    s3_fresh: MotoServer, bucket: str, lenient: MotoServer
) -> None:
    s3 = s3_client(s3_fresh.url)
    assert code_of(s3.delete_object, Bucket=bucket, Key="gone", IfMatch=md5(b"x")) == (
        204,
        "",
    )
    s3.put_object(Bucket=bucket, Key="here", Body=b"x")
    assert code_of(s3.delete_object, Bucket=bucket, Key="here", IfMatch=md5(b"y")) == (
        412,
        "PreconditionFailed",
    )
    missing_bucket = unique_names()["bucket"]
    assert code_of(s3.delete_object, Bucket=missing_bucket, Key="k", IfMatch='"0"') == (
        404,
        "NoSuchBucket",
    )
    plain = s3_client(lenient.url)
    plain.create_bucket(Bucket=bucket)
    assert code_of(plain.delete_object, Bucket=bucket, Key="gone", IfMatch=md5(b"x")) == (
        404,
        "NoSuchKey",
    )


# ------------------------------------------------------------ SSE-KMS ETags
def test_sse_kms_etags_are_no_md5_and_the_same_everywhere(
    s3_fresh: MotoServer, bucket: str
) -> None:
    s3 = s3_client(s3_fresh.url)
    kms_bucket = unique_names()["bucket"]
    s3.create_bucket(Bucket=kms_bucket)
    s3.put_bucket_encryption(
        Bucket=kms_bucket,
        ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms"}}]
        },
    )
    body = b"a body"
    key = "a key/ü&<x>"  # escaped and url-encoded in listings
    cases = [(kms_bucket, key, {}), (bucket, "explicit", {"ServerSideEncryption": "aws:kms"})]
    for where, k, extra in cases:
        etag = s3.put_object(Bucket=where, Key=k, Body=body, **extra)["ETag"]
        assert etag != md5(body) and etag == kms_etag(md5(body))
        assert s3.get_object(Bucket=where, Key=k)["ETag"] == etag
        assert s3.head_object(Bucket=where, Key=k)["ETag"] == etag
        assert {o["Key"]: o["ETag"] for o in s3.list_objects_v2(Bucket=where)["Contents"]}[
            k
        ] == etag
        assert {o["Key"]: o["ETag"] for o in s3.list_objects(Bucket=where)["Contents"]}[k] == etag
        copied = s3.copy_object(Bucket=where, Key="copy", CopySource={"Bucket": where, "Key": k})
        assert (
            copied["CopyObjectResult"]["ETag"] == s3.head_object(Bucket=where, Key="copy")["ETag"]
        )
        # conditions take the ETag shown, not the MD5
        stale = (412, "PreconditionFailed")
        assert code_of(s3.put_object, Bucket=where, Key=k, Body=b"2", IfMatch=md5(body)) == stale
        assert code_of(s3.get_object, Bucket=where, Key=k, IfMatch=md5(body)) == stale
        assert code_of(s3.get_object, Bucket=where, Key=k, IfNoneMatch=etag) == (
            304,
            "304",
        )
        assert code_of(s3.delete_object, Bucket=where, Key=k, IfMatch=md5(body)) == stale
        new = s3.put_object(Bucket=where, Key=k, Body=b"2", IfMatch=etag, **extra)["ETag"]
        assert new == kms_etag(md5(b"2"))
        assert code_of(s3.delete_object, Bucket=where, Key=k, IfMatch=new) == (204, "")
        assert code_of(s3.head_object, Bucket=where, Key=k) == (404, "404")
    # objects without KMS keep the MD5
    assert s3.put_object(Bucket=bucket, Key="plain", Body=body)["ETag"] == md5(body)
    listed = {o["Key"]: o["ETag"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    assert listed["plain"] == md5(body)


def test_plain_moto_gives_sse_kms_objects_the_md5(lenient: MotoServer) -> None:
    s3 = s3_client(lenient.url)
    name = unique_names()["bucket"]
    s3.create_bucket(Bucket=name)
    etag = s3.put_object(Bucket=name, Key="k", Body=b"x", ServerSideEncryption="aws:kms")["ETag"]
    assert etag == md5(b"x")


# -------------------------------------------------- stores that ignore conditions
@pytest.mark.parametrize("ignored", ["put", "put-if-match", "delete"])
def test_ignore_conditions_drops_them_before_moto(ignored: str) -> None:
    with moto_server(ignore_conditions=ignored) as server:
        s3 = s3_client(server.url)
        s3.create_bucket(Bucket="bucket")
        s3.put_object(Bucket="bucket", Key="k", Body=b"1")
        again = code_of(s3.put_object, Bucket="bucket", Key="k", Body=b"2", IfNoneMatch="*")
        assert again == ((200, "") if ignored == "put" else (412, "PreconditionFailed"))
        current = s3.head_object(Bucket="bucket", Key="k")["ETag"]
        stale = code_of(s3.put_object, Bucket="bucket", Key="k", Body=b"3", IfMatch='"0"')
        assert stale == ((412, "PreconditionFailed") if ignored == "delete" else (200, ""))
        assert s3.head_object(Bucket="bucket", Key="k")["ETag"] != current or ignored == "delete"
        deleted = code_of(s3.delete_object, Bucket="bucket", Key="k", IfMatch='"0"')
        assert deleted == ((204, "") if ignored == "delete" else (412, "PreconditionFailed"))
    with pytest.raises(ValueError, match="ignore_conditions"), moto_server(ignore_conditions="get"):
        pass
