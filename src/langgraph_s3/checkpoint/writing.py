"""The saver's write path: ``put`` (``put_writes`` is :mod:`.pending`'s).

* ``put``: one object (``If-None-Match: *``) holding the checkpoint and its small
  changed values, beside one conditional manifest update: 1 round trip (a value
  over ``values.INLINE_MAX`` is a blob stored first: 2). Everything is serialized
  before the first request, so bad input writes nothing. The manifest may name
  the checkpoint before its object lands (or, after a crash, without it): readers
  then take its parent as the latest, so nothing incomplete is ever read.
* ``put_writes``: one object per task for its regular writes (first write wins
  per index, merged by compare-and-swap) and one per special write: 1 round trip.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_s3.checkpoint.committing import Meeting, commit
from langgraph_s3.checkpoint.context import SaverContext
from langgraph_s3.checkpoint.erasure import ERASED, mark_erased
from langgraph_s3.checkpoint.held_writes import md5_etag, write_storer
from langgraph_s3.checkpoint.history import fetch_values
from langgraph_s3.checkpoint.inline import (
    HELD_MAX,
    Store,
    clearer,
    held_by,
    store_held,
)
from langgraph_s3.checkpoint.logs import (
    Continued,
    LogState,
    adopt,
    continued,
    delta_channels,
    logged_channels,
    own_run,
    seeds_of,
)
from langgraph_s3.checkpoint.maintenance import Maintenance
from langgraph_s3.checkpoint.overlay import HeldOverlay
from langgraph_s3.checkpoint.placement import place
from langgraph_s3.checkpoint.presence import living, parent_there
from langgraph_s3.core import codec
from langgraph_s3.core.commit import EVERY_NEED, How
from langgraph_s3.core.held import (
    InlineCopy,
)
from langgraph_s3.core.keys import NamespaceKeys, encode
from langgraph_s3.core.ports import ManifestPort, ObjectStorePort
from langgraph_s3.core.put_mode import CREATE, Update
from langgraph_s3.core.records import (
    Expiry,
    uuid6_time,
)
from langgraph_s3.core.runs import Log, Ref, Runs
from langgraph_s3.core.tasks import bounded_map, gather_all, in_background
from langgraph_s3.core.values import INLINE_MAX, Holders, holders
from langgraph_s3.errors import CheckpointConflictError, ClockSkewError

RawWrite = tuple[int, str, codec.Typed]
"""(idx, channel, serialized value) of one pending write."""
CARRY_TOTAL = 256 * 1024
"""Bytes of its parent's writes a checkpoint carries at most."""
Carried = tuple[str, str, bytes]
Carry = tuple[NamespaceKeys, dict[str, tuple[str, bytes]]]
"""Where a stored write object is kept for the checkpoint's children to carry."""


def keep_for_children(carry: Carry, key: str, body: bytes) -> None:
    """Keep a write object for the checkpoint's children to carry, under the ETag S3
    gives a single-part object (the MD5 of its bytes), before its request: LangGraph
    may store a child while the write is in flight. A write that then fails, or loses
    to another writer's, is not what the listing shows: readers fetch the real one.
    (Under SSE-KMS the ETag is no MD5: nothing carried is ever used, nothing is wrong.)"""
    keys, into = carry
    if len(body) <= codec.CARRY_MAX:
        codec.keep_carried(into, key[len(keys.prefix) :], md5_etag(body), body)


async def put_immutable(
    objects: ObjectStorePort,
    key: str,
    body: bytes,
    *,
    over_marker: bool = True,
    alive: Callable[[], Awaitable[bool]] | None = None,
) -> bool:
    """Write once; True when the key holds these bytes (written now, or before: our own
    earlier attempt whose answer was lost, or a replay). Another object there is a
    CheckpointConflictError (1 GET to tell): ``store_held`` for an object no item holds.
    An erasure marker (a deletion's) is replaced with ``over_marker`` (a new life's
    write) or, for a PUT beside its commit, while ``alive`` (1 GetItem: the thread's
    item is no tombstone: the marker is an earlier life's, an import's replace reusing
    its ids); else False."""
    if await store_held(objects, key, body, _held_by_none, over_marker=over_marker):
        return True
    existing, etag = await objects.get_with_etag(key)
    if existing == ERASED:
        if alive is None or not await alive():
            return False  # a deletion's marker: not this PUT's to replace
        return bool(await objects.put(key, body, mode=Update(etag) if etag else None, cache=True))
    raise CheckpointConflictError(
        f"checkpoint {key!r} already exists with different content; checkpoints "
        "are immutable: write a new checkpoint id instead"
    )


async def note_run(ctx: SaverContext, thread_id: str, run_id: str) -> None:
    """The run index's write for the first put of a run in a thread this process
    makes (nothing once this process named it). Cost: 1 PutItem, then none."""
    token = encode(run_id, "run_id")
    if ctx.runs.get((thread_id, token)):
        return
    await ctx.manifest.commits.note_run(thread_id, token)
    ctx.runs[(thread_id, token)] = True


async def _held_by_none() -> bool:
    """No manifest item holds the object's copy: another object is never replaced."""
    return False


def storer(objects: ObjectStorePort, manifest: ManifestPort, keys: NamespaceKeys) -> Store:
    """Stores a copy a namespace's item holds (this process's, or one another left)."""

    async def store(copy: InlineCopy, seen: float | None) -> bool:
        check = held_by(manifest, keys.thread_id, keys.checkpoint_ns, copy)
        key = keys.checkpoint_at(copy.tail)
        return await store_held(objects, key, copy.body, check, seen=seen)

    return store


def _refuse_skew(cid: str, parent: str | None) -> None:
    """ClockSkewError when ``cid`` is older than its parent: as a side branch it would
    vanish from the thread (nothing is written)."""
    if parent is not None and cid < parent:
        made, before = uuid6_time(cid), uuid6_time(parent)
        skew = before - made if made is not None and before is not None else None
        raise ClockSkewError(cid, parent, skew)


ROOTS: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(
    "langgraph_s3_roots", default=frozenset()
)
"""Checkpoint ids an import commits as the first of a life although they name a parent
(one the export does not hold: a pruned thread's oldest), set by ``transfer``."""


class Writer:
    """Stores checkpoints and pending writes (one per call: see context.py)."""

    def __init__(self, ctx: SaverContext, serde: SerializerProtocol) -> None:
        self.ctx, self.serde = ctx, serde
        self.objects = ctx.objects

    async def put(
        self,
        keys: NamespaceKeys,
        parent: str | None,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> None:
        """Store and commit it (ClockSkewError, nothing written, if older than its parent)."""
        cid = checkpoint["id"]
        # an import's checkpoint whose parent is not imported begins the life (its key
        # keeps the parent id, as a pruned thread's oldest checkpoint does)
        commit_parent = None if cid in ROOTS.get() else parent
        _refuse_skew(cid, parent)
        self.ctx.held.begin(keys.prefix, cid, commit_parent)  # before any await
        try:
            await self._put(
                keys, cid, parent, commit_parent, config, checkpoint, metadata, new_versions
            )
        finally:
            self.ctx.held.abandon(keys.prefix, cid, commit_parent)  # if not ended

    async def _put(
        self,
        keys: NamespaceKeys,
        cid: str,
        parent: str | None,
        commit_parent: str | None,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> None:
        serde = self.serde
        c = dict(checkpoint)
        values: dict[str, Any] = cast(dict[str, Any], c.pop("channel_values", None) or {})
        md = get_checkpoint_metadata(config, metadata)
        run = md.get("run_id")
        versions = checkpoint.get("channel_versions") or {}
        key = keys.checkpoint(cid, parent, None if run is None else str(run))
        log = self._log_for(keys, cid, md, values)
        life, known = self._parent_holders(keys, commit_parent)
        # serialize everything before the first request: bad input writes nothing
        placed = place(serde, keys, values, versions, new_versions, known)
        present, blobs = placed.present, placed.blobs
        logs = await self._logs(keys, commit_parent, md, present, versions, blobs)
        carried = self._carried(keys, commit_parent)
        env = codec.CheckpointEnvelope(
            checkpoint=serde.dumps_typed(c),
            metadata=serde.dumps_typed(md),
            present=present,
            written=tuple(ch for ch in present if ch in new_versions),
            inline=placed.inline,
            held=placed.held,
            runs=placed.runs,
            raw=placed.raw,
            logs=logs,
            carried=carried,
        )
        body = codec.dump_checkpoint(env)
        if self.ctx.seals is not None:  # the thread's subject, before its first write
            await self.ctx.seals.claim(keys.thread_id, md)

        async def store() -> None:
            await self._put_objects(key, body, blobs)

        async def ensure() -> None:
            await self._ensure(keys, key, cid, commit_parent, store)

        # the run index, then large values: the checkpoint points at nothing unindexed
        first = [self.objects.put(k, b, mode=CREATE, cache=True) for k, b in blobs]
        if run is not None:
            first.append(note_run(self.ctx, keys.thread_id, str(run)))
        await gather_all(*first)
        committed = await self._commit(keys, key, cid, commit_parent, body, md, store, ensure, life)
        if committed is not None:  # the next checkpoint continues in it
            self.ctx.enter_life(keys.prefix, committed)
        where = self.ctx.holders[(keys.prefix, cid)] = holders(
            keys, key, env, versions, placed.digests
        )
        if log is not None:
            log.fill(keys.tail(key), env, seeds_of(where))

    async def _commit(
        self,
        keys: NamespaceKeys,
        key: str,
        cid: str,
        parent: str | None,
        body: bytes,
        md: CheckpointMetadata,
        store: Callable[[], Awaitable[None]],
        ensure: Callable[[], Awaitable[None]],
        life: str | None,
    ) -> str | None:
        """The manifest update, carrying a small envelope (``inline.py``): its PUT goes on."""
        held, prefix = self.ctx.held, keys.prefix
        carried = body if len(body) <= HELD_MAX else None
        where = (prefix, keys.thread_id, keys.checkpoint_ns)
        keep = storer(self.objects, self.ctx.manifest, keys)
        keep_writes = write_storer(self.objects, self.ctx.manifest, keys)
        inline = await held.prepare(where, cid, carried, keep, keep_writes)
        tail, again = keys.tail(key), keep
        check = held_by(self.ctx.manifest, *where[1:], InlineCopy(cid, tail, body))
        # while the put is in progress its object is its own to place, over an erasure
        # marker too (a copy the item holds; one placed over a marker whose commit then
        # fails gets the marker back); a large one's, while its thread lives (an
        # import's replace reuses the ids its deletion marked)
        live, marked = [True], [False]

        def over_marker() -> bool:
            marked[0] = marked[0] or live[0]
            return live[0]

        alive = living(self.ctx.manifest, keys.thread_id, keys.checkpoint_ns)
        put = (
            store_held(self.objects, key, body, check, over_marker=over_marker)
            if carried
            else put_immutable(self.objects, key, body, over_marker=False, alive=alive)
        )
        task = in_background(put)
        try:
            how = How(
                uses_delta=bool(md.get("counters_since_delta_snapshot")),
                life=life or None,
                inline=inline,
                metadata=md,
                meets=EVERY_NEED,
            )
            meeting = Meeting(
                stored=task,
                rewrite=store,
                ensure=ensure,
                clear=clearer(
                    self.ctx.manifest, keys.thread_id, keys.checkpoint_ns, keep, keep_writes
                ),
                sweep=self._sweep,
                spill=self._spill,
            )
            life = await commit(self.ctx.manifest, keys, (cid, tail, parent), how, meeting)
        except BaseException as exc:
            live[0] = False
            held.end(prefix, cid, parent, tail, inline, task, again, committed=False)
            if isinstance(exc, asyncio.CancelledError):
                task.cancel()
            else:  # its PUT ends with the call (its object, no commit leads to, is harmless)
                stored = await asyncio.gather(task, return_exceptions=True)
                if marked[0] and stored[0] is True:  # but not over a deletion's marker
                    await mark_erased(self.objects)(key)
            raise
        live[0] = False
        held.end(prefix, cid, parent, tail, inline, task, again, committed=True, life=life)
        if not held.proven:  # the first put of this process also waits for its PUT
            await task
            held.proven = True
        uncarried = inline.body is None or inline.held is None  # ``_ensure`` may store it
        if uncarried and not await task and await self.objects.get(key) != body:
            # not held by the item, and another object is under its key: a replay of
            # this id with other content (advance found it committed already)
            raise CheckpointConflictError(
                f"checkpoint {key!r} already exists with different content; checkpoints "
                "are immutable: write a new checkpoint id instead"
            )
        return life

    def _parent_holders(
        self, keys: NamespaceKeys, parent: str | None
    ) -> tuple[str | None, Holders | None]:
        """The life the parent was read in and where it keeps its values, when known:
        what the parent holds is only of use when the parent is in the life (an
        import's root continues a parent the file does not hold: maybe pruned), and in
        the life it was read in: taken together, before any await (a read beside this
        put may see an import's new life meanwhile); not known, not used."""
        life = self.ctx.lives.get(keys.prefix) if parent else None
        known = self.ctx.holders.get((keys.prefix, parent)) if parent and life is not None else None
        return life, known

    def _log_for(
        self, keys: NamespaceKeys, cid: str, md: CheckpointMetadata, values: dict[str, Any]
    ) -> LogState | None:
        """The DeltaChannel log state the checkpoint fills once stored (None without
        DeltaChannels): taken before the first request, since the checkpoint's writes
        may come meanwhile."""
        delta = delta_channels(md, values)
        if not delta:
            return None
        self.ctx.delta_channels[keys.prefix] = delta
        log = adopt(self.ctx.logs.get((keys.prefix, cid)), delta)
        self.ctx.logs[(keys.prefix, cid)] = log
        return log

    async def _ensure(
        self,
        keys: NamespaceKeys,
        key: str,
        cid: str,
        parent: str | None,
        store: Callable[[], Awaitable[None]],
    ) -> None:
        """The checkpoint's objects are there before a contended commit: one GET (never
        the cache: this process put it there), since a deletion that listed it before
        this commit took it, and its blobs with it; and the parent must still be there
        (an import's replace may have left it out)."""
        if parent is None:
            mine, theirs = await self.objects.get(key), True
        else:
            there = parent_there(self.ctx, self.objects, keys, parent)
            mine, theirs = await gather_all(self.objects.get(key), there)
        if not theirs:
            raise CheckpointConflictError(
                f"checkpoint {cid} continues checkpoint {parent}, which is no longer in "
                f"thread {keys.thread_id!r} (a deletion or an import replaced the thread "
                "while this run was writing): the checkpoint was discarded; start the "
                "run again"
            )
        if mine is None:  # gone (a deletion's erasure marker reads as gone too)
            await store()

    async def _spill(self, keys: NamespaceKeys, heads: list[str], generation: str) -> None:
        """Tip markers of leaving heads: one empty object each, in one round trip."""

        async def mark(head: str) -> None:
            await self.objects.put(keys.tip_marker(generation, head), b"", mode=CREATE)

        await bounded_map(mark, heads)

    async def _sweep(self, expiry: Expiry, first: str) -> None:
        """A new conversation on an expired thread id sweeps the old one first (but
        its own first checkpoint ``first`` and the writes already stored beside it)."""
        await Maintenance(self.ctx, self.serde).sweep_thread(expiry, spare_from=first)

    def _carried(self, keys: NamespaceKeys, parent: str | None) -> tuple[Carried, ...]:
        """The parent's write objects this process knows, for the new checkpoint to carry:
        at most ``CARRY_TOTAL`` bytes of them (the rest is fetched by a history read)."""
        known = self.ctx.carry.get((keys.prefix, parent)) if parent else None
        out: list[Carried] = []
        total = 0
        for k, (e, b) in sorted(known.items()) if known else ():
            total += len(b)
            if total > CARRY_TOTAL:
                break
            out.append((k, e, b))
        return tuple(out)

    async def _logs(
        self,
        keys: NamespaceKeys,
        parent: str | None,
        md: CheckpointMetadata,
        present: tuple[str, ...],
        versions: ChannelVersions,
        blobs: list[tuple[str, bytes]],
    ) -> dict[str, Log]:
        """The checkpoint's DeltaChannel logs (logs.py): its parent's, plus the parent's
        writes. The runs they merge are read from the cache (this process stored or
        read them); those not there are fetched first: a round trip more, then only."""
        wanted = logged_channels(md, present)
        if not wanted:
            return {}
        state = self.ctx.logs.get((keys.prefix, parent)) if parent else None
        plans: dict[str, Continued] = {}
        for ch in wanted:
            c = Continued(None, None, []) if parent is None else continued(state, ch)
            if c is not None:
                plans[ch] = c
        need = {ch: [keys.prefix + r.key for r in c.absorbed()] for ch, c in plans.items()}
        flat = list(dict.fromkeys(k for ks in need.values() for k in ks))
        objects = HeldOverlay(self.objects)  # runs in checkpoints not landed yet too
        objects.hold(keys, self.ctx.held.bodies(keys.prefix))
        got = await fetch_values(objects, keys, flat)  # h/ too: see delete_for_runs
        out: dict[str, Log] = {}
        for ch, c in plans.items():
            bodies = [got[k] for k in need[ch]]
            if any(b is None for b in bodies):
                continue  # a run is gone (maintenance): this checkpoint has no log
            merged = [own_run(keys, ch, k, b) for k, b in zip(need[ch], bodies, strict=True) if b]
            r = c.runs(merged)
            if r.own is not None and len(r.own) > INLINE_MAX and ch in versions:
                start = r.count - r.own_count
                bkey, bbody = codec.pack_run(keys.log_blob(ch, versions[ch], start, r.count), r.own)
                blobs.append((bkey, bbody))
                r = Runs((*r.refs, Ref(bkey[len(keys.prefix) :], r.own_count, r.level)), r.count)
            out[ch] = Log(c.seed, r)
        return out

    async def _put_objects(self, key: str, body: bytes, blobs: list[tuple[str, bytes]]) -> None:
        """The checkpoint and its new blobs, concurrently (one round trip). Nothing is
        committed yet: a failure or a crash leaves objects no reader will see."""
        await gather_all(
            put_immutable(self.objects, key, body),
            *(self.objects.put(k, b, mode=CREATE, cache=True) for k, b in blobs),
        )
