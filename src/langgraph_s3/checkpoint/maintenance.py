"""Maintenance beside live writers: delete_thread, delete_for_runs, prune, copy_thread.

Each one commits through the manifest first, conditioned on what it read (a
compare-and-swap on the entry's ``rev``, via ``retry.cas``): a writer that
committed meanwhile makes it read again, and objects are only removed once the
manifest no longer leads to them. Costs grow with the thread (one listing of
its keys, then batched deletes/copies); none of them reads checkpoint bodies
beyond what DeltaChannel seed chains and blob references need.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_s3.checkpoint import logs, packs
from langgraph_s3.checkpoint.context import SaverContext
from langgraph_s3.checkpoint.history import channels_to_replay, lineage_of, with_spilled
from langgraph_s3.checkpoint.packs import PackedObjects, PackGoneError
from langgraph_s3.core import codec
from langgraph_s3.core.keys import CheckpointKey, NamespaceKeys, encode, invert_id
from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.core.records import (
    Deletion,
    Entry,
    Expiry,
    Fields,
    Listed,
    PackRef,
    Raw,
    mark_until,
    marks_until,
    may_land,
    removal_mark,
    uuid6_time,
)
from langgraph_s3.core.report import Progress, Report
from langgraph_s3.core.retry import LOST, Done, Retry, cas
from langgraph_s3.core.tasks import bounded_map, committed, gather_all
from langgraph_s3.core.values import value_keys
from langgraph_s3.errors import (
    CheckpointConflictError,
    ConflictError,
    CorruptObjectError,
    InvalidRequestError,
    NotFoundError,
    S3PersistenceError,
)
from langgraph_s3.manifest.decide import LEASE_POLL_SECONDS

logger = logging.getLogger(__name__)

Commit = Callable[[Entry, NamespaceKeys, list[Listed]], Awaitable[Report | bool | None]]
"""A conditional manifest write, then deletes: their Report when done, False when a
writer moved the entry meanwhile, None when there is nothing to do."""

LEASE_POLL = LEASE_POLL_SECONDS
"""Seconds between looks at a target thread another call is deleting (and at an object
in flight)."""
LEASE_POLL_MAX = 4.0
"""The longest wait between looks at a deletion in progress a removal met (the polls
back off from ``LEASE_POLL``): a crashed deleter costs about 35 GetItems, not 480."""
MARK_MARGIN_SECONDS = 15.0
"""A removal deletes nothing within this long of its mark's end (``removal_mark``):
the clocks of its process and of a new life's writer may differ, and a DeleteObjects
may take a while."""
ORPHAN_PACK_SECONDS = 3600.0
"""A pack no manifest entry names is removed by the next packing of its thread once it
is this old (a packer between its PUT and its switch is never that slow)."""


class Maintenance:
    """Whole-thread operations (one per call: see context.py)."""

    def __init__(self, ctx: SaverContext, serde: SerializerProtocol) -> None:
        self.ctx, self.serde = ctx, serde
        self.objects, self.manifest, self.layout = ctx.objects, ctx.manifest, ctx.layout
        packed = ctx.objects if isinstance(ctx.objects, PackedObjects) else None
        self.packed = packed
        self.raw: ObjectStorePort = packed.inner if packed is not None else ctx.objects
        """The objects as S3 lists them (a packed thread's are in its pack)."""
        self.restored: dict[str, float] = {}
        """Key -> when its pack was made, for the objects this call unpacked: their
        LastModified is the unpacking's, not when they were first stored."""

    def _keys(self, entry: Entry) -> NamespaceKeys:
        return self.layout.namespace(entry.thread_id, entry.checkpoint_ns)

    async def _fresh(self, entry: Entry) -> Entry | None:
        return await self.manifest.latest(entry.thread_id, entry.checkpoint_ns)

    # ------------------------------------------------------------------ setup
    async def migrate(self) -> None:
        """Adopt the entries langgraph-s3 0.1 wrote (keyed by thread alone) whose latest
        checkpoint lies in this deployment's bucket and prefix."""
        async for legacy in self.manifest.legacy_entries():
            keys = self._keys(legacy)
            if await self.objects.get(keys.checkpoint_at(legacy.latest_tail)) is not None:
                await self.manifest.adopt(legacy)

    # --------------------------------------------------------------- deleting
    async def delete_thread(self, thread: str) -> Report:
        """Tombstone every namespace (the thread is gone for every reader at once),
        then remove the objects, then let a new life on the id begin."""
        deletion = await self.manifest.tombstone(thread)
        return await self._remove(thread, deletion.stamp, deletion.keys, undo=deletion)

    async def sweep_thread(self, expiry: Expiry, *, spare_from: str | None = None) -> Report:
        """Remove a thread whose TTL passed, as :meth:`delete_thread` does, if it is
        still the expired one (a new conversation on the id sweeps it itself).

        ``spare_from``: the first checkpoint of that new conversation; it and every
        newer checkpoint keep their objects and writes (written beside it, before
        its commit), since the expired life's are all older.
        """
        deletion = await self.manifest.tombstone_expired(expiry)
        if deletion is None:
            return Report(skipped=1)
        spare = None
        if spare_from is not None:
            start = spare_from

            def spare(key: str) -> bool:
                cid = self.layout.checkpoint_id_of(expiry.thread_id, key)
                return cid is not None and cid >= start

        return await self._remove(expiry.thread_id, deletion.stamp, deletion.keys, spare)

    async def sweep_removed(self, thread: str, expired_at: float) -> Report:
        """After DynamoDB's TTL removed a thread's root item (a stream record): remove
        the thread; or, when a new conversation already began on the id over the
        removed item, the old life's objects: checkpoints and writes older than the
        new life's first checkpoint, and other objects stored before the old life
        expired (every object of the new life was stored after that)."""
        report = await self.sweep_thread(Expiry(thread, None))
        if not report.skipped:
            return report
        for _ in range(self.ctx.limits.max_conflicts):
            raw = await self.manifest.read(thread, "")
            born = raw.item.get("born", {}).get("S", "") if raw and raw.committed else ""
            if not born:  # deleted meanwhile, or pruned already: leave it to that
                return Report(skipped=1)
            # no late first writer may join the new life with a root older than born
            # (it would be one of the objects deleted below): it is refused instead
            if await self.manifest.seal_born(thread, born):
                break
        else:
            return Report(skipped=1)
        self.ctx.forget(self.layout.thread(thread))
        listed = [
            *await self.raw.list_all(self.layout.thread(thread)),
            *await self.raw.list_all(self.layout.packs(thread)),
        ]

        def old(o: Listed) -> bool:
            cid = self.layout.checkpoint_id_of(thread, o.key)
            return cid < born if cid is not None else o.modified < expired_at

        gone = [o for o in listed if old(o)]
        await self.raw.delete([o.key for o in gone])
        return _counted(self.layout.thread(thread), gone, threads=1 if gone else 0)

    async def sweep(self, progress: Progress | None = None) -> Report:
        """Remove every thread of the deployment whose TTL passed."""
        total = Report()
        done = found = 0

        async def one(expiry: Expiry) -> Report:
            nonlocal total, done
            report = await self.sweep_thread(expiry)
            total, done = total + report, done + 1
            if progress is not None:
                progress(total, done, found)
            return report

        try:
            async for page in self.manifest.expired():
                found += len(page)
                await bounded_map(one, page)
        except S3PersistenceError as exc:  # the others were cancelled: a rerun finishes
            exc.add_note(f"done before this failure, on {done} of {found} threads: {total}")
            raise
        return total

    async def _remove(
        self,
        thread: str,
        stamp: int,
        items: list[dict[str, Any]],
        spare: Callable[[str], bool] | None = None,
        *,
        undo: Deletion | None = None,
    ) -> Report:
        """A deletion's objects go (but those ``spare`` names), then its lease ends.
        Called once the tombstone is written: a sibling's failure lets it finish. One
        that fails before removing anything puts the thread back (``undo``: the
        tombstones' deletion), so the failed call leaves the thread as it was."""
        committed()
        self.ctx.forget(self.layout.thread(thread))
        try:
            listed, packs = await gather_all(
                self.raw.list_all(self.layout.thread(thread)),
                self.raw.list_all(self.layout.packs(thread)),
            )
            if spare is not None:
                listed = [o for o in listed if not spare(o.key)]
            held = {o.key: o for o in [*await self._packed_keys(packs), *listed]}
            renewed = await self.manifest.renew(items, stamp)
        except S3PersistenceError:
            if undo is not None:  # nothing removed yet: as if it never began
                with contextlib.suppress(S3PersistenceError):  # the failure is the news
                    await self.manifest.revive(undo)
            raise
        report = _counted(self.layout.thread(thread), list(held.values()))
        report.objects, report.bytes = (
            len(listed) + len(packs),
            sum(o.size for o in (*listed, *packs)),
        )
        if not renewed:
            # the lease ran out (a stalled process) and a new conversation began: its
            # objects may be in the listing, so this deletion stops; the rest is garbage
            logger.warning("delete_thread(%r) outlasted its lease; objects left", thread)
            return Report(skipped=1)
        await self.raw.delete([o.key for o in (*listed, *packs)])  # evicts them from the cache
        await self.manifest.release(items, stamp)
        if self.packed is not None:
            self.packed.note(self.layout.thread(thread), None)
        report.threads = 1
        return report

    async def _packed_keys(self, packs: Sequence[Listed]) -> list[Listed]:
        """The keys the packs hold (their indexes read), for the counts."""
        if self.packed is None:
            return []
        out: list[Listed] = []
        for o in packs:
            try:
                index = await self.packed.index(PackRef(o.key, o.size, 0, 0))
            except CorruptObjectError:
                continue  # counted as an object; what it held is not known
            thread = (
                self.layout.threads()
                + o.key[len(self.layout.root + "packs/") :].split("/")[0]
                + "/"
            )
            out += [Listed(thread + rel, "", 0.0, 0) for rel in index.entries]
        return out

    async def delete_for_runs(self, run_ids: Sequence[str]) -> Report:
        """Remove every checkpoint the runs wrote, in every thread of the deployment."""
        tokens = {encode(str(r), "run_id") for r in run_ids}
        if not tokens:
            return Report()
        entries: list[Entry] = []
        deleted: set[str] = set()  # a deletion in progress may fail and put one back
        async for page in self.manifest.scan(deleting=deleted):
            entries.extend(page)
        packed = {e.thread_id for e in entries if e.pack is not None}
        if packed:  # a rollback changes objects: a pack holding the runs' is unpacked first
            holding = await bounded_map(lambda t: self._holds_runs(t, tokens), sorted(packed))
            unpack = [t for t, holds in zip(sorted(packed), holding, strict=True) if holds]
            await bounded_map(self.unpack_thread, unpack)
            again = await bounded_map(self.manifest.namespaces, unpack)
            deleted.update(t for t, es in zip(unpack, again, strict=True) if not es)
            entries = [e for e in entries if e.thread_id not in unpack] + [
                e for es in again for e in es
            ]
        entries, reports = await self._past_deletions(
            entries, lambda e: self._delete_runs_in(e, tokens, deleted), deleted
        )
        total = sum(reports, Report())
        total.threads = len(
            {e.thread_id for e, r in zip(entries, reports, strict=True) if r.namespaces}
        )
        return total

    async def _past_deletions(
        self, entries: list[Entry], job: Callable[[Entry], Awaitable[Report]], deleted: set[str]
    ) -> tuple[list[Entry], list[Report]]:
        """``job`` on each namespace (one failing does not cut the others short); then
        on the threads a deletion in progress held meanwhile (``deleted``: the scan's
        and the jobs' finds), once it is over: it may have failed and put the thread
        back (:meth:`Manifest.revive`), and what it held is then acted on too.

        Returns:
            The namespaces acted on and their reports, in one order.
        """
        reports = await bounded_map(job, entries, settle=True)
        done = list(entries)
        for _ in range(self.ctx.limits.max_conflicts):
            if not deleted:
                return done, reports
            threads = sorted(deleted)
            deleted.clear()
            more = [e for back in await bounded_map(self._undeleted, threads) for e in back]
            done += more
            reports += await bounded_map(job, more, settle=True)
        if deleted:
            raise ConflictError(
                f"threads {sorted(deleted)[:5]!r} were deleted, and put back by a failing "
                "deletion, again and again meanwhile: run it again"
            )
        return done, reports

    async def _undeleted(self, thread: str) -> list[Entry]:
        """Wait while a deletion of ``thread`` holds its lease (delete_thread's: it may
        still fail and put the thread back; once the lease ran out it cannot, and a
        sweep's never does); then its live namespaces, if it has any (put back, or a
        new life begun).

        Cost: 1 GetItem per poll, the polls backing off from ``LEASE_POLL``
        to ``LEASE_POLL_MAX`` (a crashed deleter: its lease, 120 s at most, and as
        long again per renewal of a deleter still at work); then 1 Query unless the
        root item is a tombstone for good."""
        poll = LEASE_POLL
        while True:
            raw = await self.manifest.read(thread, "")
            now = self.manifest.now()
            if raw is None or not raw.tombstone:
                return await self.manifest.namespaces(thread)
            until = raw.deletion_held(now)
            if until <= now:
                return []  # deleted for good
            await asyncio.sleep(min(until - now, poll))
            poll = min(poll * 2, LEASE_POLL_MAX)

    async def _holds_runs(self, thread: str, tokens: set[str]) -> bool:
        """Whether a packed thread has a checkpoint of one of the runs (read from its
        pack's index: no object is read)."""
        prefix = self.layout.thread(thread)
        rounds = self.ctx.limits.max_conflicts
        for attempt in range(rounds):
            entries = await self.manifest.namespaces(thread)
            if self.packed is not None and entries:
                self.packed.note(prefix, next((e.pack for e in entries if e.pack), None))
            try:
                for e in entries:
                    keys = self._keys(e)
                    listed = await self.objects.list_all(keys.checkpoints)
                    cks = keys.listed_checkpoints(o.key for o in listed)
                    if any(ck.run_token in tokens for ck in cks):
                        return True
                return False
            except PackGoneError as gone:  # unpacked or repacked since it was read
                await self._repacked_or_raise(entries[0], gone)
                if attempt == rounds - 1:
                    raise ConflictError(
                        f"thread {thread!r} was packed again and again while it was "
                        "listed: run delete_for_runs again"
                    ) from gone
        return False

    async def _listing_cas(
        self, entry: Entry, what: str, commit: Commit, deleted: set[str] | None = None
    ) -> Report:
        """Read the entry and the namespace's checkpoint listing, then ``commit``;
        read both again while a writer moved the entry meanwhile (``deleted``: gets the
        thread when it was found deleted meanwhile)."""
        keys = self._keys(entry)
        current: Entry | None = entry

        async def read() -> tuple[Entry | None, list[Listed]]:
            if current is None:
                return current, []
            # what this process cached of an earlier life (an import's replace reuses
            # the keys, not the bytes) must not decide what the new one refers to
            self.ctx.enter_life(keys.prefix, current.life)
            if self.packed is not None:  # list through the pack the entry names
                self.packed.note(self.layout.thread(current.thread_id), current.pack)
            try:
                return current, await self.objects.list_all(keys.checkpoints)
            except PackGoneError as gone:
                await self._repacked_or_raise(current, gone)
                return current, [_REPACKED]

        async def update(state: tuple[Entry | None, list[Listed]]) -> Done[Report] | Retry:
            nonlocal current
            at, listed = state
            if at is None:
                if deleted is not None:
                    deleted.add(entry.thread_id)
                return Done(Report())  # deleted meanwhile
            if listed == [_REPACKED]:
                done: Report | bool | None = False  # repacked while listed: again
            else:
                try:
                    done = await commit(at, keys, listed)
                except PackGoneError as gone:
                    await self._repacked_or_raise(at, gone)
                    done = False  # its pack was replaced meanwhile: read again
            if isinstance(done, Report):
                return Done(done)
            if done is None:
                # nothing to do, by a listing made through the pack ``at`` named: only
                # if the thread was not packed or unpacked since (its objects moved)
                fresh = await self._fresh(at)
                if fresh is None or (fresh.pack, fresh.packings) == (at.pack, at.packings):
                    return Done(Report())
                current = fresh
                return LOST
            current = await self._fresh(at)
            if current is None and deleted is not None:
                deleted.add(entry.thread_id)
            return Done(Report()) if current is None else LOST  # deleted meanwhile

        return await cas(
            read,
            update,
            attempts=self.ctx.limits.max_conflicts,
            what=f"thread {entry.thread_id!r} ({what})",
            error=CheckpointConflictError,
        )

    async def _repacked_or_raise(self, entry: Entry, gone: PackGoneError) -> None:
        """A pack went missing under a maintenance call: go on when the thread was
        repacked or unpacked meanwhile; raise ``gone`` (corruption, named) when the
        manifest still names the missing pack."""
        root = await self.manifest.latest(entry.thread_id, "")
        if root is not None and root.pack is not None and root.pack.key == gone.key:
            raise gone

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
                await self.unpack_thread(at.thread_id)
                return False
            if self._in_flight(at, keys, cks, tokens):
                # another run's latest is committed but its object has not landed: what it
                # refers to is unknown until it does (within its request's deadline)
                await self._until_landed(at, keys)
                return False  # list again: landed, or no longer counted as in flight
            mark = removal_mark(self.manifest.now())
            if not await self._repoint(at, keys, cks, doomed, tokens, mark):
                return False
            try:
                return await self._after_repoint(at, keys, listed, cks, doomed, tokens, mark)
            finally:
                await self._unmark(at.thread_id, at.checkpoint_ns, mark)

        return await self._listing_cas(entry, "delete_for_runs", commit, deleted)

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
        cutoff = self._modified(listed, at, keys)
        try:
            report = await self._drop_checkpoints(
                keys, listed, doomed, keep, cutoff, at.floor, move=True, until=mark_until(mark)
            )
        except (NotFoundError, PackGoneError):
            return False  # a prune or a packing moved them meanwhile: list again
        # a run rolled back while it still wrote may have committed since the
        # listing (its commit did not conflict with ours): another round takes it
        # (one round trip: the listing beside the root's pack)
        listed_now, root = await gather_all(
            self.objects.list_all(keys.checkpoints),
            self.manifest.latest(at.thread_id, ""),
        )
        late = keys.listed_checkpoints(o.key for o in listed_now)
        known = {ck.key for ck in cks}
        if any(ck.run_token in tokens and ck.key not in known for ck in late):
            return False
        if root is not None and (root.pack is not None or root.packings != at.packings):
            # packed or unpacked while it rolled back: a pack may hold what it
            # deleted, or an unpacking may have put it back; the next round, over
            # the unpacked objects, deletes them again
            await self.unpack_thread(at.thread_id)
            return False
        return report

    def _in_flight(
        self, entry: Entry, keys: NamespaceKeys, cks: list[CheckpointKey], tokens: set[str]
    ) -> bool:
        """Whether the entry's latest (not of ``tokens``' runs) is a put still in flight:
        not listed, and made less than ``IN_FLIGHT_SECONDS`` ago (older: its writer died
        after the manifest update, and it never lands)."""
        latest = keys.parse_checkpoint(keys.checkpoint_at(entry.latest_tail))
        if latest.run_token in tokens or any(ck.checkpoint_id == entry.latest_id for ck in cks):
            return False
        return may_land(entry.latest_id, time.time())

    async def _until_landed(self, entry: Entry, keys: NamespaceKeys) -> None:
        """Wait for the latest's object, as long as it counts as in flight and is the
        latest (each poll: its GET beside the manifest's GetItem, one round trip)."""
        key = keys.checkpoint_at(entry.latest_tail)
        while True:
            body, now = await gather_all(
                self.objects.get(key), self.manifest.latest(entry.thread_id, entry.checkpoint_ns)
            )
            if body is not None or now is None:
                return  # landed, or the thread was deleted meanwhile
            if (now.latest_id, now.life) != (entry.latest_id, entry.life):
                return  # a writer went on (or a new life began): what to wait for changed
            if not may_land(entry.latest_id, time.time()):
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
    ) -> bool:
        """Give the entry the tips of what is left after the runs (or drop it), under
        the rollback's ``mark``."""
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
        latest = keys.parse_checkpoint(keys.checkpoint_at(entry.latest_tail))
        flying = latest.run_token not in tokens and latest.checkpoint_id not in listed_ids
        # a head not listed either, made lately, is a fork's put in flight: it stays a
        # head (its object may land yet); older, a crashed writer's phantom
        unlisted = {
            h
            for h in full.heads | full.spilled_heads
            if h not in listed_ids and may_land(h, time.time())
        }
        if not tips and not flying:
            if unlisted:  # what is left is in flight: list again once it landed
                await asyncio.sleep(LEASE_POLL)
                return False
            return await self.manifest.drop(entry, mark=mark)
        removed = {ck.checkpoint_id for ck in doomed if ck.checkpoint_id >= entry.floor}
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
        )
        return await self.manifest.retip(entry, new, tokens, mark=mark)

    async def _drop_checkpoints(
        self,
        keys: NamespaceKeys,
        listed: list[Listed],
        doomed: list[CheckpointKey],
        keep: list[CheckpointKey],
        cutoff: float,
        floor: str,
        *,
        move: bool = False,
        until: float,
    ) -> Report:
        """Delete checkpoints, their writes, and the blobs no kept checkpoint refers to.

        Only blobs stored before ``cutoff`` (the committed latest's own time) go: a
        writer's new blobs, stored after it and not yet committed, stay. A removed
        checkpoint whose object holds values of kept ones stays: below prune's floor,
        where no history reaches; or, with ``move`` (delete_for_runs, which keeps the
        floor), copied to ``h/`` first, out of the listing (readers look there).
        Nothing is deleted once ``until`` (the removal's mark) passed: a new life
        may have begun over the item and reused the keys.
        """
        kept_ids = {ck.checkpoint_id for ck in keep}
        # an id under both (a stray key copying a kept one's id) keeps its writes
        doomed_inv = {invert_id(ck.checkpoint_id) for ck in doomed} - {
            invert_id(i) for i in kept_ids
        }
        wlisted, blisted, hlisted, envs = await gather_all(
            self.objects.list_all(keys.writes),
            self.objects.list_all(keys.blobs),
            self.objects.list_all(keys.moved),
            self.objects.get_many([ck.key for ck in keep], cache=True),
        )
        referenced: set[str] = set()
        for ck, body in zip(keep, envs, strict=True):
            if body is None:  # moved (packed meanwhile) or gone: what it refers to,
                # other checkpoints' objects included, is not known: list again
                raise NotFoundError(f"{ck.key}: a kept checkpoint's object moved or went")
            with codec.reading(ck.key):
                env = codec.load_checkpoint(body)
                versions = self.serde.loads_typed(env.checkpoint)["channel_versions"]
            referenced.update(
                k for ks in value_keys(keys, ck.key, env, versions).values() for k in ks
            )
            referenced.update(logs.referenced(keys, env))
        drop = [ck.key for ck in doomed if ck.key not in referenced]
        held = [ck.key for ck in doomed if ck.key in referenced]
        if move and held:
            await bounded_map(lambda k: self.objects.copy(k, keys.moved_copy(k)), held)
            drop += held
        drop += [o.key for o in wlisted if keys.checkpoint_of_write(o.key) in doomed_inv]
        drop += [o.key for o in blisted if o.key not in referenced and self._mtime(o) < cutoff]
        drop += [
            o.key
            for o in hlisted
            if keys.checkpoints + o.key[len(keys.moved) :] not in referenced
            and self._mtime(o) < cutoff
        ]
        if not self._in_time(until, keys.thread_id):
            drop = []
        await self.objects.delete(drop)
        sizes = {o.key: o.size for o in (*listed, *wlisted, *blisted, *hlisted)}
        gone = set(drop)
        return Report(
            namespaces=1,
            # those of the history: one below the floor left its history earlier
            checkpoints=len({ck.checkpoint_id for ck in doomed if ck.checkpoint_id >= floor}),
            objects=len(gone),
            bytes=sum(sizes.get(k, 0) for k in gone),
        )

    async def _unmark(self, thread: str, checkpoint_ns: str, mark: str) -> None:
        """Take a removal's mark off; one that cannot be (the table failing) runs out
        by itself (``DELETE_LEASE_SECONDS``): what the removal did stands."""
        try:
            await self.manifest.unmark(thread, checkpoint_ns, mark)
        except S3PersistenceError as exc:
            logger.warning(
                "the mark of a removal in thread %r stays until it runs out: %s", thread, exc
            )

    def _in_time(self, until: float, thread: str) -> bool:
        """Whether a removal's mark still holds (a margin for clocks and the request)."""
        if self.manifest.now() < until - MARK_MARGIN_SECONDS:
            return True
        logger.warning("a removal in thread %r outlasted its mark; objects left", thread)
        return False

    def _mtime(self, o: Listed) -> float:
        """When an object was first stored (an unpacked one: when its pack was made)."""
        return self.restored.get(o.key, o.modified)

    def _modified(self, listed: Sequence[Listed], entry: Entry, keys: NamespaceKeys) -> float:
        """When the latest checkpoint was stored: the cutoff for unreferenced blobs (a
        writer's blob stored after it, not yet committed, stays)."""
        key = keys.checkpoint_at(entry.latest_tail)
        o = next((o for o in listed if o.key == key), None)
        if o is None:
            return 0.0
        return o.modified if o.key not in self.restored else self.restored[o.key] + 1.0

    # ----------------------------------------------------------------- packing
    async def pack_thread(self, thread: str) -> Report:
        """Put every object of a thread in one new pack, then switch the manifest to
        it, then remove the objects it holds (and an earlier pack). A crash at any
        step loses nothing: before the switch the objects are all there; after it,
        the pack holds them (an object left beside it is read as its copy)."""
        if self.packed is None:
            raise InvalidRequestError("packs need the saver's own object store")
        entries = await self.manifest.namespaces(thread)
        root = next((e for e in entries if not e.checkpoint_ns), None)
        if root is None:
            return Report(skipped=1)  # nothing, or no root namespace to name a pack
        prefix = self.layout.thread(thread)
        self.packed.note(prefix, root.pack)
        try:
            listed, plain = await gather_all(
                self.objects.list_all(prefix), self.raw.list_all(prefix)
            )
            if root.pack is not None and not plain:
                return Report(skipped=1)  # packed, and nothing written since
            bodies = await self.objects.get_many([o.key for o in listed])
        except PackGoneError as gone:  # repacked or unpacked by another meanwhile
            await self._repacked_or_raise(root, gone)
            return Report(skipped=1)
        if any(b is None for b in bodies):
            return Report(skipped=1)  # changed meanwhile (a prune, a deletion)
        made = self.manifest.now()
        body = packs.build(
            thread,
            made,
            [(o.key[len(prefix) :], b, o.etag) for o, b in zip(listed, bodies, strict=True) if b],
        )
        key = f"{self.layout.packs(thread)}{int(made * 1000):013d}-{uuid.uuid4().hex[:12]}.pack"
        await self.raw.put(key, body, if_none_match=True)
        index, _ = packs.parse_index(key, body)
        ref = PackRef(
            key, len(body), len(body) - sum(len(b or b"") for b in bodies) - packs.HEAD, len(listed)
        )
        mark = removal_mark(self.manifest.now(), "pack")
        if not await self.manifest.set_pack(thread, ref, root.pack, mark=mark, life=root.life):
            await self.raw.delete([key])  # the thread changed: this pack is no one's
            return Report(skipped=1)
        self.packed.note(prefix, ref)
        try:
            return await self._after_switch(thread, prefix, key, index, listed, root, made, mark)
        finally:
            await self._unmark(thread, "", mark)

    async def _after_switch(
        self,
        thread: str,
        prefix: str,
        key: str,
        index: packs.PackIndex,
        listed: list[Listed],
        root: Entry,
        made: float,
        mark: str,
    ) -> Report:
        """A packing's deletes, under its mark, once the thread names the new pack."""
        # only objects still as packed go (a special write rewritten meanwhile stays)
        packed_etags = {prefix + rel: etag for rel, (_, _, etag) in index.entries.items()}
        gone = [o for o in await self.raw.list_all(prefix) if packed_etags.get(o.key) == o.etag]
        old = [root.pack.key] if root.pack is not None else []
        # a pack no entry names, made long ago: a packer that crashed before its switch
        old += [
            o.key
            for o in await self.raw.list_all(self.layout.packs(thread))
            if o.key not in (key, *old) and _pack_time(o.key) < made - ORPHAN_PACK_SECONDS
        ]
        if not self._in_time(mark_until(mark), thread):
            gone, old = [], []
        await self.raw.delete([*(o.key for o in gone), *old])
        report = _counted(prefix, listed, threads=1)
        report.objects = len(gone) + len(old)  # removed; one pack stored instead
        report.bytes = sum(o.size for o in gone)
        return report

    async def unpack_thread(self, thread: str) -> bool:
        """Turn a packed thread's pack back into objects (before a prune, a copy or a
        rollback changes them); False when it had no pack.

        A packing that switched to its pack may still be deleting the loose objects
        it packed: the unpacking waits for its mark (a ``pack`` one: a prune's or a
        rollback's, the caller's own included, does not count), so that what it finds
        loose stays there."""
        if self.packed is None:
            return False
        unpacked = False
        attempts = 0
        while attempts < self.ctx.limits.max_conflicts:
            root = await self.manifest.latest(thread, "")
            if root is None or root.pack is None:
                return unpacked
            now = self.manifest.now()
            busy = marks_until(root.removing, now, kinds=("pack",))
            if busy > now:
                await asyncio.sleep(min(busy - now, LEASE_POLL))
                continue
            attempts += 1
            try:
                if await self._unpack(thread, root):
                    return True
            except PackGoneError as gone:  # repacked or unpacked by another: again
                await self._repacked_or_raise(root, gone)
            unpacked = True  # its objects are out, whoever switched the pack
        raise ConflictError(
            f"thread {thread!r} was packed again and again while it was unpacked: "
            "run the call again"
        )

    async def _unpack(self, thread: str, root: Entry) -> bool:
        """Put ``root``'s pack's objects back, then switch the thread to no pack; False
        when the switch failed (packed again, or unpacked, meanwhile).

        Its writes come before its commit, so a mark on the root item (1 UpdateItem
        each way) holds a new life off meanwhile (an import's replace reuses the keys):
        when the thread was replaced or deleted under it, it deletes what it wrote of
        the old life before the mark comes off."""
        assert self.packed is not None and root.pack is not None
        mark = removal_mark(self.manifest.now(), "unpack")
        if not await self.manifest.mark(root, mark):
            return False  # changed since it was read
        try:
            return await self._unpack_marked(thread, root, mark)
        finally:
            await self._unmark(thread, "", mark)

    async def _unpack_marked(self, thread: str, root: Entry, mark: str) -> bool:
        assert self.packed is not None and root.pack is not None
        prefix = self.layout.thread(thread)
        self.packed.note(prefix, root.pack)
        index, packed_at, plain_listed = await gather_all(
            self.packed.index(root.pack, prefix),
            self.raw.list_all(self.layout.packs(thread)),
            self.raw.list_all(prefix),
        )
        plain = {o.key for o in plain_listed}
        # when the pack was stored, by S3's clock: everything in it is older
        made = next((o.modified for o in packed_at if o.key == root.pack.key), 0.0)
        todo = [rel for rel in index.entries if prefix + rel not in plain]
        bodies = await self.objects.get_many([prefix + rel for rel in todo])

        sent: dict[str, bytes] = {}  # every PUT sent: one that failed may have landed
        wrote: dict[str, str] = {}

        async def put(pair: tuple[str, bytes | None]) -> None:
            if pair[1] is not None:
                sent[prefix + pair[0]] = pair[1]
                etag = await self.raw.put(prefix + pair[0], pair[1], if_none_match=True)
                if etag is not None:
                    wrote[prefix + pair[0]] = etag
                self.restored[prefix + pair[0]] = made - 1.0

        try:
            await bounded_map(put, list(zip(todo, bodies, strict=True)))
            switched = await self.manifest.set_pack(thread, None, root.pack, life=root.life)
        except Exception:  # a failed request: the switch may or may not have landed
            await self._unwrite(thread, root, sent, wrote, mark)
            raise
        if not switched:
            await self._unwrite(thread, root, sent, wrote, mark)
            return False
        self.packed.note(prefix, None)
        await self.raw.delete([root.pack.key])
        return True

    async def _unwrite(
        self, thread: str, root: Entry, sent: dict[str, bytes], wrote: dict[str, str], mark: str
    ) -> None:
        """An unpacking that did not commit: when the thread is no longer in the life
        it unpacked (replaced, deleted), what it wrote is a stray of the old life under
        keys a new one may reuse, and goes: the versions it wrote, and those of PUTs
        that failed yet may have landed (read back: its bytes, 1 GET each). In the same
        life they stay (another unpacking may have counted them as its own), and once
        its mark ran out too (a new life may have written them since)."""
        if not sent:
            return
        now = await self.manifest.latest(thread, "")
        if now is not None and now.life == root.life:
            return
        if not self._in_time(mark_until(mark), thread):
            return

        async def take_back(key: str) -> None:
            etag = wrote.get(key)
            if etag is None:
                body, etag = await self.raw.get_with_etag(key)
                if body != sent[key]:
                    etag = None
            if etag is not None:
                await self.raw.delete_if_match(key, etag)

        await bounded_map(take_back, list(sent))

    # ---------------------------------------------------------------- pruning
    def rule(self, keep_last: int | None, older_than: timedelta | datetime | None) -> Keep:
        """A retention rule: keep ``keep_last`` (default 1) and what is newer than
        ``older_than`` (an age, from the manifest's clock now, or a moment)."""
        cutoff: float | None = None
        if isinstance(older_than, timedelta):
            cutoff = self.manifest.now() - older_than.total_seconds()
        elif isinstance(older_than, datetime):
            cutoff = older_than.timestamp()
        return Keep(keep_last or 1, cutoff)

    async def prune_thread(self, thread: str, rule: Keep) -> Report:
        """Apply ``rule`` to each namespace of ``thread``. A packed thread is unpacked
        first, and only when the rule removes something from it. A deletion in
        progress (the thread gone, or found gone meanwhile) may fail and put it
        back: once it is over, a thread that lives is pruned again."""
        total = Report()
        for _ in range(self.ctx.limits.max_conflicts + 1):  # the first, then redone
            entries = await self.manifest.namespaces(thread)
            deleted = set() if entries else {thread}
            total += await self._prune_entries(thread, entries, rule, deleted)
            if not deleted or not await self._undeleted(thread):
                break
        else:
            raise ConflictError(
                f"thread {thread!r} was deleted, and put back by a failing deletion, again "
                "and again while it was pruned: prune it again"
            )
        acted = bool(total.checkpoints or total.objects)
        total.threads, total.skipped = (1, 0) if acted else (0, 1)
        return total

    async def _prune_entries(
        self, thread: str, entries: list[Entry], rule: Keep, deleted: set[str]
    ) -> Report:
        pack = next((e.pack for e in entries if e.pack is not None), None)
        if pack is not None and self.packed is not None:
            self.packed.note(self.layout.thread(thread), pack)
            dry = await bounded_map(
                lambda e: self._prune_ns(e, rule, dry=True, deleted=deleted), entries
            )
            if not any(r.checkpoints for r in dry):
                return Report()  # nothing to remove: the archive stays packed
            await self.unpack_thread(thread)
            entries = await self.manifest.namespaces(thread)
            if not entries:
                deleted.add(thread)
        reports = await bounded_map(
            lambda e: self._prune_ns(e, rule, deleted=deleted), entries, settle=True
        )
        return sum(reports, Report())

    async def _prune_ns(
        self, entry: Entry, rule: Keep, *, dry: bool = False, deleted: set[str] | None = None
    ) -> Report:
        """The manifest's floor is raised first, conditioned on the entry being what
        was read before the listing: every committed checkpoint is then listed, a
        writer that committed meanwhile makes prune start over, and nothing newer
        than the latest (a writer's checkpoint, not yet committed) is touched.
        """

        async def commit(at: Entry, keys: NamespaceKeys, listed: list[Listed]) -> Report | bool:
            cks = keys.listed_checkpoints(o.key for o in listed)
            by_id: dict[str, CheckpointKey] = {}
            for ck in cks:
                by_id.setdefault(ck.checkpoint_id, ck)
            latest = by_id.get(at.latest_id)
            if latest is None:  # in flight, or its writer crashed: its parent stands in
                parent = keys.parse_checkpoint(keys.checkpoint_at(at.latest_tail)).parent_id
                latest = by_id.get(parent) if parent is not None else None
            line = _line(latest, by_id, at.floor) if latest is not None else []
            kept_line = rule.select(line)
            keep = await self._seed_chain(kept_line[-1], by_id) if kept_line else None
            if latest is None or keep is None:
                if await self._moved(at):
                    return False  # deleted or rewritten since it was read: not corruption
                raise CorruptObjectError(
                    keys.checkpoint_at(at.latest_tail),
                    f"missing: it is the latest checkpoint of thread {at.thread_id!r}",
                )
            keep = [*kept_line[:-1], *keep]
            kept = {ck.checkpoint_id for ck in keep}
            doomed = [
                ck
                for ck in cks
                if ck.checkpoint_id < latest.checkpoint_id and ck.checkpoint_id not in kept
            ]
            if not doomed and at.floor == min(kept) and not at.heads and not at.spilled:
                return Report()
            if dry:  # what it would remove, nothing written
                return Report(checkpoints=max(len(doomed), 1))
            removed = {ck.checkpoint_id for ck in doomed}
            mark = removal_mark(self.manifest.now())
            if not await self.manifest.raise_floor(at, min(kept), removed, mark=mark):
                return False
            try:
                try:
                    report = await self._drop_checkpoints(
                        keys,
                        listed,
                        doomed,
                        keep,
                        self._modified(listed, at, keys),
                        at.floor,
                        until=mark_until(mark),
                    )
                except (NotFoundError, PackGoneError):
                    return False  # packed or unpacked meanwhile: list again
                if at.spilled:  # its generation is no one's now: its markers go
                    markers = await self.objects.list_all(keys.tips(at.spilled))
                    await self.objects.delete([o.key for o in markers])
                    report.objects += len(markers)
                return report
            finally:
                await self._unmark(at.thread_id, at.checkpoint_ns, mark)

        return await self._listing_cas(entry, "prune", commit, deleted)

    async def _moved(self, entry: Entry) -> bool:
        """Whether the entry changed (or went) since it was read."""
        fresh = await self._fresh(entry)
        return fresh is None or fresh.rev != entry.rev

    async def _seed_chain(
        self, latest: CheckpointKey, by_id: dict[str, CheckpointKey]
    ) -> list[CheckpointKey] | None:
        """The latest and, for DeltaChannel state, the ancestors back to each seed;
        None when the latest's own object is gone."""
        keep = [latest]
        body = await self.objects.get(latest.key, cache=True)
        if body is None:
            return None
        with codec.reading(latest.key):
            env = codec.load_checkpoint(body)
            md = self.serde.loads_typed(env.metadata)
        delta = set((md or {}).get("counters_since_delta_snapshot") or {}) - set(env.present)
        parent = latest.parent_id
        while delta and parent in by_id:
            ck = by_id[parent]
            keep.append(ck)
            pbody = await self.objects.get(ck.key, cache=True)
            if pbody is None:
                break
            with codec.reading(ck.key):
                delta -= set(codec.load_checkpoint(pbody).present)
            parent = ck.parent_id
        return keep

    # ---------------------------------------------------------------- copying
    async def copy_thread(self, src: str, dst: str) -> Report:
        """Copy the source as its entries stood at one moment, then give the target
        those tips.

        The source's entries are read first; every object they lead to is then
        listed and copied (a packed thread's from its pack, as it is read: nothing is
        unpacked), and the entries are read again. Only a change that removes or moves
        objects (a deletion, a prune, a rollback, a packing or unpacking, a new life)
        starts it over; writers going on meanwhile do not (their newer checkpoints are
        not part of the snapshot and are not copied), so a busy source is copied in
        one round. The target's items are read before copying and the commit is
        conditioned on them: a deletion of the target begun meanwhile starts it over.
        """
        if src == dst:
            return Report(skipped=1)  # a thread is already a copy of itself
        prefix = self.layout.thread(src)
        copied: set[tuple[str, str]] = set()
        landed: set[tuple[str, str]] = set()  # (ns prefix, id) an earlier round listed
        report = Report()

        async def read() -> tuple[list[Entry], list[Raw | None]]:
            entries = await self.manifest.namespaces(src)
            targets = await bounded_map(lambda e: self.manifest.read(dst, e.checkpoint_ns), entries)
            return entries, targets

        async def update(state: tuple[list[Entry], list[Raw | None]]) -> Done[Report] | Retry:
            nonlocal report
            entries, targets = state
            if not entries:
                return Done(Report(skipped=1))
            now = time.time()
            leased = [r.held_until(now) for r in targets if r is not None and r.tombstone]
            if leased and max(leased) > now:  # the target is being deleted
                return Retry(after=min(max(leased) - now, LEASE_POLL))
            for e in entries:  # the source's cached objects of an earlier life go
                self.ctx.enter_life(self._keys(e).prefix, e.life)
            if self.packed is not None:  # read through the pack these entries name
                root = next((e for e in entries if not e.checkpoint_ns), None)
                self.packed.note(prefix, root.pack if root is not None else None)
            self.ctx.forget(self.layout.thread(dst))
            try:
                listed = await self.objects.list_all(prefix)
                wanted = self._snapshot(src, entries)
                todo = [o for o in listed if (o.key, o.etag) not in copied and wanted(o.key)]
                await bounded_map(
                    lambda o: self.objects.copy(o.key, self.layout.rehome(o.key, src, dst)), todo
                )
            except (PackGoneError, NotFoundError):
                return LOST  # packed, unpacked or removed while copied: read again
            copied.update((o.key, o.etag) for o in todo)  # a later round copies only news
            report = report + _counted(prefix, todo)
            after = await self.manifest.namespaces(src)
            if not _same_objects(entries, after):
                return LOST  # objects may have moved or gone while they were copied
            raced = self._raced_landing(entries, after, listed, landed)
            landed.update(self._listed_ids(entries, listed))
            if raced:
                return LOST  # a commit may have come before a latest landed: read again
            inline = await bounded_map(lambda e: self._as_seen(e, listed), entries)
            pairs = [(e, t) for e, t in zip(inline, targets, strict=True) if e is not None]
            if not pairs:
                return Done(Report(skipped=1))  # nothing a reader could see yet
            merged = await bounded_map(lambda p: self.manifest.merge(dst, p[0], p[1]), pairs)
            if not all(merged):
                return LOST
            report.threads, report.namespaces = 1, len(pairs)
            return Done(report)

        return await cas(
            read,
            update,
            attempts=self.ctx.limits.max_conflicts,
            what=f"copy_thread({src!r}, {dst!r})",
            error=CheckpointConflictError,
        )

    def _listed_ids(self, entries: list[Entry], listed: Sequence[Listed]) -> set[tuple[str, str]]:
        """(namespace prefix, checkpoint id) of each checkpoint listed in ``entries``'
        namespaces."""
        return {
            (keys.prefix, cid)
            for keys in map(self._keys, entries)
            for cid in _listed_by_id(keys, listed)
        }

    def _raced_landing(
        self,
        before: list[Entry],
        after: list[Entry],
        listed: Sequence[Listed],
        landed: set[tuple[str, str]],
    ) -> bool:
        """Whether the copy's snapshot may be a state no reader saw. A latest whose put
        was in flight when ``before`` was read is stood in for by its parent until it
        lands (still in flight at the listing, it is not copied: the copy is of that
        moment, stand-in and all). One that landed between the read and the listing
        (no earlier round listed it) is copied, and a commit made before it landed (a
        fork) belongs in that state, though ``before`` does not name it. A new tip that
        descends from the latest was made after it landed (its writer read it), and so
        was one the listing does not reach (made after it); any other listed one may
        have come before: read again (no request: the listing and the
        entries read after it answer)."""
        now = {e.checkpoint_ns: e for e in after}
        for e in before:
            keys = self._keys(e)
            if (keys.prefix, e.latest_id) in landed:
                continue  # listed before these entries were read: it had landed
            new = now[e.checkpoint_ns].tips - e.tips
            if not new:
                continue
            by_id = _listed_by_id(keys, listed)
            if e.latest_id not in by_id:
                continue  # not landed at the listing either: not copied
            for tip in new:
                cid: str | None = tip
                while cid is not None and cid in by_id and cid > e.latest_id:
                    cid = by_id[cid].parent_id
                if cid is not None and cid > e.latest_id:
                    continue  # not listed: committed after the listing (it had landed)
                if cid != e.latest_id:
                    return True
        return False

    async def _as_seen(self, entry: Entry, listed: Sequence[Listed]) -> Entry | None:
        """What a copy commits for ``entry``: every head inline (its spilled ones
        listed; their markers are the source's and stay there), and a latest still in
        flight at the listing replaced by what readers stood in for it, the newest of
        its parent and the heads listed (its object is not copied: it may never land,
        and the target would wait for it as a put in flight). None when nothing stands
        in (a first checkpoint in flight). Costs the stand-in's GET (cached), in flight only."""
        keys = self._keys(entry)
        full = await with_spilled(self.objects, keys, entry)
        heads = full.heads | full.spilled_heads
        by_id = _listed_by_id(keys, listed)
        if entry.latest_id in by_id:
            return replace(full, heads=heads, spilled="")
        latest = keys.parse_checkpoint(keys.checkpoint_at(entry.latest_tail))
        candidates = {*heads, latest.parent_id} - {None, entry.latest_id}
        seen = sorted((c for c in candidates if c in by_id), reverse=True)
        if not seen:
            return None
        top = by_id[seen[0]]
        body = await self.objects.get(top.key, cache=True)
        uses_delta = body is None or bool(channels_to_replay(self.serde, body, top.key))
        return replace(
            full,
            latest_id=top.checkpoint_id,
            latest_tail=keys.tail(top.key),
            uses_delta=uses_delta,
            heads=frozenset(seen[1:]),
            spilled="",
        )

    def _snapshot(self, thread: str, entries: list[Entry]) -> Callable[[str], bool]:
        """Whether a listed object belongs to what ``entries`` lead to: a checkpoint
        or its writes no newer than its namespace's latest, or any other object of a
        namespace they name (a blob, a moved copy). A newer checkpoint is a writer's
        since the snapshot (or a crashed one's): invisible in the copy, so not copied."""
        top = self.layout.thread(thread)
        newest = {self._keys(e).prefix: e.latest_id for e in entries}

        def wanted(key: str) -> bool:
            rest = key[len(top) :]
            if not rest.startswith("ns/"):
                return True
            ns_prefix = key[: len(top) + 3 + rest[3:].find("/") + 1]
            if ns_prefix not in newest:
                return False  # a namespace of another life, or one begun since
            if key[len(ns_prefix) :].startswith("t/"):
                return False  # tip markers: the copy gets the heads inline
            cid = self.layout.checkpoint_id_of(thread, key)
            return cid is None or cid <= newest[ns_prefix]

        return wanted


def _listed_by_id(keys: NamespaceKeys, listed: Sequence[Listed]) -> dict[str, CheckpointKey]:
    """The checkpoints of ``keys``' namespace in a thread's listing, by id."""
    mine = (o.key for o in listed if o.key.startswith(keys.checkpoints))
    return {ck.checkpoint_id: ck for ck in keys.listed_checkpoints(mine)}


def _pack_time(key: str) -> float:
    """When a pack was made, from its name (``<ms>-<random>.pack``); now if unreadable."""
    try:
        return int(key.rsplit("/", 1)[1].split("-", 1)[0]) / 1000
    except (IndexError, ValueError):
        return time.time()


@dataclass(frozen=True, slots=True)
class Keep:
    """A retention rule for one namespace's latest line (see ``AsyncS3Saver.aprune``)."""

    last: int
    """The newest checkpoints kept, at least 1 (the latest)."""
    cutoff: float | None = None
    """Epoch seconds: checkpoints made since are kept too."""

    def select(self, line: list[CheckpointKey]) -> list[CheckpointKey]:
        """The kept head of ``line`` (newest first)."""
        n = max(self.last, 1)
        if self.cutoff is not None:
            young = 0
            for ck in line:
                made = uuid6_time(ck.checkpoint_id)
                if made is not None and made < self.cutoff:
                    break
                young += 1
            n = max(n, young)
        return line[:n]


_REPACKED = Listed("", "", 0.0, 0)
"""A listing cut short by its pack's going (repacked or unpacked meanwhile)."""


def _same_objects(before: list[Entry], after: list[Entry]) -> bool:
    """Whether every object ``before`` led to is still where it was: each namespace
    still lives with the same floor, removals and pack, and a latest no older (a
    writer going on changes nothing of the past; a prune, a rollback, a packing, a
    deletion or a new life does)."""
    now = {e.checkpoint_ns: e for e in after}
    for e in before:
        a = now.get(e.checkpoint_ns)
        if a is None or (a.life, a.floor, a.gone, a.pack, a.packings) != (
            e.life,
            e.floor,
            e.gone,
            e.pack,
            e.packings,
        ):
            return False
        if a.latest_id < e.latest_id or not e.heads <= a.tips:
            return False
    return True


def _line(
    latest: CheckpointKey, by_id: dict[str, CheckpointKey], floor: str
) -> list[CheckpointKey]:
    """The latest and its ancestors in the listing, newest first, down to the floor."""
    out = [latest]
    parent = latest.parent_id
    while parent is not None and parent >= floor and parent in by_id:
        out.append(by_id[parent])
        parent = by_id[parent].parent_id
    return out


def _counted(thread_prefix: str, listed: Sequence[Listed], *, threads: int = 0) -> Report:
    """A Report of the objects of one thread listed under ``thread_prefix``."""
    namespaces: set[str] = set()
    checkpoints = 0
    for o in listed:
        parts = o.key[len(thread_prefix) :].split("/")
        if len(parts) > 3 and parts[0] == "ns":
            namespaces.add(parts[1])
            checkpoints += parts[2] == "c"
    return Report(
        threads=threads,
        namespaces=len(namespaces),
        checkpoints=checkpoints,
        objects=len(listed),
        bytes=sum(o.size for o in listed),
    )
