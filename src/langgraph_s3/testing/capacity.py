"""What each DynamoDB request of the strict test server is billed, as AWS bills on-demand
capacity, so that a bench prices the requests the server saw instead of estimating.

* A write (PutItem, UpdateItem, DeleteItem, each part of a BatchWriteItem) costs one
  write unit per KB of the larger of the item before and after it, rounded up, at least
  one; a write whose condition failed costs the same (DynamoDB bills the item it read).
  A TransactWriteItems costs twice that for each part (its condition checks too).
* A strongly consistent GetItem costs one read unit per 4 KB of the item, rounded up, at
  least one (a missing item too); an eventually consistent one half; a BatchGetItem
  each item so; a Query or Scan the items it read, 4 KB a unit over the whole page.

Sizes are DynamoDB's (names and values: a string by its UTF-8 bytes, a number about
half its digits, a binary by its bytes): moto's ``Item.size()`` for items in the table,
:func:`item_bytes` for the items of an answer. The units land in the request's WSGI
environ under :data:`UNITS`, where the request log (``testing/moto.py``) reads them.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

from langgraph_s3.testing.wsgi import capture

__all__ = ["READS", "UNITS", "WRITES", "item_bytes", "metered"]

UNITS = "langgraph_s3.units"
"""The WSGI environ key of a request's billed capacity units (write or read units)."""
WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
READS = {"GetItem", "BatchGetItem", "Query", "Scan"}


def _value_bytes(value: dict[str, Any]) -> int:
    ((kind, v),) = value.items()
    if kind == "S":
        return len(str(v).encode())
    if kind == "N":
        return math.ceil(len(str(v).lstrip("-").replace(".", "")) / 2) + 1
    if kind == "B":
        return len(base64.b64decode(v))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(_value_bytes({kind[0]: x}) for x in v)
    if kind == "M":
        return 3 + sum(len(k.encode()) + _value_bytes(x) + 1 for k, x in v.items())
    if kind == "L":
        return 3 + sum(_value_bytes(x) + 1 for x in v)
    return 0


def item_bytes(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB counts it, from its JSON (names and values)."""
    return sum(len(name.encode()) + _value_bytes(value) for name, value in item.items())


def _write_units(before: int, after: int) -> int:
    return max(1, math.ceil(max(before, after) / 1024))


def _read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / 4096))
    return float(units) if consistent else units / 2


def _parts(operation: str, request: dict[str, Any]) -> list[tuple[str, dict[str, Any], int]]:
    """(table, key or whole item, factor) of each item a write names."""
    if operation in ("UpdateItem", "DeleteItem"):
        return [(request["TableName"], request["Key"], 1)]
    if operation == "PutItem":
        return [(request["TableName"], request["Item"], 1)]
    if operation == "BatchWriteItem":
        return [
            (table, w["PutRequest"]["Item"] if "PutRequest" in w else w["DeleteRequest"]["Key"], 1)
            for table, writes in request.get("RequestItems", {}).items()
            for w in writes
        ]
    out = []
    for part in request.get("TransactItems", []):
        ((_, body),) = part.items()
        out.append((body["TableName"], body.get("Key") or body.get("Item") or {}, 2))
    return out


def metered(
    app: Any, environ: dict[str, Any], operation: str, request: dict[str, Any], table_of: Any
) -> tuple[str, list[tuple[str, str]], bytes]:
    """Run a DynamoDB request through ``app`` and leave its billed units in ``environ``.

    ``table_of(name)`` is moto's table of that name (None when there is none).
    Returns the answer as ``wsgi.capture`` does."""
    if operation not in WRITES | READS:
        return capture(app, environ)
    probes: list[tuple[Any, Any, Any, int]] = []
    if operation in WRITES:
        for name, key, factor in _parts(operation, request):
            table = table_of(name)
            if table is not None:
                hash_, range_ = _key_of(table, key)
                probes.append((table, hash_, range_, factor))
    before = [_stored(t, h, r) for t, h, r, _ in probes]
    status, headers, body = capture(app, environ)
    if operation in WRITES:
        after = [_stored(t, h, r) for t, h, r, _ in probes]
        units: float = sum(
            f * _write_units(b, a) for (_, _, _, f), b, a in zip(probes, before, after, strict=True)
        )
    else:
        units = _reads(operation, request, body, status)
    environ[UNITS] = units
    return status, headers, body


def _key_of(table: Any, key: dict[str, Any]) -> tuple[Any, Any]:
    from moto.dynamodb.models.dynamo_type import DynamoType

    hash_ = DynamoType(key[table.hash_key_attr])
    range_ = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
    return hash_, range_


def _stored(table: Any, hash_: Any, range_: Any) -> int:
    try:
        item = table.get_item(hash_, range_)
    except Exception:  # a key of the wrong shape: moto answers the error itself
        return 0
    return int(item.size()) if item is not None else 0


def _reads(operation: str, request: dict[str, Any], body: bytes, status: str) -> float:
    try:
        answer = json.loads(body or b"{}") if status.startswith("200") else {}
    except ValueError:
        return 0.0
    if operation == "GetItem":
        consistent = bool(request.get("ConsistentRead"))
        return _read_units(item_bytes(answer.get("Item", {})), consistent)
    if operation == "BatchGetItem":
        wanted = request.get("RequestItems", {})
        units = 0.0
        for table, items in answer.get("Responses", {}).items():
            consistent = bool(wanted.get(table, {}).get("ConsistentRead"))
            units += sum(_read_units(item_bytes(i), consistent) for i in items)
            missing = len(wanted.get(table, {}).get("Keys", [])) - len(items)
            units += max(0, missing) * _read_units(0, consistent)
        return units
    consistent = bool(request.get("ConsistentRead"))
    return _read_units(sum(item_bytes(i) for i in answer.get("Items", [])), consistent)
