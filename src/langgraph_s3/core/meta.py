"""The metadata pairs the manifest records of a thread's latest checkpoint, and its index keys.

A put of a root checkpoint records, in its thread's root item, the pairs of the
checkpoint's metadata whose values are scalars (:func:`recorded`): that is what
``alist_threads(metadata={...})`` filters on without reading S3. For a key the
deployment declares (``index_metadata=["user_id"]``), the item also carries the
key's value (:func:`index_value`), the hash key of a global secondary index, so that
one Query finds the threads of one value (the attributes and indexes are named by the
manifest's schema, ``manifest/schema.py``). Pure, no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from langgraph_s3.errors import InvalidRequestError

__all__ = [
    "INDEX_KEY",
    "MAX_PAIRS",
    "MAX_VALUE",
    "Meta",
    "index_keys",
    "index_value",
    "matches",
    "recorded",
    "wanted",
]

MAX_PAIRS = 32
"""Pairs recorded per checkpoint at most (the first by key order)."""
MAX_VALUE = 256
"""Characters of a string value (and of a key) recorded at most: a longer one is not recorded."""
INDEX_KEY = re.compile(r"[A-Za-z0-9_-]{1,60}")
"""A key a deployment may index (it names an attribute and a DynamoDB index)."""

Scalar = str | int | float | bool | None
Meta = tuple[dict[str, str], tuple[str, ...]]
"""A commit's change of the metadata attributes: (set, remove), as the manifest
makes it (``ManifestPort.meta_change``) for a writer to hand back with its commit."""


def _scalar(value: object) -> bool:
    if value is None or isinstance(value, bool | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str) and len(value) <= MAX_VALUE


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:  # a lone surrogate: no JSON, no DynamoDB string
        return False


def recorded(metadata: Mapping[str, Any], first: Sequence[str] = ()) -> dict[str, Scalar]:
    """The pairs of ``metadata`` the manifest records: keys of up to 256 characters
    whose values are None, booleans, numbers or strings of up to 256 characters; at
    most 32 of them: the keys in ``first`` (the indexed ones), then by key order.
    Lists, objects, longer strings and text that is no valid Unicode are not."""
    out: dict[str, Scalar] = {}
    keys = [k for k in metadata if isinstance(k, str) and len(k) <= MAX_VALUE and _encodes(k)]
    ordered = [k for k in first if k in metadata] + sorted(k for k in keys if k not in first)
    for key in ordered:
        value = metadata[key]
        if _scalar(value) and (not isinstance(value, str) or _encodes(value)):
            out[key] = value
            if len(out) == MAX_PAIRS:
                break
    return out


def index_keys(keys: Iterable[str] | None) -> tuple[str, ...]:
    """The keys a deployment indexes, checked (each a DynamoDB index name's part)."""
    if keys is None:
        return ()
    if isinstance(keys, str):
        raise InvalidRequestError(
            f"index_metadata is a list of keys, got the string {keys!r}: write [{keys!r}]"
        )
    out = tuple(keys)
    for key in out:
        if not isinstance(key, str) or not INDEX_KEY.fullmatch(key):
            raise InvalidRequestError(
                f"index_metadata key {key!r} must be 1 to 60 of A-Z a-z 0-9 _ - "
                "(it names a DynamoDB index: meta_<key>)"
            )
    if len(set(out)) != len(out):
        raise InvalidRequestError(f"index_metadata names a key twice: {list(out)}")
    return out


def _text(value: Scalar) -> str:
    if isinstance(value, bool):
        value = int(value)  # True, 1 and 1.0 are one value, as Python compares them
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return orjson.dumps(value).decode()


def index_value(deployment: str, value: Scalar) -> str:
    """The index's hash key for one value in one deployment (deployments sharing a
    table never see each other's threads)."""
    return f"{deployment}{_text(value)}"


def loads(text: str | None) -> dict[str, Scalar]:
    """The recorded pairs from the attribute (``{}`` when absent or unreadable)."""
    if not text:
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def wanted(metadata: object) -> dict[str, Scalar]:
    """A ``metadata=`` filter, checked: pairs of keys and scalar values."""
    if not isinstance(metadata, Mapping):
        raise InvalidRequestError(
            f"metadata must be a mapping of keys to values, got {type(metadata).__name__}"
        )
    for key, value in metadata.items():
        if not isinstance(key, str):
            raise InvalidRequestError(f"metadata keys are strings, got {key!r}")
        if not _scalar(value):
            raise InvalidRequestError(
                f"metadata[{key!r}] must be None, a boolean, a number or a string of up "
                f"to {MAX_VALUE} characters (what the manifest records), got {str(value)[:60]!r}"
            )
    return dict(metadata)


def matches(pairs: Mapping[str, Scalar], want: Mapping[str, Scalar]) -> bool:
    """Whether recorded ``pairs`` hold every pair of ``want`` (Python's equality, as
    LangGraph's own ``list(filter=...)``)."""
    return all(k in pairs and pairs[k] == v for k, v in want.items())
