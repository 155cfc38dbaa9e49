"""The strict test server bills each DynamoDB request as AWS bills on-demand capacity
(``testing/capacity.py``): a write by the larger of the item before and after it, a KB a
unit rounded up, a failed condition included, a transaction twice; a read by 4 KB a unit,
half when eventually consistent, a missing item at the minimum."""

from __future__ import annotations

from typing import Any

import pytest
from aiobotocore.session import get_session

from langgraph_s3.manifest import ATTRIBUTES, KEY_SCHEMA
from langgraph_s3.testing import unique_names
from langgraph_s3.testing.capacity import item_bytes
from langgraph_s3.testing.moto import MotoServer

pytestmark = pytest.mark.integration


def pad(kb: float) -> dict[str, Any]:
    return {"S": "x" * int(kb * 1024)}


def key(name: str) -> dict[str, Any]:
    return {"pk": {"S": name}, "sk": {"S": "~"}}


async def test_each_request_is_billed_as_aws_bills_it(s3_fresh: MotoServer) -> None:
    table = unique_names()["table"]
    async with get_session().create_client("dynamodb", endpoint_url=s3_fresh.url) as ddb:
        await ddb.create_table(
            TableName=table,
            KeySchema=KEY_SCHEMA,
            AttributeDefinitions=ATTRIBUTES,
            BillingMode="PAY_PER_REQUEST",
        )
        calls: list[tuple[str, Any]] = [
            ("PutItem", ddb.put_item(TableName=table, Item={**key("a"), "v": pad(1.5)})),
            (
                "UpdateItem",  # 1.5 KB to 2.5 KB: the larger
                ddb.update_item(
                    TableName=table,
                    Key=key("a"),
                    UpdateExpression="SET w = :w",
                    ExpressionAttributeValues={":w": pad(1)},
                ),
            ),
            ("GetItem", ddb.get_item(TableName=table, Key=key("a"), ConsistentRead=True)),
            ("GetItem", ddb.get_item(TableName=table, Key=key("a"))),  # eventually: half
            ("GetItem", ddb.get_item(TableName=table, Key=key("none"), ConsistentRead=True)),
            (
                "TransactWriteItems",  # two small parts, each twice
                ddb.transact_write_items(
                    TransactItems=[
                        {"Put": {"TableName": table, "Item": {**key("b"), "v": pad(0.2)}}},
                        {"Put": {"TableName": table, "Item": {**key("c"), "v": pad(0.2)}}},
                    ]
                ),
            ),
            ("DeleteItem", ddb.delete_item(TableName=table, Key=key("a"))),  # 2.5 KB gone
        ]
        got: list[tuple[str, float]] = []
        for name, call in calls:
            with s3_fresh.recording() as log:
                await call
            assert [r.operation for r in log] == [name]
            got += [(r.operation, r.units) for r in log]
        failed = pytest.raises(ddb.exceptions.ConditionalCheckFailedException)
        with s3_fresh.recording() as log, failed:
            await ddb.update_item(  # fails: billed on the item it read
                TableName=table,
                Key=key("b"),
                UpdateExpression="SET w = :w",
                ConditionExpression="attribute_not_exists(pk)",
                ExpressionAttributeValues={":w": pad(3)},
            )
        got += [(r.operation, r.units) for r in log]
    assert got == [
        ("PutItem", 2.0),
        ("UpdateItem", 3.0),
        ("GetItem", 1.0),
        ("GetItem", 0.5),
        ("GetItem", 1.0),
        ("TransactWriteItems", 4.0),
        ("DeleteItem", 3.0),
        ("UpdateItem", 1.0),
    ]


def test_an_item_is_sized_by_names_and_values() -> None:
    assert item_bytes({"pk": {"S": "ab"}}) == 4
    assert item_bytes({"n": {"N": "12345"}}) == 1 + 4  # about half the digits, plus one
    assert item_bytes({"b": {"B": "AAAA"}}) == 1 + 3  # base64 of 3 bytes
    assert item_bytes({"m": {"M": {"k": {"BOOL": True}}}}) == 1 + 3 + 1 + 1 + 1
