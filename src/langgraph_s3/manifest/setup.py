"""The manifest's setup: its table, the deployment's marker, indexes and migration."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

from langgraph_s3.core.records import (
    INDEXED,
    INDEXED_KEYS,
    METADATA_RECORDED,
    MIGRATED,
    RUNS_INDEXED,
    Entry,
    Fields,
)
from langgraph_s3.manifest.conditions import SS, Change, N
from langgraph_s3.manifest.decide import LAYOUT_VERSION, META_SK, new_life
from langgraph_s3.manifest.items import Items
from langgraph_s3.manifest.schema import TTL_ATTRIBUTE, entry_of, index_attribute, index_name


class Setup:
    """``setup()``'s role and the CLI's: make the table, read and write the
    deployment's marker (what ``setup()`` did), add metadata indexes, and adopt the
    entries an older key layout wrote."""

    def __init__(self, items: Items) -> None:
        self.items = items

    async def exists(self) -> bool:
        """Whether the table exists. Cost: 1 DescribeTable."""
        return await self.items.db.exists()

    async def create(self) -> None:
        """Create the table, wait until it is active, enable its TTL (``expires_at``).

        A table that already exists is fine. Cost on DynamoDB: 1 CreateTable, 1
        DescribeTable per poll (usually a few), 1 UpdateTimeToLive.
        """
        await self.items.db.create(ttl_attribute=TTL_ATTRIBUTE)

    async def marker_says(self) -> frozenset[str]:
        """What the deployment's marker holds of ``MIGRATED`` (:meth:`migrated`),
        ``RUNS_INDEXED`` (the run index holds
        every run) and ``METADATA_RECORDED`` (every thread's item records its latest
        metadata), as a ``setup()`` that made it so wrote. Cost: 1 GetItem."""
        item = (
            await self.items.db.get({"pk": {"S": self.items.deployment}, "sk": {"S": META_SK}})
            or {}
        )
        says = {n for n in (RUNS_INDEXED, METADATA_RECORDED) if n in item}
        says |= {INDEXED + k for k in item.get(INDEXED_KEYS, {}).get("SS", ())}
        if int(item.get("version", {}).get("N", "0")) >= LAYOUT_VERSION:
            says.add(MIGRATED)
        return frozenset(says)

    async def marker_add(self, name: str) -> None:
        """Write ``name`` (and when) into the deployment's marker; ``INDEXED + key``:
        the items of older threads carry the key's index value. Cost: 1 UpdateItem."""
        if name.startswith(INDEXED):
            change = Change(add={INDEXED_KEYS: SS([name.removeprefix(INDEXED)])})
        else:
            change = Change({name: N(int(self.items.now()))})
        await self.items.db.update(
            {"pk": {"S": self.items.deployment}, "sk": {"S": META_SK}}, change
        )

    async def missing_indexes(self) -> list[str]:
        """The keys of ``index_metadata`` whose index the table lacks. Cost: 1 DescribeTable
        (none when no key is declared)."""
        if not self.items.index_metadata:
            return []
        have = set(await self.items.db.indexes())
        return [k for k in self.items.index_metadata if index_name(k) not in have]

    async def create_index(self, key: str) -> None:
        """Add the index of one metadata key (DynamoDB fills it from the items there).
        Cost: 1 UpdateTable, then 1 DescribeTable per poll until it is ACTIVE."""
        await self.items.db.create_index(index_name(key), index_attribute(key))

    async def migrated(self) -> bool:
        """Whether this deployment's marker says its entries use this key layout.

        Cost: 1 GetItem.
        """
        item = (
            await self.items.db.get({"pk": {"S": self.items.deployment}, "sk": {"S": META_SK}})
            or {}
        )
        return int(item.get("version", {}).get("N", "0")) >= LAYOUT_VERSION

    async def legacy_entries(self) -> AsyncIterator[Entry]:
        """Entries written by langgraph-s3 0.1 (key without the deployment).

        Cost: 1 Scan per 1 MB page of the whole table.
        """
        async for items in self.items.db.scan():
            for item in items:
                if "/" in item.get("pk", {}).get("S", "/") or "rev" in item:
                    continue
                try:
                    yield entry_of(item)
                except (KeyError, TypeError, AttributeError, ValueError):
                    continue

    async def adopt(self, legacy: Entry) -> None:
        """Give a 0.1 entry this deployment's key (its whole history stays visible).

        Cost: 1 PutItem, conditioned on there being no entry under the new key yet
        (one there already stands).
        """
        new = Fields(
            legacy.latest_id, legacy.latest_tail, "", legacy.uses_delta, 0, set(), life=new_life()
        )
        await self.items.swap(legacy.thread_id, legacy.checkpoint_ns, new, rev=None)

    async def mark_migrated(self, also: Iterable[str] = ()) -> None:
        """Record that this deployment's entries use this key layout, and the flags
        ``also`` (see :meth:`marker_says`). Cost: 1 PutItem."""
        now = {"N": str(int(self.items.now()))}
        item = {
            "pk": {"S": self.items.deployment},
            "sk": {"S": META_SK},
            "version": {"N": str(LAYOUT_VERSION)},
            "migrated_at": now,
        }
        await self.items.db.put(item | {name: now for name in also})
