"""The strict test server's DynamoDB rule: an update may not leave an item over 400 KB
(moto checks PutItem and SET, not an ``ADD`` to a set)."""

from __future__ import annotations

import copy
import json
from typing import Any

from langgraph_s3.testing.capacity import READS, WRITES, metered
from langgraph_s3.testing.wsgi import (
    Signed,
    moto_account,
    send,
    take_body,
)

MAX_ITEM_BYTES = 400 * 1024
"""DynamoDB's limit on an item: 400 KB, attribute names included."""


def item_size_limit(app: Any, environ: dict[str, Any], start_response: Any, signed: Signed) -> Any:
    """UpdateItem and TransactWriteItems' updates: an item grown over 400 KB is put back
    as it was, and the request answers DynamoDB's ValidationException. (moto checks
    PutItem, BatchWriteItem, transactions' puts and SET itself, not ``ADD`` to a set.)
    A failed UpdateItem of a missing item leaves none (moto leaves its key behind).
    Every read and write is metered as AWS bills it (``testing/capacity.py``)."""
    operation = str(environ.get("HTTP_X_AMZ_TARGET") or "").rpartition(".")[2]
    if operation not in WRITES | READS:
        return app(environ, start_response)
    try:
        request = json.loads(take_body(environ) or b"{}")
        updates = (
            [request]
            if operation == "UpdateItem"
            else [t["Update"] for t in request.get("TransactItems", []) if "Update" in t]
            if operation == "TransactWriteItems"
            else []
        )
        touched = [item_snapshot(signed, u["TableName"], u["Key"]) for u in updates]
    except Exception:  # malformed, or a table moto has not: moto answers
        return app(environ, start_response)
    status, headers, body = metered(app, environ, operation, request, _tables(signed))
    if operation == "UpdateItem" and not status.startswith("200"):
        for t in touched:  # moto creates a missing item before a failing update of it
            t.restore()
    elif status.startswith("200") and any(t.grown() for t in touched):
        for t in touched:
            t.restore()
        error = {
            "__type": "com.amazonaws.dynamodb.v20120810#ValidationException",
            "message": "Item size to update has exceeded the maximum allowed size",
        }
        return send(
            start_response,
            "400 Bad Request",
            [("Content-Type", "application/x-amz-json-1.0")],
            json.dumps(error).encode(),
        )
    return send(start_response, status, headers, body)


class ItemSnapshot:
    """An item as it was before an update (a deep copy), to put back."""

    def __init__(self, table: Any, key: dict[str, Any]) -> None:
        from moto.dynamodb.models.dynamo_type import DynamoType

        self.table = table
        self.hash = DynamoType(key[table.hash_key_attr])
        self.range = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
        item = table.get_item(self.hash, self.range)
        self.item = copy.deepcopy(item) if item is not None else None
        shard = getattr(table, "stream_shard", None)
        self.stream = len(shard.items) if shard is not None else 0

    def grown(self) -> bool:
        item = self.table.get_item(self.hash, self.range)
        return item is not None and int(item.size()) > MAX_ITEM_BYTES

    def restore(self) -> None:
        items = self.table.items
        if self.range is None:
            if self.item is None:
                items.pop(self.hash, None)
            else:
                items[self.hash] = self.item
        elif self.item is None:
            items[self.hash].pop(self.range, None)
        else:
            items[self.hash][self.range] = self.item
        shard = getattr(self.table, "stream_shard", None)
        if shard is not None:
            del shard.items[self.stream :]  # the stream never saw the update


def _tables(signed: Signed) -> Any:
    """``name -> moto's table`` (None for one it has not) of the signer's account."""
    from moto.dynamodb.models import dynamodb_backends

    backend = dynamodb_backends[moto_account(signed)][signed.region]

    def table_of(name: str) -> Any:
        try:
            return backend.get_table(name)
        except Exception:
            return None

    return table_of


def item_snapshot(signed: Signed, table_name: str, key: dict[str, Any]) -> ItemSnapshot:
    from moto.dynamodb.models import dynamodb_backends

    table = dynamodb_backends[moto_account(signed)][signed.region].get_table(table_name)
    return ItemSnapshot(table, key)
