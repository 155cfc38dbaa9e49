"""A thread's deletion and the TTL sweep: the manifest first, then the objects."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

from langgraph_s3.checkpoint.erasure import (
    LATE_RETRY_SECONDS,
    late_pass_seconds,
    late_put_seconds,
    mark_erased,
)
from langgraph_s3.checkpoint.maintenance.base import (
    Shared,
    counted,
    logger,
)
from langgraph_s3.checkpoint.maintenance.late import leftovers, upto_of
from langgraph_s3.core.keys import Layout, erasure_marker
from langgraph_s3.core.records import (
    Deletion,
    Expiry,
    Late,
    Listed,
    PackRef,
    Raw,
)
from langgraph_s3.core.report import Progress, Report
from langgraph_s3.core.shards import Shard
from langgraph_s3.core.tasks import bounded_map, committed, gather_all
from langgraph_s3.errors import (
    CorruptObjectError,
    S3PersistenceError,
)


class ThreadDeletion:
    """delete_thread and the TTL sweep: tombstone first, then the objects."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.ctx, self.serde, self.manifest = shared.ctx, shared.serde, shared.manifest
        self.objects, self.layout = shared.objects, shared.layout
        self.packed, self.raw = shared.packed, shared.raw

    # ------------------------------------------------------------------ setup
    async def migrate(self) -> None:
        """Adopt the entries langgraph-s3 0.1 wrote (keyed by thread alone) whose latest
        checkpoint lies in this deployment's bucket and prefix."""
        async for legacy in self.manifest.setup.legacy_entries():
            keys = self.shared.keys(legacy)
            if await self.objects.get(keys.checkpoint_at(legacy.latest_tail)) is not None:
                await self.manifest.setup.adopt(legacy)

    # --------------------------------------------------------------- deleting
    async def delete_thread(self, thread: str) -> Report:
        """Tombstone every namespace (the thread is gone for every reader at once),
        then remove the objects, then let a new life on the id begin."""
        try:
            deletion = await self.manifest.deletions.tombstone(thread)
            return await self._remove(thread, deletion, undo=deletion)
        except S3PersistenceError as exc:
            exc.add_note(
                f"delete_thread({thread!r}) did not finish: the thread is as it was, or, "
                "when putting it back failed too, reads as deleted while its objects (and "
                "the items' held copies, for the lease's 2 minutes) are not erased yet: "
                "call it again (it is idempotent)"
            )
            raise

    async def sweep_thread(self, expiry: Expiry, *, spare_from: str | None = None) -> Report:
        """Remove a thread whose TTL passed, as :meth:`delete_thread` does, if it is
        still the expired one (a new conversation on the id sweeps it itself).

        ``spare_from``: the first checkpoint of that new conversation; it and every
        newer checkpoint keep their objects and writes (written beside it, before
        its commit), since the expired life's are all older.
        """
        deletion = await self.manifest.deletions.tombstone_expired(expiry)
        if deletion is None:
            return Report(skipped=1)
        spare = None
        if spare_from is not None:
            start = spare_from

            def spare(key: str) -> bool:
                cid = self.layout.checkpoint_id_of(expiry.thread_id, key)
                return cid is not None and cid >= start

        return await self._remove(expiry.thread_id, deletion, spare)

    async def late_pass(self, thread: str, late: Late) -> Report:
        """A deletion's second pass, :func:`late_pass_seconds` after it began: what a
        PUT sent before it (a frozen writer's ``put_writes``) brought back after it
        listed the thread goes. A thread still deleted is removed again, as a sweep
        does (its stale erasure markers with it); one that lives again keeps its
        life's objects and loses the ended life's writes (``late.leftovers``). A deletion in
        progress leaves the pass to a later sweep; the record goes once it is done.

        An import staging the thread (``core.staging``) defers the pass 5 minutes:
        its objects are not named by any item yet.

        Cost: 2 GetItems; then a sweep's (:meth:`sweep_thread`), or 2 Queries, 2 LISTs
        (per 1,000 objects), 1 GET per pack and 1 DeleteObjects per 1,000 removed; 1
        DeleteItem.
        """
        raw, claim = await gather_all(
            self.manifest.reads.read(thread, ""), self.manifest.staging.staged_claim(thread)
        )
        now = self.manifest.now()
        if raw is not None and raw.tombstone and raw.held_until(now) > now:
            return Report(skipped=1)  # that deletion records a later pass of its own
        if claim is not None and claim.until > now:
            report = Report(skipped=1)  # an import's objects, not named by an item yet
        elif raw is None or raw.tombstone:
            report = await self._still_deleted(thread, raw, late.upto)
        else:
            report = await self._later_life(thread, late.upto)
        if report.skipped:  # changed meanwhile: again later (the record may be gone)
            again = Late(int(now + LATE_RETRY_SECONDS), late.upto)
            await self.manifest.deletions.note_late(thread, again)
        else:
            await self.manifest.deletions.late_done(thread, late.due)
        return report

    async def drop_stage(self, thread: str, token: str, *, dead: bool = False) -> Report:
        """Drop import ``token``'s stage (``core.staging``): a failed import cleaning
        up, or (``dead``) one the sweep found whose claim ran out or names another
        import. Its items go, and what it wrote goes with a late pass run at once
        (recorded first: a removal cut short is finished by the next sweep). The
        thread keeps any life it has: only objects no history of it holds go.

        Cost: the manifest's ``unstage`` (1 GetItem, 1 Query, about 3 writes), then
        a :meth:`late_pass`; 1 GetItem and 1 Query when there is nothing to drop."""
        late = await self.manifest.staging.unstage(thread, token, dead=dead)
        if late is None:
            return Report(skipped=1)
        return await self.late_pass(thread, late)

    async def _still_deleted(self, thread: str, raw: Raw | None, upto: str) -> Report:
        """The late pass over a thread still deleted: swept again, as a TTL sweep does,
        but for the checkpoints (and their writes) made since ``upto``: a conversation
        begun on the id may have stored them before its first commit."""
        deletion = await self.manifest.deletions.tombstone_expired(
            Expiry(thread, raw.rev if raw else None)
        )
        if deletion is None:
            return Report(skipped=1)  # a new life, or another sweep, came first

        def spare(key: str) -> bool:
            cid = self.layout.checkpoint_id_of(thread, key)
            return cid is not None and cid > upto

        return await self._remove(thread, deletion, spare, again=True)

    async def _later_life(self, thread: str, upto: str) -> Report:
        """The late pass over a thread that lives again: its entries read before and
        after its listing, and the pass made only when none changed between (a busy
        thread is left to a later sweep after ``max_conflicts`` tries)."""
        prefix = self.layout.thread(thread)
        for _ in range(self.ctx.limits.max_conflicts):
            before = await self.manifest.reads.namespaces(thread)
            listed, packs = await gather_all(
                self.raw.list_all(prefix), self.raw.list_all(self.layout.packs(thread))
            )
            packed = [o.key for o in await self._packed_keys(packs)]
            after = await self.manifest.reads.namespaces(thread)
            if [(e.checkpoint_ns, e.rev) for e in before] == [
                (e.checkpoint_ns, e.rev) for e in after
            ]:
                break
        else:
            return Report(skipped=1)
        found = (after, listed, packed)
        gone = await leftovers(self.layout, self.raw, thread, found, upto)
        await self.raw.delete([o.key for o in gone])
        return counted(prefix, gone, threads=1 if gone else 0)

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
            raw = await self.manifest.reads.read(thread, "")
            born = raw.born if raw and raw.committed else ""
            if not born:  # deleted meanwhile, or pruned already: leave it to that
                return Report(skipped=1)
            # no late first writer may join the new life with a root older than born
            # (it would be one of the objects deleted below): it is refused instead
            if await self.manifest.upkeep.seal_born(thread, born):
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
        return counted(self.layout.thread(thread), gone, threads=1 if gone else 0)

    async def sweep(self, progress: Progress | None = None, shard: Shard | None = None) -> Report:
        """Remove every thread of the deployment (of ``shard``) whose TTL passed."""
        total = Report()
        done = found = 0

        async def one(expiry: Expiry) -> Report:
            nonlocal total, done
            if expiry.stage is not None:
                report = await self.drop_stage(expiry.thread_id, expiry.stage, dead=True)
            elif expiry.late is not None:
                report = await self.late_pass(expiry.thread_id, expiry.late)
            else:
                report = await self.sweep_thread(expiry)
            total, done = total + report, done + 1
            if progress is not None:
                progress(total, done, found)
            return report

        try:
            async for page in self.manifest.reads.expired(shard=shard):
                found += len(page)
                await bounded_map(one, page)
        except S3PersistenceError as exc:  # the others were cancelled: a rerun finishes
            exc.add_note(f"done before this failure, on {done} of {found} threads: {total}")
            raise
        return total

    async def _remove(
        self,
        thread: str,
        deletion: Deletion,
        spare: Callable[[str], bool] | None = None,
        *,
        undo: Deletion | None = None,
        again: bool = False,
    ) -> Report:
        """A deletion's objects go (but those ``spare`` names), then its lease ends.
        Called once the tombstone is written: a sibling's failure lets it finish. One
        that fails before removing anything puts the thread back (``undo``: the
        tombstones' deletion), so the failed call leaves the thread as it was. A key
        a PUT may still be on its way to gets an erasure marker (``erasable``), and a
        late pass is recorded (unless this is one, ``again``): a write's PUT sent before
        the tombstone may land after this listing."""
        stamp, items = deletion.stamp, deletion.keys
        committed()
        self.ctx.forget(self.layout.thread(thread))
        now = self.manifest.now()
        try:
            listed, packs = await gather_all(
                self.raw.list_all(self.layout.thread(thread)),
                self.raw.list_all(self.layout.packs(thread)),
            )
            # an earlier removal's erasure markers made within the window stay: a PUT
            # of that life may still be on its way (older ones go with the rest)
            prefix = self.layout.thread(thread)
            since = self.manifest.now() - late_put_seconds(self.ctx.limits.request_timeout)
            listed = [
                o
                for o in listed
                if not (erasure_marker(prefix, o.key, o.size) and o.modified >= since)
            ]
            if spare is not None:
                listed = [o for o in listed if not spare(o.key)]
            inside = await self._packed_keys(packs)
            held = {o.key: o for o in [*inside, *listed]}
            due = int(now + late_pass_seconds(self.ctx.limits.request_timeout))
            upto = upto_of(self.layout, thread, [*held, *self._held_keys(thread, deletion)], now)
            late = () if again else (self.manifest.deletions.note_late(thread, Late(due, upto)),)
            renewed, *_ = await gather_all(self.manifest.deletions.renew(items, stamp), *late)
        except S3PersistenceError:
            if undo is not None:  # nothing removed yet: as if it never began
                with contextlib.suppress(S3PersistenceError):  # the failure is the news
                    await self.manifest.deletions.revive(undo)
            raise
        report = counted(self.layout.thread(thread), list(held.values()))
        stored = [o for o in listed if not erasure_marker(prefix, o.key, o.size)]
        report.objects, report.bytes = (
            len(stored) + len(packs),
            sum(o.size for o in (*stored, *packs)),
        )
        if not renewed:
            # the lease ran out (a stalled process) and a new conversation began: its
            # objects may be in the listing, so this deletion stops; the rest is garbage
            logger.warning("delete_thread(%r) outlasted its lease; objects left", thread)
            return Report(skipped=1)
        # the keys a late PUT may reach are marked first (a marker replaces what is
        # there): a deletion cut short here leaves the rest listed for its next attempt
        # (a late pass comes after every such PUT: it marks nothing)
        erasable = set() if again else self._erasable(thread, deletion, [*listed, *inside])
        await bounded_map(mark_erased(self.raw), sorted(erasable))
        await self.raw.delete([o.key for o in (*listed, *packs) if o.key not in erasable])
        await self.manifest.deletions.release(items, stamp)
        if self.packed is not None:
            self.packed.note(self.layout.thread(thread), None)
        report.threads = 1
        return report

    def _erasable(self, thread: str, deletion: Deletion, listed: list[Listed]) -> set[str]:
        """The keys a PUT begun before the tombstone may still reach: the checkpoints
        the items held or named latest (their writers may be frozen before their PUTs
        landed), and checkpoints stored within :func:`late_put_seconds`, loose or in a
        pack made since (one whose copy another process stored and took out while its
        writer's own PUT was on its way). ``listed``: the loose objects and the packs'
        keys (``_packed_keys``: each dated by its pack)."""
        keys = self._held_keys(thread, deletion)
        since = self.manifest.now() - late_put_seconds(self.ctx.limits.request_timeout)
        prefix = self.layout.thread(thread)
        for o in listed:
            found = Layout.kind_in_thread(prefix, o.key)
            if o.modified >= since and found is not None and found[1] == "c":
                keys.add(o.key)
        return keys

    def _held_keys(self, thread: str, deletion: Deletion) -> set[str]:
        """The checkpoint keys of the copies the deletion's items held or named latest."""
        return {self.layout.namespace(thread, ns).held_key(t) for ns, t in deletion.held}

    async def _packed_keys(self, packs: Sequence[Listed]) -> list[Listed]:
        """The keys the packs hold (their indexes read), each dated by its pack."""
        if self.packed is None:
            return []
        out: list[Listed] = []
        for o in packs:
            try:
                index = await self.packed.index(PackRef(o.key, o.size, 0, 0))
            except CorruptObjectError:
                continue  # counted as an object; what it held is not known
            thread = self.layout.thread_of_pack(o.key)
            if thread is not None:
                out += [Listed(thread + rel, "", o.modified, 0) for rel in index.entries]
        return out
