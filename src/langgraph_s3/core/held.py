"""Checkpoints a manifest item holds until their objects are stored: what a copy is,
what it counts, and what a carrying commit changes (pure: no AWS; the attributes that
hold them are the manifest's schema, ``manifest/schema.py``).

A put's commit carries its checkpoint's envelope in the item; the item counts the
bytes of its copies (``held_bytes``) in every write that adds or takes one out, and a
commit that adds one is conditioned on that count: the bound holds for the item, as
DynamoDB evaluates it, whatever number of processes left copies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

COPY_OVERHEAD = 15
"""Bytes a held copy's attribute adds beyond its id, key tail and envelope: its name's
prefix (``inline:``, ``manifest/schema.py``) and its map's keys and type tags."""
HELD_COPY_MAX = 8 * 1024 + 256
"""The most one copy counts (an envelope of ``HELD_MAX`` bytes, its name and tail)."""
HELD_BUDGET = 32 * 1024
"""The held bytes an item may reach with a new copy (DynamoDB's item bound is
400 KB): past it, a commit stores the held objects first and carries none."""


class InlineCopy(NamedTuple):
    """A checkpoint's envelope held in its manifest item (an ``inline:<id>`` attribute)."""

    checkpoint_id: str
    tail: str
    body: bytes


def held_size(copy: InlineCopy) -> int:
    """What one held copy counts in its item's count of held bytes: about the bytes
    its attribute adds to the item (name, key tail, envelope)."""
    return COPY_OVERHEAD + len(copy.checkpoint_id) + len(copy.tail) + len(copy.body)


@dataclass(slots=True)
class InlineCommit:
    """What a fast-path commit (``ManifestPort.advance``) does beside moving the latest.

    ``body``: the checkpoint's envelope, held in the item until its object is stored
    (None: its object is stored before the commit, as on the contended path).
    ``drop``: copies whose objects are now stored: they leave the item (the commit is
    conditioned on each being there, so the held bytes count exactly).
    ``bare``: no pending write of the checkpoint is known (the ``bare`` attribute).
    ``held``: filled by the commit: the copies the item held before it (a fast commit
    asks DynamoDB for the old item, at no extra request), so that the writer can store
    and drop those another process left (a Lambda frozen or killed before its object
    landed)."""

    body: bytes | None = None
    drop: tuple[InlineCopy, ...] = ()
    bare: bool = False
    held: tuple[InlineCopy, ...] | None = None
