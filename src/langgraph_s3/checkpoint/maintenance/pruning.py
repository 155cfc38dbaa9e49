"""prune: a retention rule over each namespace's latest line."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from langgraph_s3.checkpoint.maintenance.base import (
    Shared,
    line_of,
)
from langgraph_s3.checkpoint.maintenance.packing import Packing
from langgraph_s3.checkpoint.packs import PackGoneError
from langgraph_s3.core import codec
from langgraph_s3.core.keys import CheckpointKey, NamespaceKeys
from langgraph_s3.core.records import (
    Entry,
    Listed,
    mark_until,
    removal_mark,
    uuid6_time,
)
from langgraph_s3.core.report import Report
from langgraph_s3.core.tasks import bounded_map
from langgraph_s3.errors import (
    ConflictError,
    CorruptObjectError,
    NotFoundError,
)


class Pruning:
    """prune: each namespace keeps its latest line's newest checkpoints."""

    def __init__(self, shared: Shared, packing: Packing) -> None:
        self.shared = shared
        self.packing = packing
        self.ctx, self.serde, self.manifest = shared.ctx, shared.serde, shared.manifest
        self.objects, self.layout = shared.objects, shared.layout
        self.packed, self.raw = shared.packed, shared.raw

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
            entries = await self.manifest.reads.namespaces(thread)
            deleted = set() if entries else {thread}
            total += await self._prune_entries(thread, entries, rule, deleted)
            if not deleted or not await self.shared.undeleted(thread):
                break
        else:
            raise ConflictError(
                f"thread {thread!r} was deleted, and put back by a failing deletion, again "
                "and again while it was pruned: prune it again"
            )
        acted = bool(total.checkpoints or total.objects)
        total.threads, total.skipped = (1, 0) if acted else (0, 1)
        return total

    async def prune_plan(self, thread: str, rule: Keep) -> Report:
        """What :meth:`prune_thread` would remove from ``thread`` now, nothing written
        (a packed thread is read through its pack, not unpacked). Cost: a Query, and
        per namespace a LIST of its checkpoints and a GET of its latest."""
        entries = await self.manifest.reads.namespaces(thread)
        pack = next((e.pack for e in entries if e.pack is not None), None)
        if pack is not None and self.packed is not None:
            self.packed.note(self.layout.thread(thread), pack)
        reports = await bounded_map(lambda e: self._prune_ns(e, rule, dry=True), entries)
        total = sum(reports, Report())
        total.threads, total.skipped = (1, 0) if total.checkpoints else (0, 1)
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
            await self.packing.unpack_thread(thread)
            entries = await self.manifest.reads.namespaces(thread)
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
            line = line_of(latest, by_id, at.floor) if latest is not None else []
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
            if dry:  # what it would remove, nothing written (below the floor: gone for
                # readers already, kept while they hold values: not counted again)
                live = {ck.checkpoint_id for ck in doomed if ck.checkpoint_id >= at.floor}
                return Report(namespaces=1 if live else 0, checkpoints=len(live))
            removed = {ck.checkpoint_id for ck in doomed}
            mark = removal_mark(self.manifest.now())
            if not await self.manifest.upkeep.raise_floor(at, min(kept), removed, mark=mark):
                return False
            try:
                try:
                    report = await self.shared.drop_checkpoints(
                        keys,
                        listed,
                        doomed,
                        keep,
                        self.shared.modified(listed, at, keys),
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
                await self.shared.unmark(at.thread_id, at.checkpoint_ns, mark)

        return await self.shared.listing_cas(entry, "prune", commit, deleted)

    async def _moved(self, entry: Entry) -> bool:
        """Whether the entry changed (or went) since it was read."""
        fresh = await self.shared.fresh(entry)
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
