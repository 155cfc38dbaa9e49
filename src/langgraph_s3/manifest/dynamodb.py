"""The manifest's table on DynamoDB: conditions and changes rendered as expressions.

:class:`DynamoTable` is the :class:`~langgraph_s3.manifest.table.TablePort` every
:class:`~langgraph_s3.manifest.Manifest` on AWS uses. It knows DynamoDB's API and its
expression syntax and nothing of the manifest's rules: a :data:`~langgraph_s3.core.
conditions.Cond` becomes a ConditionExpression, a :class:`~langgraph_s3.manifest.conditions.
Change` an UpdateExpression, an attribute named through a placeholder where DynamoDB
requires one (a reserved word, ``key`` among them: :mod:`.reserved`). Every request goes
through ``aws.call`` (the one door: deadline, permits, retries, error translation).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from langgraph_s3.aws import door as aws
from langgraph_s3.aws.clients import ClientFactory
from langgraph_s3.core.retry import backoff
from langgraph_s3.core.shards import Shard
from langgraph_s3.errors import (
    MissingResourceError,
    S3PersistenceError,
    ServiceError,
    TransactionFailedError,
)
from langgraph_s3.manifest.conditions import (
    Absent,
    All,
    AnyOf,
    Change,
    Compare,
    Cond,
    Contains,
    Exists,
    Not,
    S,
    TxCheck,
    TxDelete,
    TxPut,
    TxUpdate,
    TxWrite,
    Typed,
    Value,
)
from langgraph_s3.manifest.reserved import RESERVED

__all__ = ["ACTIVE_POLLS", "ATTRIBUTES", "KEY_SCHEMA", "DynamoTable", "Expression"]

KEY_SCHEMA = [
    {"AttributeName": "pk", "KeyType": "HASH"},
    {"AttributeName": "sk", "KeyType": "RANGE"},
]
ATTRIBUTES = [
    {"AttributeName": "pk", "AttributeType": "S"},
    {"AttributeName": "sk", "AttributeType": "S"},
]
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""An attribute name an expression may spell out (unless it is a reserved word)."""
ACTIVE_POLLS = 120
"""DescribeTable polls (``retry.backoff`` apart) before a new table counts as stuck."""


class Expression:
    """The placeholders of one request's expressions: ``:v0`` values, and ``#n0`` names
    for the attribute names an expression may not spell out (a reserved word, a name
    that is no plain identifier); the others are written as they are, which keeps every
    request as small as the expressions a person would write."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Value] = {}

    def name(self, path: str) -> str:
        """``path`` (``a`` or ``a.b``), each part as it is or as a name placeholder."""
        out = []
        for part in path.split("."):
            if _PLAIN.fullmatch(part) and part.upper() not in RESERVED:
                out.append(part)
                continue
            token = next((k for k, v in self.names.items() if v == part), None)
            if token is None:
                token = f"#n{len(self.names)}"
                self.names[token] = part
            out.append(token)
        return ".".join(out)

    def value(self, value: Value) -> str:
        """The placeholder of ``value``: one per distinct value (an id the change sets
        and the condition compares is sent once)."""
        token = next((k for k, v in self.values.items() if v == value), None)
        if token is None:
            token = f":v{len(self.values)}"
            self.values[token] = value
        return token

    def condition(self, cond: Cond) -> str:
        """``cond`` as a ConditionExpression."""
        if isinstance(cond, Exists):
            return f"attribute_exists({self.name(cond.path)})"
        if isinstance(cond, Absent):
            return f"attribute_not_exists({self.name(cond.path)})"
        if isinstance(cond, Typed):
            return f"attribute_type({self.name(cond.path)}, {self.value(S(cond.kind))})"
        if isinstance(cond, Compare):
            return f"{self.name(cond.path)} {cond.op} {self.value(cond.value)}"
        if isinstance(cond, Contains):
            return f"contains({self.name(cond.path)}, {self.value(cond.value)})"
        if isinstance(cond, Not):
            return f"NOT {self._operand(cond.part, All | AnyOf | Compare | Not)}"
        # NOT binds tighter than AND, AND than OR: parentheses only where they must be
        # (a parser's cost, moto's above all, grows with their depth)
        if isinstance(cond, All):
            return " AND ".join(self._operand(p, AnyOf) for p in cond.parts)
        assert isinstance(cond, AnyOf)
        return " OR ".join(self._operand(p, All) for p in cond.parts)

    def _operand(self, cond: Cond, wrap: Any) -> str:
        text = self.condition(cond)
        return f"({text})" if isinstance(cond, wrap) else text

    def update(self, change: Change) -> str:
        """``change`` as an UpdateExpression."""
        clauses = []
        if change.set:
            sets = (f"{self.name(k)} = {self.value(v)}" for k, v in change.set.items())
            clauses.append("SET " + ", ".join(sets))
        if change.remove:
            clauses.append("REMOVE " + ", ".join(self.name(k) for k in change.remove))
        for verb, actions in (("ADD", change.add), ("DELETE", change.delete)):
            if actions:
                parts = (f"{self.name(k)} {self.value(v)}" for k, v in actions.items())
                clauses.append(f"{verb} " + ", ".join(parts))
        return " ".join(clauses)

    def params(self) -> dict[str, Any]:
        """The ExpressionAttributeNames and -Values to send (none when empty)."""
        out: dict[str, Any] = {}
        if self.names:
            out["ExpressionAttributeNames"] = self.names
        if self.values:
            out["ExpressionAttributeValues"] = self.values
        return out


class DynamoTable:
    """A DynamoDB table keyed by (``pk``, ``sk``) strings, as the manifest uses it.

    Cost: each call is one request (a Query or Scan, one per page; ``get_many`` one
    BatchGetItem unless DynamoDB leaves keys unprocessed; ``create`` several).

    Args:
        clients: the factory every request goes through (``aws.call``).
        name: the table's name.
        page_size: items per Query/Scan request (DynamoDB's ``Limit``); None lets
            DynamoDB cut pages at 1 MB. Smaller pages bound what one request reads
            and holds, at one request per page.
    """

    def __init__(self, clients: ClientFactory, name: str, *, page_size: int | None = None) -> None:
        if page_size is not None and page_size < 1:
            raise ValueError(
                f"page_size must be at least 1 (or None for 1 MB pages), got {page_size}"
            )
        self.clients = clients
        self.name = name
        self.page_size = page_size

    async def _call(self, op: str, **params: Any) -> dict[str, Any]:
        return await aws.call(self.clients, "dynamodb", op, **params)

    async def _pages(
        self, op: str, *, consistent: bool = True, **params: Any
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """The items of a Query or Scan, one page (one request) at a time: by hand
        rather than with a botocore paginator, so that every page goes through the door."""
        if self.page_size is not None:
            params["Limit"] = self.page_size
        while True:
            resp = await self._call(op, TableName=self.name, ConsistentRead=consistent, **params)
            yield resp.get("Items", [])
            if "LastEvaluatedKey" not in resp:
                return
            params["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    async def get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        """1 GetItem (strongly consistent)."""
        resp = await self._call("get_item", TableName=self.name, Key=key, ConsistentRead=True)
        item: dict[str, Any] | None = resp.get("Item") or None
        return item

    async def get_many(self, keys: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """1 BatchGetItem (strongly consistent), again after a backoff for the keys
        DynamoDB leaves unprocessed (throttled), at most ``Limits.max_attempts`` times."""
        out: list[dict[str, Any]] = []
        todo = list(keys)
        for attempt in range(self.clients.limits.max_attempts + 1):
            resp = await self._call(
                "batch_get_item",
                RequestItems={self.name: {"Keys": todo, "ConsistentRead": True}},
            )
            out.extend(resp.get("Responses", {}).get(self.name, []))
            todo = resp.get("UnprocessedKeys", {}).get(self.name, {}).get("Keys", [])
            if not todo:
                return out
            await backoff(attempt)
        raise ServiceError(
            f"DynamoDB left keys of table {self.name!r} unprocessed "
            f"{self.clients.limits.max_attempts + 1} times (throttled): retry later"
        )

    def query(self, pk: str) -> AsyncIterator[list[dict[str, Any]]]:
        """1 Query per page of the partition."""
        return self._pages(
            "query",
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": pk}},
        )

    def query_index(
        self, index: str, attribute: str, value: str
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """1 Query per page of one value of a global secondary index (eventually
        consistent: DynamoDB reads no index strongly)."""
        exp = Expression()
        return self._pages(
            "query",
            consistent=False,
            IndexName=index,
            KeyConditionExpression=f"{exp.name(attribute)} = {exp.value({'S': value})}",
            **exp.params(),
        )

    async def indexes(self) -> list[str]:
        """The table's global secondary indexes (ACTIVE or not): 1 DescribeTable."""
        desc = await self._call("describe_table", TableName=self.name)
        return [i["IndexName"] for i in desc["Table"].get("GlobalSecondaryIndexes", [])]

    async def create_index(self, index: str, attribute: str) -> None:
        """Add a KEYS_ONLY global secondary index keyed by ``attribute`` (hash) and
        ``pk`` (range), and wait until it is ACTIVE (DynamoDB backfills it from the
        items first). Cost: 1 UpdateTable, 1 DescribeTable per poll."""
        try:
            await self._call(
                "update_table",
                TableName=self.name,
                AttributeDefinitions=[
                    *ATTRIBUTES,
                    {"AttributeName": attribute, "AttributeType": "S"},
                ],
                GlobalSecondaryIndexUpdates=[
                    {
                        "Create": {
                            "IndexName": index,
                            "KeySchema": [
                                {"AttributeName": attribute, "KeyType": "HASH"},
                                {"AttributeName": "pk", "KeyType": "RANGE"},
                            ],
                            "Projection": {"ProjectionType": "KEYS_ONLY"},
                        }
                    }
                ],
            )
        except S3PersistenceError:
            if index not in await self.indexes():  # else: made by another setup meanwhile
                raise

        def active(table: dict[str, Any]) -> bool:
            found = [i for i in table.get("GlobalSecondaryIndexes", []) if i["IndexName"] == index]
            return bool(found) and found[0].get("IndexStatus", "ACTIVE") == "ACTIVE"

        await self._until(active, f"index {index!r} of table {self.name!r}")

    async def _until(self, ready: Callable[[dict[str, Any]], bool], what: str) -> None:
        """DescribeTable until ``ready`` holds of the table (``retry.backoff`` apart),
        at most ``ACTIVE_POLLS`` times; then ``what`` counts as stuck."""
        for attempt in range(ACTIVE_POLLS):
            desc = await self._call("describe_table", TableName=self.name)
            if ready(desc["Table"]):
                return
            await backoff(attempt)
        raise ServiceError(f"{what} did not become ACTIVE after {ACTIVE_POLLS} polls")

    def scan(
        self,
        *,
        prefix: str = "",
        after: dict[str, Any] | None = None,
        shard: Shard | None = None,
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """1 Scan per page of the whole table, or of its segment ``shard`` (the
        prefix filters after reading)."""
        params: dict[str, Any] = {}
        if shard is not None:
            params["Segment"], params["TotalSegments"] = shard.segment, shard.total
        if after is not None:
            params["ExclusiveStartKey"] = after
        if prefix:
            params["FilterExpression"] = "begins_with(pk, :d)"
            params["ExpressionAttributeValues"] = {":d": {"S": prefix}}
        return self._pages("scan", **params)

    async def update(
        self,
        key: dict[str, Any],
        change: Change,
        *,
        when: Cond | None = None,
        old: bool = False,
    ) -> dict[str, Any] | None:
        """1 UpdateItem."""
        exp = Expression()
        params: dict[str, Any] = {"UpdateExpression": exp.update(change)}
        if when is not None:
            params["ConditionExpression"] = exp.condition(when)
        if old:
            params["ReturnValues"] = "ALL_OLD"
        resp = await self._call(
            "update_item", TableName=self.name, Key=key, **params, **exp.params()
        )
        before: dict[str, Any] | None = resp.get("Attributes") or None
        return before if old else None

    async def put(self, item: dict[str, Any], *, when: Cond | None = None) -> None:
        """1 PutItem."""
        exp = Expression()
        params = {"ConditionExpression": exp.condition(when)} if when is not None else {}
        await self._call("put_item", TableName=self.name, Item=item, **params, **exp.params())

    async def delete(self, key: dict[str, Any], *, when: Cond | None = None) -> None:
        """1 DeleteItem."""
        exp = Expression()
        params = {"ConditionExpression": exp.condition(when)} if when is not None else {}
        await self._call("delete_item", TableName=self.name, Key=key, **params, **exp.params())

    async def transact(self, writes: Sequence[TxWrite]) -> None:
        """1 TransactWriteItems (twice the write units of its items' plain writes),
        sent again after a backoff while another transaction holds one of its items
        (TransactionConflict), at most ``Limits.max_attempts`` times; one token for
        every sending, so one that was applied but whose answer was lost is not
        applied twice."""
        items = [self._tx_item(w) for w in writes]
        token = secrets.token_hex(16)  # ClientRequestToken: idempotent for 10 minutes
        attempts = self.clients.limits.max_attempts
        for attempt in range(attempts):
            try:
                await self._call(
                    "transact_write_items", TransactItems=items, ClientRequestToken=token
                )
                return
            except S3PersistenceError as exc:
                reasons = aws.cancellation_reasons(exc)
                if reasons is None:
                    raise
                failed = tuple(i for i, r in enumerate(reasons) if r == "ConditionalCheckFailed")
                if failed:
                    raise TransactionFailedError(str(exc), failed) from exc
                if "TransactionConflict" not in reasons or attempt + 1 >= attempts:
                    raise
                await backoff(attempt)

    def _tx_item(self, write: TxWrite) -> dict[str, Any]:
        """One part of a TransactWriteItems request."""
        exp = Expression()
        part: dict[str, Any] = {"TableName": self.name}
        if isinstance(write, TxUpdate):
            part |= {"Key": write.key, "UpdateExpression": exp.update(write.change)}
        elif isinstance(write, TxPut):
            part["Item"] = write.item
        else:
            part["Key"] = write.key
        if write.when is not None:
            part["ConditionExpression"] = exp.condition(write.when)
        kind = {TxCheck: "ConditionCheck", TxUpdate: "Update", TxPut: "Put", TxDelete: "Delete"}
        return {kind[type(write)]: part | exp.params()}

    async def erase_history(self, key: dict[str, Any]) -> None:
        """No request: DynamoDB keeps no earlier version of an item."""

    async def exists(self) -> bool:
        """1 DescribeTable."""
        try:
            await self._call("describe_table", TableName=self.name)
            return True
        except MissingResourceError:
            return False

    async def create(self, *, ttl_attribute: str) -> None:
        """Create the table (on-demand billing), wait until it is ACTIVE, enable TTL.

        A table that already exists is fine. Cost: 1 CreateTable, 1 DescribeTable
        per poll (usually a few), 1 UpdateTimeToLive.

        Raises:
            ServiceError: the table is not ACTIVE after ``ACTIVE_POLLS`` polls.
        """
        try:
            await self._call(
                "create_table",
                TableName=self.name,
                KeySchema=KEY_SCHEMA,
                AttributeDefinitions=ATTRIBUTES,
                BillingMode="PAY_PER_REQUEST",
            )
        except ServiceError as exc:
            if exc.code != "ResourceInUseException":
                raise
        # on-demand tables are usually ACTIVE in seconds
        await self._until(lambda t: t.get("TableStatus") == "ACTIVE", f"table {self.name!r}")
        try:
            await self._call(
                "update_time_to_live",
                TableName=self.name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl_attribute},
            )
        except ServiceError as exc:
            if exc.code != "ValidationException":  # already enabled
                raise
