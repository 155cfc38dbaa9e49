"""Store items as JSON, and the pure rules of the store: filters, TTL classes,
namespace matching, similarity. No I/O.

An item object is one orjson document::

    {"ns": [...], "key": str, "value": {...}, "created_at": iso, "updated_at": iso,
     "expires_at": iso | null, "ttl": minutes | null, "vectors": {path: base64 float32}}

A segment (a compacted snapshot of one namespace) is a JSON document mapping
item keys to ``[etag, item]``; it is only a cache: an entry is used when its
ETag equals the one ``ListObjectsV2`` reports for the live object.
"""

from __future__ import annotations

import base64
import json
import math
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from langgraph.store.base import Item, MatchCondition

from langgraph_s3.errors import InvalidRequestError

TTL_TAG = "lgs3-ttl"
TTL_CLASSES_DAYS = (1, 2, 3, 7, 14, 30, 60, 90, 180, 365, 730, 1825, 3650)
"""Lifecycle backstop classes: an item expiring in at most N days is tagged Nd."""


def ttl_class(ttl_minutes: float | None) -> str | None:
    """The lifecycle class for a TTL: the smallest class that is at least as long.

    Rounding up means S3 may keep an expired object a little longer (the
    sweeper and every read hide it), never delete a live one.
    """
    if ttl_minutes is None:
        return None
    days = ttl_minutes / 1440
    for d in TTL_CLASSES_DAYS:
        if days <= d:
            return f"{d}d"
    return None  # longer than ten years: no lifecycle backstop, the sweeper only


def tagging(ttl_minutes: float | None) -> str | None:
    """The object tag (``Tagging=`` of a PUT) that puts an item in its lifecycle class."""
    cls = ttl_class(ttl_minutes)
    return f"{TTL_TAG}={cls}" if cls else None


def now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class StoredItem:
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    ttl: float | None
    vectors: dict[str, list[float]]

    def expired(self, at: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= at

    def to_item(self) -> Item:
        return Item(
            value=self.value,
            key=self.key,
            namespace=self.namespace,
            created_at=self.created_at,
            updated_at=self.updated_at,
        )

    def refreshed(self, at: datetime) -> StoredItem:
        assert self.ttl is not None
        return StoredItem(
            self.namespace,
            self.key,
            self.value,
            self.created_at,
            self.updated_at,
            at + timedelta(minutes=self.ttl),
            self.ttl,
            self.vectors,
        )


def _vec_out(v: Sequence[float]) -> str:
    return base64.b64encode(array("f", v).tobytes()).decode("ascii")


def _vec_in(s: str) -> list[float]:
    a = array("f")
    a.frombytes(base64.b64decode(s))
    return a.tolist()


def to_json(item: StoredItem) -> dict[str, Any]:
    return {
        "ns": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
        "expires_at": item.expires_at.isoformat() if item.expires_at else None,
        "ttl": item.ttl,
        "vectors": {p: _vec_out(v) for p, v in item.vectors.items()},
    }


def _when(text: str) -> datetime:
    """A timestamp we wrote: ISO 8601 with an offset (a naive one could not be compared)."""
    at = datetime.fromisoformat(text)
    if at.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no UTC offset"[:200])
    return at


def from_json(raw: Mapping[str, Any]) -> StoredItem:
    """Decode an item; a field of the wrong type raises, so it is never served as data."""
    ns, key, value, ttl = raw["ns"], raw["key"], raw["value"], raw.get("ttl")
    if not (isinstance(ns, list) and all(isinstance(x, str) for x in ns)):
        raise ValueError(f"'ns' is not a list of strings: {ns!r}"[:200])
    if not isinstance(key, str) or not isinstance(value, dict):
        raise ValueError("'key' is not a string or 'value' is not an object")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float))):
        raise ValueError(f"'ttl' is not a number: {ttl!r}"[:200])
    exp = raw.get("expires_at")
    return StoredItem(
        namespace=tuple(ns),
        key=key,
        value=value,
        created_at=_when(raw["created_at"]),
        updated_at=_when(raw["updated_at"]),
        expires_at=_when(exp) if exp else None,
        ttl=ttl,
        vectors={p: _vec_in(v) for p, v in (raw.get("vectors") or {}).items()},
    )


def _dumps(doc: Any) -> bytes:
    try:
        return orjson.dumps(doc)
    except TypeError:
        # integers beyond 64 bits: orjson refuses them (and would read them back
        # as floats), so such documents use the stdlib, marked by a leading space
        return b" " + json.dumps(doc, ensure_ascii=False, allow_nan=False).encode("utf-8")


def _loads(body: bytes) -> Any:
    if body[:1] == b" ":
        return json.loads(body)
    return orjson.loads(body)


def dump_item(item: StoredItem) -> bytes:
    return _dumps(to_json(item))


def load_item(body: bytes) -> StoredItem:
    return from_json(_loads(body))


def dump_segment(entries: Mapping[str, tuple[str, StoredItem | bytes]]) -> bytes:
    """A segment: item key -> ``[etag, item]``; a sealed item is kept as it is stored
    (its bytes in base64), so it opens only with its own subject's key."""
    return _dumps(
        {
            "v": 1,
            "items": {
                k: [e, base64.b64encode(i).decode("ascii") if isinstance(i, bytes) else to_json(i)]
                for k, (e, i) in entries.items()
            },
        }
    )


def load_segment(body: bytes) -> dict[str, tuple[str, StoredItem | bytes]]:
    """A segment's entries: decoded items, and sealed ones as stored (to open)."""
    raw = _loads(body)
    return {
        k: (
            etag,
            base64.b64decode(item, validate=True) if isinstance(item, str) else from_json(item),
        )
        for k, (etag, item) in raw["items"].items()
    }


# ------------------------------------------------------------------- filters
_MISSING = object()


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x)


def _order(a: Any, b: Any) -> int | None:
    """-1/0/1 when a and b are comparable (numbers with numbers, strings with strings)."""
    na, nb = _num(a), _num(b)
    if na is not None and nb is not None:
        return (na > nb) - (na < nb)
    if isinstance(a, str) and isinstance(b, str):
        return (a > b) - (a < b)
    return None


def _apply(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return bool((None if value is _MISSING else value) == arg)
    if op == "$ne":
        return bool((None if value is _MISSING else value) != arg)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        if value is _MISSING:
            return False
        c = _order(value, arg)
        if c is None:
            return False  # a missing or incomparable field never matches, never raises
        return {"$gt": c > 0, "$gte": c >= 0, "$lt": c < 0, "$lte": c <= 0}[op]
    raise InvalidRequestError(
        f"unsupported filter operator {op!r}: use $eq, $ne, $gt, $gte, $lt or $lte"
    )


def _matches(value: Any, cond: Any) -> bool:
    if isinstance(cond, dict):
        if any(k.startswith("$") for k in cond):
            return all(_apply(value, op, arg) for op, arg in cond.items())
        if not isinstance(value, dict):
            return False
        return all(_matches(value.get(k, _MISSING), v) for k, v in cond.items())
    if isinstance(cond, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(cond)
            and all(_matches(v, c) for v, c in zip(value, cond, strict=True))
        )
    return bool((None if value is _MISSING else value) == cond)  # missing reads as null


def matches_filter(value: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    if not flt:
        return True
    return all(_matches(value.get(k, _MISSING), cond) for k, cond in flt.items())


def validate_filter(flt: Mapping[str, Any] | None) -> None:
    """Fail before any request on an operator we do not know."""

    def walk(cond: Any) -> None:
        if isinstance(cond, dict):
            for k, v in cond.items():
                if k.startswith("$") and k not in ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte"):
                    raise InvalidRequestError(
                        f"unsupported filter operator {k!r}: use $eq, $ne, $gt, $gte, $lt or $lte"
                    )
                walk(v)

    for cond in (flt or {}).values():
        walk(cond)


# ------------------------------------------------------------- namespaces
def namespace_matches(ns: tuple[str, ...], conditions: Iterable[MatchCondition]) -> bool:
    for cond in conditions:
        path = tuple(cond.path)
        if len(ns) < len(path):
            return False
        if cond.match_type == "prefix":
            pairs = list(zip(ns, path, strict=False))
        else:
            pairs = list(zip(reversed(ns), reversed(path), strict=False))
        if any(p != "*" and n != p for n, p in pairs):
            return False
    return True


# ------------------------------------------------------------- similarity
def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0
