"""The DynamoDB manifest: what exists, per deployment, thread and namespace.

Design
------
One item per (deployment, thread, namespace)::

    pk = {bucket}/{prefix}/{thread}   sk = {namespace}   (each part keys.encode'd: no "/")
    thread_id, checkpoint_ns       the raw ids, for listing
    latest_id, latest_tail         newest committed checkpoint and its key tail
    heads                          other committed branch tips (forks, writers that lost
                                   the race to latest); absent when there are none
    floor                          nothing older belongs to this life of the thread
    gone                           checkpoints maintenance removed above the floor: a
                                   writer still holding one may not continue it
    rev                            bumped by every change: the compare-and-swap token
    uses_delta                     the latest has DeltaChannel state to rebuild
    created_at, updated_at         epoch seconds
    expires_at                     optional TTL attribute (idle threads retire)
    deleted, lease_until           a tombstone left by delete_thread

**The manifest defines what exists.** A checkpoint belongs to a thread's
history only when it is ``latest`` or one of ``heads``, or an ancestor of one
(checkpoint keys carry their parent id), and is not older than ``floor``. An
object written by a writer that crashed before its manifest update is
invisible (no phantom step), and so is everything of a deleted or expired
life when the id is reused: the new life starts from a parentless checkpoint
and its own ``floor``.

**Writers.** The common put is one UpdateItem conditioned on ``latest_id`` being
the new checkpoint's parent (and older). Anything else (a fork, a concurrent
writer, a replay, a fresh namespace) reads the item and compare-and-swaps on
``rev``. A put whose parent belongs to a deleted, expired or pruned life is
refused: its unchanged channel blobs may already be gone.

**Maintenance** conditions on ``rev``: prune raises ``floor`` before deleting,
delete_thread writes a tombstone before deleting. While the tombstone's lease
runs (the deletion is in progress), a new life on the same id waits, so the
deletion never removes its objects.

**Tenancy.** The deployment (bucket and prefix) is part of the key, so any
number of deployments share one table; the table is the only shared thing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from . import aws
from .clients import ClientFactory
from .errors import (
    CheckpointConflictError,
    ConditionFailedError,
    ConflictError,
    MissingResourceError,
    ServiceError,
)
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
META_SK = "~layout"
"""Sort key of the per-deployment marker (keys.encode never yields ``~l``)."""
LAYOUT_VERSION = 2
TOMBSTONE_SECONDS = 7 * 86400
"""How long a deleted thread's tombstone refuses writers that still hold its ids."""
DELETE_LEASE_SECONDS = 120
"""How long a new life on a deleted id waits for a deletion in progress."""
CAS_ATTEMPTS = 64
GONE_SECONDS = 3600
GONE_LIMIT = 100
logger = logging.getLogger(__name__)


def deployment_key(bucket: str, prefix: str) -> str:
    """The part of every partition key that names the deployment."""
    return f"{encode(bucket, 'bucket')}/{encode(prefix.strip('/'), 'prefix')}/"


@dataclass(frozen=True, slots=True)
class Entry:
    """One live (thread, namespace) of the manifest."""

    thread_id: str
    checkpoint_ns: str
    latest_id: str
    latest_tail: str
    uses_delta: bool = False
    """The latest checkpoint has DeltaChannel state to rebuild from history."""
    heads: frozenset[str] = field(default_factory=frozenset)
    floor: str = ""
    gone: frozenset[str] = field(default_factory=frozenset)
    rev: int = 0
    created_at: int = 0
    updated_at: int = 0
    expires_at: int | None = None

    @property
    def tips(self) -> set[str]:
        """Checkpoints whose ancestry is the thread's history."""
        return {self.latest_id, *self.heads}


@dataclass(frozen=True, slots=True)
class Raw:
    """An item as stored, live or not."""

    item: dict[str, Any]

    @property
    def rev(self) -> int:
        return int(self.item.get("rev", {}).get("N", "0"))

    @property
    def tombstone(self) -> bool:
        return bool(self.item.get("deleted", {}).get("BOOL", False))

    @property
    def lease_until(self) -> float:
        return float(self.item.get("lease_until", {}).get("N", "0"))

    def expired(self, now: float) -> bool:
        exp = self.item.get(TTL_ATTRIBUTE, {}).get("N")
        return exp is not None and float(exp) <= now

    def live(self, now: float) -> Entry | None:
        if self.tombstone or self.expired(now) or "latest_id" not in self.item:
            return None
        return _entry(self.item)


def _entry(item: dict[str, Any]) -> Entry:
    exp = item.get(TTL_ATTRIBUTE, {}).get("N")
    return Entry(
        thread_id=item["thread_id"]["S"],
        checkpoint_ns=item["checkpoint_ns"]["S"],
        latest_id=item["latest_id"]["S"],
        latest_tail=item["latest_tail"]["S"],
        uses_delta=bool(item.get("uses_delta", {}).get("BOOL", False)),
        heads=frozenset(item.get("heads", {}).get("SS", ())),
        floor=item.get("floor", {}).get("S", ""),
        gone=frozenset(item.get("gone", {}).get("SS", ())),
        rev=int(item.get("rev", {}).get("N", "0")),
        created_at=int(item.get("created_at", {}).get("N", "0")),
        updated_at=int(item.get("updated_at", {}).get("N", "0")),
        expires_at=int(exp) if exp is not None else None,
    )


class Manifest:
    def __init__(
        self,
        clients: ClientFactory,
        table: str,
        *,
        deployment: str,
        ttl_seconds: int | None,
    ) -> None:
        self.clients = clients
        self.table = table
        self.deployment = deployment
        self.ttl_seconds = ttl_seconds

    async def _call(self, op: str, **params: Any) -> dict[str, Any]:
        return await aws.call(self.clients, "dynamodb", op, **params)

    def _pk(self, thread_id: str) -> dict[str, str]:
        return {"S": f"{self.deployment}{encode(thread_id, 'thread_id')}"}

    def _key(self, thread_id: str, checkpoint_ns: str) -> dict[str, Any]:
        return {"pk": self._pk(thread_id), "sk": {"S": encode(checkpoint_ns, "checkpoint_ns")}}

    def _entries(self, items: Iterable[dict[str, Any]], now: float) -> list[Entry]:
        """The live entries among items; one another writer left (a hand edit, an
        older version of this library) is skipped with a warning, never fatal."""
        out: list[Entry] = []
        for item in items:
            if item.get("sk", {}).get("S") == META_SK:
                continue
            try:
                entry = Raw(item).live(now)
            except (KeyError, TypeError, AttributeError, ValueError):
                logger.warning(
                    "skipping an item of table %r that langgraph-s3 did not write: key %r",
                    self.table,
                    {k: item.get(k) for k in ("pk", "sk")},
                )
                continue
            if entry is not None:
                out.append(entry)
        return out

    # -- reading ------------------------------------------------------------
    async def _get(self, thread_id: str, checkpoint_ns: str) -> Raw | None:
        resp = await self._call(
            "get_item",
            TableName=self.table,
            Key=self._key(thread_id, checkpoint_ns),
            ConsistentRead=True,
        )
        item = resp.get("Item")
        return Raw(item) if item else None

    async def latest(self, thread_id: str, checkpoint_ns: str) -> Entry | None:
        """The live entry; None for a thread that does not exist, was deleted or expired."""
        raw = await self._get(thread_id, checkpoint_ns)
        entries = self._entries([raw.item], time.time()) if raw is not None else []
        return entries[0] if entries else None

    async def namespaces(self, thread_id: str) -> list[Entry]:
        """Every live namespace of one thread (one Query, paginated)."""
        out: list[Entry] = []
        async for items in self._query(thread_id):
            out.extend(self._entries(items, time.time()))
        return out

    async def _query(self, thread_id: str) -> AsyncIterator[list[dict[str, Any]]]:
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": self._pk(thread_id)},
            "ConsistentRead": True,
        }
        while True:
            resp = await self._call("query", **kwargs)
            yield resp.get("Items", [])
            if "LastEvaluatedKey" not in resp:
                return
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    async def scan(self) -> AsyncIterator[list[Entry]]:
        """Every live (thread, namespace) entry of this deployment, a page at a time."""
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "ConsistentRead": True,
            "FilterExpression": "begins_with(pk, :d)",
            "ExpressionAttributeValues": {":d": {"S": self.deployment}},
        }
        while True:
            resp = await self._call("scan", **kwargs)
            yield self._entries(resp.get("Items", []), time.time())
            if "LastEvaluatedKey" not in resp:
                return
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    # -- the writer -----------------------------------------------------------
    async def advance(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        tail: str,
        parent_id: str | None,
        *,
        uses_delta: bool = False,
        rewrite: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Commit a stored checkpoint: latest moves forward to it, or it joins ``heads``.

        A new life over a tombstone waits for that deletion to end (its lease), then
        calls ``rewrite`` to store the objects again (the deletion may have taken
        them) and commits only if no other deletion began since. Raises
        CheckpointConflictError when ``parent_id`` belongs to a deleted, expired or
        pruned life.
        """
        now = int(time.time())
        key = self._key(thread_id, checkpoint_ns)
        values: dict[str, Any] = {
            ":id": {"S": checkpoint_id},
            ":tail": {"S": tail},
            ":now": {"N": str(now)},
            ":d": {"BOOL": uses_delta},
            ":one": {"N": "1"},
        }
        update = "SET latest_id = :id, latest_tail = :tail, updated_at = :now, uses_delta = :d"
        if self.ttl_seconds:
            update += f", {TTL_ATTRIBUTE} = :exp"
            values[":exp"] = {"N": str(now + self.ttl_seconds)}
        if parent_id is not None:
            values[":p"] = {"S": parent_id}
            cond = (
                "latest_id = :p AND latest_id < :id AND attribute_not_exists(deleted) AND "
                f"(attribute_not_exists({TTL_ATTRIBUTE}) OR {TTL_ATTRIBUTE} > :now)"
            )
        else:
            update += ", thread_id = :t, checkpoint_ns = :ns, floor = :id, created_at = :now"
            values[":t"] = {"S": thread_id}
            values[":ns"] = {"S": checkpoint_ns}
            cond = "attribute_not_exists(pk)"
        try:
            await self._call(
                "update_item",
                TableName=self.table,
                Key=key,
                UpdateExpression=update + " ADD rev :one",
                ConditionExpression=cond,
                ExpressionAttributeValues=values,
            )
            return
        except ConditionFailedError:
            pass  # a fork, a concurrent writer, a replay, a new life: read and decide
        attempt = 0
        while attempt < CAS_ATTEMPTS:
            raw = await self._get(thread_id, checkpoint_ns)
            at = time.time()
            step = _decide(raw, checkpoint_id, tail, parent_id, uses_delta, at)
            if step is None:
                return  # already committed (a replay, or our own answer was lost)
            if isinstance(step, Fields):
                if raw is not None and raw.tombstone:
                    if raw.lease_until > at:  # a deletion is removing objects: wait
                        await asyncio.sleep(min(raw.lease_until - at, 0.25))
                        continue
                    if rewrite is not None:
                        await rewrite()  # after that deletion: ours are whole again
                done = await self._swap(thread_id, checkpoint_ns, raw, step)
            else:
                done = await self._add_tip(key, step, checkpoint_id, tail, parent_id, uses_delta)
            if done:
                return
            await _sleep_backoff(attempt)
            attempt += 1
        raise ConflictError(
            f"thread {thread_id!r} namespace {checkpoint_ns!r}: the manifest kept changing "
            f"under concurrent writers for {CAS_ATTEMPTS} attempts; retry the call"
        )

    async def _add_tip(
        self,
        key: dict[str, Any],
        entry: Entry,
        cid: str,
        tail: str,
        parent: str | None,
        uses_delta: bool,
    ) -> bool:
        """Commit ``cid`` beside the tips of ``entry``'s life: as the new latest (the
        old one becomes a head) or, older than latest, as a head. One UpdateItem
        whose condition pins the life (floor) and, for a new latest, the old one:
        heads are only ever added, so losers never contend with each other."""
        now = int(time.time())
        values: dict[str, Any] = {
            ":id": {"S": cid},
            ":floor": {"S": entry.floor},
            ":now": {"N": str(now)},
            ":one": {"N": "1"},
        }
        live = (
            f"floor = :floor AND attribute_not_exists(deleted) AND "
            f"(attribute_not_exists({TTL_ATTRIBUTE}) OR {TTL_ATTRIBUTE} > :now)"
        )
        if parent is not None:  # maintenance may have removed it since it was read
            values[":p"] = {"S": parent}
            live += " AND (attribute_not_exists(gone) OR NOT contains(gone, :p))"
        if cid > entry.latest_id:
            values[":old"] = {"S": entry.latest_id}
            values[":oldset"] = {"SS": [entry.latest_id]}
            values[":tail"] = {"S": tail}
            values[":d"] = {"BOOL": uses_delta}
            update = "SET latest_id = :id, latest_tail = :tail, uses_delta = :d, updated_at = :now"
            if self.ttl_seconds:
                update += f", {TTL_ATTRIBUTE} = :exp"
                values[":exp"] = {"N": str(now + self.ttl_seconds)}
            update += " ADD heads :oldset, rev :one"
            cond = f"latest_id = :old AND {live}"
        else:
            values[":idset"] = {"SS": [cid]}
            update = "SET updated_at = :now ADD heads :idset, rev :one"
            cond = f"latest_id > :id AND {live}"
        try:
            await self._call(
                "update_item",
                TableName=self.table,
                Key=key,
                UpdateExpression=update,
                ConditionExpression=cond,
                ExpressionAttributeValues=values,
            )
            return True
        except ConditionFailedError:
            return False

    async def _swap(self, thread_id: str, checkpoint_ns: str, raw: Raw | None, new: Fields) -> bool:
        """Write the item if it is still ``raw`` (compared by ``rev``)."""
        now = int(time.time())
        item: dict[str, Any] = {
            **self._key(thread_id, checkpoint_ns),
            "thread_id": {"S": thread_id},
            "checkpoint_ns": {"S": checkpoint_ns},
            "latest_id": {"S": new.latest_id},
            "latest_tail": {"S": new.latest_tail},
            "floor": {"S": new.floor},
            "uses_delta": {"BOOL": new.uses_delta},
            "created_at": {"N": str(new.created_at or now)},
            "updated_at": {"N": str(now)},
            "rev": {"N": str((raw.rev if raw else 0) + 1)},
        }
        if new.heads:
            item["heads"] = {"SS": sorted(new.heads)}
        gone = trim_gone(new.gone, new.floor, now)
        if gone:
            item["gone"] = {"SS": sorted(gone)}
        if self.ttl_seconds:
            item[TTL_ATTRIBUTE] = {"N": str(now + self.ttl_seconds)}
        return await self._put_if(item, raw)

    async def _put_if(self, item: dict[str, Any], raw: Raw | None) -> bool:
        """PutItem conditioned on the item being what was read (absent, or by rev)."""
        cond: dict[str, Any]
        if raw is None:
            cond = {"ConditionExpression": "attribute_not_exists(pk)"}
        elif "rev" in raw.item:
            cond = {
                "ConditionExpression": "rev = :rev",
                "ExpressionAttributeValues": {":rev": raw.item["rev"]},
            }
        else:  # an item of the legacy layout being adopted
            cond = {"ConditionExpression": "attribute_not_exists(rev)"}
        try:
            await self._call("put_item", TableName=self.table, Item=item, **cond)
            return True
        except ConditionFailedError:
            return False

    # -- maintenance ------------------------------------------------------------
    async def raise_floor(self, entry: Entry, floor: str, removed: Iterable[str]) -> bool:
        """Prune's commit: the thread now starts at ``floor`` and has no other heads;
        ``removed`` (above the floor: side branches of a DeltaChannel seed chain) may
        not be continued. False when a writer moved the thread since ``entry`` was read."""
        gone = {*entry.gone, *removed}
        new = Fields(
            entry.latest_id,
            entry.latest_tail,
            floor,
            entry.uses_delta,
            entry.created_at,
            set(),
            gone,
        )
        raw = Raw({"rev": {"N": str(entry.rev)}})
        return await self._swap(entry.thread_id, entry.checkpoint_ns, raw, new)

    async def replace(self, entry: Entry, new: Fields) -> bool:
        """Compare-and-swap one entry as read (delete_for_runs repoints with it)."""
        raw = Raw({"rev": {"N": str(entry.rev)}})
        return await self._swap(entry.thread_id, entry.checkpoint_ns, raw, new)

    async def merge(self, thread_id: str, source: Entry, raw: Raw | None) -> bool:
        """copy_thread's commit: the target gains the source's tips (a target with its
        own history keeps it beside the copy). Conditioned on the target being ``raw``,
        as read before the objects were copied: a deletion begun since makes it fail."""
        live = raw.live(time.time()) if raw is not None else None
        if live is None:
            new = Fields(
                source.latest_id,
                source.latest_tail,
                source.floor,
                source.uses_delta,
                0,
                set(source.heads),
                set(source.gone),
            )
        else:
            top = max((live, source), key=lambda e: e.latest_id)
            new = Fields(
                top.latest_id,
                top.latest_tail,
                min(live.floor, source.floor),
                top.uses_delta,
                live.created_at,
                (live.tips | source.tips) - {top.latest_id},
                set(live.gone | source.gone),
            )
        return await self._swap(thread_id, source.checkpoint_ns, raw, new)

    async def read(self, thread_id: str, checkpoint_ns: str) -> Raw | None:
        """The item as stored (live, tombstone or expired), for a later compare-and-swap."""
        return await self._get(thread_id, checkpoint_ns)

    async def renew(self, keys: list[dict[str, Any]], stamp: int) -> bool:
        """Extend a deletion's lease; False when a tombstone was replaced meanwhile (the
        lease ran out and a new life began): the deletion must not go on."""
        now = int(time.time())

        async def one(key: dict[str, Any]) -> bool:
            try:
                await self._call(
                    "update_item",
                    TableName=self.table,
                    Key=key,
                    UpdateExpression="SET lease_until = :lease",
                    ConditionExpression="deleted_at = :stamp",
                    ExpressionAttributeValues={
                        ":lease": {"N": str(now + DELETE_LEASE_SECONDS)},
                        ":stamp": {"N": str(stamp)},
                    },
                )
                return True
            except ConditionFailedError:
                return False

        return all(await asyncio.gather(*(one(k) for k in keys)))

    async def tombstone(self, thread_id: str) -> tuple[int, list[dict[str, Any]]]:
        """delete_thread's first step: every namespace of the thread (and at least the
        root one, so a new life waits for the deletion) becomes a tombstone at once
        for readers, before any object goes. Returns the stamp and the item keys."""
        stamp = time.time_ns()
        now = int(time.time())
        keys = [self._key(thread_id, "")]
        async for page in self._query(thread_id):
            keys += [{"pk": i["pk"], "sk": i["sk"]} for i in page if i["sk"]["S"] != META_SK]
        unique = list({k["sk"]["S"]: k for k in keys}.values())

        async def one(key: dict[str, Any]) -> None:
            await self._call(
                "update_item",
                TableName=self.table,
                Key=key,
                UpdateExpression=(
                    "SET deleted = :t, deleted_at = :stamp, lease_until = :lease, "
                    f"{TTL_ATTRIBUTE} = :exp ADD rev :one "
                    "REMOVE latest_id, latest_tail, heads, uses_delta"
                ),
                ExpressionAttributeValues={
                    ":t": {"BOOL": True},
                    ":stamp": {"N": str(stamp)},
                    ":lease": {"N": str(now + DELETE_LEASE_SECONDS)},
                    ":exp": {"N": str(now + TOMBSTONE_SECONDS)},
                    ":one": {"N": "1"},
                },
            )

        await asyncio.gather(*(one(k) for k in unique))
        return stamp, unique

    async def release(self, keys: list[dict[str, Any]], stamp: int) -> None:
        """delete_thread's last step: the deletion is over, new lives may start."""

        async def one(key: dict[str, Any]) -> None:
            # a newer deletion or a new life may have replaced it: theirs stands
            with contextlib.suppress(ConditionFailedError):
                await self._call(
                    "update_item",
                    TableName=self.table,
                    Key=key,
                    UpdateExpression="SET lease_until = :zero",
                    ConditionExpression="deleted_at = :stamp",
                    ExpressionAttributeValues={
                        ":zero": {"N": "0"},
                        ":stamp": {"N": str(stamp)},
                    },
                )

        await asyncio.gather(*(one(k) for k in keys))

    async def drop(self, entry: Entry) -> bool:
        """Retire an entry as read (its last checkpoint was deleted): a tombstone
        without a lease, so a run still writing to it is refused, while a new
        conversation may start at once."""
        now = int(time.time())
        try:
            await self._call(
                "update_item",
                TableName=self.table,
                Key=self._key(entry.thread_id, entry.checkpoint_ns),
                UpdateExpression=(
                    f"SET deleted = :t, deleted_at = :stamp, lease_until = :zero, "
                    f"{TTL_ATTRIBUTE} = :exp ADD rev :one "
                    "REMOVE latest_id, latest_tail, heads, uses_delta"
                ),
                ConditionExpression="rev = :rev",
                ExpressionAttributeValues={
                    ":t": {"BOOL": True},
                    ":stamp": {"N": str(time.time_ns())},
                    ":zero": {"N": "0"},
                    ":exp": {"N": str(now + TOMBSTONE_SECONDS)},
                    ":one": {"N": "1"},
                    ":rev": {"N": str(entry.rev)},
                },
            )
            return True
        except ConditionFailedError:
            return False

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

    async def migrated(self) -> bool:
        """Whether this deployment's marker says its entries use this key layout."""
        resp = await self._call(
            "get_item",
            TableName=self.table,
            Key={"pk": {"S": self.deployment}, "sk": {"S": META_SK}},
            ConsistentRead=True,
        )
        item: dict[str, Any] = resp.get("Item") or {}
        return int(item.get("version", {}).get("N", "0")) >= LAYOUT_VERSION

    async def legacy_entries(self) -> AsyncIterator[Entry]:
        """Entries written by langgraph-s3 0.1 (key without the deployment)."""
        kwargs: dict[str, Any] = {"TableName": self.table, "ConsistentRead": True}
        while True:
            resp = await self._call("scan", **kwargs)
            for item in resp.get("Items", []):
                if "/" in item.get("pk", {}).get("S", "/") or "rev" in item:
                    continue
                try:
                    yield _entry(item)
                except (KeyError, TypeError, AttributeError, ValueError):
                    continue
            if "LastEvaluatedKey" not in resp:
                return
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    async def adopt(self, legacy: Entry) -> None:
        """Give a 0.1 entry this deployment's key (its whole history stays visible)."""
        new = Fields(legacy.latest_id, legacy.latest_tail, "", legacy.uses_delta, 0, set())
        await self._swap(legacy.thread_id, legacy.checkpoint_ns, None, new)

    async def mark_migrated(self) -> None:
        await self._call(
            "put_item",
            TableName=self.table,
            Item={
                "pk": {"S": self.deployment},
                "sk": {"S": META_SK},
                "version": {"N": str(LAYOUT_VERSION)},
                "migrated_at": {"N": str(int(time.time()))},
            },
        )


@dataclass(slots=True)
class Fields:
    """The changeable part of an entry, as a compare-and-swap writes it."""

    latest_id: str
    latest_tail: str
    floor: str
    uses_delta: bool
    created_at: int
    heads: set[str]
    gone: set[str] = field(default_factory=set)


def uuid6_time(checkpoint_id: str) -> float | None:
    """The epoch seconds inside a uuid6 checkpoint id (None for another kind of id)."""
    try:
        u = uuid.UUID(checkpoint_id)
    except ValueError:
        return None
    if u.version != 6:
        return None
    ticks = ((u.int >> 80) << 12) | ((u.int >> 64) & 0x0FFF)
    return (ticks - 0x01B21DD213814000) / 1e7


def trim_gone(gone: Iterable[str], floor: str, now: float) -> set[str]:
    """``gone`` only has to outlive a writer still in flight on a removed checkpoint:
    keep ids above the floor from the last hour, at most the newest GONE_LIMIT, so
    the entry stays small (a rollback after every run would grow it forever)."""
    kept = sorted(
        (g for g in gone if g >= floor and (uuid6_time(g) or now) > now - GONE_SECONDS),
        reverse=True,
    )
    return set(kept[:GONE_LIMIT])


def _decide(
    raw: Raw | None, cid: str, tail: str, parent: str | None, uses_delta: bool, now: float
) -> Fields | Entry | None:
    """How to commit ``cid`` (parent ``parent``) on top of ``raw``: a new life's
    fields, the live entry to add a tip to, or None when it is already committed."""
    if raw is None or raw.tombstone or raw.expired(now) or "latest_id" not in raw.item:
        if parent is not None and raw is not None:
            what = "deleted" if raw.tombstone else "expired (thread_ttl_days)"
            raise CheckpointConflictError(
                f"checkpoint {cid} continues checkpoint {parent}, but its thread was {what} "
                "while this run was writing: the checkpoint was discarded; start the "
                "conversation again"
            )
        # the first commit starts the life: nothing older is part of it (a parent it
        # names may belong to a life that was deleted or expired, item and all)
        return Fields(cid, tail, cid, uses_delta, 0, set())
    entry = _entry(raw.item)
    if cid == entry.latest_id or cid in entry.heads:
        return None
    if parent is not None and (parent < entry.floor or parent in entry.gone):
        raise CheckpointConflictError(
            f"checkpoint {cid} continues checkpoint {parent}, which prune or delete_for_runs "
            "removed while this run was writing: the checkpoint was discarded"
        )
    return entry


async def _sleep_backoff(attempt: int) -> None:
    """Full jitter, from 10 ms doubling to at most 0.5 s: contenders spread out."""
    await asyncio.sleep(random.uniform(0, min(0.5, 0.01 * 2**attempt)))
