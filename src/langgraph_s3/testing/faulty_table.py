"""A table whose chosen requests fail, deterministically for a seed (see :class:`Faults`).

Faults sit at the narrow table port, under every role of the manifest: each
request of :class:`~langgraph_s3.manifest.table.TablePort` may fail before it is applied,
or (a write) after, its answer lost, named as requests are counted
(``"dynamodb.UpdateItem"``, ``"dynamodb.GetItem"`` ...). A manifest call that makes
several requests can so fail between any two of them, as it can on DynamoDB; and a
new manifest write needs nothing here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from typing import TypeVar

from langgraph_s3.core.shards import Shard
from langgraph_s3.manifest.conditions import Change, Cond, TxPut, TxWrite
from langgraph_s3.manifest.table import Item, TablePort
from langgraph_s3.testing.faults import Faults

__all__ = ["TABLE_WRITES", "FaultyTable"]

T = TypeVar("T")

TABLE_WRITES = frozenset(
    {
        "dynamodb.UpdateItem",
        "dynamodb.PutItem",
        "dynamodb.DeleteItem",
        "dynamodb.TransactWriteItems",
        "dynamodb.CreateTable",
        "dynamodb.UpdateTable",
    }
)
"""The table's requests that change state: only these may have their answer lost."""


def _pk(key: Item) -> str:
    return str(key.get("pk", {}).get("S", ""))


class FaultyTable:
    """Wraps a table; a seeded :class:`Faults` plan fails chosen requests.

    A ``get_many`` draws once (one BatchGetItem), a ``query``, ``scan`` or
    ``query_index`` once per page pulled, a ``transact`` once (all of it is applied
    or none). Arguments as :class:`~langgraph_s3.testing.faults.FaultyObjectStore`'s;
    one :class:`Faults` may drive a store and a table together.
    """

    def __init__(
        self,
        inner: TablePort,
        seed: int = 0,
        rate: float = 0.1,
        *,
        lost: float = 0.5,
        only: Collection[str] | None = None,
        limit: int | None = None,
        faults: Faults | None = None,
    ) -> None:
        self.inner = inner
        self.faults = faults or Faults(seed, rate, lost=lost, only=only, limit=limit)

    @property
    def name(self) -> str:
        return self.inner.name

    async def _around(self, call: str, target: str, run: Callable[[], Awaitable[T]]) -> T:
        op = f"dynamodb.{call}"
        return await self.faults.around(op, target, run, write=op in TABLE_WRITES)

    async def _pages(
        self, target: str, pages: AsyncIterator[list[Item]]
    ) -> AsyncIterator[list[Item]]:
        call = "Scan" if target.startswith("scan:") else "Query"
        try:
            while True:
                try:
                    page = await self._around(call, target, pages.__anext__)
                except StopAsyncIteration:
                    return
                yield page
        finally:
            aclose = getattr(pages, "aclose", None)
            if aclose is not None:
                await aclose()

    async def get(self, key: Item) -> Item | None:
        return await self._around("GetItem", _pk(key), lambda: self.inner.get(key))

    async def get_many(self, keys: Sequence[Item]) -> list[Item]:
        target = _pk(keys[0]) if keys else "-"
        return await self._around("BatchGetItem", target, lambda: self.inner.get_many(keys))

    def query(self, pk: str) -> AsyncIterator[list[Item]]:
        return self._pages(pk, self.inner.query(pk))

    def scan(
        self, *, prefix: str = "", after: Item | None = None, shard: Shard | None = None
    ) -> AsyncIterator[list[Item]]:
        pages = self.inner.scan(prefix=prefix, after=after, shard=shard)
        return self._pages(f"scan:{prefix}", pages)

    def query_index(self, index: str, attribute: str, value: str) -> AsyncIterator[list[Item]]:
        return self._pages(index, self.inner.query_index(index, attribute, value))

    async def indexes(self) -> list[str]:
        return await self._around("DescribeTable", self.name, self.inner.indexes)

    async def create_index(self, index: str, attribute: str) -> None:
        await self._around("UpdateTable", index, lambda: self.inner.create_index(index, attribute))

    async def update(
        self, key: Item, change: Change, *, when: Cond | None = None, old: bool = False
    ) -> Item | None:
        return await self._around(
            "UpdateItem", _pk(key), lambda: self.inner.update(key, change, when=when, old=old)
        )

    async def put(self, item: Item, *, when: Cond | None = None) -> None:
        await self._around("PutItem", _pk(item), lambda: self.inner.put(item, when=when))

    async def delete(self, key: Item, *, when: Cond | None = None) -> None:
        await self._around("DeleteItem", _pk(key), lambda: self.inner.delete(key, when=when))

    async def transact(self, writes: Sequence[TxWrite]) -> None:
        first = writes[0] if writes else None
        target = (
            "-" if first is None else _pk(first.item if isinstance(first, TxPut) else first.key)
        )
        await self._around("TransactWriteItems", target, lambda: self.inner.transact(writes))

    async def erase_history(self, key: Item) -> None:
        await self.inner.erase_history(key)

    async def exists(self) -> bool:
        return await self._around("DescribeTable", self.name, self.inner.exists)

    async def create(self, *, ttl_attribute: str) -> None:
        await self._around(
            "CreateTable", self.name, lambda: self.inner.create(ttl_attribute=ttl_attribute)
        )
