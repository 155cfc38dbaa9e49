"""Maintenance reads the manifest through :class:`Settling`: before it lists a thread's
objects, the checkpoints its items hold (``inline.py``: committed, their objects maybe
not stored yet) are stored and leave the items, so that what maintenance lists, copies,
packs, prunes or exports is every committed checkpoint, as before the items held any.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

from langgraph_s3.checkpoint.inline import held_by, store_held
from langgraph_s3.core.keys import Layout
from langgraph_s3.core.ports import ManifestPort, ObjectStorePort
from langgraph_s3.core.records import Entry
from langgraph_s3.core.shards import Shard
from langgraph_s3.core.tasks import bounded_map


class Settling:
    """A :class:`~langgraph_s3.core.ports.ManifestPort` over ``inner`` whose ``latest``,
    ``namespaces`` and ``scan`` store what the entries they read hold before returning them (as
    read: a listing made after the call sees every checkpoint they name): the held
    objects' PUTs (concurrent, ``If-None-Match``), then 1 UpdateItem per item holding
    any, which takes the stored copies out; nothing more where nothing is held (the
    usual case). A commit after the read is a writer going on, as ever."""

    def __init__(self, inner: ManifestPort, objects: ObjectStorePort, layout: Layout) -> None:
        self.inner, self.objects, self.layout = inner, objects, layout

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def latest(self, thread_id: str, checkpoint_ns: str) -> Entry | None:
        """The live entry, once the checkpoints it holds are stored."""
        entry = await self.inner.latest(thread_id, checkpoint_ns)
        if entry is not None and entry.inline:
            await self._settle([entry])
        return entry

    async def namespaces(self, thread_id: str) -> list[Entry]:
        """Every live namespace of the thread, once the checkpoints they hold are stored."""
        entries = await self.inner.namespaces(thread_id)
        held = [e for e in entries if e.inline]
        if held:
            await self._settle(held)
        return entries

    def scan(
        self, *, deleting: set[str] | None = None, shard: Shard | None = None
    ) -> AsyncIterator[list[Entry]]:
        """Every live entry of the deployment (of ``shard``), a page at a time, each
        page once the checkpoints its entries hold are stored."""
        return self._settled(self.inner.scan(deleting=deleting, shard=shard))

    async def _settled(self, pages: AsyncIterator[list[Entry]]) -> AsyncIterator[list[Entry]]:
        async for page in pages:
            held = [e for e in page if e.inline]
            if held:
                await self._settle(held)
            yield page

    async def _settle(self, entries: list[Entry]) -> None:
        jobs = [
            (
                self.layout.namespace(e.thread_id, e.checkpoint_ns).checkpoint_at(c.tail),
                c.body,
                held_by(self.inner, e.thread_id, e.checkpoint_ns, c),
            )
            for e in entries
            for c in e.inline
        ]
        await bounded_map(lambda job: store_held(self.objects, *job), jobs)
        for e in entries:
            ids = [c.checkpoint_id for c in e.inline]
            await self.inner.settle(e.thread_id, e.checkpoint_ns, ids, life=e.life)


def settling(inner: ManifestPort, objects: ObjectStorePort, layout: Layout) -> ManifestPort:
    """``inner`` as maintenance reads it (see :class:`Settling`)."""
    return cast(ManifestPort, Settling(inner, objects, layout))
