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
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from langgraph.checkpoint.serde.base import SerializerProtocol

from . import codec, logs
from .context import SaverContext
from .errors import CheckpointConflictError, CorruptObjectError
from .history import channels_to_replay, lineage_of
from .keys import CheckpointKey, NamespaceKeys, encode, invert_id
from .manifest import Entry, Fields, Raw, uuid6_time
from .objects import Listed
from .retry import LOST, Done, Retry, cas
from .tasks import bounded_map, gather_all
from .values import value_keys

logger = logging.getLogger(__name__)

Commit = Callable[[Entry, NamespaceKeys, list[Listed]], Awaitable[bool | None]]

LEASE_POLL = 0.25
"""Seconds between looks at a target thread another call is deleting (and at an object
in flight)."""
IN_FLIGHT_SECONDS = 120.0
"""How long a committed latest whose object is not listed counts as a put in flight
(a request's own deadline is 25 s by default, 5 attempts at most within it); older,
its writer died between its two requests and it never lands."""


class Maintenance:
    """Whole-thread operations (one per call: see context.py)."""

    def __init__(self, ctx: SaverContext, serde: SerializerProtocol) -> None:
        self.ctx, self.serde = ctx, serde
        self.objects, self.manifest, self.layout = ctx.objects, ctx.manifest, ctx.layout

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
    async def delete_thread(self, thread: str) -> None:
        """Tombstone every namespace (the thread is gone for every reader at once),
        then remove the objects, then let a new life on the id begin."""
        stamp, items = await self.manifest.tombstone(thread)
        self.ctx.forget(self.layout.thread(thread))
        listed = await self.objects.list_all(self.layout.thread(thread))
        if not await self.manifest.renew(items, stamp):
            # the lease ran out (a stalled process) and a new conversation began: its
            # objects may be in the listing, so this deletion stops; the rest is garbage
            logger.warning("delete_thread(%r) outlasted its lease; objects left", thread)
            return
        await self.objects.delete([o.key for o in listed])  # evicts them from the cache
        await self.manifest.release(items, stamp)

    async def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Remove every checkpoint the runs wrote, in every thread of the deployment."""
        tokens = {encode(str(r), "run_id") for r in run_ids}
        if not tokens:
            return
        entries: list[Entry] = []
        async for page in self.manifest.scan():
            entries.extend(page)
        # namespaces are independent: one failing does not cut the others short
        await bounded_map(lambda e: self._delete_runs_in(e, tokens), entries, settle=True)

    async def _listing_cas(self, entry: Entry, what: str, commit: Commit) -> None:
        """Read the entry and the namespace's checkpoint listing, then ``commit`` (a
        conditional manifest write, then deletes): True when done, False when a
        writer moved the entry meanwhile (read both again), None when nothing to do."""
        keys = self._keys(entry)
        current: Entry | None = entry

        async def read() -> tuple[Entry | None, list[Listed]]:
            return current, (await self.objects.list_all(keys.checkpoints) if current else [])

        async def update(state: tuple[Entry | None, list[Listed]]) -> Done[None] | Retry:
            nonlocal current
            at, listed = state
            if at is None:
                return Done(None)  # deleted meanwhile
            if await commit(at, keys, listed) is not False:
                return Done(None)
            current = await self._fresh(at)
            return Done(None) if current is None else LOST  # deleted meanwhile: nothing to do

        await cas(
            read,
            update,
            attempts=self.ctx.limits.max_conflicts,
            what=f"thread {entry.thread_id!r} ({what})",
            error=CheckpointConflictError,
        )

    async def _delete_runs_in(self, entry: Entry, tokens: set[str]) -> None:
        """Remove the runs' checkpoints; the manifest's tips move to what is left
        (compare-and-swap: a writer that committed meanwhile makes it start over)."""

        async def commit(at: Entry, keys: NamespaceKeys, listed: list[Listed]) -> bool | None:
            cks = keys.listed_checkpoints(o.key for o in listed)
            doomed = [ck for ck in cks if ck.run_token in tokens]
            if not doomed:
                return None
            if self._in_flight(at, keys, cks, tokens):
                # another run's latest is committed but its object has not landed: what it
                # refers to is unknown until it does (within its request's deadline)
                await self._until_landed(at, keys)
                return False  # list again: landed, or no longer counted as in flight
            if not await self._repoint(at, keys, cks, doomed, tokens):
                return False
            keep = [ck for ck in cks if ck.run_token not in tokens]
            cutoff = _modified(listed, at, keys)
            await self._drop_checkpoints(keys, doomed, keep, cutoff, move=True)
            return True

        await self._listing_cas(entry, "delete_for_runs", commit)

    def _in_flight(
        self, entry: Entry, keys: NamespaceKeys, cks: list[CheckpointKey], tokens: set[str]
    ) -> bool:
        """Whether the entry's latest (not of ``tokens``' runs) is a put still in flight:
        not listed, and made less than ``IN_FLIGHT_SECONDS`` ago (older: its writer died
        after the manifest update, and it never lands)."""
        latest = keys.parse_checkpoint(keys.checkpoint_at(entry.latest_tail))
        if latest.run_token in tokens or any(ck.checkpoint_id == entry.latest_id for ck in cks):
            return False
        made = uuid6_time(entry.latest_id)
        return made is not None and time.time() - made < IN_FLIGHT_SECONDS

    async def _until_landed(self, entry: Entry, keys: NamespaceKeys) -> None:
        """Wait for the latest's object, as long as it counts as in flight."""
        key = keys.checkpoint_at(entry.latest_tail)
        made = uuid6_time(entry.latest_id) or 0.0
        while await self.objects.get(key) is None:
            if time.time() - made >= IN_FLIGHT_SECONDS:
                return  # its writer died after the manifest update: it never lands
            await asyncio.sleep(LEASE_POLL)

    async def _repoint(
        self,
        entry: Entry,
        keys: NamespaceKeys,
        cks: list[CheckpointKey],
        doomed: list[CheckpointKey],
        tokens: set[str],
    ) -> bool:
        """Give the entry the tips of what is left after the runs (or drop it)."""
        lineage = lineage_of(entry, keys)
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
        latest = keys.parse_checkpoint(keys.checkpoint_at(entry.latest_tail))
        flying = latest.run_token not in tokens and latest.checkpoint_id not in {
            ck.checkpoint_id for ck in cks
        }
        if not tips and not flying:
            return await self.manifest.drop(entry)
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
        new = Fields(
            top_id,
            top_tail,
            entry.floor,
            uses_delta,
            entry.created_at,
            heads,
            set(entry.gone) | removed,  # a run still writing may not continue them
            # the floor stays; once checkpoints below it were removed it may not come down
            born="" if any(ck.checkpoint_id < entry.floor for ck in doomed) else entry.born,
        )
        return await self.manifest.replace(entry, new)

    async def _drop_checkpoints(
        self,
        keys: NamespaceKeys,
        doomed: list[CheckpointKey],
        keep: list[CheckpointKey],
        cutoff: float,
        *,
        move: bool = False,
    ) -> None:
        """Delete checkpoints, their writes, and the blobs no kept checkpoint refers to.

        Only blobs stored before ``cutoff`` (the committed latest's own time) go: a
        writer's new blobs, stored after it and not yet committed, stay. A removed
        checkpoint whose object holds values of kept ones stays: below prune's floor,
        where no history reaches; or, with ``move`` (delete_for_runs, which keeps the
        floor), copied to ``h/`` first, out of the listing (readers look there).
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
            if body is None:  # cannot tell what it refers to: leave every blob
                cutoff = 0.0
                continue
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
        drop += [o.key for o in blisted if o.key not in referenced and o.modified < cutoff]
        drop += [
            o.key
            for o in hlisted
            if keys.checkpoints + o.key[len(keys.moved) :] not in referenced and o.modified < cutoff
        ]
        await self.objects.delete(drop)

    # ---------------------------------------------------------------- pruning
    async def prune(self, thread_ids: Sequence[str]) -> None:
        """Keep each namespace's latest checkpoint (and its DeltaChannel seed chain)."""
        per_thread = await bounded_map(lambda t: self.manifest.namespaces(str(t)), thread_ids)
        await bounded_map(self._prune_ns, [e for es in per_thread for e in es], settle=True)

    async def _prune_ns(self, entry: Entry) -> None:
        """The manifest's floor is raised first, conditioned on the entry being what
        was read before the listing: every committed checkpoint is then listed, a
        writer that committed meanwhile makes prune start over, and nothing newer
        than the latest (a writer's checkpoint, not yet committed) is touched.
        """

        async def commit(at: Entry, keys: NamespaceKeys, listed: list[Listed]) -> bool:
            cks = keys.listed_checkpoints(o.key for o in listed)
            by_id: dict[str, CheckpointKey] = {}
            for ck in cks:
                by_id.setdefault(ck.checkpoint_id, ck)
            latest = by_id.get(at.latest_id)
            if latest is None:  # in flight, or its writer crashed: its parent stands in
                parent = keys.parse_checkpoint(keys.checkpoint_at(at.latest_tail)).parent_id
                latest = by_id.get(parent) if parent is not None else None
            keep = await self._seed_chain(latest, by_id) if latest is not None else None
            if latest is None or keep is None:
                if await self._moved(at):
                    return False  # deleted or rewritten since it was read: not corruption
                raise CorruptObjectError(
                    keys.checkpoint_at(at.latest_tail),
                    f"missing: it is the latest checkpoint of thread {at.thread_id!r}",
                )
            kept = {ck.checkpoint_id for ck in keep}
            doomed = [
                ck
                for ck in cks
                if ck.checkpoint_id < latest.checkpoint_id and ck.checkpoint_id not in kept
            ]
            removed = {ck.checkpoint_id for ck in doomed}
            if not await self.manifest.raise_floor(at, min(kept), removed):
                return False
            await self._drop_checkpoints(keys, doomed, keep, _modified(listed, at, keys))
            return True

        await self._listing_cas(entry, "prune", commit)

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
    async def copy_thread(self, src: str, dst: str) -> None:
        """Copy every object, then give the target the source's tips.

        The source's entries are read before the listing (all they lead to is copied)
        and again after the copy: a change meanwhile (a delete, a prune) starts it
        over. The target's items are read before copying and the commit is
        conditioned on them: a deletion of the target begun meanwhile starts it over.
        """
        if src == dst:
            return  # a thread is already a copy of itself
        copied: set[tuple[str, str]] = set()

        async def read() -> tuple[list[Entry], list[Raw | None]]:
            entries = await self.manifest.namespaces(src)
            targets = await bounded_map(lambda e: self.manifest.read(dst, e.checkpoint_ns), entries)
            return entries, targets

        async def update(state: tuple[list[Entry], list[Raw | None]]) -> Done[None] | Retry:
            entries, targets = state
            if not entries:
                return Done(None)
            leased = [r.lease_until for r in targets if r is not None and r.tombstone]
            if leased and max(leased) > time.time():  # the target is being deleted
                return Retry(after=min(max(leased) - time.time(), LEASE_POLL))
            listed = await self.objects.list_all(self.layout.thread(src))
            self.ctx.forget(self.layout.thread(dst))
            todo = [o for o in listed if (o.key, o.etag) not in copied]
            await bounded_map(
                lambda o: self.objects.copy(o.key, self.layout.rehome(o.key, src, dst)), todo
            )
            copied.update((o.key, o.etag) for o in todo)  # a later round copies only news
            after = {e.checkpoint_ns: e.rev for e in await self.manifest.namespaces(src)}
            if after != {e.checkpoint_ns: e.rev for e in entries}:
                return LOST  # the source changed while it was copied
            merged = await bounded_map(
                lambda pair: self.manifest.merge(dst, pair[0], pair[1]),
                list(zip(entries, targets, strict=True)),
            )
            return Done(None) if all(merged) else LOST

        await cas(
            read,
            update,
            attempts=self.ctx.limits.max_conflicts,
            what=f"copy_thread({src!r}, {dst!r})",
            error=CheckpointConflictError,
        )


def _modified(listed: Sequence[Listed], entry: Entry, keys: NamespaceKeys) -> float:
    """When the latest checkpoint was stored: the cutoff for unreferenced blobs."""
    key = keys.checkpoint_at(entry.latest_tail)
    return next((o.modified for o in listed if o.key == key), 0.0)
