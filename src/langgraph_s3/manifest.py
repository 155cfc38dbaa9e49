"""The DynamoDB manifest: the latest checkpoint of each (thread, namespace).

Design
------
One item per (thread, namespace)::

    pk = encode(thread_id)   sk = encode(checkpoint_ns)   (keys.encode: bounded, injective)
    thread_id, checkpoint_ns       the raw ids, for listing
    latest_id, latest_tail         newest checkpoint id and its key tail
    uses_delta                     the latest has DeltaChannel state to rebuild
    created_at, updated_at         epoch seconds
    expires_at                     optional TTL attribute (idle threads retire)

The only write that moves ``latest`` forward is a conditional UpdateItem:
``attribute_not_exists(latest_id) OR latest_id < :id``. uuid6 ids sort by time
as strings, so two writers, retries and replays can only move it forward. A
failed condition therefore always means "a newer or the same checkpoint is
already latest", which is success for the writer: its checkpoint object is
stored and readable by id. The saver writes objects first and the manifest
last, so the manifest never points at a checkpoint that is not fully stored.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from . import aws
from .clients import ClientFactory
from .errors import ConditionFailedError, ConflictError, MissingResourceError, ServiceError
from .keys import encode

KEY_SCHEMA = [
    {"AttributeName": "pk", "KeyType": "HASH"},
    {"AttributeName": "sk", "KeyType": "RANGE"},
]
ATTRIBUTES = [
    {"AttributeName": "pk", "AttributeType": "S"},
    {"AttributeName": "sk", "AttributeType": "S"},
]
TTL_ATTRIBUTE = "expires_at"
logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Entry:
    thread_id: str
    checkpoint_ns: str
    latest_id: str
    latest_tail: str
    uses_delta: bool = False
    """The latest checkpoint has DeltaChannel state to rebuild from history."""


def _entries(table: str, items: list[dict[str, Any]]) -> list[Entry]:
    """Our entries among a page of items; an item another writer left in the table
    (a shared table, a hand edit) is skipped with a warning, never fatal."""
    out: list[Entry] = []
    for item in items:
        try:
            out.append(_entry(item))
        except (KeyError, TypeError, AttributeError):
            logger.warning(
                "skipping an item of table %r that langgraph-s3 did not write: key %r",
                table,
                {k: item.get(k) for k in ("pk", "sk")},
            )
    return out


def _entry(item: dict[str, Any]) -> Entry:
    return Entry(
        thread_id=item["thread_id"]["S"],
        checkpoint_ns=item["checkpoint_ns"]["S"],
        latest_id=item["latest_id"]["S"],
        latest_tail=item["latest_tail"]["S"],
        uses_delta=bool(item.get("uses_delta", {}).get("BOOL", False)),
    )


class Manifest:
    def __init__(self, clients: ClientFactory, table: str, *, ttl_seconds: int | None) -> None:
        self.clients = clients
        self.table = table
        self.ttl_seconds = ttl_seconds

    async def _call(self, op: str, **params: Any) -> dict[str, Any]:
        return await aws.call(self.clients, "dynamodb", op, **params)

    @staticmethod
    def _key(thread_id: str, checkpoint_ns: str) -> dict[str, Any]:
        return {
            "pk": {"S": encode(thread_id, "thread_id")},
            "sk": {"S": encode(checkpoint_ns, "checkpoint_ns")},
        }

    async def advance(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        tail: str,
        *,
        uses_delta: bool = False,
    ) -> bool:
        """Move latest forward to ``checkpoint_id``; False if it already is newer."""
        now = int(time.time())
        names = {"#l": "latest_id"}
        values: dict[str, Any] = {
            ":id": {"S": checkpoint_id},
            ":tail": {"S": tail},
            ":now": {"N": str(now)},
            ":t": {"S": thread_id},
            ":ns": {"S": checkpoint_ns},
            ":d": {"BOOL": uses_delta},
        }
        update = (
            "SET #l = :id, latest_tail = :tail, updated_at = :now, thread_id = :t, "
            "checkpoint_ns = :ns, uses_delta = :d, created_at = if_not_exists(created_at, :now)"
        )
        if self.ttl_seconds:
            update += f", {TTL_ATTRIBUTE} = :exp"
            values[":exp"] = {"N": str(now + self.ttl_seconds)}
        try:
            await self._call(
                "update_item",
                TableName=self.table,
                Key=self._key(thread_id, checkpoint_ns),
                UpdateExpression=update,
                ConditionExpression="attribute_not_exists(#l) OR #l < :id",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
            return True
        except ConditionFailedError:
            return False

    async def repoint(
        self, thread_id: str, checkpoint_ns: str, expected_id: str, new: tuple[str, str] | None
    ) -> None:
        """After deleting the latest checkpoint: point at ``new`` or drop the entry.

        Conditional on latest still being ``expected_id``, so a concurrent
        writer that moved it forward wins.
        """
        key = self._key(thread_id, checkpoint_ns)
        try:
            if new is None:
                await self._call(
                    "delete_item",
                    TableName=self.table,
                    Key=key,
                    ConditionExpression="latest_id = :old",
                    ExpressionAttributeValues={":old": {"S": expected_id}},
                )
            else:
                await self._call(
                    "update_item",
                    TableName=self.table,
                    Key=key,
                    UpdateExpression="SET latest_id = :id, latest_tail = :tail",
                    ConditionExpression="latest_id = :old",
                    ExpressionAttributeValues={
                        ":id": {"S": new[0]},
                        ":tail": {"S": new[1]},
                        ":old": {"S": expected_id},
                    },
                )
        except ConditionFailedError:
            pass  # a concurrent writer moved it: theirs stands

    async def latest(self, thread_id: str, checkpoint_ns: str) -> Entry | None:
        resp = await self._call(
            "get_item",
            TableName=self.table,
            Key=self._key(thread_id, checkpoint_ns),
            ConsistentRead=True,
        )
        item = resp.get("Item")
        return _entry(item) if item else None

    async def namespaces(self, thread_id: str) -> list[Entry]:
        """Every namespace of one thread (one Query, paginated)."""
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": encode(thread_id, "thread_id")}},
            "ConsistentRead": True,
        }
        out: list[Entry] = []
        while True:
            resp = await self._call("query", **kwargs)
            out.extend(_entries(self.table, resp.get("Items", [])))
            if "LastEvaluatedKey" not in resp:
                return out
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    async def scan(self) -> AsyncIterator[list[Entry]]:
        """Every (thread, namespace) entry, a page at a time."""
        kwargs: dict[str, Any] = {"TableName": self.table, "ConsistentRead": True}
        while True:
            resp = await self._call("scan", **kwargs)
            yield _entries(self.table, resp.get("Items", []))
            if "LastEvaluatedKey" not in resp:
                return
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    async def forget(self, entries: list[Entry]) -> None:
        """Delete entries (BatchWriteItem, 25 at a time, unprocessed retried)."""
        requests = [
            {"DeleteRequest": {"Key": self._key(e.thread_id, e.checkpoint_ns)}} for e in entries
        ]
        for i in range(0, len(requests), 25):
            pending: dict[str, Any] = {self.table: requests[i : i + 25]}
            for attempt in range(8):
                resp = await self._call("batch_write_item", RequestItems=pending)
                pending = resp.get("UnprocessedItems") or {}
                if not pending:
                    break
                await _sleep_backoff(attempt)
            else:
                raise ConflictError(
                    f"DynamoDB left {len(pending[self.table])} deletes in table {self.table!r} "
                    "unprocessed after 8 attempts (throttled): retry the call later"
                )

    # -- setup --------------------------------------------------------------
    async def exists(self) -> bool:
        try:
            await self._call("describe_table", TableName=self.table)
            return True
        except MissingResourceError:
            return False

    async def create(self) -> None:
        try:
            await self._call(
                "create_table",
                TableName=self.table,
                KeySchema=KEY_SCHEMA,
                AttributeDefinitions=ATTRIBUTES,
                BillingMode="PAY_PER_REQUEST",
            )
        except ServiceError as exc:
            if exc.code != "ResourceInUseException":
                raise
        for attempt in range(120):  # on-demand tables are usually ACTIVE in seconds
            desc = await self._call("describe_table", TableName=self.table)
            if desc["Table"].get("TableStatus") == "ACTIVE":
                break
            await _sleep_backoff(attempt)
        else:
            raise ServiceError(f"table {self.table!r} did not become ACTIVE within 2 minutes")
        try:
            await self._call(
                "update_time_to_live",
                TableName=self.table,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
            )
        except ServiceError as exc:
            if exc.code != "ValidationException":  # already enabled
                raise


async def _sleep_backoff(attempt: int) -> None:
    import asyncio

    await asyncio.sleep(min(1.0, 0.05 * 2**attempt))
