"""The write protocol's second half: checkpoints the manifest holds until their objects
are stored, and which checkpoints have pending writes.

**The rule.** A put's commit (one conditional UpdateItem) carries the checkpoint's
envelope when it is at most :data:`HELD_MAX` bytes: the put is durable and readable
by every process the moment DynamoDB answers, and its immutable S3 object is written
beside it, off the caller's path. The copy leaves the item only in a later write that
knows the object is stored (this process's next commit drops the copies whose PUTs it
saw succeed, or that it stored itself). So every committed checkpoint is, at every
moment, in the item or in S3, and a crash at any request loses nothing acknowledged.
A copy another process left (a Lambda frozen or killed before its object landed) is
learned from the old item the commit hands back, stored by this process in the
background, and dropped by its next commit. The item counts its copies' bytes and a
carrying commit is conditioned on room under :data:`HELD_BUDGET` (``core/held.py``):
DynamoDB holds the bound, whatever number of processes left copies (:func:`clearer`).

**Pending writes.** A commit records whether its checkpoint had pending writes when it
was sent (``InlineCommit.bare``); a read of the latest lists writes only when the item
does not call the latest bare. A ``put_writes`` of a checkpoint the item may call bare
removes that word (``ManifestPort.written``) unless this process already committed a
child of it (then it is not the latest, and only reads by id, which always list, see
its writes).

One :class:`HeldCopies` per saver context (shared by the saver's copies), safe across
event loops: a PUT begun on a loop that ended is begun again on the running one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from cachetools import LRUCache

from langgraph_s3.checkpoint.erasure import ERASED, HELD_LICENSE
from langgraph_s3.core.held import (
    HELD_BUDGET,
    HeldWrite,
    InlineCommit,
    InlineCopy,
    held_size,
    write_size,
)
from langgraph_s3.core.keys import invert_id, uninvert_id
from langgraph_s3.core.ports import ManifestPort, ObjectStorePort
from langgraph_s3.core.put_mode import CREATE, Update
from langgraph_s3.core.records import (
    Raw,
)
from langgraph_s3.core.tasks import bounded_map, in_background
from langgraph_s3.errors import CheckpointConflictError, ConflictError

logger = logging.getLogger("langgraph_s3.inline")

HELD_MAX = 8 * 1024
"""Bytes of a checkpoint envelope a commit carries at most (one DynamoDB write unit is
1 KB: a larger envelope is stored first, as before)."""
NOTES = 4096
"""(namespace, checkpoint) pairs remembered for commits and children."""
WRITTEN_NOTES = 65536
"""(namespace, checkpoint) pairs whose pending writes began before their commit: an entry
lives from its ``put_writes`` to its checkpoint's commit (a few milliseconds), which
takes it out."""

UNSEEN_WAIT = 2.0
"""Seconds a ``put_writes`` of a checkpoint this process neither read nor put waits for
its put to begin here before it tells the manifest itself (1 UpdateItem), counted again
from the end of each put of the namespace in flight here."""
CHILD_TURNS = 16
"""Event-loop turns a ``put_writes`` gives LangGraph to begin the next step's put before
it decides that its checkpoint may be the latest (no request; a turn is microseconds)."""

Store = Callable[[InlineCopy, float | None], Coroutine[Any, Any, bool]]
"""Writes a held copy's object once (``If-None-Match``), given when the item was last seen
holding it (None: just now): True when the key holds it (``store_held``)."""
WriteStore = Callable[[HeldWrite, float | None], Coroutine[Any, Any, bool]]
"""The same for a held write's object (``held_writes.store_write``)."""


async def store_held(
    objects: ObjectStorePort,
    key: str,
    body: bytes,
    still_held: Callable[[], Awaitable[bool]],
    *,
    seen: float | None = None,
    over_marker: Callable[[], bool] | bool = False,
) -> bool:
    """Store a held checkpoint's object: ``If-None-Match`` (1 PUT). True when the key
    then holds these bytes: written, or found there (a GET more). An object with other
    bytes was left under the key uncommitted (a writer that crashed before its commit,
    an import's attempt cut short): while the item still holds this copy
    (``still_held``: 1 GetItem), the copy replaces that object, ``If-Match`` its ETag.
    False when it does not: the object is another life's (an import's replace reuses
    ids), or a replay's with other content, and is left as it is.

    ``seen``: when (the loop's clock) the item was last known to hold the copy; past
    :data:`HELD_LICENSE` the item is asked first (1 GetItem) and nothing is PUT when it
    no longer holds it. ``over_marker``: an erasure marker under the key is replaced
    whether or not an item holds the copy (a new life's own write, or a put still in
    progress whose commit waits for its object: never a PUT that lands after its call
    returned, which replaces a marker only while the item holds its copy)."""
    stale = seen is not None and asyncio.get_running_loop().time() - seen > HELD_LICENSE
    if stale and not await still_held():
        return False  # taken out (stored elsewhere, or its thread deleted)
    for _ in range(3):
        if await objects.put(key, body, mode=CREATE, cache=True):
            return True
        existing, etag = await objects.get_with_etag(key)
        if existing == body:
            return True
        if existing is None:
            continue  # deleted meanwhile: store it again
        ours = over_marker() if callable(over_marker) else over_marker
        if not (ours and existing == ERASED) and not await still_held():
            return False  # not ours to replace
        if await objects.put(key, body, mode=Update(etag) if etag else None, cache=True):
            return True
    raise ConflictError(f"checkpoint object {key!r} kept changing while it was stored: retry")


def held_by(
    manifest: ManifestPort, thread_id: str, checkpoint_ns: str, copy: InlineCopy
) -> Callable[[], Awaitable[bool]]:
    """Whether the item of (thread, namespace) still holds ``copy`` (1 GetItem)."""

    async def check() -> bool:
        raw = await manifest.reads.read(thread_id, checkpoint_ns)
        return raw is not None and copy in raw.inline

    return check


def clearer(
    manifest: ManifestPort,
    thread_id: str,
    checkpoint_ns: str,
    store: Store,
    store_write: WriteStore | None = None,
) -> Callable[[Raw], Awaitable[None]]:
    """``advance``'s ``clear``: an item crowded with copies and writes (other
    processes', frozen or reaped before their objects landed) is counted, what it holds
    stored and taken out (its latest then called bare no more: its writes are listed).

    Cost: 1 UpdateItem when its count is missing or wrong; 1 PUT per copy or write
    (concurrently, ``If-None-Match``) and 1 UpdateItem that takes the stored ones out."""

    async def clear(raw: Raw) -> None:
        copies, writes = raw.inline, raw.writes if store_write is not None else ()
        exact = sum(held_size(c) for c in copies) + sum(write_size(w) for w in raw.writes)
        if raw.held_bytes != exact:
            await manifest.held.recount(thread_id, checkpoint_ns, raw)
        if copies or writes:
            done = await bounded_map(lambda c: store(c, None), list(copies))
            stored = [c for c, ok in zip(copies, done, strict=True) if ok]
            wdone: list[bool] = []
            if store_write is not None:
                wdone = await bounded_map(lambda w: store_write(w, None), list(writes))
            kept = [w for w, ok in zip(writes, wdone, strict=True) if ok]
            await manifest.held.settle(
                thread_id, checkpoint_ns, stored, life=raw.life, writes=kept, unbare=True
            )

    return clear


@dataclass
class _Copy:
    """One copy (or write) the item holds, as this process knows it."""

    copy: InlineCopy | HeldWrite
    seen: float
    """When (the loop's clock) the item was last known to hold it."""
    task: asyncio.Task[bool] | None = None
    stored: bool = False
    """Its object is known to be stored: the next commit drops it."""
    stuck: bool = False
    """Its object could not be stored as held (another body at its key): it stays."""


@dataclass
class _Namespace:
    thread_id: str
    checkpoint_ns: str
    copies: dict[str, _Copy] = field(default_factory=dict)
    life: str | None = None
    """The life (``Entry.life``) its copies were committed in (None: not known)."""
    store: Store | None = None
    """How its copies' objects are stored (set by the first commit here)."""
    writes: dict[str, _Copy] = field(default_factory=dict)
    """Its held writes, by key tail."""
    store_write: WriteStore | None = None
    """How its held writes' objects are stored."""


class HeldCopies:
    """What this process knows of the copies its items hold, and of pending writes."""

    def __init__(self) -> None:
        self._ns: LRUCache[str, _Namespace] = LRUCache(maxsize=NOTES)
        self._written: LRUCache[tuple[str, str], bool] = LRUCache(maxsize=WRITTEN_NOTES)
        """(prefix, checkpoint id) -> True: it has pending writes from this process."""
        self._sent: LRUCache[tuple[str, str], bool] = LRUCache(maxsize=NOTES)
        """(prefix, checkpoint id) -> whether its commit was sent calling it bare."""
        self._parents: LRUCache[tuple[str, str], bool] = LRUCache(maxsize=NOTES)
        """(prefix, checkpoint id) -> True: a child of it was committed here."""
        self.proven = False
        """A checkpoint object of this process has been stored: until then a put waits
        for its object's PUT too, so that a missing bucket or a denied PutObject fails
        the first put instead of leaving every checkpoint held."""
        self._committing: dict[tuple[str, str], asyncio.Future[bool]] = {}
        """(prefix, checkpoint id) -> its put in progress here: whether it committed."""
        self._children: dict[tuple[str, str], list[asyncio.Future[bool]]] = {}
        """(prefix, checkpoint id) -> the puts in progress here that continue it."""
        self._awaited: dict[tuple[str, str], list[asyncio.Future[None]]] = {}
        """(prefix, checkpoint id) -> ``put_writes`` waiting for its put to begin here."""
        """(prefix, checkpoint id) -> the puts in progress here that continue it."""

    # ---------------------------------------------------------------- commits
    async def prepare(
        self,
        where: tuple[str, str, str],
        cid: str,
        body: bytes | None,
        store: Store,
        store_write: WriteStore | None = None,
    ) -> InlineCommit:
        """The ``InlineCommit`` of a put about to commit (``body`` None: not carried).
        Waits only when the copies already held would pass :data:`HELD_BUDGET`.
        ``where``: (namespace prefix, thread id, checkpoint namespace)."""
        prefix = where[0]
        ns = self._space(*where)
        ns.store = store
        if store_write is not None:
            ns.store_write = store_write
        self._restart(ns, store)
        if body is not None:
            await self._make_room(ns, len(body), store)
        bare = not self._written.pop((prefix, cid), False)
        self._sent[(prefix, cid)] = bare
        drop = tuple(h.copy for h in ns.copies.values() if h.stored)
        mine = invert_id(cid)
        drop_writes = tuple(
            h.copy
            for h in ns.writes.values()
            if h.stored and isinstance(h.copy, HeldWrite) and h.copy.inverted > mine
        )
        return InlineCommit(
            body=body,
            drop=tuple(c for c in drop if isinstance(c, InlineCopy)),
            bare=bare,
            drop_writes=drop_writes,
        )

    def hold_writes(
        self, where: tuple[str, str, str], writes: list[HeldWrite], store_write: WriteStore
    ) -> None:
        """The item now holds ``writes`` (a ``put_writes``'s UpdateItem answered): their
        objects are stored in the background, and a later commit drops them."""
        ns = self._space(*where)
        ns.store_write = store_write
        for w in writes:
            ns.writes[w.tail] = self._store_write(w, store_write)

    def begin(self, prefix: str, cid: str, parent: str | None) -> None:
        """A put of ``cid`` (continuing ``parent``) begins, before its first await: a
        ``put_writes`` of either waits for it (``needs_mark``); :meth:`end` ends it."""
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._committing[(prefix, cid)] = fut
        for waiter in self._awaited.pop((prefix, cid), []):
            if not waiter.done():
                waiter.set_result(None)
        if parent is not None:
            self._children.setdefault((prefix, parent), []).append(fut)

    def abandon(self, prefix: str, cid: str, parent: str | None) -> None:
        """A put that ended before its commit (bad input, a failed PUT of a blob)."""
        self._resolve(prefix, cid, parent, False)

    def _resolve(self, prefix: str, cid: str, parent: str | None, committed: bool) -> None:
        fut = self._committing.pop((prefix, cid), None)
        if fut is None:
            return
        if not fut.done():
            fut.set_result(committed)
        if parent is not None:
            siblings = self._children.get((prefix, parent), [])
            if fut in siblings:
                siblings.remove(fut)
            if not siblings:
                self._children.pop((prefix, parent), None)

    def end(
        self,
        prefix: str,
        cid: str,
        parent: str | None,
        tail: str,
        inline: InlineCommit,
        task: asyncio.Task[bool],
        store: Store,
        committed: bool,
        life: str | None = None,
    ) -> None:
        """After the commit (``committed``: it went through): the dropped copies are
        gone, a carried one is held until ``task`` stores it, and the copies another
        process left are stored from here."""
        self._resolve(prefix, cid, parent, committed)
        if not committed:
            return
        if parent is not None:
            self._parents[(prefix, parent)] = True
        ns = self._ns.get(prefix)
        if ns is not None and life is not None:
            ns.life = life
        if ns is None or inline.held is None:  # the contended path: nothing was dropped, none held
            return
        dropped = {c.checkpoint_id for c in inline.drop}
        for c in dropped:
            ns.copies.pop(c, None)
        held_ids = {h.checkpoint_id for h in inline.held} - dropped
        for c in [c for c in ns.copies if c not in held_ids and c != cid]:
            del ns.copies[c]  # gone from the item (settled by maintenance, a new life)
        now = asyncio.get_running_loop().time()
        for known in ns.copies.values():
            known.seen = now  # the old item holds it: its PUT may begin (again) for a while
        if inline.body is not None:
            mine = _Copy(InlineCopy(cid, tail, inline.body), now, task)
            ns.copies[cid] = mine
            task.add_done_callback(lambda t: _settled(mine, t))
        for h in inline.held:
            if h.checkpoint_id not in ns.copies and h.checkpoint_id not in dropped:
                ns.copies[h.checkpoint_id] = self._store(h, store)
        self._learn_writes(ns, cid, inline)

    def _learn_writes(self, ns: _Namespace, cid: str, inline: InlineCommit) -> None:
        """After a commit: the writes it dropped are gone, those the old item held that
        this process does not know as stored (another process's, frozen or reaped
        before their objects landed) are stored from here."""
        if inline.held_writes is None:
            return
        mine = invert_id(cid)
        dropped = {w for w in inline.drop_writes if w.inverted > mine}
        for w in dropped:
            known = ns.writes.get(w.tail)
            if known is not None and known.copy == w:
                del ns.writes[w.tail]
        held = {w.tail: w for w in inline.held_writes if w not in dropped}
        for tail, known in list(ns.writes.items()):
            if known.stored and tail not in held:
                del ns.writes[tail]  # gone from the item (settled elsewhere)
        now = asyncio.get_running_loop().time()
        for tail, w in held.items():
            known = ns.writes.get(tail)
            if known is not None and known.copy == w:
                known.seen = now
            elif ns.store_write is not None:
                ns.writes[tail] = self._store_write(w, ns.store_write)

    def life_of(self, prefix: str) -> str | None:
        """The life this process last committed in, in a namespace (None: not known)."""
        ns = self._ns.get(prefix)
        return ns.life if ns is not None else None

    def _space(self, prefix: str, thread_id: str, checkpoint_ns: str) -> _Namespace:
        ns = self._ns.get(prefix)
        if ns is None:
            ns = self._ns[prefix] = _Namespace(thread_id, checkpoint_ns)
        return ns

    def _store(self, copy: InlineCopy, store: Store, seen: float | None = None) -> _Copy:
        """A copy whose object this process stores, in the background (``seen``: when
        the item was last known to hold it; None: now)."""
        held = _Copy(copy, asyncio.get_running_loop().time() if seen is None else seen)
        held.task = in_background(store(copy, held.seen))
        task = held.task
        task.add_done_callback(lambda t: _settled(held, t))
        return held

    def _store_write(self, write: HeldWrite, store: WriteStore, seen: float | None = None) -> _Copy:
        """A held write whose object this process stores, in the background."""
        held = _Copy(write, asyncio.get_running_loop().time() if seen is None else seen)
        held.task = in_background(store(write, held.seen))
        task = held.task
        task.add_done_callback(lambda t: _settled(held, t))
        return held

    def _restart(self, ns: _Namespace, store: Store) -> None:
        """PUTs that failed, or were begun on a loop that is gone, begin again here."""
        loop = asyncio.get_running_loop()

        def again(h: _Copy) -> bool:
            if h.stored or h.stuck:
                return False
            t = h.task
            failed = t is not None and t.done() and (t.cancelled() or t.exception() is not None)
            orphan = t is not None and not t.done() and t.get_loop() is not loop
            return t is None or failed or orphan

        for c, h in list(ns.copies.items()):
            if again(h) and isinstance(h.copy, InlineCopy):
                ns.copies[c] = self._store(h.copy, store, h.seen)
        for tail, h in list(ns.writes.items()):
            if again(h) and isinstance(h.copy, HeldWrite) and ns.store_write is not None:
                ns.writes[tail] = self._store_write(h.copy, ns.store_write, h.seen)

    async def _make_room(self, ns: _Namespace, size: int, store: Store) -> None:
        """Past the budget, wait for the held objects (a failure is the put's error)."""
        live = [h for h in (*ns.copies.values(), *ns.writes.values()) if not (h.stored or h.stuck)]
        if sum(len(h.copy.body) for h in live) + size <= HELD_BUDGET:
            return
        for h in live:
            if h.task is not None:
                h.stored = await h.task
                h.stuck = not h.stored

    def bodies(self, prefix: str) -> list[InlineCopy]:
        """The copies of a namespace this process knows its item holds (no request):
        a put reads its parent's runs from them when their objects have not landed."""
        ns = self._ns.get(prefix)
        if ns is None:
            return []
        return [h.copy for h in ns.copies.values() if isinstance(h.copy, InlineCopy)]

    def forget(self, thread_prefix: str) -> None:
        """A thread began a new life (an import's replace, a deletion and a new
        conversation reuse its ids): what this process knew of its checkpoints (copies
        stored, children committed, commits sent) was the old life's."""
        for p in [p for p in self._ns if p.startswith(thread_prefix)]:
            self._ns.pop(p, None)
        for cache in (self._sent, self._parents):
            for k in [k for k in cache if k[0].startswith(thread_prefix)]:
                cache.pop(k, None)

    # ---------------------------------------------------------- pending writes
    def note_writes(self, prefix: str, cid: str) -> None:
        """A ``put_writes`` of ``cid`` begins (before its first request)."""
        self._written[(prefix, cid)] = True

    async def needs_mark(self, prefix: str, cid: str, *, read: bool) -> bool:
        """After a ``put_writes`` stored its objects: whether the item may still call
        ``cid`` a bare latest (then ``ManifestPort.written`` must say otherwise).

        ``read``: this process read ``cid`` (it was committed elsewhere). A checkpoint
        this process neither read nor put is one LangGraph made and will put next (its
        tasks run ahead of its checkpoint's put): its put is waited for, at most
        :data:`UNSEEN_WAIT` seconds, and its commit then says it has writes itself. A
        put of ``cid`` in progress here is waited for, and so are those of its children
        (LangGraph stores the next step's checkpoint as the tasks' writes land): once a
        child is committed, ``cid`` is no latest and needs no mark."""
        loop = asyncio.get_running_loop()
        key = (prefix, cid)
        await self._unseen(key, read)
        fut = self._committing.get(key)
        if fut is not None and fut.get_loop() is loop:
            await asyncio.shield(fut)
        if self._sent.get(key) is False:
            return False  # its commit knew of these writes: it called it no bare latest
        await _turns(lambda: bool(self._children.get(key) or self._parents.get(key)))
        children = [f for f in self._children.get(key, []) if f.get_loop() is loop]
        if children:
            await asyncio.wait([asyncio.shield(f) for f in children])
        return not self._parents.get(key)  # a child is committed: cid is no latest

    async def own_put(self, prefix: str, cid: str, *, read: bool) -> bool | None:
        """Whether this process's own put of ``cid`` committed, waited for while in
        progress here or about to begin (as :meth:`needs_mark` does); None when it has
        none (``read``: ``cid`` was read here, committed elsewhere)."""
        key = (prefix, cid)
        await self._unseen(key, read)
        fut = self._committing.get(key)
        if fut is not None and fut.get_loop() is asyncio.get_running_loop():
            return await asyncio.shield(fut)
        return None

    async def _unseen(self, key: tuple[str, str], read: bool) -> None:
        """A checkpoint this process neither read nor put is one LangGraph made and will
        put next: its put is given :data:`UNSEEN_WAIT` seconds to begin here, and as
        long again after each put of the namespace in flight here ends (LangGraph begins
        a thread's puts one after another: a slow one, sweeping an old life under load,
        must not make the next one's writes look orphaned)."""
        if read or key in self._committing or key in self._sent:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._awaited.setdefault(key, []).append(waiter)
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(waiter), UNSEEN_WAIT)
                if waiter.done() or not (ahead := _in_flight(self._committing, key[0])):
                    return
                await asyncio.wait([asyncio.shield(f) for f in ahead])
        finally:
            waiters = self._awaited.get(key, [])
            if waiter in waiters:
                waiters.remove(waiter)
            if not waiters:
                self._awaited.pop(key, None)

    # ---------------------------------------------------------------- closing
    async def drain(self, manifest: ManifestPort) -> None:
        """Wait for this loop's PUTs of held copies (a PUT that failed, before or while
        it is waited for, or was begun on a loop that is gone, is begun again: twice at
        most), then take the stored ones out of their items (1 UpdateItem per namespace
        holding any): after it, what this process committed is in S3. A copy whose PUT
        kept failing stays held: the next writer or maintenance stores it."""
        for _ in range(2):  # a PUT that fails while waited for is begun once more
            await self._wait_stored()
        for prefix, ns in list(self._ns.items()):
            stored = [h.copy for h in ns.copies.values() if h.stored]
            copies = [c for c in stored if isinstance(c, InlineCopy)]
            # a latest's writes stay held while it is the latest (its reads list none)
            writes = [
                h.copy
                for h in ns.writes.values()
                if h.stored
                and isinstance(h.copy, HeldWrite)
                and self._parents.get((prefix, uninvert_id(h.copy.inverted)))
            ]
            if copies or writes:
                where = (ns.thread_id, ns.checkpoint_ns)
                await manifest.held.settle(*where, copies, life=ns.life, writes=writes)
                for c in copies:
                    ns.copies.pop(c.checkpoint_id, None)
                for w in writes:
                    ns.writes.pop(w.tail, None)

    async def _wait_stored(self) -> None:
        """Begin again the PUTs that failed or were begun on a loop that is gone, then
        wait for this loop's PUTs of held copies; each copy's result is read from its
        task (its done callback may not have run yet)."""
        loop = asyncio.get_running_loop()
        waiting: list[tuple[_Copy, asyncio.Task[bool]]] = []
        for ns in list(self._ns.values()):
            if ns.store is not None:
                self._restart(ns, ns.store)
            waiting += [
                (h, h.task)
                for h in [*ns.copies.values(), *ns.writes.values()]
                if not (h.stored or h.stuck) and h.task is not None and h.task.get_loop() is loop
            ]
        if waiting:
            await asyncio.gather(*(t for _, t in waiting), return_exceptions=True)
        for h, t in waiting:
            if not t.cancelled() and t.exception() is None:
                h.stored = t.result()
                h.stuck = not h.stored


async def _turns(ready: Callable[[], bool]) -> None:
    """Up to :data:`CHILD_TURNS` event-loop turns, until ``ready()``."""
    for _ in range(CHILD_TURNS):
        if ready():
            return
        await asyncio.sleep(0)


def _settled(held: _Copy, task: asyncio.Task[bool]) -> None:
    """A held copy's PUT ended: stored, or left for the next commit to begin again. The
    task is let go (a task holds its loop: a loop that ``asyncio.run`` closed must not
    outlive it here, clients and all)."""
    if held.task is task:
        held.task = None
    if task.cancelled():
        return
    exc = task.exception()
    if exc is None:
        held.stored = task.result()
        held.stuck = not held.stored  # another object under its key: it stays held
        return
    name = held.copy.checkpoint_id if isinstance(held.copy, InlineCopy) else held.copy.tail
    if isinstance(exc, CheckpointConflictError):
        held.stuck = True
        logger.error("%s stays held in the manifest: %s", name, exc)
    else:  # the copy stays held: the next commit or maintenance stores it
        logger.info("storing %s (held in the manifest) failed, to be retried: %r", name, exc)


def _in_flight(
    committing: dict[tuple[str, str], asyncio.Future[bool]], prefix: str
) -> list[asyncio.Future[bool]]:
    """The puts of a namespace in flight on this event loop."""
    loop = asyncio.get_running_loop()
    return [
        f
        for (p, _), f in committing.items()
        if p == prefix and not f.done() and f.get_loop() is loop
    ]
