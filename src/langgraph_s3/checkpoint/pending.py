"""``put_writes``: a task's pending writes, one object per task for its regular writes
(first write wins per index, merged by compare-and-swap) and one per special write:
1 round trip; then, only when the checkpoint may still be the item's bare latest
(no child of it committed here), 1 UpdateItem saying it has writes (``inline.py``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_s3.checkpoint.context import SaverContext
from langgraph_s3.checkpoint.erasure import WRITE_LICENSE
from langgraph_s3.checkpoint.history import write_version
from langgraph_s3.checkpoint.logs import (
    LogState,
)
from langgraph_s3.checkpoint.writing import Carry, RawWrite, keep_for_children
from langgraph_s3.core import codec
from langgraph_s3.core.keys import NamespaceKeys
from langgraph_s3.core.put_mode import CREATE, PutMode, Update
from langgraph_s3.core.records import uuid6_time
from langgraph_s3.core.retry import LOST, Done, Retry, cas
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
        special ones (error, interrupt...) one object each, last write wins."""
        regular: list[RawWrite] = []
        special: dict[int, RawWrite] = {}
        for idx, (ch, value) in enumerate(writes):
            typed = self.serde.dumps_typed(value)
            if ch in WRITES_IDX_MAP:
                special[WRITES_IDX_MAP[ch]] = (WRITES_IDX_MAP[ch], ch, typed)
            else:
                regular.append((idx, ch, typed))
        jobs: list[Awaitable[Any]] = []
        held = self.ctx.held
        held.note_writes(keys.prefix, cid)  # before any request: a commit not yet sent
        await self._licensed(keys, cid)
        state = self._log_of(keys, cid)  # before the first request (see LogState)
        carry = self.ctx.carry.get((keys.prefix, cid))
        if carry is None:
            carry = self.ctx.carry[(keys.prefix, cid)] = {}
        if regular:
            key = keys.regular_write(cid, task_id)
            fresh = codec.dump_writes(task_id, task_path, regular)
            keep_for_children((keys, carry), key, fresh)  # before any request: see _carry
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
            keep_for_children((keys, carry), key, body)
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
            raise CheckpointConflictError(
                f"a task's writes for checkpoint {cid} of thread {keys.thread_id!r} were "
                "not stored: the thread was deleted, expired or replaced (an import) while "
                "the task ran; start the run again"
            )
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
            mode: PutMode = Update(etag) if etag is not None else None
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
