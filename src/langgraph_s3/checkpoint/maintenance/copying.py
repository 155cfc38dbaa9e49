"""copy_thread: a snapshot of one thread becomes (part of) another."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from langgraph_s3.checkpoint.history import channels_to_replay, with_spilled
from langgraph_s3.checkpoint.maintenance.base import (
    LEASE_POLL,
    Shared,
    counted,
    listed_by_id,
    logger,
    same_objects,
)
from langgraph_s3.checkpoint.maintenance.deletion import ThreadDeletion
from langgraph_s3.checkpoint.packs import PackGoneError
from langgraph_s3.core.records import (
    Entry,
    Expiry,
    Listed,
    Raw,
)
from langgraph_s3.core.report import Report
from langgraph_s3.core.retry import LOST, Done, Retry, cas
from langgraph_s3.core.tasks import bounded_map
from langgraph_s3.errors import (
    CheckpointConflictError,
    NotFoundError,
)


@dataclass
class _Rounds:
    """What the rounds of one copy_thread share."""

    copied: set[tuple[str, str]] = field(default_factory=set)
    """(key, ETag) of each source object copied: a later round copies only news."""
    landed: set[tuple[str, str]] = field(default_factory=set)
    """(namespace prefix, id) of each checkpoint an earlier round listed."""
    report: Report = field(default_factory=Report)
    owned: bool = True
    """No round found a live item of the target (none, or tombstones of ended lives):
    what the copy wrote there is its own to take back."""
    root_rev: int | None = None
    """The target's root item's ``rev`` as last read (None: there was none)."""
    lives: dict[str, str | None] | None = None
    """Each target namespace's life as last read (None: no item, or a tombstone)."""
    wrote: bool = False
    """A CopyObject into the target was begun (one cut short may have landed)."""
    removals: set[tuple[str, int]] = field(default_factory=set)
    """(namespace, rev) of the target's tombstones met so far."""


class Copying:
    """copy_thread: the target gains a snapshot of the source (and a copy that ends
    without committing takes back what it wrote: :meth:`_abandon`)."""

    def __init__(self, shared: Shared, deletion: ThreadDeletion) -> None:
        self.shared = shared
        self.deletion = deletion
        self.ctx, self.serde, self.manifest = shared.ctx, shared.serde, shared.manifest
        self.objects, self.layout = shared.objects, shared.layout
        self.packed, self.raw = shared.packed, shared.raw

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

        A copy that ends without committing (its source deleted, rolled back to
        nothing or replaced meanwhile, or an error) after it wrote objects into a
        target that had no item removes them again, as a deletion of the target
        would: otherwise no item would ever lead a deletion or a sweep to them, and
        the source's content would outlive the source.
        """
        if src == dst:
            return Report(skipped=1)  # a thread is already a copy of itself
        rounds = _Rounds()
        try:
            done = await cas(
                lambda: self._read_both(src, dst),
                lambda state: self._copy_round(src, dst, state, rounds),
                attempts=self.ctx.limits.max_conflicts,
                what=f"copy_thread({src!r}, {dst!r})",
                error=CheckpointConflictError,
            )
        except BaseException:  # a cancel too (a timeout, a client gone): take back
            if rounds.wrote and rounds.owned:
                await asyncio.shield(self._abandon(dst, rounds.root_rev, quiet=True))
            raise
        if done.skipped and rounds.wrote and rounds.owned:
            await self._abandon(dst, rounds.root_rev)
        return done

    async def _read_both(self, src: str, dst: str) -> tuple[list[Entry], list[Raw | None]]:
        """The source's entries, then the target's item of each of their namespaces."""
        entries = await self.manifest.reads.namespaces(src)
        targets = await bounded_map(
            lambda e: self.manifest.reads.read(dst, e.checkpoint_ns), entries
        )
        return entries, targets

    async def _copy_round(
        self, src: str, dst: str, state: tuple[list[Entry], list[Raw | None]], rounds: _Rounds
    ) -> Done[Report] | Retry:
        """One round: list, copy what is new, read the entries again, commit."""
        entries, targets = state
        wait = self._meet_target(entries, targets, rounds)
        if wait is not None:
            return wait
        if not entries:
            return Done(Report(skipped=1))
        prefix = self.layout.thread(src)
        for e in entries:  # the source's cached objects of an earlier life go
            self.ctx.enter_life(self.shared.keys(e).prefix, e.life)
        if self.packed is not None:  # read through the pack these entries name
            root = next((e for e in entries if not e.checkpoint_ns), None)
            self.packed.note(prefix, root.pack if root is not None else None)
        self.ctx.forget(self.layout.thread(dst))
        try:
            listed = await self.objects.list_all(prefix)
            wanted = self._snapshot(src, entries)
            todo = [o for o in listed if (o.key, o.etag) not in rounds.copied and wanted(o.key)]
            rounds.wrote = rounds.wrote or bool(todo)  # a copy cut short may have landed
            await bounded_map(
                lambda o: self.objects.copy(
                    o.key, self.layout.rehome(o.key, src, dst), if_match=o.etag or None
                ),
                todo,
            )
        except (PackGoneError, NotFoundError):
            return LOST  # packed, unpacked or removed while copied: read again
        rounds.copied.update((o.key, o.etag) for o in todo)  # a later round copies only news
        rounds.report = rounds.report + counted(prefix, todo)
        # as the manifest is (nothing stored): what changed while the copy listed
        after = await self.ctx.manifest.reads.namespaces(src)
        if not same_objects(entries, after):
            return LOST  # objects may have moved or gone while they were copied
        raced = self._raced_landing(entries, after, listed, rounds.landed)
        rounds.landed.update(self._listed_ids(entries, listed))
        if raced:
            return LOST  # a commit may have come before a latest landed: read again
        inline = await bounded_map(lambda e: self._as_seen(e, listed), entries)
        pairs = [(e, t) for e, t in zip(inline, targets, strict=True) if e is not None]
        if not pairs:
            return Done(Report(skipped=1))  # nothing a reader could see yet
        await self._note_runs(dst, entries, listed)  # before the copy is visible
        merged = await bounded_map(lambda p: self.manifest.upkeep.merge(dst, p[0], p[1]), pairs)
        if not all(merged):
            return LOST
        rounds.report.threads, rounds.report.namespaces = 1, len(pairs)
        return Done(rounds.report)

    def _meet_target(
        self, entries: list[Entry], targets: list[Raw | None], rounds: _Rounds
    ) -> Retry | None:
        """What the target's items say: a deletion of it since an earlier round (what
        was copied may be gone: copy it all again), one still under way (wait)."""
        if any(t is not None and not t.tombstone for t in targets):
            rounds.owned = False
        if entries:  # none: the source is gone, the target as the last round read it
            root = next(
                (t for e, t in zip(entries, targets, strict=True) if not e.checkpoint_ns), None
            )
            rounds.root_rev = root.rev if root is not None else None
            lives = {
                e.checkpoint_ns: (t.life if t is not None and not t.tombstone else None)
                for e, t in zip(entries, targets, strict=True)
            }
            if rounds.lives is not None and lives != rounds.lives:
                rounds.copied.clear()  # the target began (or ended) a life since: copy it all
            rounds.lives = lives
        tombs = {
            (e.checkpoint_ns, t.rev)
            for e, t in zip(entries, targets, strict=True)
            if t is not None and t.tombstone
        }
        if tombs - rounds.removals:
            rounds.removals.update(tombs)
            rounds.copied.clear()
        now = self.ctx.clock()
        leased = [r.held_until(now) for r in targets if r is not None and r.tombstone]
        if leased and max(leased) > now:  # the target is being deleted
            return Retry(after=min(max(leased) - now, LEASE_POLL))
        return None

    async def _abandon(self, dst: str, root_rev: int | None, *, quiet: bool = False) -> None:
        """Remove what a copy that never committed wrote into ``dst``, if ``dst``'s root
        is still as the copy last read it (absent, or a tombstone of an ended life at
        ``root_rev``): tombstoned as an expired thread is (conditioned on that, so a
        copy or a writer that committed there meanwhile keeps it, and one still copying
        starts over once the tombstone's lease ends), then listed and removed. Cost: as
        a TTL sweep of one thread (an UpdateItem, a Query, a LIST, the DeleteObjects and
        the erasure markers, an UpdateItem), on this path only. ``quiet``: the copy is
        failing already; a failure here is logged, not raised."""
        try:
            await self.deletion.sweep_thread(Expiry(dst, root_rev))
        except Exception:
            if not quiet:
                raise
            logger.warning(
                "copy_thread: what it wrote into %r is left (its removal failed): a later "
                "delete_thread of the id, or the stream handler once its tombstone expires, "
                "removes it",
                dst,
            )

    async def _note_runs(self, dst: str, entries: list[Entry], listed: Sequence[Listed]) -> None:
        """Name the copy in the run index under each run its checkpoints belong to
        (a PutItem per run, concurrently), so that rolling a run back reaches it."""
        runs = {
            ck.run_token
            for keys in map(self.shared.keys, entries)
            for ck in keys.listed_checkpoints(
                o.key for o in listed if o.key.startswith(keys.checkpoints)
            )
            if ck.run_token
        }
        await bounded_map(lambda token: self.manifest.commits.note_run(dst, token), sorted(runs))

    def _listed_ids(self, entries: list[Entry], listed: Sequence[Listed]) -> set[tuple[str, str]]:
        """(namespace prefix, checkpoint id) of each checkpoint listed in ``entries``'
        namespaces."""
        return {
            (keys.prefix, cid)
            for keys in map(self.shared.keys, entries)
            for cid in listed_by_id(keys, listed)
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
            keys = self.shared.keys(e)
            if (keys.prefix, e.latest_id) in landed:
                continue  # listed before these entries were read: it had landed
            new = now[e.checkpoint_ns].tips - e.tips
            if not new:
                continue
            by_id = listed_by_id(keys, listed)
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
        keys = self.shared.keys(entry)
        full = await with_spilled(self.objects, keys, entry)
        heads = full.heads | full.spilled_heads
        by_id = listed_by_id(keys, listed)
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
        newest = {self.shared.keys(e).prefix: e.latest_id for e in entries}

        def wanted(key: str) -> bool:
            ns_prefix = self.layout.namespace_prefix_of(top, key)
            if ns_prefix is None:
                return True
            if ns_prefix not in newest:
                return False  # a namespace of another life, or one begun since
            if (self.layout.kind_in_thread(top, key) or ("", ""))[1] == "t":
                return False  # tip markers: the copy gets the heads inline
            cid = self.layout.checkpoint_id_of(thread, key)
            return cid is None or cid <= newest[ns_prefix]

        return wanted
