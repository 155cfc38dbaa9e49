"""The narrow table under the manifest, in DynamoDB's item format: the port its rules
are written over once (:class:`~langgraph_s3.manifest.facade.Manifest`), which
:class:`~langgraph_s3.manifest.dynamodb.DynamoTable` (DynamoDB) and
:class:`~langgraph_s3.testing.table.MemoryTableClient` implement, and which
:class:`~langgraph_s3.testing.faulty_table.FaultyTable` wraps. No request is made here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from langgraph_s3.core.shards import Shard
from langgraph_s3.manifest.conditions import Change, Cond, TxWrite

__all__ = ["Item", "TablePort"]


Item = dict[str, Any]
"""A table item in DynamoDB's attribute format (``{"pk": {"S": ...}, ...}``)."""


class TablePort(Protocol):
    """The narrow table under the manifest: items keyed by (``pk``, ``sk``), strongly
    consistent reads, ordered pages, and single-item writes conditioned on the item.

    :class:`~langgraph_s3.manifest.dynamodb.DynamoTable` (DynamoDB) and
    :class:`~langgraph_s3.testing.table.MemoryTableClient` implement it; the manifest's
    rules (:class:`~langgraph_s3.manifest.Manifest`) are written once above it. Each
    call is one request (a page of ``query``/``scan`` one each) unless it says so.
    A write whose ``when`` does not hold changes nothing and raises
    :class:`~langgraph_s3.errors.ConditionFailedError`; a missing table is
    :class:`~langgraph_s3.errors.MissingResourceError`.
    """

    @property
    def name(self) -> str:
        """The table's name."""

    async def get(self, key: Item) -> Item | None:
        """The item under ``key`` as it is now (strongly consistent), or None."""

    async def get_many(self, keys: Sequence[Item]) -> list[Item]:
        """The items of ``keys`` that exist (strongly consistent), in no set order; one
        request unless the table leaves some unprocessed (then again for those)."""

    def query(self, pk: str) -> AsyncIterator[list[Item]]:
        """Every item of one partition, in sort key order, a page at a time; each page
        reads the table as it is when it is asked for."""

    def scan(
        self, *, prefix: str = "", after: Item | None = None, shard: Shard | None = None
    ) -> AsyncIterator[list[Item]]:
        """Every item whose ``pk`` starts with ``prefix``, in key order, a page at a
        time, from after the key ``after``. A page may hold fewer items than it could
        (DynamoDB filters after reading), even none, and more pages follow. ``shard``:
        its segment only (a parallel Scan: one ``pk``'s items in one segment)."""

    def query_index(self, index: str, attribute: str, value: str) -> AsyncIterator[list[Item]]:
        """Pages of the keys of the items whose ``attribute`` is ``value``, through the
        global secondary index ``index`` (eventually consistent)."""

    async def indexes(self) -> list[str]:
        """The names of the table's global secondary indexes."""

    async def create_index(self, index: str, attribute: str) -> None:
        """Add a keys-only index keyed by ``attribute`` and ``pk``; wait until it answers."""

    async def update(
        self, key: Item, change: Change, *, when: Cond | None = None, old: bool = False
    ) -> Item | None:
        """Apply ``change`` to the item (created from ``key`` when there is none) if
        ``when`` holds of it as it is (a missing item has no attributes): atomic.

        Returns:
            With ``old``, the item as it was before (None when there was none);
            otherwise None.
        """

    async def put(self, item: Item, *, when: Cond | None = None) -> None:
        """Write the whole item (its key inside it) if ``when`` holds of the one there."""

    async def delete(self, key: Item, *, when: Cond | None = None) -> None:
        """Delete the item if ``when`` holds of it (a missing item is fine without one)."""

    async def transact(self, writes: Sequence[TxWrite]) -> None:
        """Apply every part of ``writes`` or none (DynamoDB's TransactWriteItems): each
        part's condition holds of its item as it is, or nothing is written. At most
        :data:`~langgraph_s3.manifest.conditions.TX_ITEMS` parts, each naming another item.

        Raises:
            TransactionFailedError: a condition failed (``failed`` says which parts).
        """

    async def erase_history(self, key: Item) -> None:
        """Erase what earlier versions of the item hold, where the table keeps any
        (a forgotten subject's wrapped key must not outlive its removal). DynamoDB keeps
        none (its stream and backups are its operator's): no request."""

    async def exists(self) -> bool:
        """Whether the table exists."""

    async def create(self, *, ttl_attribute: str) -> None:
        """Create the table with the (``pk``, ``sk``) string key (or find it made), wait
        until it is active, and have it remove items whose ``ttl_attribute`` (epoch
        seconds) passed: several requests."""
