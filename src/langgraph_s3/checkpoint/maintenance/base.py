"""Maintenance's shared floor: the listing compare-and-swap, waits, removals' deletes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_s3.checkpoint import logs
from langgraph_s3.checkpoint.context import SaverContext
from langgraph_s3.checkpoint.erasure import late_put_seconds, mark_erased
from langgraph_s3.checkpoint.maintenance.settling import settling
from langgraph_s3.checkpoint.packs import PackGoneError, packed_view
from langgraph_s3.core import codec
from langgraph_s3.core.keys import CheckpointKey, Layout, NamespaceKeys, erasure_marker, invert_id
from langgraph_s3.core.ports import ManifestPort, ObjectStorePort
from langgraph_s3.core.records import (
    Entry,
    Listed,
)
from langgraph_s3.core.report import Report
from langgraph_s3.core.retry import LOST, Done, Retry, cas
from langgraph_s3.core.tasks import bounded_map, gather_all
from langgraph_s3.core.values import value_keys
from langgraph_s3.errors import (
    CheckpointConflictError,
    ConflictError,
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
"""A pack no manifest entry names and no packing's mark names (one an earlier version
stored, which marked at its switch) is removed by the next packing of its thread once
it is this old (a packer between its PUT and its switch is never that slow). A pack
whose mark ran out goes at once (``Packing._orphans``)."""


class Shared:
    """What every whole-thread operation shares: the listing compare-and-swap, the
    wait for deletions in progress, the deletes of a removal and their marks."""

    def __init__(self, ctx: SaverContext, serde: SerializerProtocol) -> None:
        self.ctx, self.serde = ctx, serde
        self.objects, self.layout = ctx.objects, ctx.layout
        self.settling = settling(ctx.manifest, ctx.objects, ctx.layout)
        self.manifest: ManifestPort = self.settling
        """The manifest, what its items hold stored first (``settling.py``)."""
        packed = packed_view(ctx.objects)
        self.packed = packed
        self.raw: ObjectStorePort = packed.inner if packed is not None else ctx.objects
        """The objects as S3 lists them (a packed thread's are in its pack)."""
        self.restored: dict[str, float] = {}
        """Key -> when its pack was made, for the objects this call unpacked: their
        LastModified is the unpacking's, not when they were first stored."""

    def keys(self, entry: Entry) -> NamespaceKeys:
        return self.layout.namespace(entry.thread_id, entry.checkpoint_ns)

    async def fresh(self, entry: Entry) -> Entry | None:
        return await self.manifest.reads.latest(entry.thread_id, entry.checkpoint_ns)

    async def past_deletions(
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
            more = [e for back in await bounded_map(self.undeleted, threads) for e in back]
            done += more
            reports += await bounded_map(job, more, settle=True)
        if deleted:
            raise ConflictError(
                f"threads {sorted(deleted)[:5]!r} were deleted, and put back by a failing "
                "deletion, again and again meanwhile: run it again"
            )
        return done, reports

    async def undeleted(self, thread: str) -> list[Entry]:
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
            raw = await self.manifest.reads.read(thread, "")
            now = self.manifest.now()
            if raw is None or not raw.tombstone:
                return await self.manifest.reads.namespaces(thread)
            until = raw.deletion_held(now)
            if until <= now:
                return []  # deleted for good
            await asyncio.sleep(min(until - now, poll))
            poll = min(poll * 2, LEASE_POLL_MAX)

    async def listing_cas(
        self, entry: Entry, what: str, commit: Commit, deleted: set[str] | None = None
    ) -> Report:
        """Read the entry and the namespace's checkpoint listing, then ``commit``;
        read both again while a writer moved the entry meanwhile (``deleted``: gets the
        thread when it was found deleted meanwhile)."""
        keys = self.keys(entry)
        current: Entry | None = entry

        async def read() -> tuple[Entry | None, list[Listed]]:
            nonlocal current
            if current is None:
                return current, []
            if current.inline or current.writes:  # a listing never leaves out what it holds
                current = (await self.settling.settle_entries([current]))[0]
            # what this process cached of an earlier life (an import's replace reuses
            # the keys, not the bytes) must not decide what the new one refers to
            self.ctx.enter_life(keys.prefix, current.life)
            if self.packed is not None:  # list through the pack the entry names
                self.packed.note(self.layout.thread(current.thread_id), current.pack)
            try:
                return current, await self.objects.list_all(keys.checkpoints)
            except PackGoneError as gone:
                await self.repacked_or_raise(current, gone)
                return current, [REPACKED]

        async def update(state: tuple[Entry | None, list[Listed]]) -> Done[Report] | Retry:
            nonlocal current
            at, listed = state
            if at is None:
                if deleted is not None:
                    deleted.add(entry.thread_id)
                return Done(Report())  # deleted meanwhile
            if listed == [REPACKED]:
                done: Report | bool | None = False  # repacked while listed: again
            else:
                try:
                    done = await commit(at, keys, listed)
                except PackGoneError as gone:
                    await self.repacked_or_raise(at, gone)
                    done = False  # its pack was replaced meanwhile: read again
            if isinstance(done, Report):
                return Done(done)
            if done is None:
                # nothing to do, by a listing made through the pack ``at`` named: only
                # if the thread was not packed or unpacked since (its objects moved)
                fresh = await self.fresh(at)
                if fresh is None or (fresh.pack, fresh.packings) == (at.pack, at.packings):
                    return Done(Report())
                current = fresh
                return LOST
            current = await self.fresh(at)
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

    async def repacked_or_raise(self, entry: Entry, gone: PackGoneError) -> None:
        """A pack went missing under a maintenance call: go on when the thread was
        repacked or unpacked meanwhile; raise ``gone`` (corruption, named) when the
        manifest still names the missing pack."""
        root = await self.manifest.reads.latest(entry.thread_id, "")
        if root is not None and root.pack is not None and root.pack.key == gone.key:
            raise gone

    async def drop_checkpoints(
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
        drop += [o.key for o in blisted if o.key not in referenced and self.mtime(o) < cutoff]
        drop += [
            o.key
            for o in hlisted
            if keys.checkpoints + o.key[len(keys.moved) :] not in referenced
            and self.mtime(o) < cutoff
        ]
        if not self.in_time(until, keys.thread_id):
            drop = []
        # a removed checkpoint stored lately (a held copy stored by this call or by its
        # writer, whose own PUT may still be on its way) gets an erasure marker
        # instead: that late PUT finds the key taken and brings nothing back
        since = self.manifest.now() - late_put_seconds(self.ctx.limits.request_timeout)
        doomed_keys = {ck.key for ck in doomed}
        recent = {o.key for o in listed if o.key in doomed_keys and self.mtime(o) >= since}
        await gather_all(
            self.objects.delete([k for k in drop if k not in recent]),
            bounded_map(mark_erased(self.raw), sorted(recent & set(drop))),
        )
        sizes = {o.key: o.size for o in (*listed, *wlisted, *blisted, *hlisted)}
        gone = set(drop)
        return Report(
            namespaces=1,
            # those of the history: one below the floor left its history earlier
            checkpoints=len({ck.checkpoint_id for ck in doomed if ck.checkpoint_id >= floor}),
            objects=len(gone),
            bytes=sum(sizes.get(k, 0) for k in gone),
        )

    async def unmark(self, thread: str, checkpoint_ns: str, mark: str) -> None:
        """Take a removal's mark off; one that cannot be (the table failing) runs out
        by itself (``DELETE_LEASE_SECONDS``): what the removal did stands."""
        try:
            await self.manifest.upkeep.unmark(thread, checkpoint_ns, mark)
        except S3PersistenceError as exc:
            logger.warning(
                "the mark of a removal in thread %r stays until it runs out: %s", thread, exc
            )

    def in_time(self, until: float, thread: str) -> bool:
        """Whether a removal's mark still holds (a margin for clocks and the request)."""
        if self.manifest.now() < until - MARK_MARGIN_SECONDS:
            return True
        logger.warning("a removal in thread %r outlasted its mark; objects left", thread)
        return False

    def mtime(self, o: Listed) -> float:
        """When an object was first stored (an unpacked one: when its pack was made)."""
        return self.restored.get(o.key, o.modified)

    def modified(self, listed: Sequence[Listed], entry: Entry, keys: NamespaceKeys) -> float:
        """When the latest checkpoint was stored: the cutoff for unreferenced blobs (a
        writer's blob stored after it, not yet committed, stays)."""
        key = keys.checkpoint_at(entry.latest_tail)
        o = next((o for o in listed if o.key == key), None)
        if o is None:
            return 0.0
        return o.modified if o.key not in self.restored else self.restored[o.key] + 1.0


def listed_by_id(keys: NamespaceKeys, listed: Sequence[Listed]) -> dict[str, CheckpointKey]:
    """The checkpoints of ``keys``' namespace in a thread's listing, by id."""
    mine = (o.key for o in listed if o.key.startswith(keys.checkpoints))
    return {ck.checkpoint_id: ck for ck in keys.listed_checkpoints(mine)}


def pack_time(key: str, now: float) -> float:
    """When a pack was made, from its name (``Layout.pack``); ``now`` if unreadable."""
    made = Layout.pack_made(key)
    return now if made is None else made


REPACKED = Listed("", "", 0.0, 0)


def same_objects(before: list[Entry], after: list[Entry]) -> bool:
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


def line_of(
    latest: CheckpointKey, by_id: dict[str, CheckpointKey], floor: str
) -> list[CheckpointKey]:
    """The latest and its ancestors in the listing, newest first, down to the floor."""
    out = [latest]
    parent = latest.parent_id
    while parent is not None and parent >= floor and parent in by_id:
        out.append(by_id[parent])
        parent = by_id[parent].parent_id
    return out


def counted(thread_prefix: str, listed: Sequence[Listed], *, threads: int = 0) -> Report:
    """A Report of the objects of one thread listed under ``thread_prefix``: an earlier
    deletion's erasure markers hold nothing, and are not counted."""
    listed = [o for o in listed if not erasure_marker(thread_prefix, o.key, o.size)]
    namespaces: set[str] = set()
    checkpoints = 0
    for o in listed:
        found = Layout.kind_in_thread(thread_prefix, o.key)
        if found is not None:
            namespaces.add(found[0])
            checkpoints += found[1] == "c"
    return Report(
        threads=threads,
        namespaces=len(namespaces),
        checkpoints=checkpoints,
        objects=len(listed),
        bytes=sum(o.size for o in listed),
    )
