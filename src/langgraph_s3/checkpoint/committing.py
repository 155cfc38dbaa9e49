"""A writer's commit, meeting what the manifest needs of it (``core/commit.py``).

The manifest answers a contended commit with a :class:`~langgraph_s3.core.commit.Need`
instead of calling back into the writer; this loop meets each one with the writer's
own calls and asks again, so control only ever runs down the floors.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from langgraph_s3.core.commit import How, Need
from langgraph_s3.core.keys import NamespaceKeys
from langgraph_s3.core.ports import ManifestPort
from langgraph_s3.core.records import Expiry, Raw
from langgraph_s3.core.tasks import gather_all


@dataclass(frozen=True)
class Meeting:
    """The writer's answers to each need of one commit.

    Args:
        stored: the checkpoint's object PUT, under way.
        rewrite: stores its objects again (after a deletion ended).
        ensure: makes sure its objects are there (stored again when not).
        clear: stores an item's held copies and takes them out.
        sweep: sweeps an expired life but for the checkpoint (its id given).
        spill: stores tip markers of heads under a generation.
    """

    stored: asyncio.Future[bool]
    rewrite: Callable[[], Awaitable[None]]
    ensure: Callable[[], Awaitable[None]]
    clear: Callable[[Raw], Awaitable[None]]
    sweep: Callable[[Expiry, str], Awaitable[None]]
    spill: Callable[[NamespaceKeys, list[str], str], Awaitable[None]]

    async def meet(self, need: Need, keys: NamespaceKeys, checkpoint_id: str) -> None:
        """Do what ``need`` asks (its cost is the call's it makes)."""
        if need.kind == "stored":
            await self.stored
        elif need.kind == "clear" and need.raw is not None:
            await self.clear(need.raw)
        elif need.kind == "sweep" and need.expiry is not None:
            await self.sweep(need.expiry, checkpoint_id)
        elif need.kind == "ensure":
            await self.ensure()
        elif need.kind == "spill":
            await self.spill(keys, list(need.heads), need.generation)
        elif need.kind == "rewrite":
            await self.rewrite()


async def commit(
    manifest: ManifestPort,
    keys: NamespaceKeys,
    at: tuple[str, str, str | None],
    how: How,
    meeting: Meeting,
) -> str | None:
    """Commit checkpoint ``at`` = (id, tail, parent) of ``keys``'s namespace.

    The fast path's UpdateItem goes out beside the object's PUT (one round trip for
    both), or alone when the item carries the envelope (``how.inline.body``: the PUT
    goes on after it). A contended commit then meets each need and asks again.

    Returns and raises: as ``ManifestCommits.advance`` (never a need).
    """
    cid, tail, parent = at
    where = (keys.thread_id, keys.checkpoint_ns, cid, tail, parent)
    first = manifest.commits.advance(*where, how)
    if how.inline is not None and how.inline.body is not None:
        out = await first
    else:
        out, _ = await gather_all(first, meeting.stored)
    while isinstance(out, Need):
        await meeting.meet(out, keys, cid)
        how = how.after(out)
        out = await manifest.commits.advance(*where, how)
    return out
