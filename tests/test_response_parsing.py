"""The XML parser of the sessions the library makes (``aws/parsing.py``: structures
parsed from a plan per shape, ISO timestamps by ``datetime.fromisoformat``) answers
exactly as botocore's own parser does, on S3's real answers: listings of every shape
(empty, truncated and continued, with common prefixes, URL-encoded keys, owners),
the bucket's lifecycle, the buckets, and errors."""

from __future__ import annotations

from typing import Any

import pytest
from aiobotocore.session import get_session

from langgraph_s3.aws import door
from langgraph_s3.aws.clients import ClientFactory
from langgraph_s3.aws.parsing import PlannedJSONParser, PlannedXMLParser
from langgraph_s3.errors import NotFoundError
from langgraph_s3.manifest.dynamodb import ATTRIBUTES, KEY_SCHEMA
from langgraph_s3.testing import unique_names
from langgraph_s3.testing.moto import MotoServer

pytestmark = pytest.mark.integration

KEYS = [
    "a/one",
    "a/two",
    "a/sub/three",
    "a/sub/four",
    "b/odd key & <xml> \u00e9",
    "b/tab\tkey",
    *(f"c/{i:03d}" for i in range(7)),
]
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("list_objects_v2", {}),
    ("list_objects_v2", {"Prefix": "a/", "Delimiter": "/"}),
    ("list_objects_v2", {"Prefix": "c/", "MaxKeys": 3}),
    ("list_objects_v2", {"Prefix": "c/", "StartAfter": "c/004", "FetchOwner": True}),
    ("list_objects_v2", {"Prefix": "nothing/"}),
    ("list_objects_v2", {"Prefix": "b/", "EncodingType": "url"}),
    ("list_objects", {"Prefix": "a/", "Delimiter": "/"}),
    ("get_bucket_lifecycle_configuration", {}),
    ("list_buckets", {}),
]


def steady(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer without what differs between two requests (ids, dates, headers)."""
    return {k: v for k, v in answer.items() if k != "ResponseMetadata"}


async def test_the_planned_parser_answers_as_botocores(s3_fresh: MotoServer) -> None:
    bucket = unique_names()["bucket"]
    planned = ClientFactory(endpoint_url=s3_fresh.url)
    plain = ClientFactory(endpoint_url=s3_fresh.url, session=get_session())
    try:
        await door.call(planned, "s3", "create_bucket", Bucket=bucket)
        for key in KEYS:
            await door.call(planned, "s3", "put_object", Bucket=bucket, Key=key, Body=b"x")
        rules = [
            {"ID": "r", "Status": "Enabled", "Filter": {"Prefix": "c/"}, "Expiration": {"Days": 3}}
        ]
        await door.call(
            planned,
            "s3",
            "put_bucket_lifecycle_configuration",
            Bucket=bucket,
            LifecycleConfiguration={"Rules": rules},
        )
        ours = await planned.client("s3")
        assert isinstance(
            ours._endpoint._response_parser_factory.create_parser("rest-xml"), PlannedXMLParser
        )
        for op, params in CALLS:
            args = params if op == "list_buckets" else {"Bucket": bucket, **params}
            got = await getattr(ours, op)(**args)
            want = await getattr(await plain.client("s3"), op)(**args)
            assert steady(got) == steady(want), (op, params)
            if "Contents" in want:
                assert got["Contents"][0]["LastModified"] == want["Contents"][0]["LastModified"]
        token = (await ours.list_objects_v2(Bucket=bucket, MaxKeys=2))["NextContinuationToken"]
        pages = [
            await (await c.client("s3")).list_objects_v2(
                Bucket=bucket, MaxKeys=2, ContinuationToken=token
            )
            for c in (planned, plain)
        ]
        assert steady(pages[0]) == steady(pages[1]) and pages[0]["IsTruncated"] is True
        for clients in (planned, plain):  # an error parses as the same error
            with pytest.raises(NotFoundError):
                await door.call(clients, "s3", "get_object", Bucket=bucket, Key="missing")
    finally:
        await planned.aclose()
        await plain.aclose()


HEADERS = ("ResponseMetadata", "Body")
"""What differs between two answers of one object request (ids, dates; the stream)."""


async def test_answers_bound_to_headers_parse_as_botocores(s3_fresh: MotoServer) -> None:
    """Object answers, whose members are the answer's headers (a size, an ETag, dates
    as HTTP dates, user metadata as a prefixed map, a range, a status), parse to what
    botocore's walk gives, through the library's parser and botocore's."""
    bucket = unique_names()["bucket"]
    planned = ClientFactory(endpoint_url=s3_fresh.url)
    plain = ClientFactory(endpoint_url=s3_fresh.url, session=get_session())
    try:
        await door.call(planned, "s3", "create_bucket", Bucket=bucket)
        put = {
            "Bucket": bucket,
            "Key": "k",
            "Body": b"0123456789",
            "Metadata": {"owner": "alice", "Mixed-Case": "v"},
            "ContentType": "application/json",
            "CacheControl": "no-cache",
            "Tagging": "a=b",
        }
        calls: list[tuple[str, dict[str, Any]]] = [
            ("put_object", put),
            ("get_object", {"Bucket": bucket, "Key": "k"}),
            ("get_object", {"Bucket": bucket, "Key": "k", "Range": "bytes=2-4"}),
            ("head_object", {"Bucket": bucket, "Key": "k"}),
            ("put_object", {"Bucket": bucket, "Key": "k2", "Body": b"x", "IfNoneMatch": "*"}),
        ]
        ours, theirs = await planned.client("s3"), await plain.client("s3")
        for op, params in calls:
            got = await getattr(ours, op)(**params)
            if op == "put_object":  # the same request twice would meet its own object
                await theirs.delete_object(Bucket=bucket, Key=params["Key"])
            want = await getattr(theirs, op)(**params)
            if "Body" in want:
                assert await got["Body"].read() == await want["Body"].read()
            assert {k: v for k, v in got.items() if k not in HEADERS} == {
                k: v for k, v in want.items() if k not in HEADERS
            }, op
            if op == "get_object":
                assert got["LastModified"].tzinfo is not None
                assert got["Metadata"] == {"owner": "alice", "mixed-case": "v"}
    finally:
        await planned.aclose()
        await plain.aclose()


@pytest.mark.parametrize(
    "text",
    [
        "Sun, 06 Dec 2026 06:50:00 GMT",
        "Thu, 29 Feb 2024 23:59:59 GMT",
        "Mon, 01 Jan 1970 00:00:00 GMT",
        "2026-12-05T21:34:15.000Z",
        "2026-12-05T21:34:15+02:00",
        "1700000000",
        "Sunday, 06-Dec-26 06:50:00 GMT",
    ],
)
def test_a_timestamp_parses_as_botocore_parses_it(text: str) -> None:
    from botocore.utils import parse_timestamp as botocores

    from langgraph_s3.aws.parsing import parse_timestamp

    assert parse_timestamp(text) == botocores(text)


def test_an_impossible_http_date_is_botocores_error() -> None:
    from botocore.utils import parse_timestamp as botocores

    from langgraph_s3.aws.parsing import parse_timestamp

    with pytest.raises(ValueError) as theirs:
        botocores("Sun, 31 Feb 2026 06:50:00 GMT")
    with pytest.raises(type(theirs.value)):
        parse_timestamp("Sun, 31 Feb 2026 06:50:00 GMT")


ITEM: dict[str, Any] = {
    "pk": {"S": "p"},
    "sk": {"S": "s \u00e9"},
    "n": {"N": "12.50"},
    "b": {"B": b"\x00\xffbytes"},
    "ss": {"SS": ["a", "b"]},
    "ns": {"NS": ["1", "2.5"]},
    "bs": {"BS": [b"x", b"\x01"]},
    "m": {"M": {"t": {"S": "tail"}, "b": {"B": b"body"}, "deep": {"M": {"l": {"L": []}}}}},
    "l": {"L": [{"S": "x"}, {"N": "1"}, {"B": b"y"}, {"NULL": True}, {"BOOL": False}]},
    "null": {"NULL": True},
    "yes": {"BOOL": True},
}


async def test_the_planned_json_parser_answers_as_botocores(s3_fresh: MotoServer) -> None:
    """DynamoDB's answers (items of every attribute type, nested maps and lists, blobs,
    consumed capacity, a table's description with its timestamps, a modeled error's
    item) parse as botocore's parser parses them."""
    table = unique_names()["table"]
    planned = ClientFactory(endpoint_url=s3_fresh.url)
    plain = ClientFactory(endpoint_url=s3_fresh.url, session=get_session())
    try:
        ours, theirs = await planned.client("dynamodb"), await plain.client("dynamodb")
        assert isinstance(
            ours._endpoint._response_parser_factory.create_parser("json"), PlannedJSONParser
        )
        await ours.create_table(
            TableName=table,
            KeySchema=KEY_SCHEMA,
            AttributeDefinitions=ATTRIBUTES,
            BillingMode="PAY_PER_REQUEST",
        )
        await ours.put_item(TableName=table, Item=ITEM)
        key = {"pk": ITEM["pk"], "sk": ITEM["sk"]}
        same = {"UpdateExpression": "SET n = :n", "ExpressionAttributeValues": {":n": ITEM["n"]}}
        calls: list[tuple[str, dict[str, Any]]] = [
            ("get_item", {"Key": key, "ConsistentRead": True, "ReturnConsumedCapacity": "TOTAL"}),
            ("get_item", {"Key": {"pk": {"S": "none"}, "sk": {"S": "none"}}}),
            ("update_item", {"Key": key, "ReturnValues": "ALL_OLD", **same}),
            ("update_item", {"Key": key, "ReturnValues": "ALL_NEW", **same}),
            (
                "query",
                {
                    "KeyConditionExpression": "pk = :p",
                    "ExpressionAttributeValues": {":p": {"S": "p"}},
                    "ReturnConsumedCapacity": "INDEXES",
                },
            ),
            ("scan", {}),
            ("describe_table", {}),
            ("describe_time_to_live", {}),
        ]
        for op, params in calls:
            got = await getattr(ours, op)(TableName=table, **params)
            want = await getattr(theirs, op)(TableName=table, **params)
            assert steady(got) == steady(want), (op, params)
        batch = {"RequestItems": {table: {"Keys": [key]}}}
        got, want = await ours.batch_get_item(**batch), await theirs.batch_get_item(**batch)
        assert steady(got) == steady(want) and got["Responses"][table] == [ITEM]
        assert (await ours.get_item(TableName=table, Key=key))["Item"] == ITEM
        failed = []
        for client in (ours, theirs):  # a modeled error's fields, the old item among them
            with pytest.raises(client.exceptions.ConditionalCheckFailedException) as caught:
                await client.put_item(
                    TableName=table,
                    Item=ITEM,
                    ConditionExpression="attribute_not_exists(pk)",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            failed.append(steady(caught.value.response))
        assert failed[0] == failed[1]
    finally:
        await planned.aclose()
        await plain.aclose()
