"""Whole-thread updates: copy's merge, a life's sealed beginning, packing's commit, TTL."""

from __future__ import annotations

from langgraph_s3.core.conditions import (
    Absent,
    Change,
    Compare,
    Contains,
    Exists,
    N,
    S,
    all_of,
    eq,
)
from langgraph_s3.core.records import REMOVING, TTL_ATTRIBUTE, Entry, Fields, PackRef, Raw
from langgraph_s3.manifest.decide import demoted, new_life
from langgraph_s3.manifest.held import Held


class Updates(Held):
    """Conditional updates of a thread's root item outside a writer's commit."""

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
        live = target.live(self.now()) if target is not None else None
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
                meta=top.meta,
            )
        rev = target.rev if target is not None else None
        return await self._swap(thread_id, source.checkpoint_ns, new, rev=rev)

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
        return await self._if(self.db.update(self.key(thread_id, ""), change, when=when))

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
            else Change({"pack": new.item()}, add=add)
        )
        return await self._if(self.db.update(self.key(thread_id, ""), change, when=when))

    async def touch(self, thread_id: str) -> bool:
        """Refresh a live thread's TTL (a read, when the saver is asked to).

        Cost: 1 conditional UpdateItem of the root namespace's item.

        Returns:
            False when there is no TTL, or no live root namespace to refresh.
        """
        if not self.ttl_seconds:
            return False
        now = int(self.now())
        expires = N(now + self.ttl_seconds)
        when = all_of(
            Exists("latest_id"),
            Absent("deleted"),
            Compare(TTL_ATTRIBUTE, ">", N(now)),
            Compare(TTL_ATTRIBUTE, "<", expires),
        )
        change = Change({TTL_ATTRIBUTE: expires})
        return await self._if(self.db.update(self.key(thread_id, ""), change, when=when))
