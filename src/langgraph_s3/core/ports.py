"""The interfaces the saver's logic runs on: an object store, a manifest, and the table
the manifest keeps its items in.

:class:`~langgraph_s3.aws.s3.ObjectStore` (S3) and
:class:`~langgraph_s3.manifest.Manifest` (DynamoDB) implement them for AWS;
:class:`~langgraph_s3.testing.fakes.MemoryObjectStore` and
:class:`~langgraph_s3.testing.fakes.MemoryManifest` implement them in memory, for tests
and offline experiments, and the fault-injecting wrappers of
:mod:`langgraph_s3.testing.fakes` wrap any implementation. ``mypy --strict`` checks
that every one of them satisfies these protocols (see the end of ``testing/fakes.py``).

The protocols say what a caller may rely on; the semantics (conditional
writes, listing order, what a compare-and-swap refuses) are those documented
on the AWS implementations, and ``tests/unit/test_contract_*.py`` run the same
assertions against both kinds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from langgraph_s3.core.cache import ByteLRU
from langgraph_s3.core.conditions import Change, Cond, PutMode, TxWrite
from langgraph_s3.core.manifest_ports import ManifestPort
from langgraph_s3.core.records import (
    Lifecycle,
    Listed,
)
from langgraph_s3.core.shards import Shard

__all__ = ["ManifestPort", "ObjectStorePort", "TablePort"]


class ObjectStorePort(Protocol):
    """Objects of one bucket: conditional writes, reads, ordered listings, deletes."""

    @property
    def bucket(self) -> str:
        """The bucket's name."""

    @property
    def concurrency(self) -> int:
        """Requests in flight per operation."""

    @property
    def cache(self) -> ByteLRU | None:
        """The cache of immutable objects (``put``/``get`` with ``cache=True``), if any."""

    async def put(
        self,
        key: str,
        body: bytes,
        *,
        mode: PutMode = None,
        cache: bool = False,
        tagging: str | None = None,
    ) -> str | None:
        """Write an object; its ETag, or None when ``mode``'s condition failed (the
        object exists, for ``CREATE``; it changed or is gone, for ``Update(etag)``)."""

    async def copy(self, source_key: str, target_key: str, *, if_match: str | None = None) -> None:
        """Copy one object (its tags too); NotFoundError when the source is gone or,
        given ``if_match`` (an ETag a listing showed), is no longer that version (412:
        what lies there now, an erasure marker say, is not copied)."""

    async def delete(self, keys: Sequence[str]) -> int:
        """Delete keys (missing ones are fine); returns how many were asked for."""

    async def delete_if_match(self, key: str, etag: str) -> bool:
        """Delete ``key`` only while its ETag is ``etag``; False when it changed or is gone."""

    async def get(self, key: str, *, cache: bool = False) -> bytes | None:
        """An object's body; None when it does not exist."""

    async def get_with_etag(self, key: str) -> tuple[bytes | None, str | None]:
        """The body and ETag, or ``(None, None)`` when the object does not exist."""

    async def get_many(self, keys: Sequence[str], *, cache: bool = False) -> list[bytes | None]:
        """Bodies of ``keys``, in order, read concurrently."""

    async def get_range(self, key: str, start: int, length: int) -> bytes | None:
        """``length`` bytes from ``start`` (a ranged GET); None when the object is gone."""

    def list_pages(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[list[Listed]]:
        """Pages (one request each) of the keys under ``prefix``, ascending;
        ``start_after`` counts only when it sorts after ``prefix``."""

    async def list_all(self, prefix: str, *, start_after: str | None = None) -> list[Listed]:
        """Every key under ``prefix``, ascending."""

    async def bucket_exists(self) -> bool:
        """Whether the bucket exists (and may be reached with these credentials)."""

    async def create_bucket(self) -> None:
        """Create the bucket; one that exists already is fine."""

    async def lifecycle(self) -> Lifecycle:
        """The bucket's lifecycle configuration (none: no rules)."""

    async def set_lifecycle(self, config: Lifecycle) -> None:
        """Replace the bucket's lifecycle configuration whole (S3 has no partial
        update): pass what :meth:`lifecycle` gave, changed."""


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
        :data:`~langgraph_s3.core.conditions.TX_ITEMS` parts, each naming another item.

        Raises:
            TransactionFailedError: a condition failed (``failed`` says which parts).
        """

    async def exists(self) -> bool:
        """Whether the table exists."""

    async def create(self, *, ttl_attribute: str) -> None:
        """Create the table with the (``pk``, ``sk``) string key (or find it made), wait
        until it is active, and have it remove items whose ``ttl_attribute`` (epoch
        seconds) passed: several requests."""
