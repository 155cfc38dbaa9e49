"""DynamoDB's hot requests (``aws/hot.py``) go from a template after their first request,
and answer, fail, retry and count exactly as the SDK's whole path does: the same parsed
answers (binary values included), the same error classes and our errors from the door,
botocore's retries through a fault proxy, the same request accounting."""

from __future__ import annotations

from typing import Any

import pytest

from faults import FaultPlan, fault_proxy
from langgraph_s3.aws import door, hot
from langgraph_s3.aws.clients import ClientFactory
from langgraph_s3.aws.config import Limits
from langgraph_s3.errors import ConditionFailedError
from langgraph_s3.manifest import ATTRIBUTES, KEY_SCHEMA
from langgraph_s3.testing import unique_names
from langgraph_s3.testing.moto import MotoServer

pytestmark = pytest.mark.integration


def key(name: str) -> dict[str, Any]:
    return {"pk": {"S": name}, "sk": {"S": "~"}}


async def make_table(clients: ClientFactory, table: str) -> None:
    await door.call(
        clients,
        "dynamodb",
        "create_table",
        TableName=table,
        KeySchema=KEY_SCHEMA,
        AttributeDefinitions=ATTRIBUTES,
        BillingMode="PAY_PER_REQUEST",
    )


async def test_a_templated_request_answers_as_the_whole_path(s3_fresh: MotoServer) -> None:
    table = unique_names()["table"]
    clients = ClientFactory(endpoint_url=s3_fresh.url)
    try:
        await make_table(clients, table)
        item = {**key("a"), "b": {"B": b"\x00\xffbytes"}, "n": {"N": "12"}, "s": {"SS": ["x", "y"]}}
        for _ in range(2):  # the first makes the template, the second uses it
            await door.call(clients, "dynamodb", "put_item", TableName=table, Item=item)
        client = await clients.client("dynamodb")
        assert {"PutItem"} <= set(hot._TEMPLATES[client].by_operation)
        whole = await client.get_item(TableName=table, Key=key("a"), ConsistentRead=True)
        got = [
            await door.call(
                clients, "dynamodb", "get_item", TableName=table, Key=key("a"), ConsistentRead=True
            )
            for _ in range(2)
        ]
        assert "GetItem" in hot._TEMPLATES[client].by_operation
        for answer in got:
            assert answer["Item"] == whole["Item"] == item  # bytes come back as bytes
        update = {
            "TableName": table,
            "Key": key("a"),
            "UpdateExpression": "ADD n :one",
            "ConditionExpression": "attribute_exists(pk)",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
            "ReturnValues": "ALL_NEW",
        }
        await door.call(clients, "dynamodb", "update_item", **update)
        again = await door.call(clients, "dynamodb", "update_item", **update)
        assert again["Attributes"]["n"] == {"N": "14"}
        refused = {**update, "Key": key("none")}
        for _ in range(2):  # the whole path, then the template: the same error
            with pytest.raises(ConditionFailedError) as caught:
                await door.call(clients, "dynamodb", "update_item", **refused)
            cause = caught.value.__cause__
            assert type(cause).__name__ == "ConditionalCheckFailedException"
            assert isinstance(cause, client.exceptions.ConditionalCheckFailedException)
        assert clients.stats.requests["dynamodb.UpdateItem"] == 4
    finally:
        await clients.aclose()


async def test_a_templated_request_is_retried_as_botocore_retries(s3_fresh: MotoServer) -> None:
    table = unique_names()["table"]
    setup = ClientFactory(endpoint_url=s3_fresh.url)
    try:
        await make_table(setup, table)
    finally:
        await setup.aclose()
    plan = FaultPlan(every=2, cycle=("503", "reset"))
    with fault_proxy(s3_fresh.url, plan) as url:
        clients = ClientFactory(endpoint_url=url, limits=Limits(max_attempts=6))
        retried: list[int] = []
        clients.add_hook("needs-retry.dynamodb", lambda **kw: retried.append(kw["attempts"]))
        try:
            for i in range(8):
                item = {**key(f"k{i}"), "v": {"N": str(i)}}
                await door.call(clients, "dynamodb", "put_item", TableName=table, Item=item)
            client = await clients.client("dynamodb")
            assert "PutItem" in hot._TEMPLATES[client].by_operation
            got = await door.call(
                clients, "dynamodb", "get_item", TableName=table, Key=key("k7"), ConsistentRead=True
            )
            assert got["Item"]["v"] == {"N": "7"}
        finally:
            await clients.aclose()
    assert plan.injected["503"] + plan.injected["reset"] >= 4  # faults met the templates too
    assert max(retried) > 1  # botocore retried them
    assert clients.stats.retries > 0


async def test_in_a_lambda_each_request_carries_its_invocations_trace(
    s3_fresh: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """botocore's recursion-detection header (``X-Amzn-Trace-Id`` from
    ``_X_AMZN_TRACE_ID``) is set on every templated request too: X-Ray and AWS's loop
    detection see each invocation's DynamoDB requests, not the first one's alone."""
    table = unique_names()["table"]
    clients = ClientFactory(endpoint_url=s3_fresh.url)
    seen: list[str | None] = []

    def record(request: Any, event_name: str, **kw: Any) -> None:
        if "PutItem" in event_name:
            header = request.headers.get("X-Amzn-Trace-Id")
            seen.append(header.decode() if isinstance(header, bytes) else header)

    clients.add_hook("before-send", record)
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "agent")
    try:
        await make_table(clients, table)
        for n in range(3):  # three invocations of one warm Lambda, each its own trace
            monkeypatch.setenv("_X_AMZN_TRACE_ID", f"Root=1-0000000{n}-abc;Parent=x")
            await door.call(clients, "dynamodb", "put_item", TableName=table, Item=key("a"))
        client = await clients.client("dynamodb")
        assert "PutItem" in hot._TEMPLATES[client].by_operation
    finally:
        await clients.aclose()
    assert seen == [f"Root=1-0000000{n}-abc;Parent=x" for n in range(3)]


async def test_a_hook_on_a_skipped_event_sees_every_request(s3_fresh: MotoServer) -> None:
    """A handler ``add_hook`` registers on an event templated requests skip turns the
    templates off, for the clients made before and after it."""
    table = unique_names()["table"]
    clients = ClientFactory(endpoint_url=s3_fresh.url)
    counts: dict[str, int] = {}

    def counter(name: str) -> Any:
        def count(**kw: Any) -> None:
            counts[name] = counts.get(name, 0) + 1

        return count

    try:
        await make_table(clients, table)
        for _ in range(2):  # a template is made now
            await door.call(clients, "dynamodb", "get_item", TableName=table, Key=key("a"))
        for event in hot.SKIPPED:
            clients.add_hook(f"{event}.dynamodb.GetItem", counter(event))
        for _ in range(3):
            await door.call(clients, "dynamodb", "get_item", TableName=table, Key=key("a"))
    finally:
        await clients.aclose()
    assert counts == dict.fromkeys(hot.SKIPPED, 3)
    assert hot.skips("before-call") and hot.skips("after-call.dynamodb.GetItem")
    assert not hot.skips("before-send") and not hot.skips("before-call.s3.PutObject")


@pytest.mark.parametrize("blob", ["aGVsbG8=", "hello!"])
async def test_a_text_binary_value_is_stored_as_the_whole_path_stores_it(
    s3_fresh: MotoServer, blob: str
) -> None:
    """A ``str`` given for a binary value is its UTF-8 bytes, as botocore's serializer
    makes it, whether the request goes the whole way or from the template."""
    table = unique_names()["table"]
    clients = ClientFactory(endpoint_url=s3_fresh.url)
    try:
        await make_table(clients, table)
        item = {**key("a"), "b": {"B": blob}, "s": {"BS": [blob, b"raw"]}}
        stored = []
        for _ in range(2):  # the whole path, then the template
            await door.call(clients, "dynamodb", "put_item", TableName=table, Item=item)
            got = await door.call(
                clients, "dynamodb", "get_item", TableName=table, Key=key("a"), ConsistentRead=True
            )
            stored.append(got["Item"])
    finally:
        await clients.aclose()
    for got in stored:
        assert got["b"] == {"B": blob.encode()}
        assert sorted(got["s"]["BS"]) == sorted([blob.encode(), b"raw"])
