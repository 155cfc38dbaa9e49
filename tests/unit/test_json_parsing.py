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
