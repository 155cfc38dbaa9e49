"""Checkpoints a manifest item holds until their objects are stored: what a copy is,
what it counts, and what a carrying commit changes (pure: no AWS; the attributes that
hold them are the manifest's schema, ``manifest/schema.py``).

A put's commit carries its checkpoint's envelope in the item; the item counts the
bytes of its copies (``held_bytes``) in every write that adds or takes one out, and a
commit that adds one is conditioned on that count: the bound holds for the item, as
DynamoDB evaluates it, whatever number of processes left copies.
"""

from __future__ import annotations

import os
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


WRITE_OVERHEAD = 28
"""Bytes a held write's attribute adds beyond its key tail and body: its name's prefix
(``hw:``, ``manifest/schema.py``), its map's keys and type tags, and its tag."""
LEGACY_WRITE_OVERHEAD = 8
"""The same for a write an earlier build held as bare bytes (no tag)."""
WRITE_TAG = 16
"""Random bytes naming one hold of a write: a commit or a settle that drops the write,
and a hold that replaces it, are conditioned on the tag, not on the body sent again;
and a hold of the same bytes by another run of the task is another hold, which a
writer that knows the first stored does not drop."""
HELD_WRITES_MAX = 8 * 1024
"""Bytes of a task's writes (all of one ``put_writes``) the item holds at most: larger
ones are stored in S3 first, as before (a DynamoDB write unit is 1 KB)."""


class InlineCopy(NamedTuple):
    """A checkpoint's envelope held in its manifest item (an ``inline:<id>`` attribute)."""

    checkpoint_id: str
    tail: str
    body: bytes


class HeldWrite(NamedTuple):
    """A write object's body held in its manifest item (an ``hw:<tail>`` attribute)
    until the object is stored: ``tail`` is its key after the namespace's prefix
    (``w/<inverted id>x/<task>/<slot>``), ``body`` its bytes (``codec.dump_writes``)."""

    tail: str
    body: bytes
    tag: bytes = b""
    """This hold's :data:`WRITE_TAG` bytes (none for a legacy one)."""
    legacy: bool = False
    """Held by an earlier build as bare bytes (no tag): dropped by its whole value."""

    @property
    def inverted(self) -> str:
        """The inverted id of the checkpoint the write belongs to."""
        return self.tail[2:].partition("x")[0]

    @property
    def regular(self) -> bool:
        """A task's regular writes (first write wins per index), not a special one
        (error, interrupt...: last write wins)."""
        return self.tail.endswith("/r")


def new_hold(tail: str, body: bytes) -> HeldWrite:
    """A write to hold, with a tag of its own."""
    return HeldWrite(tail, body, os.urandom(WRITE_TAG))


def write_size(write: HeldWrite) -> int:
    """What one held write counts in its item's count of held bytes."""
    over = LEGACY_WRITE_OVERHEAD if write.legacy else WRITE_OVERHEAD
    return over + len(write.tail) + len(write.body)


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
    landed). ``drop_writes`` and ``held_writes``: the same for held writes (only those
    of checkpoints older than the one committed are dropped: a latest's writes stay
    held while it is the latest, so a read of a bare latest lists none)."""

    body: bytes | None = None
    drop: tuple[InlineCopy, ...] = ()
    bare: bool = False
    held: tuple[InlineCopy, ...] | None = None
    drop_writes: tuple[HeldWrite, ...] = ()
    held_writes: tuple[HeldWrite, ...] | None = None
