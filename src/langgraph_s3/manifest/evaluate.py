"""DynamoDB's rules for items, in Python: whether a condition holds of an item, what a
change makes of it, and what DynamoDB refuses (a bad value, an item over 400 KB, a key
attribute changed). Pure, no I/O.

Two tables evaluate conditions here rather than in a service: the in-memory table of
the tests (:mod:`langgraph_s3.testing.table`) and the manifest on object storage
(:mod:`langgraph_s3.manifest.objects`), which reads an item, evaluates the condition,
and writes the next version create-only. ``tests/unit/test_contract_table.py`` holds
both and DynamoDB to the same assertions.
"""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

from langgraph_s3.errors import InvalidRequestError, ServiceError
from langgraph_s3.manifest.conditions import (
    Absent,
    All,
    AnyOf,
    Change,
    Cond,
    Contains,
    Exists,
    Not,
    Typed,
    Value,
)

__all__ = [
    "ITEM_LIMIT",
    "KEY",
    "applied",
    "check_value",
    "holds",
    "item_size",
    "key_of",
    "refused",
    "valid_item",
]

ITEM_LIMIT = 400 * 1024  # DynamoDB's largest item, in bytes (names and values)
KEY = ("pk", "sk")


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


def refused(reason: str) -> ServiceError:
    """DynamoDB's ValidationException, as the door translates it (``ServiceError``)."""
    text = f"dynamodb request failed: ValidationException {reason}: AWS rejected it as invalid"
    return ServiceError(text, code="ValidationException", status=400)


def check_value(value: Any, where: str) -> None:
    """Refuse what DynamoDB refuses in an attribute value: an empty or repeating set, a
    number that is none, a value of no type or of two."""
    if not isinstance(value, dict) or len(value) != 1:
        raise refused(f"{where}: an attribute value has exactly one type, got {value!r}")
    ((kind, raw),) = value.items()
    if kind in ("SS", "NS", "BS") and (not raw or len(set(raw)) != len(raw)):
        raise refused(f"{where}: a set may be neither empty nor hold an element twice")
    if kind in ("N", "NS"):
        for number in [raw] if kind == "N" else raw:
            try:
                finite = Decimal(number).is_finite()
            except (ArithmeticError, ValueError, TypeError):
                finite = False
            if not finite:
                raise refused(f"{where}: {number!r} is not a number")
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
        raise refused(f"{cond.op} compares strings or numbers, not {kind}")
    return bool(
        {"<": have < want, "<=": have <= want, ">": have > want, ">=": have >= want}[cond.op]
    )


def _number(value: Decimal) -> str:
    return str(int(value)) if value == value.to_integral_value() else str(value.normalize())


def applied(change: Change, item: dict[str, Any]) -> dict[str, Any]:
    """``item`` after ``change``, a new dict (``item`` is left as it is)."""
    touched = {*change.set, *change.remove, *change.add, *change.delete}
    if touched & set(KEY):
        raise refused(f"cannot update attribute {sorted(touched & set(KEY))}: part of the key")
    new = copy.deepcopy(item)
    for name, value in change.set.items():
        new[name] = copy.deepcopy(value)
    for name in change.remove:
        new.pop(name, None)
    for name, value in change.add.items():
        have = new.get(name)
        if have is not None and set(have) != set(value):
            raise refused(f"ADD {name}: the attribute is a {set(have)}, the operand a {set(value)}")
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
            raise refused(f"DELETE {name}: the attribute is a {set(have)}, not a string set")
        left = sorted(set(have.get("SS", ())) - set(value["SS"]))
        if left:
            new[name] = {"SS": left}
        else:
            new.pop(name)  # DynamoDB drops a set left empty
    return new


def item_size(value: Any) -> int:
    """About the bytes DynamoDB counts for a value (never fewer): a map or a list costs 3
    bytes, and 1 more per element, beside what its elements cost."""
    if isinstance(value, dict):
        return 3 + sum(len(k.encode()) + item_size(v) + 1 for k, v in value.items())
    if isinstance(value, list | tuple):
        return 3 + sum(item_size(v) + 1 for v in value)
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, bytes | bytearray):
        return len(value)
    return 1


def key_of(attrs: dict[str, Any]) -> tuple[str, str]:
    """The (pk, sk) of an item or key; refused as DynamoDB refuses a bad key."""
    try:
        key = str(attrs["pk"]["S"]), str(attrs["sk"]["S"])
    except (KeyError, TypeError) as exc:
        raise refused(f"the key must be pk and sk strings, got {attrs!r}") from exc
    if not all(key):
        raise refused("a key attribute may not be an empty string")
    return key


def valid_item(item: dict[str, Any]) -> None:
    """Refuse what DynamoDB refuses of an item to be written: a bad value, too large."""
    for name, value in item.items():
        check_value(value, name)
    if item_size(item) > ITEM_LIMIT:
        raise refused("Item size has exceeded the maximum allowed size")
