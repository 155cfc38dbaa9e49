"""Maintenance's role: the conditional updates of a thread outside a writer's commit.

copy's merge, a life's sealed beginning, packing's commit (:meth:`Upkeep.set_pack`),
prune's floor, a rollback's tips, a dropped entry, the marks of the removals under
way, and the metadata an index backfill records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from langgraph_s3.core.records import Entry, Fields, PackRef, Raw
from langgraph_s3.manifest.conditions import (
    BOOL,
    SS,
    Absent,
    Change,
    Cond,
    Contains,
    Exists,
    N,
    Not,
    S,
    TxCheck,
    TxUpdate,
    all_of,
    any_of,
    eq,
)
from langgraph_s3.manifest.decide import (
    RETIP_RUNS,
    RETIRED,
    TOMBSTONE_SECONDS,
    as_read,
    demoted,
    marked,
    new_life,
    trim_gone,
)
from langgraph_s3.manifest.items import Items
from langgraph_s3.manifest.schema import REMOVING, REVIVABLE, TTL_ATTRIBUTE, pack_attribute


class Upkeep:
    """The commits of copy, packing, prune, rollback, delete_for_runs and the
    removals that mark an item: each one conditional write on the item as read."""

    def __init__(self, items: Items) -> None:
        self.items = items

    async def merge(self, thread_id: str, source: Entry, target: Raw | None) -> bool:
        """copy_thread's commit: the target gains the source's tips.

        A target with its own live history keeps it beside the copy (the newer
        latest wins, the other becomes a head, the lower floor stays).

        Cost: 1 conditional PutItem.

        Args:
            thread_id: the target thread.
            source: the source's entry for one namespace.
            target: the target's item for that namespace as read before the objects
                were copied (None: there was none); the write is conditioned on it.

        Returns:
            False when the target changed since (a deletion begun meanwhile).
        """
        live = target.live(self.items.now()) if target is not None else None
        if live is None:
            new = Fields(
                source.latest_id,
                source.latest_tail,
                source.floor,
                source.uses_delta,
                0,
                set(source.heads),
                set(source.gone),
                born=source.born if target is None else "",  # not over a deleted life
                # copy_thread hands the source's spilled heads over inline: none here
                life=new_life(),
                meta=source.meta,
            )
        else:
            top = max((live, source), key=lambda e: e.latest_id)
            new = Fields(
                top.latest_id,
                top.latest_tail,
                min(live.floor, source.floor),
                top.uses_delta,
                live.created_at,
                # a demoted latest keeps its parent beside it: its object may not be
                # there (a put in flight, a crashed writer), and the parent stands in
                ({*demoted(live), *live.heads, *demoted(source), *source.heads}) - {top.latest_id},
                set(live.gone | source.gone),
                # lowerable only while neither side was pruned
                born=min(live.floor, source.floor)
                if live.floor == live.born and source.floor == source.born
                else "",
                pack=live.pack,
                spilled=live.spilled,  # the target's own markers; the source's come inline
                packings=live.packings,
                life=live.life,
                removing=live.removing,
                inline=live.inline,
                writes=live.writes,
                meta=top.meta,
            )
        rev = target.rev if target is not None else None
        return await self.items.swap(thread_id, source.checkpoint_ns, new, rev=rev)

    async def seal_born(self, thread_id: str, born: str) -> bool:
        """Fix a life's beginning: a root older than ``born`` may no longer join it
        (a late first writer gets CheckpointConflictError), so what is older than
        ``born`` belongs to an earlier life for good.

        Cost: 1 conditional UpdateItem of the root namespace's item.

        Returns:
            False when ``born`` is not the life's beginning any more.
        """
        change = Change(remove=("born",), add={"rev": N(1)})
        when = all_of(eq("born", S(born)), Exists("latest_id"))
        return await self.items.applied(
            self.items.db.update(self.items.key(thread_id, ""), change, when=when)
        )

    async def set_pack(
        self,
        thread_id: str,
        new: PackRef | None,
        old: PackRef | None,
        *,
        mark: str | None = None,
        life: str | None = None,
    ) -> bool:
        """Switch a live thread to another pack (None: none), if its pack is still
        ``old`` (and its life ``life``, when given: an import's replace leaves a thread
        without a pack too): packing's commit, after the pack is stored and before the
        objects it holds are removed (under ``mark``, the packing's, put on the item by
        :meth:`mark` before its pack was stored: the switch requires it still there, so
        a packing whose mark another took off, its pack deemed an orphan, never names
        that pack).

        Cost: 1 conditional UpdateItem of the root namespace's item (``rev`` bumped:
        a read that found objects gone reads again).

        Returns:
            False when the thread changed meanwhile (deleted, a new life, repacked).
        """
        when = all_of(
            Exists("latest_id"),
            Absent("deleted"),
            Absent("pack") if old is None else eq("pack.key", S(old.key)),
            eq("life", S(life)) if life else None,
            Contains(REMOVING, S(mark)) if mark else None,
        )
        add = {"rev": N(1), "packings": N(1)}
        change = (
            Change(remove=("pack",), add=add)
            if new is None
            else Change({"pack": pack_attribute(new)}, add=add)
        )
        return await self.items.applied(
            self.items.db.update(self.items.key(thread_id, ""), change, when=when)
        )

    async def raise_floor(
        self, entry: Entry, floor: str, removed: Iterable[str], *, mark: str | None = None
    ) -> bool:
        """Prune's commit: the thread now starts at ``floor`` and has no other heads.

        Conditioned on what prune decided on, not on ``rev``: the same life and floor,
        the heads and ``gone`` it saw, and a latest that is ``entry``'s or a newer one.
        A writer's fast-path commits only ever move the latest to a child of the latest
        (a descendant of the line prune keeps), so a busy thread does not make prune
        start over; a fork, a deletion, a rollback or another prune does.

        Cost: 1 conditional UpdateItem.

        Args:
            entry: the entry as read before prune listed the namespace.
            floor: the new floor (the oldest checkpoint kept).
            removed: checkpoints removed above the floor (side branches of a
                DeltaChannel seed chain): a writer may not continue them.
            mark: the removal's mark (``removal_mark``), added to the item's:
                released by :meth:`unmark` once its deletes are done.

        Returns:
            False when the entry changed in a way prune must see (read it again).
        """
        now = int(self.items.now())
        gone = trim_gone({*entry.gone, *removed}, floor, now)
        change = Change(
            {"floor": S(floor), **({"gone": SS(gone)} if gone else {})},
            ("heads", "spilled", "born", *(() if gone else ("gone",))),
            {"rev": N(1), **marked(mark)},
        )
        return await self._update_if(entry, change, as_read(entry, now))

    async def retip(
        self, entry: Entry, new: Fields, runs: Iterable[str], *, mark: str | None = None
    ) -> bool:
        """delete_for_runs' commit: the entry's tips become ``new``'s.

        When ``new`` keeps the latest, conditioned like :meth:`raise_floor` (the life,
        floor, heads, gone as read; a latest no older), so a writer going on meanwhile
        does not make the rollback start over, unless the latest is now one of
        ``runs``' own (a run being rolled back while it writes). Otherwise, and for
        more than ``RETIP_RUNS`` runs, a compare-and-swap on ``rev`` (:meth:`replace`).

        Cost: 1 conditional write.

        Args:
            entry: the entry as read before the namespace was listed.
            new: what it becomes.
            runs: the run tokens rolled back (``keys.encode``'d run ids).
            mark: the removal's mark, as for :meth:`raise_floor`.
        """
        tokens = sorted(set(runs))
        if new.latest_id != entry.latest_id or len(tokens) > RETIP_RUNS:
            if mark:
                new = replace(new, removing=new.removing | {mark})
            return await self.replace(entry, new)
        now = int(self.items.now())
        # the run is the tail's last part: ".b" is in ".bc" too, which only costs a
        # round when another run's latest is newer than the one read
        runs_free = all_of(*(Not(Contains("latest_tail", S(f".{t}"))) for t in tokens))
        when = all_of(
            as_read(entry, now),
            any_of(eq("latest_id", S(entry.latest_id)), runs_free) if runs_free else None,
        )
        assert when is not None
        gone = trim_gone(new.gone, new.floor, now)
        sets, removes = {}, []
        for name, text in (("spilled", new.spilled), ("born", new.born)):
            if text:
                sets[name] = S(text)
            else:
                removes.append(name)
        for name, value in (("heads", new.heads), ("gone", gone)):
            if value:
                sets[name] = SS(value)
            else:
                removes.append(name)
        change = Change(sets, tuple(removes), {"rev": N(1), **marked(mark)})
        return await self._update_if(entry, change, when)

    async def _update_if(self, entry: Entry, change: Change, when: Cond) -> bool:
        """One conditional UpdateItem of ``entry``'s item; False when ``when`` failed.
        A subgraph namespace's is one TransactWriteItems with a check that the thread
        was not packed or unpacked since (the root counts them: ``as_read``)."""
        key = self.items.key(entry.thread_id, entry.checkpoint_ns)
        if not entry.checkpoint_ns:
            return await self.items.applied(self.items.db.update(key, change, when=when))
        count = entry.packings
        packed = eq("packings", N(count)) if count else Absent("packings")
        root = TxCheck(self.items.key(entry.thread_id, ""), packed)
        return await self.items.applied(self.items.db.transact([TxUpdate(key, change, when), root]))

    async def replace(self, entry: Entry, new: Fields) -> bool:
        """Compare-and-swap one entry as read (delete_for_runs repoints with it).

        Cost: 1 conditional PutItem.

        Returns:
            False when the entry changed since it was read (its ``rev``).
        """
        return await self.items.swap(entry.thread_id, entry.checkpoint_ns, new, rev=entry.rev)

    async def drop(self, entry: Entry, *, mark: str | None = None) -> bool:
        """Retire an entry as read (its last checkpoint was deleted).

        Leaves a tombstone without a lease: a run still writing to it is refused,
        while a new conversation may start once ``mark`` (the removal's, as for
        :meth:`raise_floor`) is released.

        Cost: 1 conditional UpdateItem.

        Returns:
            False when the entry changed since it was read (its ``rev``).
        """
        now = int(self.items.now())
        change = Change(
            {
                "deleted": BOOL(True),
                "deleted_at": N(self.items.stamp()),
                "lease_until": N(0),
                TTL_ATTRIBUTE: N(now + TOMBSTONE_SECONDS),
            },
            (*RETIRED, REVIVABLE),
            {"rev": N(1), **marked(mark)},
        )
        return await self._update_if(entry, change, eq("rev", N(entry.rev)))

    async def mark(self, entry: Entry, mark: str) -> bool:
        """Put ``mark`` (``removal_mark``'s) on the entry's item while it is in the
        same life with the same pack: for a call that writes objects before its commit
        (an unpacking), whose writes a new life must wait for. Taken off by
        :meth:`unmark`.

        Cost: 1 conditional UpdateItem (``rev`` untouched: writers are not disturbed).

        Returns:
            False when the item changed meanwhile (deleted, a new life, another pack).
        """
        when = all_of(
            Exists("latest_id"),
            Absent("deleted"),
            # items of earlier versions have no life (as for set_pack)
            eq("life", S(entry.life)) if entry.life else None,
            Absent("pack") if entry.pack is None else eq("pack.key", S(entry.pack.key)),
        )
        assert when is not None
        return await self._update_if(entry, Change(add={REMOVING: SS([mark])}), when)

    async def unmark(self, thread_id: str, checkpoint_ns: str, mark: str) -> None:
        """A removal's deletes are done: its mark leaves the item, whatever it is now
        (live, a tombstone, another life's: the mark is the removal's own). ``rev``
        moves, so a compare-and-swap that read the mark does not write it back.

        Cost: 1 UpdateItem (none written where the item is gone)."""
        change = Change(delete={REMOVING: SS([mark])}, add={"rev": N(1)})
        key = self.items.key(thread_id, checkpoint_ns)
        await self.items.applied(self.items.db.update(key, change, when=Exists("pk")))

    async def record_meta(self, thread_id: str, latest_id: str, metadata: Any) -> bool:
        """Record the metadata of a thread's latest root checkpoint in its item, if
        ``latest_id`` is still the latest (a later commit records its own).

        Cost: 1 conditional UpdateItem. Returns False when the latest moved.
        """
        change = self.items.meta_change("", metadata)
        assert change is not None
        sets, removes = change
        update = Change({k: S(v) for k, v in sets.items()}, remove=removes)
        when = all_of(eq("latest_id", S(latest_id)), Absent("deleted"))
        return await self.items.applied(
            self.items.db.update(self.items.key(thread_id, ""), update, when=when)
        )
