"""What the item holds for its readers beside the latest: committed checkpoints'
envelopes until their objects are stored, and whether the latest has pending writes.

A fast commit (:meth:`~langgraph_s3.manifest.commits.Commits.advance` with an
:class:`~langgraph_s3.core.held.InlineCommit`) carries its checkpoint's envelope in
the item and its object is written off the critical path; the copy leaves the item
only once the object is known to be stored (:meth:`Held.settle`, or a later commit's
``drop``). So every committed checkpoint is, at every moment, in the item or in S3.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from langgraph_s3.core.held import HELD_BUDGET, HeldWrite, InlineCopy, held_size, write_size
from langgraph_s3.core.records import (
    Raw,
)
from langgraph_s3.manifest.conditions import Absent, Change, Compare, Cond, Exists, N, all_of, eq
from langgraph_s3.manifest.conditions import S as Str
from langgraph_s3.manifest.decide import not_expired
from langgraph_s3.manifest.items import Items
from langgraph_s3.manifest.reads import Reads
from langgraph_s3.manifest.schema import (
    BARE_ATTRIBUTE,
    HELD_BYTES,
    INLINE_PREFIX,
    WRITE_PREFIX,
    write_attribute,
    write_held,
)

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

    async def hold(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[tuple[HeldWrite, HeldWrite | None]],
        *,
        life: str,
    ) -> bool:
        """Hold pending write objects in the item (``put_writes`` on DynamoDB's clock):
        each ``(new, old)`` sets ``new`` where the item holds ``old`` (None: where it
        holds none under that key), and :data:`HELD_BYTES` counts the difference.

        Conditioned on the item being ``life``'s, not deleted or expired, room under
        :data:`HELD_BUDGET`, and each ``old`` as named. The item's ``rev`` moves (a
        whole-item write read before keeps them). ``checkpoint_id``: whose writes.

        Cost: 1 UpdateItem. False when a condition failed (nothing changed).
        """
        key = self.items.key(thread_id, checkpoint_ns)
        delta = sum(write_size(w) - (write_size(o) if o else 0) for w, o in writes)
        olds: list[Cond] = []
        for w, o in writes:
            name = WRITE_PREFIX + w.tail
            olds.append(Absent(name) if o is None else write_held(o))
        when = all_of(
            eq("life", Str(life)),
            Absent("deleted"),
            not_expired(int(self.items.now())),
            Compare(HELD_BYTES, "<=", N(HELD_BUDGET - max(delta, 0))),
            *olds,
        )
        change = Change(
            set={WRITE_PREFIX + w.tail: write_attribute(w) for w, _ in writes},
            add={HELD_BYTES: N(delta), "rev": N(1)},
        )
        return await self.items.applied(self.items.db.update(key, change, when=when))

    async def settle(
        self,
        thread_id: str,
        checkpoint_ns: str,
        copies: Iterable[InlineCopy],
        *,
        life: str | None = None,
        writes: Iterable[HeldWrite] = (),
        unbare: bool = False,
    ) -> None:
        """Held copies and writes whose objects are stored leave the item (none named:
        no request), and :data:`HELD_BYTES` goes down by exactly what left. ``unbare``:
        the item no longer calls its latest bare (writes of the latest leave it: its
        readers list them again).

        Cost: 1 UpdateItem, conditioned on the item being there, each copy in it (each
        write as named: a newer one stays) and, given ``life``, in that life (a new
        life may reuse the ids: its copies are not these). When another process took
        some out first: 1 GetItem, then the update of those still there
        (:data:`SETTLE_ROUNDS` at most); an item an earlier version wrote (no count)
        loses them uncounted.
        """
        todo = {c.checkpoint_id: c for c in copies}
        wtodo = {w.tail: w for w in writes}
        key = self.items.key(thread_id, checkpoint_ns)
        same = None if life is None else eq("life", Str(life)) if life else Absent("life")
        counted = True
        for _ in range(SETTLE_ROUNDS):
            if not todo and not wtodo:
                return
            names = tuple(sorted(INLINE_PREFIX + c for c in todo))
            wnames = tuple(sorted(WRITE_PREFIX + t for t in wtodo))
            there = all_of(
                Exists("pk"),
                same,
                *(Exists(n) for n in names),
                *(write_held(w) for w in wtodo.values()),
            )
            gone = (*names, *wnames, *((BARE_ATTRIBUTE,) if unbare and wtodo else ()))
            if counted:
                less = -sum(held_size(c) for c in todo.values())
                less -= sum(write_size(w) for w in wtodo.values())
                change = Change(remove=gone, add={HELD_BYTES: N(less)})
                when = all_of(there, Exists(HELD_BYTES))
            else:
                change, when = Change(remove=gone), all_of(there, Absent(HELD_BYTES))
            if await self.items.applied(self.items.db.update(key, change, when=when)):
                return
            raw = await self.reads.read(thread_id, checkpoint_ns)
            if raw is None:
                return
            held, held_w = set(raw.inline), set(raw.writes)
            todo = {i: c for i, c in todo.items() if c in held}
            wtodo = {t: w for t, w in wtodo.items() if w in held_w}
            counted = raw.held_bytes is not None

    async def recount(self, thread_id: str, checkpoint_ns: str, raw: Raw) -> bool:
        """Set :data:`HELD_BYTES` to what ``raw``'s copies count, if the item is still
        as read (its rev, and its count or lack of one): an item an earlier version
        wrote gets its count; a count a crashed writer left wrong is put right.

        Cost: 1 conditional UpdateItem. False when the item changed since ``raw``.
        """
        exact = sum(held_size(c) for c in raw.inline) + sum(write_size(w) for w in raw.writes)
        seen = raw.held_bytes
        same = eq(HELD_BYTES, N(seen)) if seen is not None else Absent(HELD_BYTES)
        when = all_of(eq("rev", N(raw.rev)), same)
        change = Change(set={HELD_BYTES: N(exact)})
        return await self.items.applied(
            self.items.db.update(self.items.key(thread_id, checkpoint_ns), change, when=when)
        )
