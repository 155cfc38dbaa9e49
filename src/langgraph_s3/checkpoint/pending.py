"""``put_writes``: a task's pending writes, one object per task for its regular writes
(first write wins per index, merged by compare-and-swap) and one per special write:
1 round trip; then, only when the checkpoint may still be the item's bare latest
(no child of it committed here), 1 UpdateItem saying it has writes (``inline.py``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_s3.checkpoint.context import SaverContext
from langgraph_s3.checkpoint.erasure import ERASED, WRITE_LICENSE
from langgraph_s3.checkpoint.held_writes import STORE_ROUNDS, merged, write_storer
from langgraph_s3.checkpoint.history import write_version
from langgraph_s3.checkpoint.logs import (
    LogState,
)
from langgraph_s3.checkpoint.writing import Carry, RawWrite, keep_for_children
from langgraph_s3.core import codec
from langgraph_s3.core.held import HELD_BUDGET, HELD_WRITES_MAX, HeldWrite, new_hold, write_size
from langgraph_s3.core.keys import NamespaceKeys
from langgraph_s3.core.put_mode import CREATE, PutMode, Update
from langgraph_s3.core.records import uuid6_time
from langgraph_s3.core.retry import LOST, Done, Retry, cas
from langgraph_s3.core.staging import STAGING
from langgraph_s3.core.tasks import gather_all
from langgraph_s3.errors import CheckpointConflictError


class PendingWriter:
    """Stores the pending writes of tasks (one per call: see context.py)."""

    def __init__(self, ctx: SaverContext, serde: SerializerProtocol) -> None:
        self.ctx, self.serde = ctx, serde
        self.objects = ctx.objects

    async def put_writes(
        self,
        keys: NamespaceKeys,
        cid: str,
        writes: list[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> None:
        """Store a task's writes: regular ones merged first-write-wins per index,
        special ones (error, interrupt...) one object each, last write wins. Held by the
        item when they fit (``held_writes.py``: 1 UpdateItem, the objects stored off
        the caller's path), else stored in S3 first."""
        regular: list[RawWrite] = []
        special: dict[int, RawWrite] = {}
        for idx, (ch, value) in enumerate(writes):
            typed = self.serde.dumps_typed(value)
            if ch in WRITES_IDX_MAP:
                special[WRITES_IDX_MAP[ch]] = (WRITES_IDX_MAP[ch], ch, typed)
            else:
                regular.append((idx, ch, typed))
        if not regular and not special:
            return
        state = self._log_of(keys, cid)  # before the first request (see LogState)
        carry = self.ctx.carry.get((keys.prefix, cid))
        if carry is None:
            carry = self.ctx.carry[(keys.prefix, cid)] = {}
        bodies: dict[str, bytes] = {}  # object key -> its body
        if regular:
            bodies[keys.regular_write(cid, task_id)] = codec.dump_writes(
                task_id, task_path, regular
            )
        for sidx, write in special.items():
            key = keys.special_write(cid, task_id, sidx)
            bodies[key] = codec.dump_writes(task_id, task_path, [write])
        for key, body in bodies.items():
            keep_for_children((keys, carry), key, body)  # before any request: see _carry
        held = await self._hold(keys, cid, bodies, state, (keys, carry))
        if held is True:
            return
        there = {w.tail: w for w in held}
        basis = there.get(keys.write_tail(keys.regular_write(cid, task_id)))
        if regular and basis is not None:  # the item's regular writes came first: they win
            key = keys.regular_write(cid, task_id)
            with codec.reading(key):
                first = codec.load_writes(basis.body)
            have = {w.idx for w in first}
            regular = sorted(
                [(w.idx, w.channel, w.value) for w in first]
                + [w for w in regular if w[0] not in have],
                key=lambda w: w[0],
            )
            task_path = first[0].task_path if first else task_path
        await self._in_s3(keys, cid, task_id, task_path, regular, special, state, carry)
        older = [w for w in held if not w.regular]
        if older:  # an older special write the item holds would hide this one
            await self._unhide(keys, older, {keys.write_tail(k): b for k, b in bodies.items()})

    async def _hold(
        self,
        keys: NamespaceKeys,
        cid: str,
        bodies: dict[str, bytes],
        log: LogState,
        carry: Carry,
    ) -> Literal[True] | list[HeldWrite]:
        """Hold the writes in the namespace's item (``Held.hold``), merged with what it
        holds under their keys on a conflict (regular: first write wins per index;
        special: last). True when held; otherwise (an import's, too large, no known life,
        no room: they go to S3 first) the writes the item holds under their keys.

        Cost: 1 UpdateItem; per conflict, 1 GetItem and 1 UpdateItem more.

        Raises:
            CheckpointConflictError: the life was deleted, expired or replaced since.
        """
        ctx = self.ctx
        size = sum(len(b) for b in bodies.values())
        if STAGING.get() is not None:  # an import's: stored before it publishes, whole
            return []
        if size > HELD_WRITES_MAX:
            return await self._hidden(keys, bodies)
        life = ctx.lives.get(keys.prefix)
        # the checkpoint's own put, in progress here, says the life (a new thread's, a
        # new conversation's over a deleted one); none: the life this process last saw
        read = (keys.prefix, cid) in ctx.holders or bool(life)
        if await ctx.held.own_put(keys.prefix, cid, read=read):
            life = ctx.held.life_of(keys.prefix) or life
        if not life:  # never seen here (another worker's thread): the item says (1 GetItem)
            entry = await ctx.manifest.reads.latest(keys.thread_id, keys.checkpoint_ns)
            if entry is None or not entry.life:
                return await self._hidden(keys, bodies)
            life = entry.life
            ctx.enter_life(keys.prefix, life)
        mine = {keys.write_tail(k): new_hold(keys.write_tail(k), b) for k, b in bodies.items()}
        pairs: list[tuple[HeldWrite, HeldWrite | None]] = [(w, None) for w in mine.values()]
        where = (keys.thread_id, keys.checkpoint_ns)
        final = dict(mine)
        hide: list[HeldWrite] = []
        for _ in range(ctx.limits.max_conflicts):
            if not pairs or await ctx.manifest.held.hold(*where, cid, pairs, life=life):
                for w in final.values():
                    keep_for_children(carry, keys.held_key(w.tail), w.body)  # as held
                    if w.regular:
                        with codec.reading(keys.held_key(w.tail)):
                            got = codec.load_writes(w.body)
                        ws = [(x.idx, x.channel, x.value) for x in got]
                        log.record(got[0].task_id, got[0].task_path, ws, stored=True)
                storer = write_storer(self.objects, ctx.manifest, keys)
                ctx.held.hold_writes((keys.prefix, *where), [w for w, _ in pairs], storer)
                return True
            raw = await ctx.manifest.reads.read(*where)
            now = ctx.manifest.now()
            current = {w.tail: w for w in raw.writes} if raw is not None else {}
            hide = [current[t] for t in mine if t in current]
            entry = raw.latest if raw is not None else None
            if raw is None or entry is None or raw.life != life or raw.expired(now):
                # a life begun since this one was seen, by this process's own put of
                # ``cid`` (a new conversation over a deleted one; under exit
                # durability its put comes after its writes): held in that life
                seen = {ctx.held.life_of(keys.prefix), ctx.lives.get(keys.prefix)}
                if raw is not None and raw.life and raw.life != life and raw.life in seen:
                    life = raw.life  # seen here since (its put committed, a read)
                    continue
                read = (keys.prefix, cid) in ctx.holders
                ours = await ctx.held.own_put(keys.prefix, cid, read=read)
                now_life = ctx.held.life_of(keys.prefix)
                if ours and now_life and now_life != life:
                    life = now_life
                    continue
                raise _gone(keys, cid)  # nothing of a deleted conversation is stored
            if raw.held_bytes is None:  # an item an earlier version wrote: no count
                return hide
            pairs = []
            for tail, w in mine.items():
                old = current.get(tail)
                body = w.body if old is None or not w.regular else merged(old.body, w.body, tail)
                if old is not None and old.body == body:
                    final[tail] = old  # held as it would be: that hold stands
                    continue
                final[tail] = new = new_hold(tail, body)
                pairs.append((new, old))
            grow = sum(write_size(w) - (write_size(o) if o else 0) for w, o in pairs)
            if raw.held_bytes + max(grow, 0) > HELD_BUDGET:
                return hide
        return hide

    async def _hidden(self, keys: NamespaceKeys, bodies: dict[str, bytes]) -> list[HeldWrite]:
        """The writes the item holds under these writes' keys, for writes stored in S3
        first: a regular one came first (its writes win), an older special one would
        hide the new (last write wins). Cost: 1 GetItem."""
        tails = {keys.write_tail(k) for k in bodies}
        raw = await self.ctx.manifest.reads.read(keys.thread_id, keys.checkpoint_ns)
        held = raw.writes if raw is not None and not raw.tombstone else ()
        return [w for w in held if w.tail in tails]

    async def _unhide(
        self, keys: NamespaceKeys, older: list[HeldWrite], mine: dict[str, bytes]
    ) -> None:
        """Special writes stored in S3 over older ones the item held: those leave the
        item (only as they were: a newer hold stays), its latest called bare no more.
        The older one's own PUT may have passed its check (still held?) before they
        left: S3 is read once more and put right (a PUT that begins after they left
        replaces nothing). Cost: 1 UpdateItem; 1 GET per write, a PUT where it is not
        this one's."""
        where = (keys.thread_id, keys.checkpoint_ns)
        await self.ctx.manifest.held.settle(*where, (), writes=older, unbare=True)
        for w in older:
            key, body = keys.held_key(w.tail), mine[w.tail]
            for _ in range(STORE_ROUNDS):
                stored, etag = await self.objects.get_with_etag(key)
                if stored == body:
                    break
                mode: PutMode = Update(etag) if stored is not None and etag else CREATE
                await self._put_write(key, body, mode=mode)

    async def _in_s3(
        self,
        keys: NamespaceKeys,
        cid: str,
        task_id: str,
        task_path: str,
        regular: list[RawWrite],
        special: dict[int, RawWrite],
        state: LogState,
        carry: dict[str, tuple[str, bytes]],
    ) -> None:
        """The writes stored in S3 first (the objects, then the word to the manifest
        when ``cid`` may be its bare latest)."""
        jobs: list[Awaitable[Any]] = []
        held = self.ctx.held
        held.note_writes(keys.prefix, cid)  # before any request: a commit not yet sent
        await self._licensed(keys, cid)
        if regular:
            key = keys.regular_write(cid, task_id)
            fresh = codec.dump_writes(task_id, task_path, regular)
            jobs.append(
                self._merge_first_wins(
                    key,
                    task_id,
                    task_path,
                    regular,
                    fresh,
                    state,
                    (keys, carry),
                    lambda: self._licensed(keys, cid),
                )
            )
        for sidx, write in special.items():
            key = keys.special_write(cid, task_id, sidx)
            body = codec.dump_writes(task_id, task_path, [write])
            jobs.append(self._put_write(key, body))
        await gather_all(*jobs)
        # stored: a read of the latest must now list them, unless cid is no latest
        read = (keys.prefix, cid) in self.ctx.holders  # a read or put here filled it
        if jobs and await held.needs_mark(keys.prefix, cid, read=read):
            await self.ctx.manifest.held.written(keys.thread_id, keys.checkpoint_ns, cid)

    async def _licensed(self, keys: NamespaceKeys, cid: str) -> None:
        """A write's PUT begins only within :data:`WRITE_LICENSE` of this process's
        last sight of the namespace's life (a read, a put; or, in a namespace never
        seen here, a checkpoint made here lately: a new thread's first put on its
        way). Past it, a put of ``cid`` in progress here (or about to begin: exit
        durability) is waited for, and its commit answers; else the item is asked
        (1 GetItem; 2 for a subgraph's). So a writer frozen mid-task and thawed after a
        deletion stores nothing of the deleted conversation (what it sent before is the
        deletion's late pass's). Called before each PUT of a write.

        Raises:
            CheckpointConflictError: the life was deleted, expired or replaced since.
        """
        seen = self.ctx.sighted.get(keys.prefix)
        if seen is not None and asyncio.get_running_loop().time() - seen[0] <= WRITE_LICENSE:
            return  # seen lately
        made = uuid6_time(cid)
        if seen is None and made is not None and time.time() - made <= WRITE_LICENSE:
            return  # a new thread's checkpoint, made lately here: its put is on its way
        read = (keys.prefix, cid) in self.ctx.holders
        mine = await self.ctx.held.own_put(keys.prefix, cid, read=read)
        if mine:
            return  # its own put, just committed: in a live life
        latest = self.ctx.manifest.reads.latest
        entry = None if mine is False else await latest(keys.thread_id, keys.checkpoint_ns)
        life = self.ctx.lives.get(keys.prefix)
        if entry is None or (life is not None and entry.life != life):
            raise _gone(keys, cid)
        self.ctx.enter_life(keys.prefix, entry.life)

    def _log_of(self, keys: NamespaceKeys, cid: str) -> LogState:
        """Where the writes of checkpoint ``cid`` are recorded for its children's logs:
        made with the namespace's known delta channels when the checkpoint's own put
        has not started (none known: nothing is recorded, and no child continues it)."""
        state = self.ctx.logs.get((keys.prefix, cid))
        if state is None:
            known = self.ctx.delta_channels.get(keys.prefix, frozenset())
            state = self.ctx.logs[(keys.prefix, cid)] = LogState(known)
        return state

    async def _put_write(
        self, key: str, body: bytes, *, carry: Carry | None = None, **kw: Any
    ) -> str | None:
        """Put a write object; the version it made is cached (``history.fetch_writes``):
        this process never reads its own writes back."""
        if carry is not None:
            keep_for_children(carry, key, body)
        etag = await self.objects.put(key, body, **kw)
        cache = self.objects.cache
        if etag is not None and cache is not None:
            cache.put(write_version(key, etag), body)
        return etag

    async def _merge_first_wins(
        self,
        key: str,
        task_id: str,
        task_path: str,
        writes: list[RawWrite],
        fresh: bytes,
        log: LogState | None = None,
        carry: Carry | None = None,
        licensed: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Regular writes are first-write-wins per (task_id, idx): merge by CAS. What the
        store holds in the end, and only that, is recorded in ``log`` (the checkpoint's,
        for its children's DeltaChannel logs): a write that failed is not, and one that
        lost to another writer's gives way to it. ``licensed`` is asked again before
        each later PUT (a process frozen between two rounds: ``_licensed``)."""

        def stored(path: str, ws: list[RawWrite]) -> None:
            if log is not None:
                log.record(task_id, path, ws, stored=True)

        if await self._put_write(key, fresh, mode=CREATE):
            stored(task_path, writes)
            return

        async def update(state: tuple[bytes | None, str | None]) -> Done[None] | Retry:
            body, etag = state
            if licensed is not None:
                await licensed()
            if body is None:  # deleted meanwhile: start over
                if await self._put_write(key, fresh, mode=CREATE):
                    stored(task_path, writes)
                    return Done(None)
                return LOST
            if body == ERASED:  # an earlier life's deletion marked it (its item held it)
                mode: PutMode = Update(etag) if etag is not None else None
                if await self._put_write(key, fresh, mode=mode, carry=carry):
                    stored(task_path, writes)
                    return Done(None)
                return LOST
            with codec.reading(key):
                held = codec.load_writes(body)
            have = {w.idx for w in held}
            extra = [w for w in writes if w[0] not in have]
            path = held[0].task_path
            stored(path, [(w.idx, w.channel, w.value) for w in held])  # the stored ones win
            if not extra:  # an idempotent replay, or our own write whose answer was lost
                if carry is not None:
                    keep_for_children(carry, key, body)  # as it is stored
                return Done(None)
            merged = sorted([(w.idx, w.channel, w.value) for w in held] + extra, key=lambda w: w[0])
            merged_body = codec.dump_writes(task_id, path, merged)
            # every store names the ETag of what it returns; none: nothing to condition on
            mode = Update(etag) if etag is not None else None
            ok = await self._put_write(key, merged_body, mode=mode, carry=carry)
            if ok:
                stored(path, extra)
            return Done(None) if ok else LOST

        await cas(
            lambda: self.objects.get_with_etag(key),
            update,
            attempts=self.ctx.limits.max_conflicts,
            what=f"writes {key!r}",
            error=CheckpointConflictError,
        )


def _gone(keys: NamespaceKeys, cid: str) -> CheckpointConflictError:
    """The error of writes whose thread's life ended while their task ran."""
    return CheckpointConflictError(
        f"a task's writes for checkpoint {cid} of thread {keys.thread_id!r} were "
        "not stored: the thread was deleted, expired or replaced (an import) while "
        "the task ran; start the run again"
    )
