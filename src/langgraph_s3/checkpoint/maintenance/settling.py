"""Maintenance reads the manifest through :class:`Settling`: before it lists a thread's
objects, the checkpoints its items hold (``inline.py``: committed, their objects maybe
not stored yet) are stored and leave the items, so that what maintenance lists, copies,
packs, prunes or exports is every committed checkpoint, as before the items held any.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

from langgraph_s3.checkpoint.held_writes import store_write, write_held_by
from langgraph_s3.checkpoint.inline import held_by, store_held
from langgraph_s3.core.keys import Layout
from langgraph_s3.core.ports import ManifestPort, ObjectStorePort
from langgraph_s3.core.records import Entry
from langgraph_s3.core.shards import Shard
from langgraph_s3.core.tasks import bounded_map


class SettledReads:
    """The reads role over ``inner`` whose ``latest``, ``namespaces``, ``run_entries``
    and ``scan`` store what the entries they read hold before returning them (as
    read: a listing made after the call sees every checkpoint they name): the held
    objects' PUTs (concurrent, ``If-None-Match``), then 1 UpdateItem per item holding
    any, which takes the stored copies out; nothing more where nothing is held (the
    usual case). A commit after the read is a writer going on, as ever. The other
    reads are ``inner``'s."""

    def __init__(self, inner: ManifestPort, objects: ObjectStorePort, layout: Layout) -> None:
        self.inner, self.objects, self.layout = inner, objects, layout
        reads = inner.reads
        self.read, self.thread, self.pack_of = reads.read, reads.thread, reads.pack_of
        self.threads, self.matching, self.expired = reads.threads, reads.matching, reads.expired
        self.run_threads = reads.run_threads

    async def latest(self, thread_id: str, checkpoint_ns: str) -> Entry | None:
        """The live entry, once the checkpoints it holds are stored."""
        entry = await self.inner.reads.latest(thread_id, checkpoint_ns)
        return None if entry is None else (await self.settle_entries([entry]))[0]

    async def namespaces(self, thread_id: str) -> list[Entry]:
        """Every live namespace of the thread, once the checkpoints they hold are stored."""
        return await self.settle_entries(await self.inner.reads.namespaces(thread_id))

    async def run_entries(self, threads: list[str], deleting: set[str]) -> list[Entry]:
        """The run index's entries (a rollback's), once the checkpoints they hold are
        stored: a run cancelled in its last turn may have all of its checkpoints held."""
        return await self.settle_entries(await self.inner.reads.run_entries(threads, deleting))

    def scan(
        self, *, deleting: set[str] | None = None, shard: Shard | None = None
    ) -> AsyncIterator[list[Entry]]:
        """Every live entry of the deployment (of ``shard``), a page at a time, each
        page once the checkpoints its entries hold are stored."""
        return self._settled(self.inner.reads.scan(deleting=deleting, shard=shard))

    async def _settled(self, pages: AsyncIterator[list[Entry]]) -> AsyncIterator[list[Entry]]:
        async for page in pages:
            yield await self.settle_entries(page)

    async def settle_entries(self, entries: list[Entry]) -> list[Entry]:
        """``entries`` once what they hold is stored and out of their items, each as
        read but holding nothing (no request when none holds any); one whose item held
        writes no longer calls its latest bare (they are listed now)."""
        held = [e for e in entries if e.inline or e.writes]
        if not held:
            return entries
        await self._settle(held)
        return [
            replace(e, inline=(), writes=(), bare="" if e.writes else e.bare)
            if e.inline or e.writes
            else e
            for e in entries
        ]

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
        wjobs = [
            (
                self.layout.namespace(e.thread_id, e.checkpoint_ns).held_key(w.tail),
                w,
                write_held_by(self.inner, e.thread_id, e.checkpoint_ns, w),
            )
            for e in entries
            for w in e.writes
        ]
        await bounded_map(lambda job: store_held(self.objects, *job), jobs)
        stored = await bounded_map(lambda job: store_write(self.objects, *job), wjobs)
        kept = {job[1] for job, ok in zip(wjobs, stored, strict=True) if ok}
        for e in entries:
            writes = [w for w in e.writes if w in kept]
            await self.inner.held.settle(
                e.thread_id, e.checkpoint_ns, e.inline, life=e.life, writes=writes, unbare=True
            )


class Settling:
    """``inner`` as maintenance reads it: its roles, but reads through
    :class:`SettledReads`."""

    def __init__(self, inner: ManifestPort, objects: ObjectStorePort, layout: Layout) -> None:
        self.inner = inner
        self.reads = SettledReads(inner, objects, layout)
        self.commits, self.held, self.upkeep = inner.commits, inner.held, inner.upkeep
        self.deletions, self.staging, self.setup = inner.deletions, inner.staging, inner.setup
        self.now, self.meta_change = inner.now, inner.meta_change

    @property
    def table(self) -> str:
        """The table's name."""
        return self.inner.table

    @property
    def deployment(self) -> str:
        """This deployment's partition key prefix."""
        return self.inner.deployment

    @property
    def ttl_seconds(self) -> int | None:
        """Idle seconds before a thread expires; None: never."""
        return self.inner.ttl_seconds

    async def settle_entries(self, entries: list[Entry]) -> list[Entry]:
        """:meth:`SettledReads.settle_entries`."""
        return await self.reads.settle_entries(entries)


def settling(inner: ManifestPort, objects: ObjectStorePort, layout: Layout) -> Settling:
    """``inner`` as maintenance reads it (see :class:`Settling`)."""
    return Settling(inner, objects, layout)
