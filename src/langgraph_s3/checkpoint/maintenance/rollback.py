"""delete_for_runs: the checkpoints of some runs leave a thread's history."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Literal

from langgraph_s3.checkpoint.history import channels_to_replay, lineage_of, with_spilled
from langgraph_s3.checkpoint.maintenance.base import (
    LEASE_POLL,
    Shared,
)
from langgraph_s3.checkpoint.maintenance.packing import Packing
from langgraph_s3.checkpoint.packs import PackGoneError
from langgraph_s3.core import codec
from langgraph_s3.core.keys import CheckpointKey, NamespaceKeys, encode
from langgraph_s3.core.records import (
    RUNS_INDEXED,
    Entry,
    Fields,
    Listed,
    mark_until,
    may_land,
    removal_mark,
)
from langgraph_s3.core.report import Report
from langgraph_s3.core.tasks import bounded_map, gather_all
from langgraph_s3.errors import (
    ConflictError,
    NotFoundError,
)


class Rollback:
    """delete_for_runs: the runs' checkpoints leave the history, the rest stays."""

    def __init__(self, shared: Shared, packing: Packing) -> None:
        self.shared = shared
        self.packing = packing
        self.ctx, self.serde, self.manifest = shared.ctx, shared.serde, shared.manifest
        self.objects, self.layout = shared.objects, shared.layout
        self.packed, self.raw = shared.packed, shared.raw

    async def delete_for_runs(self, run_ids: Sequence[str]) -> Report:
        """Remove every checkpoint the runs wrote, in every thread of the deployment."""
        tokens = {encode(str(r), "run_id") for r in run_ids}
        if not tokens:
            return Report()
        entries: list[Entry] = []
        deleted: set[str] = set()  # a deletion in progress may fail and put one back
        if RUNS_INDEXED in await self.manifest.setup.marker_says():  # the runs' threads, no more
            threads = await self.manifest.reads.run_threads(sorted(tokens))
            entries = await self.manifest.reads.run_entries(threads, deleted)
        else:  # a deployment whose older runs were never indexed: every thread
            async for page in self.manifest.reads.scan(deleting=deleted):
                entries.extend(page)
        packed = {e.thread_id for e in entries if e.pack is not None}
        if packed:  # a rollback changes objects: a pack holding the runs' is unpacked first
            holding = await bounded_map(lambda t: self._holds_runs(t, tokens), sorted(packed))
            unpack = [t for t, holds in zip(sorted(packed), holding, strict=True) if holds]
            await bounded_map(self.packing.unpack_thread, unpack)
            again = await bounded_map(self.manifest.reads.namespaces, unpack)
            deleted.update(t for t, es in zip(unpack, again, strict=True) if not es)
            entries = [e for e in entries if e.thread_id not in unpack] + [
                e for es in again for e in es
            ]
        entries, reports = await self.shared.past_deletions(
            entries, lambda e: self._delete_runs_in(e, tokens, deleted), deleted
        )
        total = sum(reports, Report())
        total.threads = len(
            {e.thread_id for e, r in zip(entries, reports, strict=True) if r.namespaces}
        )
        return total

    async def _holds_runs(self, thread: str, tokens: set[str]) -> bool:
        """Whether a packed thread has a checkpoint of one of the runs (read from its
        pack's index: no object is read)."""
        prefix = self.layout.thread(thread)
        rounds = self.ctx.limits.max_conflicts
        for attempt in range(rounds):
            entries = await self.manifest.reads.namespaces(thread)
            if self.packed is not None and entries:
                self.packed.note(prefix, next((e.pack for e in entries if e.pack), None))
            try:
                for e in entries:
                    keys = self.shared.keys(e)
                    listed = await self.objects.list_all(keys.checkpoints)
                    cks = keys.listed_checkpoints(o.key for o in listed)
                    if any(ck.run_token in tokens for ck in cks):
                        return True
                return False
            except PackGoneError as gone:  # unpacked or repacked since it was read
                await self.shared.repacked_or_raise(entries[0], gone)
                if attempt == rounds - 1:
                    raise ConflictError(
                        f"thread {thread!r} was packed again and again while it was "
                        "listed: run delete_for_runs again"
                    ) from gone
        return False

    async def _delete_runs_in(self, entry: Entry, tokens: set[str], deleted: set[str]) -> Report:
        """Remove the runs' checkpoints; the manifest's tips move to what is left
        (compare-and-swap: a writer that committed meanwhile makes it start over).
        ``deleted``: gets the thread when it was found deleted meanwhile."""

        async def commit(
            at: Entry, keys: NamespaceKeys, listed: list[Listed]
        ) -> Report | bool | None:
            cks = keys.listed_checkpoints(o.key for o in listed)
            doomed = [ck for ck in cks if ck.run_token in tokens]
            if not doomed:
                return None
            if at.pack is not None:  # packed since the scan: a rollback changes objects
                await self.packing.unpack_thread(at.thread_id)
                return False
            if self._in_flight(at, keys, cks, tokens):
                # another run's latest is committed but its object has not landed: what it
                # refers to is unknown until it does (within its request's deadline)
                await self._until_landed(at, keys)
                return False  # list again: landed, or no longer counted as in flight
            mark = removal_mark(self.manifest.now())
            outcome = await self._repoint(at, keys, cks, doomed, tokens, mark)
            if outcome is None:
                return False
            try:
                report = await self._after_repoint(at, keys, listed, cks, doomed, tokens, mark)
                if isinstance(report, Report) and outcome == "dropped":
                    report = report + await self._clear_dropped(keys, mark)
                return report
            finally:
                await self.shared.unmark(at.thread_id, at.checkpoint_ns, mark)

        return await self.shared.listing_cas(entry, "delete_for_runs", commit, deleted)

    async def _after_repoint(
        self,
        at: Entry,
        keys: NamespaceKeys,
        listed: list[Listed],
        cks: list[CheckpointKey],
        doomed: list[CheckpointKey],
        tokens: set[str],
        mark: str,
    ) -> Report | bool:
        """A rollback's deletes, under its mark, once its commit landed; False: another
        round (what it deleted moved, or a run still writing committed since)."""
        keep = [ck for ck in cks if ck.run_token not in tokens]
        cutoff = self.shared.modified(listed, at, keys)
        try:
            report = await self.shared.drop_checkpoints(
                keys, listed, doomed, keep, cutoff, at.floor, move=True, until=mark_until(mark)
            )
        except (NotFoundError, PackGoneError):
            return False  # a prune or a packing moved them meanwhile: list again
        # a run rolled back while it still wrote may have committed since the
        # listing (its commit did not conflict with ours): another round takes it
        # (one round trip: the listing beside the root's pack)
        listed_now, root = await gather_all(
            self.objects.list_all(keys.checkpoints),
            self.manifest.reads.latest(at.thread_id, ""),
        )
        late = keys.listed_checkpoints(o.key for o in listed_now)
        known = {ck.key for ck in cks}
        if any(ck.run_token in tokens and ck.key not in known for ck in late):
            return False
        if root is not None and (root.pack is not None or root.packings != at.packings):
            # packed or unpacked while it rolled back: a pack may hold what it
            # deleted, or an unpacking may have put it back; the next round, over
            # the unpacked objects, deletes them again
            await self.packing.unpack_thread(at.thread_id)
            return False
        return report

    async def _clear_dropped(self, keys: NamespaceKeys, mark: str) -> Report:
        """A namespace the rollback emptied (its entry dropped, under ``mark``): what
        is left under its prefix (writes, blobs and moved copies kept earlier for
        checkpoints now gone) goes too, else no later removal would ever reach it. No
        new life may begin while the mark holds. Cost: 1 LIST, 1 DeleteObjects."""
        rest = await self.objects.list_all(keys.prefix)
        if not rest or not self.shared.in_time(mark_until(mark), keys.thread_id):
            return Report()
        await self.objects.delete([o.key for o in rest])
        return Report(objects=len(rest), bytes=sum(o.size for o in rest))

    def _flying(
        self, entry: Entry, keys: NamespaceKeys, cks: list[CheckpointKey], tokens: set[str]
    ) -> bool:
        """Whether the latest is of another run and not listed (a put in flight: the
        entry keeps it rather than being dropped)."""
        latest = keys.parse_checkpoint(keys.checkpoint_at(entry.latest_tail))
        listed = {ck.checkpoint_id for ck in cks}
        return latest.run_token not in tokens and latest.checkpoint_id not in listed

    def _in_flight(
        self, entry: Entry, keys: NamespaceKeys, cks: list[CheckpointKey], tokens: set[str]
    ) -> bool:
        """Whether the entry's latest (not of ``tokens``' runs) is a put still in flight:
        not listed, and made less than ``IN_FLIGHT_SECONDS`` ago (older: its writer died
        after the manifest update, and it never lands)."""
        latest = keys.parse_checkpoint(keys.checkpoint_at(entry.latest_tail))
        if latest.run_token in tokens or any(ck.checkpoint_id == entry.latest_id for ck in cks):
            return False
        return may_land(entry.latest_id, self.ctx.clock())

    async def _until_landed(self, entry: Entry, keys: NamespaceKeys) -> None:
        """Wait for the latest's object, as long as it counts as in flight and is the
        latest (each poll: its GET beside the manifest's GetItem, one round trip)."""
        key = keys.checkpoint_at(entry.latest_tail)
        while True:
            body, now = await gather_all(
                self.objects.get(key),
                self.manifest.reads.latest(entry.thread_id, entry.checkpoint_ns),
            )
            if body is not None or now is None:
                return  # landed, or the thread was deleted meanwhile
            if (now.latest_id, now.life) != (entry.latest_id, entry.life):
                return  # a writer went on (or a new life began): what to wait for changed
            if not may_land(entry.latest_id, self.ctx.clock()):
                return  # its writer died after the manifest update: it never lands
            await asyncio.sleep(LEASE_POLL)

    async def _repoint(
        self,
        entry: Entry,
        keys: NamespaceKeys,
        cks: list[CheckpointKey],
        doomed: list[CheckpointKey],
        tokens: set[str],
        mark: str,
    ) -> Literal["retipped", "dropped"] | None:
        """Give the entry the tips of what is left after the runs (``"retipped"``) or
        drop it (``"dropped"``), under the rollback's ``mark``; None: it changed since
        it was read (or what is left is in flight), another round."""
        full = await with_spilled(self.objects, keys, entry)
        lineage = lineage_of(full, keys)
        visible = {ck.checkpoint_id for ck in cks if lineage.admit(ck)}
        history: list[CheckpointKey] = []
        for ck in cks:  # an id stored under two keys (a stray copy) counts once
            if ck.checkpoint_id in visible and ck.run_token not in tokens:
                visible.discard(ck.checkpoint_id)
                history.append(ck)
        parents = {ck.parent_id for ck in history}
        tips = [ck for ck in history if ck.checkpoint_id not in parents]
        # a latest of another run not listed yet is a put in flight (its object lands
        # after its manifest update): it stays the latest
        listed_ids = {ck.checkpoint_id for ck in cks}
        flying = self._flying(entry, keys, cks, tokens)
        # a head not listed either, made lately, is a fork's put in flight: it stays a
        # head (its object may land yet); older, a crashed writer's phantom
        unlisted = {
            h
            for h in full.heads | full.spilled_heads
            if h not in listed_ids and may_land(h, self.ctx.clock())
        }
        if not tips and not flying:
            if unlisted:  # what is left is in flight: list again once it landed
                await asyncio.sleep(LEASE_POLL)
                return None
            return "dropped" if await self.manifest.upkeep.drop(entry, mark=mark) else None
        removed = {ck.checkpoint_id for ck in doomed if ck.checkpoint_id >= entry.floor}
        body: bytes | None = None
        if flying:
            top_id, top_tail, uses_delta = entry.latest_id, entry.latest_tail, entry.uses_delta
            heads = {ck.checkpoint_id for ck in tips} - {top_id}
        else:
            top = tips[0]  # listings are newest first
            body = await self.objects.get(top.key, cache=True)
            top_id, top_tail = top.checkpoint_id, keys.tail(top.key)
            uses_delta = body is None or bool(channels_to_replay(self.serde, body, top.key))
            heads = {ck.checkpoint_id for ck in tips[1:]}
        heads |= unlisted - {top_id}
        meta = entry.meta
        if top_id != entry.latest_id and not entry.checkpoint_ns and body is not None:
            meta = self._meta_of(body, top.key)  # the new latest's metadata pairs
        new = Fields(
            top_id,
            top_tail,
            entry.floor,
            uses_delta,
            entry.created_at,
            heads,  # spilled ones come back inline: the item names no generation now
            set(entry.gone) | removed,  # a run still writing may not continue them
            # the floor stays; once checkpoints below it were removed it may not come down
            born="" if any(ck.checkpoint_id < entry.floor for ck in doomed) else entry.born,
            pack=entry.pack,
            packings=entry.packings,
            life=entry.life,
            removing=entry.removing,
            meta=meta,
        )
        return (
            "retipped" if await self.manifest.upkeep.retip(entry, new, tokens, mark=mark) else None
        )

    def _meta_of(self, body: bytes, key: str) -> tuple[tuple[str, str], ...]:
        """The metadata attributes a root item records for the checkpoint ``body``."""
        with codec.reading(key):
            env = codec.load_checkpoint(body)
        change = self.manifest.meta_change("", self.serde.loads_typed(env.metadata))
        return tuple(sorted(change[0].items())) if change is not None else ()
