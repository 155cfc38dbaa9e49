"""The manifest's table in memory: DynamoDB's rules for items, conditions and changes.

:class:`MemoryTable` is what a DynamoDB table holds (shared by every client on it, one
per deployment or process, as on AWS); :class:`MemoryTableClient` is one client's
:class:`~langgraph_s3.manifest.table.TablePort` on it, counting its requests; and
:class:`MemoryManifest` is the real :class:`~langgraph_s3.manifest.Manifest`, rules and
all, on such a client. Nothing of the manifest is written twice: this module knows
DynamoDB, not the manifest.

**Fidelity.** A condition (:mod:`langgraph_s3.manifest.conditions`) is evaluated and a change
applied as DynamoDB does, atomically under the table's lock: comparisons with a missing
attribute or one of another type are false, strings compare by code point (UTF-8 byte
order), numbers exactly, sets as sets, ``contains`` is membership or a substring; ``ADD``
adds to a number (missing: 0) or unites sets, ``DELETE`` takes set elements out and
drops a set left empty; an update of a missing item creates it from its key. What
DynamoDB refuses is refused with its error: a change of a key attribute, an ``ADD`` onto
an attribute of another type, an item over 400 KB (``ValidationException``), a missing
table (``ResourceNotFoundException``). ``tests/unit/test_contract_table.py`` holds this
client and DynamoDB's (on moto) to the same assertions.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from langgraph_s3.aws.stats import RequestStats
from langgraph_s3.core.shards import Shard
from langgraph_s3.errors import (
    ConditionFailedError,
    MissingResourceError,
    TransactionFailedError,
)
from langgraph_s3.manifest.conditions import (
    TX_ITEMS,
    Change,
    Cond,
    TxCheck,
    TxDelete,
    TxPut,
    TxUpdate,
    TxWrite,
)
from langgraph_s3.manifest.evaluate import (
    applied,
    holds,
    refused,
)
from langgraph_s3.manifest.evaluate import key_of as _key_of
from langgraph_s3.manifest.evaluate import valid_item as _valid
from langgraph_s3.testing.requests import YIELDS, Requester

__all__ = ["MemoryTable", "MemoryTableClient", "applied", "holds"]

DEFAULT_BUCKET = "memory"
DEFAULT_TABLE = "langgraph-s3-manifest"
PAGE_ITEMS = 1000  # items per Query or Scan page (DynamoDB's 1 MB, about this many)


# ------------------------------------------------------------------ the state
class MemoryTable:
    """What the manifest's DynamoDB table holds, shared by every client on it.

    Args:
        name: the table's name.
        exists: False for a table ``create()`` (``setup()``) has yet to create.
        clock: epoch seconds now (TTL, leases, ``updated_at``); ``time.time`` by default.
    """

    def __init__(
        self,
        name: str = DEFAULT_TABLE,
        *,
        exists: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        self.exists = exists
        self.ttl_enabled = exists
        self.clock = clock
        self.items: dict[tuple[str, str], dict[str, Any]] = {}
        """(pk, sk) -> the item in DynamoDB's attribute format; a test may change it."""
        self.lock = threading.RLock()
        self._last_stamp = 0
        self.indexes: dict[str, str] = {}
        """Global secondary index name -> the attribute it is keyed by."""

    def stamp(self) -> int:
        """``time.time_ns()`` of the table's clock, strictly increasing."""
        self._last_stamp = max(int(self.clock() * 1e9), self._last_stamp + 1)
        return self._last_stamp

    def get(self, key: tuple[str, str]) -> dict[str, Any] | None:
        item = self.items.get(key)
        return copy.deepcopy(item) if item is not None else None

    def sorted_keys(self, after: tuple[str, str] | None) -> list[tuple[str, str]]:
        keys = sorted(self.items)
        return keys if after is None else [k for k in keys if k > after]


# ------------------------------------------------------------------ a client
class MemoryTableClient(Requester):
    """One client's :class:`~langgraph_s3.manifest.table.TablePort` on a :class:`MemoryTable`.

    Args:
        table: the table's state.
        stats: where requests are counted (a new RequestStats by default).
        page_items: items per Query or Scan page.
        yields: event-loop turns each request lasts (see ``testing.requests.YIELDS``).
    """

    def __init__(
        self,
        table: MemoryTable,
        *,
        stats: RequestStats | None = None,
        page_items: int = PAGE_ITEMS,
        yields: int = YIELDS,
    ) -> None:
        self.data = table
        self.stats = stats if stats is not None else RequestStats()
        self.page_items = page_items
        self.yields = yields

    @property
    def name(self) -> str:
        return self.data.name

    def _require_table(self) -> None:
        # DynamoDB answers ResourceNotFoundException, which aws/door.py translates so
        if not self.data.exists:
            raise MissingResourceError("manifest table", self.name)

    async def get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        async with self.request("dynamodb.GetItem"):
            with self.data.lock:
                self._require_table()
                return self.data.get(_key_of(key))

    async def get_many(self, keys: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        if len({_key_of(k) for k in keys}) != len(keys):
            raise refused("Provided list of item keys contains duplicates")
        async with self.request("dynamodb.BatchGetItem"):
            with self.data.lock:
                self._require_table()
                got = (self.data.get(_key_of(k)) for k in keys)
                return [i for i in got if i is not None]

    async def _pages(
        self,
        operation: str,
        match: Callable[[tuple[str, str]], bool],
        after: tuple[str, str] | None = None,
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """Pages of ``page_items`` matching items in key order, one request each, each
        reading the table as it is then (after ``after``: ExclusiveStartKey)."""
        while True:
            async with self.request(operation):
                with self.data.lock:
                    self._require_table()
                    keys = [k for k in self.data.sorted_keys(after) if match(k)]
                    page = copy.deepcopy([self.data.items[k] for k in keys[: self.page_items]])
                    more = len(keys) > self.page_items  # LastEvaluatedKey
            yield page
            if not more:
                return
            after = _key_of(page[-1])

    def query(self, pk: str) -> AsyncIterator[list[dict[str, Any]]]:
        return self._pages("dynamodb.Query", lambda k: k[0] == pk)

    def scan(
        self,
        *,
        prefix: str = "",
        after: dict[str, Any] | None = None,
        shard: Shard | None = None,
    ) -> AsyncIterator[list[dict[str, Any]]]:
        # DynamoDB filters after reading; here the pages hold only matching items,
        # which callers cannot tell apart (a page may be short either way). A
        # segment is a hash of the partition key, as DynamoDB's (its own hash)
        start = _key_of(after) if after is not None else None

        def match(k: tuple[str, str]) -> bool:
            return k[0].startswith(prefix) and (shard is None or shard.holds(k[0]))

        return self._pages("dynamodb.Scan", match, after=start)

    def _write(self, key: tuple[str, str], item: dict[str, Any] | None) -> None:
        if item is None:
            self.data.items.pop(key, None)
            return
        _valid(item)
        self.data.items[key] = item

    def _check(self, when: Cond | None, item: dict[str, Any] | None) -> None:
        if when is not None and not holds(when, item):
            raise ConditionFailedError("ConditionalCheckFailedException: the condition failed")

    async def update(
        self,
        key: dict[str, Any],
        change: Change,
        *,
        when: Cond | None = None,
        old: bool = False,
    ) -> dict[str, Any] | None:
        k = _key_of(key)
        async with self.request("dynamodb.UpdateItem"):
            with self.data.lock:
                self._require_table()
                item = self.data.items.get(k)
                self._check(when, item)
                base = item if item is not None else {"pk": {"S": k[0]}, "sk": {"S": k[1]}}
                self._write(k, applied(change, base))
                return copy.deepcopy(item) if old and item is not None else None

    async def put(self, item: dict[str, Any], *, when: Cond | None = None) -> None:
        k = _key_of(item)
        async with self.request("dynamodb.PutItem"):
            with self.data.lock:
                self._require_table()
                self._check(when, self.data.items.get(k))
                self._write(k, copy.deepcopy(item))

    async def delete(self, key: dict[str, Any], *, when: Cond | None = None) -> None:
        k = _key_of(key)
        async with self.request("dynamodb.DeleteItem"):
            with self.data.lock:
                self._require_table()
                self._check(when, self.data.items.get(k))
                self._write(k, None)

    async def transact(self, writes: Sequence[TxWrite]) -> None:
        if not 0 < len(writes) <= TX_ITEMS:
            raise refused(f"a transaction names 1 to {TX_ITEMS} items, not {len(writes)}")
        keys = [_key_of(w.item if isinstance(w, TxPut) else w.key) for w in writes]
        if len(set(keys)) != len(keys):
            raise refused("Transaction request cannot include multiple operations on one item")
        async with self.request("dynamodb.TransactWriteItems"):
            with self.data.lock:
                self._require_table()
                items = [self.data.items.get(k) for k in keys]
                failed = tuple(
                    i
                    for i, (w, item) in enumerate(zip(writes, items, strict=True))
                    if w.when is not None and not holds(w.when, item)
                )
                if failed:
                    raise TransactionFailedError(
                        "TransactionCanceledException: ConditionalCheckFailed", failed
                    )
                staged: list[tuple[tuple[str, str], dict[str, Any] | None]] = []
                for w, k, item in zip(writes, keys, items, strict=True):
                    if isinstance(w, TxUpdate):
                        base = item if item is not None else {"pk": {"S": k[0]}, "sk": {"S": k[1]}}
                        staged.append((k, applied(w.change, base)))
                    elif isinstance(w, TxPut):
                        staged.append((k, copy.deepcopy(w.item)))
                    elif isinstance(w, TxDelete):
                        staged.append((k, None))
                    else:
                        assert isinstance(w, TxCheck)
                for _k, new in staged:  # all checked first: a refused one writes nothing
                    if new is not None:
                        _valid(new)
                for k, new in staged:
                    self._write(k, new)

    def query_index(
        self, index: str, attribute: str, value: str
    ) -> AsyncIterator[list[dict[str, Any]]]:
        # a GSI holds the items that have its key attribute, keys only; this one is
        # never stale (DynamoDB's may be, for a moment)
        async def pages() -> AsyncIterator[list[dict[str, Any]]]:
            with self.data.lock:
                if self.data.indexes.get(index) != attribute:
                    raise refused(f"The table does not have the specified index: {index}")
            async for page in self._pages(
                "dynamodb.Query",
                lambda k: self.data.items[k].get(attribute) == {"S": value},
            ):
                yield [{"pk": i["pk"], "sk": i["sk"], attribute: i[attribute]} for i in page]

        return pages()

    async def indexes(self) -> list[str]:
        async with self.request("dynamodb.DescribeTable"):
            self._require_table()
            return sorted(self.data.indexes)

    async def create_index(self, index: str, attribute: str) -> None:
        async with self.request("dynamodb.UpdateTable"):
            self._require_table()
            self.data.indexes[index] = attribute
        async with self.request("dynamodb.DescribeTable"):
            pass

    async def erase_history(self, key: dict[str, Any]) -> None:
        """No request: a table keeps no earlier version of an item."""

    async def exists(self) -> bool:
        async with self.request("dynamodb.DescribeTable"):
            return self.data.exists

    async def create(self, *, ttl_attribute: str) -> None:
        """CreateTable (an existing one is fine), one DescribeTable (ACTIVE at once),
        UpdateTimeToLive: the requests DynamoTable.create makes on an on-demand table."""
        async with self.request("dynamodb.CreateTable"):
            self.data.exists = True
        async with self.request("dynamodb.DescribeTable"):
            pass
        async with self.request("dynamodb.UpdateTimeToLive"):
            self.data.ttl_enabled = True
