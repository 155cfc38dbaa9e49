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
from decimal import Decimal
from typing import Any

from langgraph_s3.aws.stats import RequestStats
from langgraph_s3.core.shards import Shard
from langgraph_s3.errors import (
    ConditionFailedError,
    InvalidRequestError,
    MissingResourceError,
    ServiceError,
    TransactionFailedError,
)
from langgraph_s3.manifest.conditions import (
    TX_ITEMS,
    Absent,
    All,
    AnyOf,
    Change,
    Cond,
    Contains,
    Exists,
    Not,
    TxCheck,
    TxDelete,
    TxPut,
    TxUpdate,
    TxWrite,
    Typed,
    Value,
)
from langgraph_s3.testing.requests import YIELDS, Requester

__all__ = ["MemoryTable", "MemoryTableClient", "applied", "holds"]

DEFAULT_BUCKET = "memory"
DEFAULT_TABLE = "langgraph-s3-manifest"
PAGE_ITEMS = 1000  # items per Query or Scan page (DynamoDB's 1 MB, about this many)
ITEM_LIMIT = 400 * 1024  # DynamoDB's largest item, in bytes (names and values)
KEY = ("pk", "sk")


# ------------------------------------------------------------------ the rules
def _at(item: dict[str, Any] | None, path: str) -> Value | None:
    """The value at ``path`` (``a`` or ``a.b`` inside a map), or None."""
    parts = path.split(".")
    value = (item or {}).get(parts[0])
    for part in parts[1:]:
        value = value.get("M", {}).get(part) if value is not None else None
    return value


def _plain(value: Value) -> tuple[str, Any]:
    """A value's type and a Python value that compares as DynamoDB compares it."""
    (kind, raw), *more = value.items()
    if more:
        raise InvalidRequestError(f"an attribute value has one type, got {sorted(value)}")
    if kind == "N":
        return kind, Decimal(raw)
    if kind in ("SS", "NS"):
        return kind, frozenset(raw)
    if kind == "M":
        return kind, {k: _plain(v) for k, v in raw.items()}
    if kind == "L":
        return kind, tuple(_plain(v) for v in raw)
    return kind, raw


def _refused(reason: str) -> ServiceError:
    """DynamoDB's ValidationException, as the door translates it (``ServiceError``)."""
    text = f"dynamodb request failed: ValidationException {reason}: AWS rejected it as invalid"
    return ServiceError(text, code="ValidationException", status=400)


def check_value(value: Any, where: str) -> None:
    """Refuse what DynamoDB refuses in an attribute value: an empty or repeating set, a
    number that is none, a value of no type or of two."""
    if not isinstance(value, dict) or len(value) != 1:
        raise _refused(f"{where}: an attribute value has exactly one type, got {value!r}")
    ((kind, raw),) = value.items()
    if kind in ("SS", "NS", "BS") and (not raw or len(set(raw)) != len(raw)):
        raise _refused(f"{where}: a set may be neither empty nor hold an element twice")
    if kind in ("N", "NS"):
        for number in [raw] if kind == "N" else raw:
            try:
                finite = Decimal(number).is_finite()
            except (ArithmeticError, ValueError, TypeError):
                finite = False
            if not finite:
                raise _refused(f"{where}: {number!r} is not a number")
    if kind == "M":
        for name, inner in raw.items():
            check_value(inner, f"{where}.{name}")
    if kind == "L":
        for n, inner in enumerate(raw):
            check_value(inner, f"{where}[{n}]")


def holds(cond: Cond, item: dict[str, Any] | None) -> bool:
    """Whether ``cond`` holds of ``item`` (None: there is no item), as DynamoDB says."""
    if isinstance(cond, Exists):
        return _at(item, cond.path) is not None
    if isinstance(cond, Absent):
        return _at(item, cond.path) is None
    if isinstance(cond, Typed):
        return cond.kind in (_at(item, cond.path) or {})
    if isinstance(cond, All):
        return all(holds(p, item) for p in cond.parts)
    if isinstance(cond, AnyOf):
        return any(holds(p, item) for p in cond.parts)
    if isinstance(cond, Not):
        return not holds(cond.part, item)
    found = _at(item, cond.path)
    if found is None:
        return False
    kind, have = _plain(found)
    want_kind, want = _plain(cond.value)
    if isinstance(cond, Contains):
        if kind in ("SS", "NS"):
            return (want_kind, kind) in (("S", "SS"), ("N", "NS")) and want in have
        if kind == "L":
            return any(_plain(v) == (want_kind, want) for v in found["L"])
        return kind == want_kind == "S" and want in have
    if kind != want_kind:
        return False
    if cond.op == "=":
        return bool(have == want)
    if kind not in ("S", "N"):
        raise _refused(f"{cond.op} compares strings or numbers, not {kind}")
    return bool(
        {"<": have < want, "<=": have <= want, ">": have > want, ">=": have >= want}[cond.op]
    )


def _number(value: Decimal) -> str:
    return str(int(value)) if value == value.to_integral_value() else str(value.normalize())


def applied(change: Change, item: dict[str, Any]) -> dict[str, Any]:
    """``item`` after ``change``, a new dict (``item`` is left as it is)."""
    touched = {*change.set, *change.remove, *change.add, *change.delete}
    if touched & set(KEY):
        raise _refused(f"cannot update attribute {sorted(touched & set(KEY))}: part of the key")
    new = copy.deepcopy(item)
    for name, value in change.set.items():
        new[name] = copy.deepcopy(value)
    for name in change.remove:
        new.pop(name, None)
    for name, value in change.add.items():
        have = new.get(name)
        if have is not None and set(have) != set(value):
            raise _refused(
                f"ADD {name}: the attribute is a {set(have)}, the operand a {set(value)}"
            )
        if "N" in value:
            total = Decimal((have or {"N": "0"})["N"]) + Decimal(value["N"])
            new[name] = {"N": _number(total)}
        else:
            new[name] = {"SS": sorted({*(have or {}).get("SS", ()), *value["SS"]})}
    for name, value in change.delete.items():
        have = new.get(name)
        if have is None:
            continue
        if set(have) != {"SS"}:
            raise _refused(f"DELETE {name}: the attribute is a {set(have)}, not a string set")
        left = sorted(set(have.get("SS", ())) - set(value["SS"]))
        if left:
            new[name] = {"SS": left}
        else:
            new.pop(name)  # DynamoDB drops a set left empty
    return new


def _size(value: Any) -> int:
    """About the bytes DynamoDB counts for a value (never fewer): a map or a list costs 3
    bytes, and 1 more per element, beside what its elements cost."""
    if isinstance(value, dict):
        return 3 + sum(len(k.encode()) + _size(v) + 1 for k, v in value.items())
    if isinstance(value, list | tuple):
        return 3 + sum(_size(v) + 1 for v in value)
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, bytes | bytearray):
        return len(value)
    return 1


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


def _key_of(attrs: dict[str, Any]) -> tuple[str, str]:
    try:
        key = str(attrs["pk"]["S"]), str(attrs["sk"]["S"])
    except (KeyError, TypeError) as exc:
        raise _refused(f"the key must be pk and sk strings, got {attrs!r}") from exc
    if not all(key):
        raise _refused("a key attribute may not be an empty string")
    return key


def _valid(item: dict[str, Any]) -> None:
    """Refuse what DynamoDB refuses of an item to be written: a bad value, too large."""
    for name, value in item.items():
        check_value(value, name)
    if _size(item) > ITEM_LIMIT:
        raise _refused("Item size has exceeded the maximum allowed size")


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
            raise _refused("Provided list of item keys contains duplicates")
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
            raise _refused(f"a transaction names 1 to {TX_ITEMS} items, not {len(writes)}")
        keys = [_key_of(w.item if isinstance(w, TxPut) else w.key) for w in writes]
        if len(set(keys)) != len(keys):
            raise _refused("Transaction request cannot include multiple operations on one item")
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
                    raise _refused(f"The table does not have the specified index: {index}")
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
