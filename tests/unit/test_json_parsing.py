"""DynamoDB's JSON answers parse through the planned parser (``aws/parsing.py``) as
through botocore's own, on bodies a server could send that the real-server test does
not reach: numbers past 64 bits, NaN, nulls in lists and maps, members unknown to the
model, a body that is no JSON, an empty one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiobotocore.parsers import AioResponseParserFactory
from botocore.session import get_session

from langgraph_s3.aws.parsing import PlannedParserFactory

pytestmark = pytest.mark.unit

MODEL = get_session().get_service_model("dynamodb")
BODIES = [
    b'{"Attributes": {"n": {"N": "1"}, "b": {"B": "AAE="}, "m": {"M": {"x": {"BS": ["AA=="]}}}}}',
    b'{"Attributes": {"l": {"L": [null, {"S": "x"}, {"L": [{"B": "AQ=="}]}]}}, "Extra": 1}',
    b'{"Attributes": {"m": {"M": {"k": null}}}, "ConsumedCapacity": {"CapacityUnits": 1.5}}',
    b'{"Attributes": {"s": {"S": "\\ud800"}}, "ConsumedCapacity": {"CapacityUnits": NaN}}',
    b'{"ItemCollectionMetrics": {"SizeEstimateRangeGB": [123456789012345678901234567890]}}',
    b'{"Attributes": {"two": {"S": "a", "N": "1"}, "unknown": {"Q": "?"}}}',
    b"not json",
    b"",
]


async def parse(factory: Any, body: bytes, operation: str) -> Any:
    shape = MODEL.operation_model(operation).output_shape
    response = {"body": body, "headers": {}, "status_code": 200}
    return await factory.create_parser("json").parse(response, shape)


@pytest.mark.parametrize("body", BODIES)
@pytest.mark.parametrize("operation", ["UpdateItem", "GetItem", "Query"])
def test_a_body_parses_as_botocore_parses_it(body: bytes, operation: str) -> None:
    planned = asyncio.run(parse(PlannedParserFactory(), body, operation))
    plain = asyncio.run(parse(AioResponseParserFactory(), body, operation))
    assert repr(planned) == repr(plain)  # NaN != NaN: compared as written


LISTING = (
    b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult '
    b'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><KeyCount>1</KeyCount>'
    b"<IsTruncated>false</IsTruncated><Contents><Key>k</Key><Size>1</Size>"
    b"<LastModified>2026-12-05T21:34:15.000Z</LastModified></Contents></ListBucketResult>"
)


def test_plans_are_made_once_per_service_whatever_the_clients() -> None:
    """A client per event loop gets its own botocore model of the service: the plans
    are kept by the shapes' names in the description the session loaded once, so they
    do not grow with the loops (they did: one set, and a model kept, per loop)."""
    session, factory = get_session(), PlannedParserFactory()
    sizes = []
    for _ in range(4):
        dynamodb, s3 = session.get_service_model("dynamodb"), session.get_service_model("s3")
        shape = dynamodb.operation_model("UpdateItem").output_shape
        response = {"body": BODIES[0], "headers": {}, "status_code": 200}
        asyncio.run(factory.create_parser("json").parse(response, shape))
        listing = s3.operation_model("ListObjectsV2").output_shape
        response = {"body": LISTING, "headers": {}, "status_code": 200}
        got = asyncio.run(factory.create_parser("rest-xml").parse(response, listing))
        assert got["Contents"][0]["Key"] == "k"
        sizes.append((len(factory._json_plans), len(factory._plans)))
    assert sizes[0][0] > 0 and sizes[0][1] > 0
    assert sizes == [sizes[0]] * 4, sizes
