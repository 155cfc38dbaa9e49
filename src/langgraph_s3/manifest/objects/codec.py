"""One version of an object manifest's item, as bytes: pure, no I/O.

A version holds the item's whole image (DynamoDB's typed format, as the memory table
holds it) or ``None`` when the item is deleted (a ⊥ version), the token of the writer
that made it (a writer that lost a PUT's answer knows its own version by it), and, for
a transaction's part, its intent (:class:`Intent`). A ⊥ version is at most
:data:`DEAD_MAX` bytes and every other one longer, so a listing's sizes tell a deleted
item from a live one without reading it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ormsgpack

from langgraph_s3.errors import CorruptObjectError

__all__ = ["DEAD_MAX", "Intent", "Version", "decode", "encode"]

DEAD_MAX = 95
"""The most bytes of a ⊥ version; a live one is padded past it."""

Image = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Intent:
    """A transaction's part, pending: the item was ``pre`` and becomes ``post`` if
    transaction ``tx`` commits. ``multi``: the transaction writes several items, and
    its outcome is the decision object ``t/{tx}``; otherwise it is the item's next
    version (``post`` by the committer, ``pre`` by whoever aborts it)."""

    tx: str
    pre: Image | None
    post: Image | None
    multi: bool


@dataclass(frozen=True, slots=True)
class Version:
    """One version of an item: ``image`` None is ⊥ (the item does not exist)."""

    seq: int
    image: Image | None
    token: str
    intent: Intent | None = None


def encode(version: Version) -> bytes:
    """The version's bytes (msgpack), a live one padded past :data:`DEAD_MAX`."""
    body: dict[str, Any] = {"s": version.seq, "w": version.token, "i": version.image}
    if version.intent is not None:
        x = version.intent
        body["x"] = {"t": x.tx, "a": x.pre, "b": x.post, "m": x.multi}
    out = ormsgpack.packb(body)
    if (version.image is not None or version.intent is not None) and len(out) <= DEAD_MAX:
        body["p"] = b"\0" * (DEAD_MAX + 1 - len(out))
        out = ormsgpack.packb(body)
    return out


def decode(data: bytes, where: str) -> Version:
    """The version ``data`` holds (``where``: its key, for the error)."""
    try:
        body = ormsgpack.unpackb(data)
        x = body.get("x")
        intent = Intent(x["t"], x["a"], x["b"], bool(x["m"])) if x is not None else None
        return Version(int(body["s"]), body["i"], str(body["w"]), intent)
    except (ormsgpack.MsgpackDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptObjectError(where, f"not a manifest version: {exc}") from exc
