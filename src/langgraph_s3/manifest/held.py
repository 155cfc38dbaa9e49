"""What the item holds for its readers beside the latest: committed checkpoints'
envelopes until their objects are stored, and whether the latest has pending writes.

A fast commit (:meth:`~langgraph_s3.manifest.commits.Commits.advance` with an
:class:`~langgraph_s3.core.held.InlineCommit`) carries its checkpoint's envelope in
the item and its object is written off the critical path; the copy leaves the item
only once the object is known to be stored (:meth:`Held.settle`, or a later commit's
``drop``). So every committed checkpoint is, at every moment, in the item or in S3.
"""

from __future__ import annotations

from collections.abc import Iterable

from langgraph_s3.core.held import InlineCopy, held_size
from langgraph_s3.core.records import (
    Raw,
)
from langgraph_s3.manifest.conditions import Absent, Change, Exists, N, all_of, eq
from langgraph_s3.manifest.conditions import S as Str
from langgraph_s3.manifest.items import Items
from langgraph_s3.manifest.reads import Reads
from langgraph_s3.manifest.schema import BARE_ATTRIBUTE, HELD_BYTES, INLINE_PREFIX

SETTLE_ROUNDS = 4
"""Rounds of a settle whose copies another process took out meanwhile (each round
names only those the item still holds)."""


class Held:
    """A writer's role beside its commits: ``written`` (a checkpoint gained pending
    writes) and ``settle`` (held copies whose objects are stored leave the item)."""

    def __init__(self, items: Items, reads: Reads) -> None:
        self.items = items
        self.reads = reads

    async def written(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> bool:
        """``checkpoint_id`` has pending writes: if the item says it is a bare latest,
        it no longer is (readers of the latest list its writes again).

        Cost: 1 UpdateItem, conditioned on the item naming it bare (no change, and no
        error, otherwise).

        Returns:
            Whether the item named it bare (and no longer does).
        """
        change = Change(remove=(BARE_ATTRIBUTE,))
        when = eq(BARE_ATTRIBUTE, Str(checkpoint_id))
        return await self.items.applied(
            self.items.db.update(self.items.key(thread_id, checkpoint_ns), change, when=when)
        )

    async def settle(
        self,
        thread_id: str,
        checkpoint_ns: str,
        copies: Iterable[InlineCopy],
        *,
        life: str | None = None,
    ) -> None:
        """Held copies whose objects are stored leave the item (none named: no request),
        and :data:`HELD_BYTES` goes down by exactly what left.

        Cost: 1 UpdateItem, conditioned on the item being there, each copy in it and,
        given ``life``, in that life (a new life may reuse the ids: its copies are not
        these). When another process took some out first: 1 GetItem, then the update of
        those still there (:data:`SETTLE_ROUNDS` at most); an item an earlier version
        wrote (no count) loses them uncounted.
        """
        todo = {c.checkpoint_id: c for c in copies}
        key = self.items.key(thread_id, checkpoint_ns)
        same = None if life is None else eq("life", Str(life)) if life else Absent("life")
        counted = True
        for _ in range(SETTLE_ROUNDS):
            if not todo:
                return
            names = tuple(sorted(INLINE_PREFIX + c for c in todo))
            there = all_of(Exists("pk"), same, *(Exists(n) for n in names))
            if counted:
                less = -sum(held_size(c) for c in todo.values())
                change = Change(remove=names, add={HELD_BYTES: N(less)})
                when = all_of(there, Exists(HELD_BYTES))
            else:
                change, when = Change(remove=names), all_of(there, Absent(HELD_BYTES))
            if await self.items.applied(self.items.db.update(key, change, when=when)):
                return
            raw = await self.reads.read(thread_id, checkpoint_ns)
            if raw is None:
                return
            held = set(raw.inline)
            todo = {i: c for i, c in todo.items() if c in held}
            counted = raw.held_bytes is not None

    async def recount(self, thread_id: str, checkpoint_ns: str, raw: Raw) -> bool:
        """Set :data:`HELD_BYTES` to what ``raw``'s copies count, if the item is still
        as read (its rev, and its count or lack of one): an item an earlier version
        wrote gets its count; a count a crashed writer left wrong is put right.

        Cost: 1 conditional UpdateItem. False when the item changed since ``raw``.
        """
        exact = sum(held_size(c) for c in raw.inline)
        seen = raw.held_bytes
        same = eq(HELD_BYTES, N(seen)) if seen is not None else Absent(HELD_BYTES)
        when = all_of(eq("rev", N(raw.rev)), same)
        change = Change(set={HELD_BYTES: N(exact)})
        return await self.items.applied(
            self.items.db.update(self.items.key(thread_id, checkpoint_ns), change, when=when)
        )
