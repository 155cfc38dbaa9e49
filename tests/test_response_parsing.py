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
from langgraph_s3.aws.parsing import PlannedXMLParser
from langgraph_s3.errors import NotFoundError
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
