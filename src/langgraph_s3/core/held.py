"""Checkpoints a manifest item holds until their objects are stored: the attribute
format, their count, and what a carrying commit changes (pure: no AWS).

A put's commit carries its checkpoint's envelope in the item (``INLINE_PREFIX``); the
item counts the bytes of its copies (``HELD_BYTES``) in every write that adds or takes
one out, and a commit that adds one is conditioned on that count: the bound holds for
the item, as DynamoDB evaluates it, whatever number of processes left copies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

BARE_ATTRIBUTE = "bare"
"""The latest checkpoint id when it was committed with no pending writes known: while
``bare == latest_id`` the latest has none, and a read of it lists no writes. A
``put_writes`` of that checkpoint removes it; any other change of the latest leaves it
naming an older id, which no longer counts."""
INLINE_PREFIX = "inline:"
"""An item's attribute ``inline:<checkpoint id>`` holds a committed checkpoint's
envelope (a map: ``t`` its key tail, ``b`` its bytes) until its S3 object is known to
be stored: the commit carries the checkpoint, and the object is written off the
critical path (``checkpoint/inline.py``)."""
HELD_BYTES = "held_bytes"
"""The bytes of the copies an item holds (:func:`held_size` of each), kept by every
write that adds or removes one: a commit that carries a copy is conditioned on it, so
the item's bound holds whatever number of writers left copies (DynamoDB enforces it,
not each process's count)."""
HELD_COPY_MAX = 8 * 1024 + 256
"""The most one copy counts (an envelope of ``HELD_MAX`` bytes, its name and tail)."""
HELD_BUDGET = 32 * 1024
""":data:`HELD_BYTES` an item may reach with a new copy (DynamoDB's item bound is
400 KB): past it, a commit stores the held objects first and carries none."""


class InlineCopy(NamedTuple):
    """A checkpoint's envelope held in its manifest item (``INLINE_PREFIX``)."""

    checkpoint_id: str
    tail: str
    body: bytes


def inline_copies(item: dict[str, Any]) -> tuple[InlineCopy, ...]:
    """The envelopes an item holds, oldest first (a malformed one is skipped)."""
    out: list[InlineCopy] = []
    for name, value in item.items():
        if not name.startswith(INLINE_PREFIX):
            continue
        m = value.get("M") if isinstance(value, dict) else None
        tail, body = (m or {}).get("t", {}).get("S"), (m or {}).get("b", {}).get("B")
        if isinstance(tail, str) and isinstance(body, bytes | bytearray):
            out.append(InlineCopy(name[len(INLINE_PREFIX) :], tail, bytes(body)))
    return tuple(sorted(out))


def held_size(copy: InlineCopy) -> int:
    """What one held copy counts in :data:`HELD_BYTES`: about the bytes its attribute
    adds to the item (name, key tail, envelope)."""
    return len(INLINE_PREFIX) + len(copy.checkpoint_id) + len(copy.tail) + len(copy.body) + 8


def inline_attribute(copy: InlineCopy) -> dict[str, Any]:
    """The item attribute value holding ``copy``."""
    return {"M": {"t": {"S": copy.tail}, "b": {"B": copy.body}}}


@dataclass(slots=True)
class InlineCommit:
    """What a fast-path commit (``ManifestPort.advance``) does beside moving the latest.

    ``body``: the checkpoint's envelope, held in the item until its object is stored
    (None: its object is stored before the commit, as on the contended path).
    ``drop``: copies whose objects are now stored: they leave the item (the commit is
    conditioned on each being there, so :data:`HELD_BYTES` counts exactly).
    ``bare``: no pending write of the checkpoint is known (``BARE_ATTRIBUTE``).
    ``held``: filled by the commit: the copies the item held before it (a fast commit
    asks DynamoDB for the old item, at no extra request), so that the writer can store
    and drop those another process left (a Lambda frozen or killed before its object
    landed)."""

    body: bytes | None = None
    drop: tuple[InlineCopy, ...] = ()
    bare: bool = False
    held: tuple[InlineCopy, ...] | None = None
