"""The DynamoDB manifest: what exists, per deployment, thread and namespace.

:class:`Manifest` keeps one item per (deployment, thread, namespace); its
docstring lists the item's attributes and what each call costs in requests.

Design
------
**The manifest defines what exists.** A checkpoint belongs to a thread's
history only when it is ``latest`` or one of ``heads``, or an ancestor of one
(checkpoint keys carry their parent id), and is not older than ``floor``. An
object written by a writer that crashed before its manifest update is
invisible (no phantom step), and so is everything of a deleted or expired
life when the id is reused: the new life starts from a parentless checkpoint
and its own ``floor``.

**Writers.** The common put is one UpdateItem conditioned on ``latest_id`` being
the new checkpoint's parent (and older). Anything else (a fork, a concurrent
writer, a replay, a fresh namespace) reads the item and compare-and-swaps on
``rev`` (``retry.cas``). A put whose parent belongs to a deleted, expired or
pruned life is refused: its unchanged channel blobs may already be gone.

**Maintenance** conditions on ``rev``: prune raises ``floor`` before deleting,
delete_thread writes a tombstone before deleting. While the tombstone's lease
runs (the deletion is in progress), a new life on the same id waits, so the
deletion never removes its objects.

**Tenancy.** The deployment (bucket and prefix) is part of the key, so any
number of deployments share one table; the table is the only shared thing.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import orjson

from langgraph_s3.aws import door as aws
from langgraph_s3.aws.clients import ClientFactory
from langgraph_s3.core.keys import encode, parse_checkpoint_tail
from langgraph_s3.core.records import (
    DELETE_LEASE_SECONDS,
    DELETING,
    IDLE_ATTRIBUTE,
    REMOVING,
    REVIVABLE,
    ROOT_SK,
    TTL_ATTRIBUTE,
    Deletion,
    Entry,
    Expiry,
    Fields,
    PackRef,
    Raw,
    ThreadInfo,
    bound_live,
    deleting_threads,
    entry_of,
    mark_until,
    marks_until,
    uuid6_time,
)
from langgraph_s3.core.retry import LOST, Done, Retry, backoff, cas
from langgraph_s3.core.tasks import gather_all
from langgraph_s3.errors import (
    CheckpointConflictError,
    ConditionFailedError,
    ConflictError,
    InvalidIdError,
    InvalidRequestError,
    MissingResourceError,
    ServiceError,
)

KEY_SCHEMA = [
    {"AttributeName": "pk", "KeyType": "HASH"},
    {"AttributeName": "sk", "KeyType": "RANGE"},
]
ATTRIBUTES = [
    {"AttributeName": "pk", "AttributeType": "S"},
    {"AttributeName": "sk", "AttributeType": "S"},
]
META_SK = "~layout"
"""Sort key of the per-deployment marker (keys.encode never yields ``~l``)."""
LAYOUT_VERSION = 2
TOMBSTONE_SECONDS = 7 * 86400
"""How long a deleted thread's tombstone refuses writers that still hold its ids."""
LEASE_POLL_SECONDS = 0.25
"""How often a new life waiting on a deletion's lease reads the item again."""
ACTIVE_POLLS = 120
"""DescribeTable polls (``retry.backoff`` apart) before a new table counts as stuck."""
GONE_SECONDS = 3600
GONE_LIMIT = 100
RETIRED = f"latest_id, latest_tail, heads, spilled, uses_delta, {IDLE_ATTRIBUTE}, pack"
"""What a tombstone removes from an item: everything that made it a life."""
RETIP_RUNS = 16
"""Rolled-back runs a rollback's commit names in its condition (more: a CAS on rev)."""
HEADS_INLINE = 64
"""Heads an item holds before a writer's next contended commit spills the older half
to tip markers: with the two a commit adds, an item never holds more than 66 heads
(about 2.5 KB), whatever the thread's forks (each fork is still in the history)."""
logger = logging.getLogger(__name__)


def deployment_key(bucket: str, prefix: str) -> str:
    """The part of every partition key that names the deployment.

    Args:
        bucket: the deployment's bucket.
        prefix: its key prefix; surrounding slashes do not matter.

    Returns:
        ``{bucket}/{prefix}/``, each part ``keys.encode``'d (so neither holds a ``/``).
    """
    return f"{encode(bucket, 'bucket')}/{encode(prefix.strip('/'), 'prefix')}/"


Group = list[dict[str, Any]]
"""One thread's items, as a Scan or Query returns them together."""


def expiry_attribute(checkpoint_ns: str) -> str:
    """Where a write under a thread TTL records the expiry: the root namespace's item
    carries the table's TTL attribute; a subgraph namespace's, its own idle time."""
    return IDLE_ATTRIBUTE if checkpoint_ns else TTL_ATTRIBUTE


def _when(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _cursor(item: dict[str, Any]) -> str:
    key = orjson.dumps([item["pk"]["S"], item["sk"]["S"]])
    return base64.urlsafe_b64encode(key).decode().rstrip("=")


def _uncursor(cursor: str) -> dict[str, Any]:
    try:
        pk, sk = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        return {"pk": {"S": str(pk)}, "sk": {"S": str(sk)}}
    except (ValueError, TypeError) as exc:
        raise InvalidRequestError(
            f"after={cursor[:60]!r} is not a cursor list_threads gave: pass a "
            "ThreadInfo.cursor, or nothing to start from the beginning"
        ) from exc


def _thread_info(entries: list[Entry], group: Group) -> ThreadInfo | None:
    """A thread's summary from its live entries (None when it has none)."""
    if not entries:
        return None
    entries = sorted(entries, key=lambda e: e.checkpoint_ns)
    root = entries[0] if not entries[0].checkpoint_ns else None
    if root is not None:
        expires = root.expires_at
    else:
        idles = [e.expires_at for e in entries]
        expires = None if None in idles else max(i for i in idles if i is not None)
    return ThreadInfo(
        thread_id=entries[0].thread_id,
        namespaces=tuple(e.checkpoint_ns for e in entries),
        latest_id=root.latest_id if root is not None else None,
        created_at=_when(min(e.created_at for e in entries)),
        updated_at=_when(max(e.updated_at for e in entries)),
        expires_at=_when(expires) if expires is not None else None,
        cursor=_cursor(group[-1]),
    )


def _expiry(group: Group, now: float) -> Expiry | None:
    """The thread of ``group`` when its TTL passed and its objects await a sweep."""
    raws = [Raw(i) for i in group]
    root = next((r for r in raws if r.item["sk"]["S"] == ROOT_SK), None)
    named = next((r.item["thread_id"]["S"] for r in raws if "thread_id" in r.item), None)
    if named is None:
        return None
    if root is not None and root.committed:
        return Expiry(named, root.rev) if root.expired(now) else None
    subs = [r for r in raws if r.committed and r.item["sk"]["S"] != ROOT_SK]
    idles = [r.idle_until for r in subs]
    if subs and None not in idles and max(i for i in idles if i is not None) <= now:
        return Expiry(named, root.rev if root is not None else None)
    return None


class CommitRounds:
    """What :class:`Manifest` and the in-memory manifest (testing/fakes.py) decide alike,
    over their own conditional writes (``_add_tip``, ``_swap``): the contended half
    of ``advance`` (read the item, decide with :func:`_decide`, then add a tip, wait
    out a deletion's lease, or start a new life by CAS) and ``merge``."""

    async def read(self, thread_id: str, checkpoint_ns: str) -> Raw | None:
        raise NotImplementedError

    async def advance(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        tail: str,
        parent_id: str | None,
        *,
        uses_delta: bool = False,
        rewrite: Callable[[], Awaitable[None]] | None = None,
        stored: Awaitable[Any] | None = None,
        sweep: Callable[[Expiry, str], Awaitable[None]] | None = None,
        spill: Callable[[Entry, list[str], str], Awaitable[None]] | None = None,
        ensure: Callable[[], Awaitable[None]] | None = None,
        life: str | None = None,
    ) -> str | None:
        """Commit a stored checkpoint: latest moves forward to it, or it joins ``heads``.

        A new life over a tombstone waits for that deletion to end (its lease), then
        calls ``rewrite`` to store the objects again (the deletion may have taken
        them) and commits only if no other deletion began since. A checkpoint
        already committed (a replay, a lost answer) is left as it is.

        Cost: 1 UpdateItem when ``parent_id`` is the latest (or a new namespace);
        otherwise that failed attempt, then per round 1 GetItem + 1 conditional write
        (UpdateItem or PutItem), at most ``Limits.max_conflicts`` contended rounds.

        Args:
            thread_id: the thread.
            checkpoint_ns: the namespace.
            checkpoint_id: the checkpoint to commit (its objects are stored).
            tail: its object key below the namespace's checkpoints prefix.
            parent_id: the checkpoint it continues; None for the first of a life.
            uses_delta: it has DeltaChannel state to rebuild from history.
            rewrite: stores its objects again (called after a deletion ends).
            stored: the checkpoint's object, still being stored: the fast-path update
                goes out beside it (one round trip for both). Until it lands, and for
                good if its writer crashes, the latest names an object that is not
                there, and readers take the latest's parent instead; the contended
                path starts only once it is stored.
            sweep: removes an expired life's objects (the TTL sweep of one thread)
                but those of ``checkpoint_id`` and newer ones, called before a new
                life begins over it; then ``rewrite`` follows, as after a deletion.
                Without it the old objects are left behind.
            spill: stores tip markers of an entry's older heads under a spill generation
                (called when it holds ``HEADS_INLINE`` or more); the item then drops them
                and names the generation.
                Without it heads stay in the item (it grows with every fork).
            ensure: makes sure the checkpoint's objects are there, storing them again if
                not: called once before a contended commit onto a live entry, since a
                deletion (delete_thread, an import's replace, a TTL sweep) may have
                listed and removed them before another writer began the life it joins.
            life: the life (``Entry.life``) the parent was read in, when this process
                read it: the checkpoint commits only in that life (an import's replace
                or a deletion and a new conversation reuse the thread's ids).

        Returns:
            The life the checkpoint was committed in ("" on an item an earlier version
            wrote; None when not known: a parent whose life the caller did not pass).

        Raises:
            CheckpointConflictError: ``parent_id`` belongs to a deleted, expired,
                replaced or pruned life (the checkpoint is discarded).
            ConflictError: the entry kept changing for ``Limits.max_conflicts`` rounds.
        """
        fresh = new_life()  # the token of the life it begins, if it begins one
        fast = self._advance_fast(
            thread_id, checkpoint_ns, checkpoint_id, tail, parent_id, uses_delta, life, fresh
        )
        if stored is None:
            done = await fast
        else:
            done, _ = await gather_all(fast, stored)
        if done:
            return fresh if parent_id is None else life
        return await self._advance_contended(
            thread_id,
            checkpoint_ns,
            checkpoint_id,
            tail,
            parent_id,
            uses_delta,
            rewrite,
            sweep,
            spill,
            ensure,
            life,
        )

    async def _advance_fast(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        tail: str,
        parent_id: str | None,
        uses_delta: bool,
        life: str | None,
        fresh: str,
    ) -> bool:
        """One conditional UpdateItem: ``parent_id`` is the latest (in ``life``, when
        known), or the namespace is new (its life's token is ``fresh``)."""
        raise NotImplementedError

    async def _add_tip(
        self, entry: Entry, cid: str, tail: str, parent: str | None, uses_delta: bool
    ) -> bool:
        raise NotImplementedError

    async def _swap(
        self, thread_id: str, checkpoint_ns: str, new: Fields, *, rev: int | None
    ) -> bool:
        raise NotImplementedError

    async def _drop_heads(self, entry: Entry, moved: list[str], spill: str) -> bool:
        """Remove ``moved`` (their tip markers are stored under generation ``spill``)
        from the item's heads and name the generation, if it is still at ``entry.rev``."""
        raise NotImplementedError

    table: str
    deployment: str

    def _live(self, items: Iterable[dict[str, Any]], now: float) -> list[Entry]:
        """The live entries among items (the marker skipped); one another writer left
        (a hand edit, an older version of this library) is skipped with a warning.

        A subgraph namespace lives and dies with its thread's root namespace, when
        that is among ``items`` (see :func:`bound_live`; and while a deletion of the
        thread is in progress, whose revive puts the root back last): pass a thread's
        items together.
        """
        kept: list[tuple[Raw, Entry]] = []
        roots: dict[str, Raw] = {}
        for item in items:
            if item.get("sk", {}).get("S") == META_SK:
                continue
            raw = Raw(item)
            try:
                entry = raw.live(now)
            except (KeyError, TypeError, AttributeError, ValueError):
                logger.warning(
                    "skipping an item of table %r that langgraph-s3 did not write: key %r",
                    self.table,
                    {k: item.get(k) for k in ("pk", "sk")},
                )
                continue
            if item.get("sk", {}).get("S") == ROOT_SK:
                roots[item["pk"]["S"]] = raw
            if entry is not None:
                kept.append((raw, entry))
        out: list[Entry] = []
        for raw, e in kept:
            root = roots.get(raw.item["pk"]["S"])
            if e.checkpoint_ns and not bound_live(raw, root, now):
                continue
            if e.checkpoint_ns and root is not None and root.deletion_held(now) > now:
                continue  # its thread's deletion is in progress: gone, or back, whole
            if e.checkpoint_ns and root is not None and root.committed:
                e = replace(
                    e,
                    pack=PackRef.of(root.item.get("pack")),
                    packings=int(root.item.get("packings", {}).get("N", "0")),
                )
            out.append(e)
        return out

    # -- whole-deployment scans (maintenance, listing threads) -------------------
    def _scan_pages(self, start: dict[str, Any] | None) -> AsyncIterator[list[dict[str, Any]]]:
        """This deployment's items, a Scan page at a time, from after ``start``."""
        raise NotImplementedError

    async def _groups(self, start: dict[str, Any] | None = None) -> AsyncIterator[list[Group]]:
        """Each thread's items together (a thread split across two Scan pages is held
        back until its last item is read), a page's worth at a time."""
        held: list[dict[str, Any]] = []
        async for page in self._scan_pages(start):
            done: list[Group] = []
            for item in page:
                if item.get("sk", {}).get("S") == META_SK:
                    continue
                if held and held[0]["pk"]["S"] != item["pk"]["S"]:
                    done.append(held)
                    held = []
                held.append(item)
            if done:
                yield done
        if held:
            yield [held]

    async def scan(self, *, deleting: set[str] | None = None) -> AsyncIterator[list[Entry]]:
        """Every live (thread, namespace) entry of this deployment, a page at a time.

        Args:
            deleting: gets the threads whose deletion is in progress (a tombstone
                whose lease is held): that deletion may still fail and put the thread
                back (:meth:`revive`), so a caller that must reach every thread waits
                for it. No extra request.

        Cost: 1 Scan per 1 MB page of the whole table (the filter on the deployment
        is applied after reading): for maintenance, never on a request path.
        """
        async for groups in self._groups():
            now = self._clock()
            if deleting is not None:
                deleting.update(t for g in groups for t in deleting_threads(g, now))
            yield [e for g in groups for e in self._live(g, now)]

    async def threads(self, after: str | None = None) -> AsyncIterator[list[ThreadInfo]]:
        """Every live thread of this deployment, a Scan page at a time, in table order.

        Args:
            after: a :attr:`ThreadInfo.cursor`: resume after that thread.

        Cost: 1 Scan per 1 MB page of the whole table (about 3,000 namespaces).
        """
        start = _uncursor(after) if after else None
        if start is not None and not start["pk"]["S"].startswith(self.deployment):
            raise InvalidRequestError(
                f"after={str(after)[:60]!r} is a cursor of another deployment (or not one "
                "list_threads gave): pass a ThreadInfo.cursor of this saver's listing"
            )
        async for groups in self._groups(start):
            now = self._clock()
            out = [info for g in groups if (info := _thread_info(self._live(g, now), g))]
            if out:
                yield out

    async def expired(self) -> AsyncIterator[list[Expiry]]:
        """This deployment's threads whose TTL passed and whose objects are still to
        be swept (DynamoDB may or may not have removed the root item yet).

        Cost: 1 Scan per 1 MB page of the whole table.
        """
        async for groups in self._groups():
            now = self._clock()
            out = [x for g in groups if (x := _expiry(g, now)) is not None]
            if out:
                yield out

    def _conflict_rounds(self) -> int:
        """``Limits.max_conflicts``."""
        raise NotImplementedError

    def _clock(self) -> float:
        return time.time()

    async def merge(self, thread_id: str, source: Entry, target: Raw | None) -> bool:
        """copy_thread's commit: the target gains the source's tips.

        A target with its own live history keeps it beside the copy (the newer
        latest wins, the other becomes a head, the lower floor stays).

        Cost: 1 conditional PutItem.

        Args:
            thread_id: the target thread.
            source: the source's entry for one namespace.
            target: the target's item for that namespace as read before the objects
                were copied (None: there was none); the write is conditioned on it.

        Returns:
            False when the target changed since (a deletion begun meanwhile).
        """
        live = target.live(self._clock()) if target is not None else None
        if live is None:
            new = Fields(
                source.latest_id,
                source.latest_tail,
                source.floor,
                source.uses_delta,
                0,
                set(source.heads),
                set(source.gone),
                born=source.born if target is None else "",  # not over a deleted life
                # copy_thread hands the source's spilled heads over inline: none here
                life=new_life(),
            )
        else:
            top = max((live, source), key=lambda e: e.latest_id)
            new = Fields(
                top.latest_id,
                top.latest_tail,
                min(live.floor, source.floor),
                top.uses_delta,
                live.created_at,
                # a demoted latest keeps its parent beside it: its object may not be
                # there (a put in flight, a crashed writer), and the parent stands in
                ({*demoted(live), *live.heads, *demoted(source), *source.heads}) - {top.latest_id},
                set(live.gone | source.gone),
                # lowerable only while neither side was pruned
                born=min(live.floor, source.floor)
                if live.floor == live.born and source.floor == source.born
                else "",
                pack=live.pack,
                spilled=live.spilled,  # the target's own markers; the source's come inline
                packings=live.packings,
                life=live.life,
                removing=live.removing,
            )
        rev = target.rev if target is not None else None
        return await self._swap(thread_id, source.checkpoint_ns, new, rev=rev)

    async def _advance_contended(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        tail: str,
        parent_id: str | None,
        uses_delta: bool,
        rewrite: Callable[[], Awaitable[None]] | None,
        sweep: Callable[[Expiry, str], Awaitable[None]] | None = None,
        spill: Callable[[Entry, list[str], str], Awaitable[None]] | None = None,
        ensure: Callable[[], Awaitable[None]] | None = None,
        life: str | None = None,
    ) -> str:
        """A fork, a concurrent writer, a replay, a new life: read and decide; the
        life it committed in."""
        ensured: str | None = None
        """The life in which ``ensure`` last ran."""

        async def commit(raw: Raw | None) -> Done[str] | Retry:
            nonlocal ensured
            at = self._clock()
            expired = raw is not None and raw.committed and raw.expired(at)
            root = not checkpoint_ns  # only a root's expiry is a thread's
            if root and parent_id is None and expired and raw is not None and sweep is not None:
                await sweep(Expiry(thread_id, raw.rev), checkpoint_id)  # the old life goes
                return Retry(after=0)
            step = _decide(raw, checkpoint_id, tail, parent_id, uses_delta, at)
            if step is None:  # already committed (a replay, or our answer was lost)
                return Done(entry_of(raw.item).life if raw is not None else "")
            if isinstance(step, Entry) and parent_id is not None and life and step.life != life:
                # the parent was read in a life the thread no longer has: replaced by an
                # import, or deleted and begun again (its ids may be reused, its object
                # may have outlived the deletion)
                raise CheckpointConflictError(
                    f"checkpoint {checkpoint_id} continues checkpoint {parent_id} of a "
                    f"thread {thread_id!r} that was replaced (an import's replace, or a "
                    "deletion and a new conversation) while this run was writing: the "
                    "checkpoint was discarded; start the run again"
                )
            if isinstance(step, Entry) and checkpoint_id < step.latest_id:
                # a head: a prune or rollback in progress may have listed its object
                # (uncommitted, off the latest's line) and delete it: wait for it,
                # then check the objects again
                busy = marks_until(step.removing, at, kinds=DELETING)
                if busy > at:
                    ensured = None
                    return Retry(after=min(busy - at, LEASE_POLL_SECONDS))
            current = "" if raw is None else str(raw.item.get("life", {}).get("S", ""))
            if (
                ensure is not None
                and not (raw is not None and raw.tombstone)
                and ensured != current
            ):
                # its objects, whatever came between, once in each life it joins (a
                # deletion ended before that life began: what it took is put back)
                ensured = current
                await ensure()
                return Retry(after=0)
            if isinstance(step, Entry):
                if spill is not None and len(step.heads) >= HEADS_INLINE:
                    # the older half goes to markers first, then leaves the item; a
                    # crash between leaves markers of heads still in it (harmless)
                    moved = sorted(step.heads)[: len(step.heads) - HEADS_INLINE // 2]
                    generation = step.spilled or uuid.uuid4().hex[:16]
                    await spill(step, moved, generation)
                    await self._drop_heads(step, moved, generation)
                    return Retry(after=0)  # read it again, smaller
                done = await self._add_tip(step, checkpoint_id, tail, parent_id, uses_delta)
                return Done(step.life) if done else LOST
            if raw is not None and raw.tombstone:
                until = raw.held_until(at)
                if until > at:  # a deletion is removing objects: wait
                    return Retry(after=min(until - at, LEASE_POLL_SECONDS))
                if rewrite is not None:
                    await rewrite()  # after that deletion: ours are whole again
            done = await self._swap(
                thread_id, checkpoint_ns, step, rev=raw.rev if raw is not None else None
            )
            return Done(step.life) if done else LOST

        return await cas(
            lambda: self._read_bound(thread_id, checkpoint_ns),
            commit,
            attempts=self._conflict_rounds(),
            what=f"the manifest entry of thread {thread_id!r} namespace {checkpoint_ns!r}",
            error=ConflictError,
        )

    async def _read_bound(self, thread_id: str, checkpoint_ns: str) -> Raw | None:
        """The item a writer decides on. A subgraph namespace's is read with its root:
        one left by an expired life of the thread (see :func:`bound_live`) counts as
        expired, so the new life starts over it instead of continuing it."""
        if not checkpoint_ns:
            return await self.read(thread_id, checkpoint_ns)
        root, sub = await self._read_pair(thread_id, checkpoint_ns)
        if sub is not None and sub.committed and not bound_live(sub, root, self._clock()):
            return Raw({**sub.item, TTL_ATTRIBUTE: {"N": "0"}})
        marks = root.item.get(REMOVING, {}).get("SS", ()) if root is not None else ()
        if sub is not None and sub.tombstone and marks:  # a packing's: the thread's objects
            own = sub.item.get(REMOVING, {}).get("SS", ())
            return Raw({**sub.item, REMOVING: {"SS": sorted({*own, *marks})}})
        return sub

    async def _read_pair(self, thread_id: str, checkpoint_ns: str) -> tuple[Raw | None, Raw | None]:
        """(the root namespace's item, the namespace's), in one request."""
        raise NotImplementedError


class Manifest(CommitRounds):
    """The table that says which checkpoints exist: one item per (thread, namespace).

    Item layout (the key names the deployment, so deployments share a table)::

        pk = {bucket}/{prefix}/{thread}   sk = {namespace}   (each part keys.encode'd: no "/")
        thread_id, checkpoint_ns       the raw ids, for listing
        latest_id, latest_tail         newest committed checkpoint and its key tail
        heads                          other committed branch tips (forks, writers that lost
                                       the race to latest); absent when there are none
        floor                          nothing older belongs to this life of the thread
        born                           the floor the life began at, until prune raises
                                       it: a root a concurrent first writer commits
                                       late (older than the floor) lowers the floor
        gone                           checkpoints maintenance removed above the floor: a
                                       writer still holding one may not continue it
        rev                            bumped by every change: the compare-and-swap token
        uses_delta                     the latest has DeltaChannel state to rebuild
        created_at, updated_at         epoch seconds
        expires_at                     optional TTL attribute (idle threads retire)
        deleted, deleted_at,           a tombstone left by delete_thread (or drop) and
        lease_until                    the lease of the deletion in progress

    plus one marker per deployment (``pk = {bucket}/{prefix}/``, ``sk = ~layout``)
    recording the key layout its entries use.

    **The manifest defines what exists**: a checkpoint object is part of a thread
    only when the item's tips (``latest_id``, ``heads``) lead to it, not below
    ``floor``. A put sends its checkpoint object beside the fast-path update, so
    the latest may name an object still in flight (or, after a crash between the
    two, never stored): readers then take the latest's parent (a tip too, see
    ``history.lineage_of`` and ``demoted``). Every other path writes objects
    first, so a crash leaves only invisible objects.

    Cost in requests (each one round trip unless said otherwise):

    * :meth:`latest`, :meth:`read`: 1 GetItem (strongly consistent).
    * :meth:`namespaces`: 1 Query per 1 MB page of the thread's namespaces.
    * :meth:`scan`: 1 Scan per 1 MB page of the whole table (maintenance only).
    * :meth:`advance`: 1 UpdateItem on the fast path (the parent is latest);
      otherwise + 1 GetItem and 1 conditional write per contended round.
    * :meth:`raise_floor`, :meth:`replace`, :meth:`merge`, :meth:`drop`:
      1 conditional write.
    * :meth:`tombstone`: 1 Query page, then 1 UpdateItem per namespace (concurrent).
    * :meth:`renew`, :meth:`release`: 1 UpdateItem per namespace (concurrent).

    Example::

        manifest = Manifest(
            ClientFactory(), "checkpoints",
            deployment=deployment_key("my-bucket", "prod"), ttl_seconds=None,
        )
        await manifest.advance("t1", "", cid, tail, None)  # a new life: 1 UpdateItem
        entry = await manifest.latest("t1", "")            # 1 GetItem
        assert entry is not None and entry.latest_id == cid
    """

    def __init__(
        self,
        clients: ClientFactory,
        table: str,
        *,
        deployment: str,
        ttl_seconds: int | None,
        page_size: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """A client of ``table`` for one deployment (no request is made here).

        Args:
            clients: the factory every request goes through (``aws.call``).
            table: the DynamoDB table's name.
            deployment: this deployment's partition key prefix (:func:`deployment_key`).
            ttl_seconds: idle seconds before a thread expires; None keeps threads forever.
            page_size: items per Query/Scan request (DynamoDB's ``Limit``); None lets
                DynamoDB cut pages at 1 MB. Smaller pages bound what one request
                reads and holds, at one request per page.
            clock: epoch seconds now (expiry, leases, ``updated_at``); tests move it.
        """
        if page_size is not None and page_size < 1:
            raise ValueError(
                f"page_size must be at least 1 (or None for 1 MB pages), got {page_size}"
            )
        self.clients = clients
        self.table = table
        self.deployment = deployment
        self.ttl_seconds = ttl_seconds
        self.page_size = page_size
        self.clock = clock

    async def _call(self, op: str, **params: Any) -> dict[str, Any]:
        return await aws.call(self.clients, "dynamodb", op, **params)

    async def _pages(self, op: str, **params: Any) -> AsyncIterator[list[dict[str, Any]]]:
        """The items of a Query or Scan, one page (one request) at a time.

        Paginates by hand rather than with a botocore paginator, so that every page
        goes through ``aws.call`` (deadline, permits, error translation).
        """
        if self.page_size is not None:
            params["Limit"] = self.page_size
        while True:
            resp = await self._call(op, **params)
            yield resp.get("Items", [])
            if "LastEvaluatedKey" not in resp:
                return
            params["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def _pk(self, thread_id: str) -> dict[str, str]:
        return {"S": f"{self.deployment}{encode(thread_id, 'thread_id')}"}

    def key(self, thread_id: str, checkpoint_ns: str) -> dict[str, Any]:
        """The primary key of one (thread, namespace) item, as a tombstone lists it."""
        return {"pk": self._pk(thread_id), "sk": {"S": encode(checkpoint_ns, "checkpoint_ns")}}

    # -- reading ------------------------------------------------------------
    async def read(self, thread_id: str, checkpoint_ns: str) -> Raw | None:
        """The item as stored (live, tombstone or expired), for a later compare-and-swap.

        Cost: 1 GetItem (strongly consistent).

        Returns:
            The item, or None when there is none.
        """
        resp = await self._call(
            "get_item",
            TableName=self.table,
            Key=self.key(thread_id, checkpoint_ns),
            ConsistentRead=True,
        )
        item = resp.get("Item")
        return Raw(item) if item else None

    async def latest(self, thread_id: str, checkpoint_ns: str) -> Entry | None:
        """The live entry of one (thread, namespace).

        Cost: 1 GetItem (strongly consistent); for a subgraph namespace, 1
        BatchGetItem of it and the thread's root namespace, whose life it shares.

        Returns:
            The entry; None for a thread that does not exist, was deleted or expired.
        """
        if not checkpoint_ns:
            raw = await self.read(thread_id, checkpoint_ns)
            items = [raw.item] if raw is not None else []
        else:
            items = await self._batch_get(
                [self.key(thread_id, ""), self.key(thread_id, checkpoint_ns)]
            )
        want = encode(checkpoint_ns, "checkpoint_ns")
        entries = self._live(items, self._clock())
        return next((e for e in entries if encode(e.checkpoint_ns, "checkpoint_ns") == want), None)

    async def _batch_get(self, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Strongly consistent items of ``keys`` (of this table), in one BatchGetItem
        unless DynamoDB leaves some unprocessed (then again, after a backoff)."""
        out: list[dict[str, Any]] = []
        todo = keys
        for attempt in range(self.clients.limits.max_attempts + 1):
            resp = await self._call(
                "batch_get_item",
                RequestItems={self.table: {"Keys": todo, "ConsistentRead": True}},
            )
            out.extend(resp.get("Responses", {}).get(self.table, []))
            todo = resp.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
            if not todo:
                return out
            await backoff(attempt)
        raise ServiceError(
            f"DynamoDB left keys of table {self.table!r} unprocessed "
            f"{self.clients.limits.max_attempts + 1} times (throttled): retry later"
        )

    async def namespaces(self, thread_id: str) -> list[Entry]:
        """Every live namespace of one thread.

        Cost: 1 Query per 1 MB page (sequential); one for any ordinary thread.
        """
        items: list[dict[str, Any]] = []
        async for page in self._query(thread_id):
            items.extend(page)
        return self._live(items, self._clock())

    async def _read_pair(self, thread_id: str, checkpoint_ns: str) -> tuple[Raw | None, Raw | None]:
        items = await self._batch_get([self.key(thread_id, ""), self.key(thread_id, checkpoint_ns)])
        by_sk = {i["sk"]["S"]: Raw(i) for i in items}
        return by_sk.get(ROOT_SK), by_sk.get(encode(checkpoint_ns, "checkpoint_ns"))

    async def seal_born(self, thread_id: str, born: str) -> bool:
        """Fix a life's beginning: a root older than ``born`` may no longer join it
        (a late first writer gets CheckpointConflictError), so what is older than
        ``born`` belongs to an earlier life for good.

        Cost: 1 conditional UpdateItem of the root namespace's item.

        Returns:
            False when ``born`` is not the life's beginning any more.
        """
        try:
            await self._call(
                "update_item",
                TableName=self.table,
                Key=self.key(thread_id, ""),
                UpdateExpression="REMOVE born ADD rev :one",
                ConditionExpression="born = :b AND attribute_exists(latest_id)",
                ExpressionAttributeValues={":b": {"S": born}, ":one": {"N": "1"}},
            )
            return True
        except ConditionFailedError:
            return False

    async def pack_of(self, encoded_thread: str) -> PackRef | None:
        """The pack of a thread named by its key segment (``keys.encode``'d id).

        Cost: 1 GetItem of the root namespace's item.
        """
        resp = await self._call(
            "get_item",
            TableName=self.table,
            Key={"pk": {"S": self.deployment + encoded_thread}, "sk": {"S": ROOT_SK}},
            ConsistentRead=True,
        )
        raw = Raw(resp["Item"]) if resp.get("Item") else None
        return PackRef.of(raw.item.get("pack")) if raw is not None and raw.committed else None

    async def set_pack(
        self,
        thread_id: str,
        new: PackRef | None,
        old: PackRef | None,
        *,
        mark: str | None = None,
        life: str | None = None,
    ) -> bool:
        """Switch a live thread to another pack (None: none), if its pack is still
        ``old`` (and its life ``life``, when given: an import's replace leaves a thread
        without a pack too): packing's commit, after the pack is stored and before the
        objects it holds are removed (under ``mark``, the removal's, as for
        :meth:`raise_floor`).

        Cost: 1 conditional UpdateItem of the root namespace's item (``rev`` bumped:
        a read that found objects gone reads again).

        Returns:
            False when the thread changed meanwhile (deleted, a new life, repacked).
        """
        values: dict[str, Any] = {":one": {"N": "1"}}
        cond = "attribute_exists(latest_id) AND attribute_not_exists(deleted)"
        if old is None:
            cond += " AND attribute_not_exists(pack)"
        else:
            cond += " AND pack.#k = :old"
            values[":old"] = {"S": old.key}
        if life:
            cond += " AND life = :life"
            values[":life"] = {"S": life}
        if new is None:
            update = "REMOVE pack ADD rev :one, packings :one"
        else:
            update = "SET pack = :p ADD rev :one, packings :one"
            values[":p"] = new.item()
        update += _marked(values, mark)
        names = {"#k": "key"} if old is not None else {}
        try:
            await self._call(
                "update_item",
                TableName=self.table,
                Key=self.key(thread_id, ""),
                UpdateExpression=update,
                ConditionExpression=cond,
                ExpressionAttributeValues=values,
                **({"ExpressionAttributeNames": names} if names else {}),
            )
            return True
        except ConditionFailedError:
            return False

    async def touch(self, thread_id: str) -> bool:
        """Refresh a live thread's TTL (a read, when the saver is asked to).

        Cost: 1 conditional UpdateItem of the root namespace's item.

        Returns:
            False when there is no TTL, or no live root namespace to refresh.
        """
        if not self.ttl_seconds:
            return False
        now = int(self._clock())
        try:
            await self._call(
                "update_item",
                TableName=self.table,
                Key=self.key(thread_id, ""),
                UpdateExpression=f"SET {TTL_ATTRIBUTE} = :exp",
                ConditionExpression=(
                    f"attribute_exists(latest_id) AND attribute_not_exists(deleted) AND "
                    f"{TTL_ATTRIBUTE} > :now AND {TTL_ATTRIBUTE} < :exp"
                ),
                ExpressionAttributeValues={
                    ":exp": {"N": str(now + self.ttl_seconds)},
                    ":now": {"N": str(now)},
                },
            )
            return True
        except ConditionFailedError:
            return False

    def _query(self, thread_id: str) -> AsyncIterator[list[dict[str, Any]]]:
        """Every item of one thread (live or not, the marker aside), page by page."""
        return self._pages(
            "query",
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": self._pk(thread_id)},
            ConsistentRead=True,
        )

    def _scan_pages(self, start: dict[str, Any] | None) -> AsyncIterator[list[dict[str, Any]]]:
        params: dict[str, Any] = {}
        if start is not None:
            params["ExclusiveStartKey"] = start
        return self._pages(
            "scan",
            TableName=self.table,
            ConsistentRead=True,
            FilterExpression="begins_with(pk, :d)",
            ExpressionAttributeValues={":d": {"S": self.deployment}},
            **params,
        )

    # -- the writer -----------------------------------------------------------
    def _conflict_rounds(self) -> int:
        return self.clients.limits.max_conflicts

    def _clock(self) -> float:
        return self.clock()

    def now(self) -> float:
        """Epoch seconds by this manifest's clock (expiry, retention ages)."""
        return self.clock()

    async def _advance_fast(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        tail: str,
        parent_id: str | None,
        uses_delta: bool,
        life: str | None,
        fresh: str,
    ) -> bool:
        """The common case in one UpdateItem: the parent is the latest (or the
        namespace is new), in the life it was read in. False when its condition failed."""
        now = int(self._clock())
        key = self.key(thread_id, checkpoint_ns)
        values: dict[str, Any] = {
            ":id": {"S": checkpoint_id},
            ":tail": {"S": tail},
            ":now": {"N": str(now)},
            ":d": {"BOOL": uses_delta},
            ":one": {"N": "1"},
        }
        update = "SET latest_id = :id, latest_tail = :tail, updated_at = :now, uses_delta = :d"
        if self.ttl_seconds:
            update += f", {expiry_attribute(checkpoint_ns)} = :exp"
            values[":exp"] = {"N": str(now + self.ttl_seconds)}
        if parent_id is not None:
            values[":p"] = {"S": parent_id}
            cond = (
                "latest_id = :p AND latest_id < :id AND attribute_not_exists(deleted) AND "
                f"(attribute_not_exists({TTL_ATTRIBUTE}) OR {TTL_ATTRIBUTE} > :now)"
            )
            if life:
                values[":life"] = {"S": life}
                cond += " AND (attribute_not_exists(life) OR life = :life)"
        else:
            values[":life"] = {"S": fresh}
            update += (
                ", thread_id = :t, checkpoint_ns = :ns, floor = :id, born = :id, "
                "created_at = :now, life = :life"
            )
            values[":t"] = {"S": thread_id}
            values[":ns"] = {"S": checkpoint_ns}
            cond = "attribute_not_exists(pk)"
        try:
            await self._call(
                "update_item",
                TableName=self.table,
                Key=key,
                UpdateExpression=update
                + " ADD rev :one"
                + _untimed(checkpoint_ns, self.ttl_seconds),
                ConditionExpression=cond,
                ExpressionAttributeValues=values,
            )
            return True
        except ConditionFailedError:
            return False

    async def _add_tip(
        self, entry: Entry, cid: str, tail: str, parent: str | None, uses_delta: bool
    ) -> bool:
        """Commit ``cid`` beside the tips of ``entry``'s life: as the new latest (the
        old one becomes a head) or, older than latest, as a head. One UpdateItem
        whose condition pins the life (floor) and, for a new latest, the old one:
        heads are only ever added, so losers never contend with each other."""
        now = int(self._clock())
        values: dict[str, Any] = {
            ":id": {"S": cid},
            ":floor": {"S": entry.floor},
            ":now": {"N": str(now)},
            ":one": {"N": "1"},
        }
        live = (
            f"floor = :floor AND attribute_not_exists(deleted) AND "
            f"(attribute_not_exists({TTL_ATTRIBUTE}) OR {TTL_ATTRIBUTE} > :now)"
        )
        if entry.life:  # a replace may reuse the floor's id: the life is the life
            values[":life"] = {"S": entry.life}
            live += " AND life = :life"
        else:
            live += " AND attribute_not_exists(life)"
        # maintenance may have removed the parent, or this very checkpoint (listed while
        # uncommitted), since the entry was read
        live += " AND (attribute_not_exists(gone) OR NOT contains(gone, :id))"
        if parent is not None:
            values[":p"] = {"S": parent}
            live += " AND (attribute_not_exists(gone) OR NOT contains(gone, :p))"
        if cid > entry.latest_id:
            values[":old"] = {"S": entry.latest_id}
            values[":oldset"] = {"SS": demoted(entry)}
            values[":tail"] = {"S": tail}
            values[":d"] = {"BOOL": uses_delta}
            update = "SET latest_id = :id, latest_tail = :tail, uses_delta = :d, updated_at = :now"
            if self.ttl_seconds:
                update += f", {expiry_attribute(entry.checkpoint_ns)} = :exp"
                values[":exp"] = {"N": str(now + self.ttl_seconds)}
            update += " ADD heads :oldset, rev :one"
            update += _untimed(entry.checkpoint_ns, self.ttl_seconds)
            cond = f"latest_id = :old AND {live}"
        else:
            values[":idset"] = {"SS": [cid]}
            update = "SET updated_at = :now ADD heads :idset, rev :one"
            cond = f"latest_id > :id AND {live}"
        return await self._update_if(entry, update, cond, values)

    async def _swap(
        self, thread_id: str, checkpoint_ns: str, new: Fields, *, rev: int | None
    ) -> bool:
        """Write the whole item as ``new`` if it is still at ``rev`` (None: if there is
        no item). One PutItem; False when the condition failed."""
        key = self.key(thread_id, checkpoint_ns)
        item = whole_item(
            key, thread_id, checkpoint_ns, new, rev, int(self._clock()), self.ttl_seconds
        )
        cond: dict[str, Any]
        if rev is None:
            cond = {"ConditionExpression": "attribute_not_exists(pk)"}
        else:
            cond = {
                "ConditionExpression": "rev = :rev",
                "ExpressionAttributeValues": {":rev": {"N": str(rev)}},
            }
        try:
            await self._call("put_item", TableName=self.table, Item=item, **cond)
            return True
        except ConditionFailedError:
            return False

    async def _drop_heads(self, entry: Entry, moved: list[str], spill: str) -> bool:
        """One UpdateItem: ``DELETE heads :moved SET spilled = :spill``, on ``rev``."""
        values = {
            ":t": {"S": spill},
            ":moved": {"SS": moved},
            ":one": {"N": "1"},
            ":rev": {"N": str(entry.rev)},
        }
        update = "SET spilled = :t DELETE heads :moved ADD rev :one"
        return await self._update_if(entry, update, "rev = :rev", values)

    # -- maintenance ------------------------------------------------------------
    async def raise_floor(
        self, entry: Entry, floor: str, removed: Iterable[str], *, mark: str | None = None
    ) -> bool:
        """Prune's commit: the thread now starts at ``floor`` and has no other heads.

        Conditioned on what prune decided on, not on ``rev``: the same life and floor,
        the heads and ``gone`` it saw, and a latest that is ``entry``'s or a newer one.
        A writer's fast-path commits only ever move the latest to a child of the latest
        (a descendant of the line prune keeps), so a busy thread does not make prune
        start over; a fork, a deletion, a rollback or another prune does.

        Cost: 1 conditional UpdateItem.

        Args:
            entry: the entry as read before prune listed the namespace.
            floor: the new floor (the oldest checkpoint kept).
            removed: checkpoints removed above the floor (side branches of a
                DeltaChannel seed chain): a writer may not continue them.
            mark: the removal's mark (``removal_mark``), added to the item's:
                released by :meth:`unmark` once its deletes are done.

        Returns:
            False when the entry changed in a way prune must see (read it again).
        """
        now = int(self._clock())
        gone = trim_gone({*entry.gone, *removed}, floor, now)
        values, cond = _as_read(entry, now)
        values[":f"] = {"S": floor}
        values[":one"] = {"N": "1"}
        update = "SET floor = :f"
        if gone:
            values[":gone"] = {"SS": sorted(gone)}
            update += ", gone = :gone"
        update += " REMOVE heads, spilled, born" + ("" if gone else ", gone") + " ADD rev :one"
        update += _marked(values, mark)
        return await self._update_if(entry, update, " AND ".join(cond), values)

    async def retip(
        self, entry: Entry, new: Fields, runs: Iterable[str], *, mark: str | None = None
    ) -> bool:
        """delete_for_runs' commit: the entry's tips become ``new``'s.

        When ``new`` keeps the latest, conditioned like :meth:`raise_floor` (the life,
        floor, heads, gone as read; a latest no older), so a writer going on meanwhile
        does not make the rollback start over, unless the latest is now one of
        ``runs``' own (a run being rolled back while it writes). Otherwise, and for
        more than ``RETIP_RUNS`` runs, a compare-and-swap on ``rev`` (:meth:`replace`).

        Cost: 1 conditional write.

        Args:
            entry: the entry as read before the namespace was listed.
            new: what it becomes.
            runs: the run tokens rolled back (``keys.encode``'d run ids).
            mark: the removal's mark, as for :meth:`raise_floor`.
        """
        tokens = sorted(set(runs))
        if new.latest_id != entry.latest_id or len(tokens) > RETIP_RUNS:
            if mark:
                new = replace(new, removing=new.removing | {mark})
            return await self.replace(entry, new)
        now = int(self._clock())
        values, cond = _as_read(entry, now)
        # the run is the tail's last part: ".b" is in ".bc" too, which only costs a
        # round when another run's latest is newer than the one read
        runs_free = [f"NOT contains(latest_tail, :run{i})" for i in range(len(tokens))]
        for i, token in enumerate(tokens):
            values[f":run{i}"] = {"S": f".{token}"}
        if runs_free:
            cond.append(f"(latest_id = :l OR ({' AND '.join(runs_free)}))")
        gone = trim_gone(new.gone, new.floor, now)
        sets, removes = [], []
        if new.spilled:
            values[":spill"] = {"S": new.spilled}
            sets.append("spilled = :spill")
        else:
            removes.append("spilled")
        for name, value in (("heads", new.heads), ("gone", gone)):
            if value:
                values[f":{name}"] = {"SS": sorted(value)}
                sets.append(f"{name} = :{name}")
            else:
                removes.append(name)
        if new.born:
            values[":born"] = {"S": new.born}
            sets.append("born = :born")
        else:
            removes.append("born")
        values[":one"] = {"N": "1"}
        update = (
            (f"SET {', '.join(sets)} " if sets else "")
            + (f"REMOVE {', '.join(removes)} " if removes else "")
            + "ADD rev :one"
            + _marked(values, mark)
        )
        return await self._update_if(entry, update, " AND ".join(cond), values)

    async def _update_if(
        self, entry: Entry, update: str, condition: str, values: dict[str, Any]
    ) -> bool:
        """One conditional UpdateItem of ``entry``'s item; False when its condition failed."""
        try:
            await self._call(
                "update_item",
                TableName=self.table,
                Key=self.key(entry.thread_id, entry.checkpoint_ns),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
            )
            return True
        except ConditionFailedError:
            return False

    async def replace(self, entry: Entry, new: Fields) -> bool:
        """Compare-and-swap one entry as read (delete_for_runs repoints with it).

        Cost: 1 conditional PutItem.

        Returns:
            False when the entry changed since it was read (its ``rev``).
        """
        return await self._swap(entry.thread_id, entry.checkpoint_ns, new, rev=entry.rev)

    async def tombstone(self, thread_id: str) -> Deletion:
        """delete_thread's first step: every namespace becomes a tombstone at once.

        Readers see the thread gone before any object goes; the root namespace is
        always tombstoned, so a new life on the id waits for the deletion (its lease,
        ``DELETE_LEASE_SECONDS``).

        Cost: 1 Query per page of the thread's items, then 1 UpdateItem per
        namespace, concurrently (one round trip).

        Returns:
            The deletion's stamp and item keys, for :meth:`renew` and :meth:`release`.
        """
        deletion = await self._tombstone(thread_id, None)
        assert deletion is not None  # unconditional
        return deletion

    async def tombstone_expired(self, expiry: Expiry) -> Deletion | None:
        """The TTL sweep's first step: :meth:`tombstone`, if the thread is still the
        expired one ``expiry`` names (its root item at that ``rev``, or still absent).

        Cost: 1 Query page, 1 conditional UpdateItem of the root namespace, then 1
        UpdateItem per other namespace, concurrently (three round trips).

        Returns:
            None when the root item changed since (a new life began, another sweep).
        """
        return await self._tombstone(expiry.thread_id, expiry)

    async def _tombstone(self, thread_id: str, expect: Expiry | None) -> Deletion | None:
        stamp = time.time_ns()
        now = int(self._clock())
        root = self.key(thread_id, "")
        keys = [root]
        async for page in self._query(thread_id):
            keys += [{"pk": i["pk"], "sk": i["sk"]} for i in page if i["sk"]["S"] != META_SK]
        unique = list({k["sk"]["S"]: k for k in keys}.values())

        before: dict[str, dict[str, Any]] = {}

        async def one(key: dict[str, Any]) -> None:
            cond: dict[str, Any] = {}
            values = {
                ":t": {"BOOL": True},
                ":stamp": {"N": str(stamp)},
                ":lease": {"N": str(now + DELETE_LEASE_SECONDS)},
                ":exp": {"N": str(now + TOMBSTONE_SECONDS)},
                ":one": {"N": "1"},
            }
            if expect is not None and key is root:
                if expect.rev is None:
                    cond["ConditionExpression"] = "attribute_not_exists(pk)"
                else:
                    cond["ConditionExpression"] = "rev = :rev"
                    values[":rev"] = {"N": str(expect.rev)}
            # a delete_thread may fail and revive the thread (a removal that meets
            # it waits for it); a sweep never does
            undo = f"{REVIVABLE} = :t, " if expect is None else ""
            keep = "" if expect is None else f", {REVIVABLE}"
            resp = await self._call(
                "update_item",
                TableName=self.table,
                Key=key,
                UpdateExpression=(
                    f"SET deleted = :t, deleted_at = :stamp, lease_until = :lease, {undo}"
                    f"{TTL_ATTRIBUTE} = :exp ADD rev :one "
                    f"REMOVE {RETIRED}{keep}"
                ),
                ExpressionAttributeValues=values,
                ReturnValues="ALL_OLD",
                **cond,
            )
            if resp.get("Attributes"):
                before[key["sk"]["S"]] = resp["Attributes"]

        if expect is not None:
            try:
                await one(root)  # first: the thread may have begun a new life
            except ConditionFailedError:
                return None
            await gather_all(*(one(k) for k in unique if k is not root))
        else:
            await gather_all(*(one(k) for k in unique))
        return Deletion(stamp, unique, before)

    async def renew(self, keys: list[dict[str, Any]], stamp: int) -> bool:
        """Extend a deletion's lease by ``DELETE_LEASE_SECONDS`` from now.

        Cost: 1 conditional UpdateItem per key, concurrently (one round trip).

        Args:
            keys: the deletion's item keys (``Deletion.keys``).
            stamp: its stamp (``Deletion.stamp``).

        Returns:
            False when a tombstone was replaced meanwhile (the lease ran out and a
            new life began): the deletion must not go on.
        """
        now = int(self._clock())

        async def one(key: dict[str, Any]) -> bool:
            try:
                await self._call(
                    "update_item",
                    TableName=self.table,
                    Key=key,
                    UpdateExpression="SET lease_until = :lease",
                    ConditionExpression="deleted_at = :stamp",
                    ExpressionAttributeValues={
                        ":lease": {"N": str(now + DELETE_LEASE_SECONDS)},
                        ":stamp": {"N": str(stamp)},
                    },
                )
                return True
            except ConditionFailedError:
                return False

        return all(await gather_all(*(one(k) for k in keys)))

    async def release(self, keys: list[dict[str, Any]], stamp: int) -> None:
        """delete_thread's last step: the deletion is over, new lives may start.

        Cost: 1 conditional UpdateItem per key, concurrently (one round trip). A
        tombstone a newer deletion or a new life replaced is left to them.
        """

        async def one(key: dict[str, Any]) -> None:
            with contextlib.suppress(ConditionFailedError):
                await self._call(
                    "update_item",
                    TableName=self.table,
                    Key=key,
                    UpdateExpression="SET lease_until = :zero",
                    ConditionExpression="deleted_at = :stamp",
                    ExpressionAttributeValues={
                        ":zero": {"N": "0"},
                        ":stamp": {"N": str(stamp)},
                    },
                )

        await gather_all(*(one(k) for k in keys))

    async def revive(self, deletion: Deletion) -> None:
        """Undo a deletion that failed before it removed any object: each tombstone
        still its own goes back to the item it replaced (or away, where there was
        none), so the thread is as it was; a call that fails leaves nothing half-done.

        Cost: 1 conditional PutItem or DeleteItem per namespace, concurrently, then
        the root's (two round trips). A tombstone a new life or another deletion
        replaced since is left to it, and so is one whose lease ran out.
        """

        now = int(self._clock())

        async def one(key: dict[str, Any]) -> None:
            cond = {
                # once its lease ran out, a deletion is final: a removal that met it
                # took the thread as gone for good (a stalled deleter revives nothing)
                "ConditionExpression": "deleted_at = :stamp AND lease_until > :now",
                "ExpressionAttributeValues": {
                    ":stamp": {"N": str(deletion.stamp)},
                    ":now": {"N": str(now)},
                },
            }
            old = deletion.before.get(key["sk"]["S"])
            with contextlib.suppress(ConditionFailedError):
                if old is None:
                    await self._call("delete_item", TableName=self.table, Key=key, **cond)
                else:
                    await self._call("put_item", TableName=self.table, Item=old, **cond)

        # the root last: once it lives again, so does every namespace under it
        for first in (False, True):
            keys = [k for k in deletion.keys if (k["sk"]["S"] == ROOT_SK) is first]
            if keys:
                await gather_all(*(one(k) for k in keys))

    async def drop(self, entry: Entry, *, mark: str | None = None) -> bool:
        """Retire an entry as read (its last checkpoint was deleted).

        Leaves a tombstone without a lease: a run still writing to it is refused,
        while a new conversation may start once ``mark`` (the removal's, as for
        :meth:`raise_floor`) is released.

        Cost: 1 conditional UpdateItem.

        Returns:
            False when the entry changed since it was read (its ``rev``).
        """
        now = int(self._clock())
        update = (
            f"SET deleted = :t, deleted_at = :stamp, lease_until = :zero, "
            f"{TTL_ATTRIBUTE} = :exp REMOVE {RETIRED}, {REVIVABLE} ADD rev :one"
        )
        values: dict[str, Any] = {
            ":t": {"BOOL": True},
            ":stamp": {"N": str(time.time_ns())},
            ":zero": {"N": "0"},
            ":exp": {"N": str(now + TOMBSTONE_SECONDS)},
            ":one": {"N": "1"},
            ":rev": {"N": str(entry.rev)},
        }
        update += _marked(values, mark)
        return await self._update_if(entry, update, "rev = :rev", values)

    async def mark(self, entry: Entry, mark: str) -> bool:
        """Put ``mark`` (``removal_mark``'s) on the entry's item while it is in the
        same life with the same pack: for a call that writes objects before its commit
        (an unpacking), whose writes a new life must wait for. Taken off by
        :meth:`unmark`.

        Cost: 1 conditional UpdateItem (``rev`` untouched: writers are not disturbed).

        Returns:
            False when the item changed meanwhile (deleted, a new life, another pack).
        """
        values: dict[str, Any] = {":mk": {"SS": [mark]}}
        cond = "attribute_exists(latest_id) AND attribute_not_exists(deleted)"
        if entry.life:  # items of earlier versions have none (as for set_pack)
            cond += " AND life = :life"
            values[":life"] = {"S": entry.life}
        names: dict[str, str] = {}
        if entry.pack is None:
            cond += " AND attribute_not_exists(pack)"
        else:
            cond += " AND pack.#k = :pk"
            values[":pk"] = {"S": entry.pack.key}
            names["#k"] = "key"
        try:
            await self._call(
                "update_item",
                TableName=self.table,
                Key=self.key(entry.thread_id, entry.checkpoint_ns),
                UpdateExpression=f"ADD {REMOVING} :mk",
                ConditionExpression=cond,
                ExpressionAttributeValues=values,
                **({"ExpressionAttributeNames": names} if names else {}),
            )
            return True
        except ConditionFailedError:
            return False

    async def unmark(self, thread_id: str, checkpoint_ns: str, mark: str) -> None:
        """A removal's deletes are done: its mark leaves the item, whatever it is now
        (live, a tombstone, another life's: the mark is the removal's own). ``rev``
        moves, so a compare-and-swap that read the mark does not write it back.

        Cost: 1 UpdateItem (none written where the item is gone)."""
        with contextlib.suppress(ConditionFailedError):
            await self._call(
                "update_item",
                TableName=self.table,
                Key=self.key(thread_id, checkpoint_ns),
                UpdateExpression=f"DELETE {REMOVING} :mk ADD rev :one",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={":mk": {"SS": [mark]}, ":one": {"N": "1"}},
            )

    # -- setup --------------------------------------------------------------
    async def exists(self) -> bool:
        """Whether the table exists. Cost: 1 DescribeTable."""
        try:
            await self._call("describe_table", TableName=self.table)
            return True
        except MissingResourceError:
            return False

    async def create(self) -> None:
        """Create the table (on-demand billing), wait until it is ACTIVE, enable TTL.

        A table that already exists is fine. Cost: 1 CreateTable, 1 DescribeTable
        per poll (usually a few), 1 UpdateTimeToLive.

        Raises:
            ServiceError: the table is not ACTIVE after ``ACTIVE_POLLS`` polls.
        """
        try:
            await self._call(
                "create_table",
                TableName=self.table,
                KeySchema=KEY_SCHEMA,
                AttributeDefinitions=ATTRIBUTES,
                BillingMode="PAY_PER_REQUEST",
            )
        except ServiceError as exc:
            if exc.code != "ResourceInUseException":
                raise
        for attempt in range(ACTIVE_POLLS):  # on-demand tables are usually ACTIVE in seconds
            desc = await self._call("describe_table", TableName=self.table)
            if desc["Table"].get("TableStatus") == "ACTIVE":
                break
            await backoff(attempt)
        else:
            raise ServiceError(
                f"table {self.table!r} did not become ACTIVE after {ACTIVE_POLLS} polls"
            )
        try:
            await self._call(
                "update_time_to_live",
                TableName=self.table,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
            )
        except ServiceError as exc:
            if exc.code != "ValidationException":  # already enabled
                raise

    async def migrated(self) -> bool:
        """Whether this deployment's marker says its entries use this key layout.

        Cost: 1 GetItem.
        """
        resp = await self._call(
            "get_item",
            TableName=self.table,
            Key={"pk": {"S": self.deployment}, "sk": {"S": META_SK}},
            ConsistentRead=True,
        )
        item: dict[str, Any] = resp.get("Item") or {}
        return int(item.get("version", {}).get("N", "0")) >= LAYOUT_VERSION

    async def legacy_entries(self) -> AsyncIterator[Entry]:
        """Entries written by langgraph-s3 0.1 (key without the deployment).

        Cost: 1 Scan per 1 MB page of the whole table.
        """
        async for items in self._pages("scan", TableName=self.table, ConsistentRead=True):
            for item in items:
                if "/" in item.get("pk", {}).get("S", "/") or "rev" in item:
                    continue
                try:
                    yield entry_of(item)
                except (KeyError, TypeError, AttributeError, ValueError):
                    continue

    async def adopt(self, legacy: Entry) -> None:
        """Give a 0.1 entry this deployment's key (its whole history stays visible).

        Cost: 1 PutItem, conditioned on there being no entry under the new key yet
        (one there already stands).
        """
        new = Fields(
            legacy.latest_id, legacy.latest_tail, "", legacy.uses_delta, 0, set(), life=new_life()
        )
        await self._swap(legacy.thread_id, legacy.checkpoint_ns, new, rev=None)

    async def mark_migrated(self) -> None:
        """Record that this deployment's entries use this key layout. Cost: 1 PutItem."""
        await self._call(
            "put_item",
            TableName=self.table,
            Item={
                "pk": {"S": self.deployment},
                "sk": {"S": META_SK},
                "version": {"N": str(LAYOUT_VERSION)},
                "migrated_at": {"N": str(int(self._clock()))},
            },
        )


def new_life() -> str:
    """A new life's token (``Entry.life``)."""
    return uuid.uuid4().hex[:16]


def whole_item(
    key: dict[str, Any],
    thread_id: str,
    checkpoint_ns: str,
    new: Fields,
    rev: int | None,
    now: int,
    ttl_seconds: int | None,
) -> dict[str, Any]:
    """The item ``_swap`` writes: ``new`` at revision ``rev + 1`` (``gone`` trimmed)."""
    item: dict[str, Any] = {
        **key,
        "thread_id": {"S": thread_id},
        "checkpoint_ns": {"S": checkpoint_ns},
        "latest_id": {"S": new.latest_id},
        "latest_tail": {"S": new.latest_tail},
        "floor": {"S": new.floor},
        "uses_delta": {"BOOL": new.uses_delta},
        "created_at": {"N": str(new.created_at or now)},
        "updated_at": {"N": str(now)},
        "rev": {"N": str((rev or 0) + 1)},
    }
    if new.heads:
        item["heads"] = {"SS": sorted(new.heads)}
    if new.born:
        item["born"] = {"S": new.born}
    gone = trim_gone(new.gone, new.floor, now)
    if gone:
        item["gone"] = {"SS": sorted(gone)}
    if ttl_seconds:
        item[expiry_attribute(checkpoint_ns)] = {"N": str(now + ttl_seconds)}
    if new.pack is not None and not checkpoint_ns:
        item["pack"] = new.pack.item()
    if new.spilled:
        item["spilled"] = {"S": new.spilled}
    if new.packings and not checkpoint_ns:
        item["packings"] = {"N": str(new.packings)}
    if new.life:
        item["life"] = {"S": new.life}
    marks = sorted(m for m in new.removing if mark_until(m) > now)  # spent ones go
    if marks:
        item[REMOVING] = {"SS": marks}
    return item


def _as_read(entry: Entry, now: int) -> tuple[dict[str, Any], list[str]]:
    """The condition that the item is still ``entry``'s life as maintenance read it:
    the same life, floor, heads, spilled heads and removals, not deleted or expired, and a
    latest no older (a writer's commits since only continue the latest)."""
    values: dict[str, Any] = {
        ":f0": {"S": entry.floor},
        ":l": {"S": entry.latest_id},
        ":now": {"N": str(now)},
    }
    cond = [
        "floor = :f0",
        "latest_id >= :l",
        "attribute_not_exists(deleted)",
        f"(attribute_not_exists({TTL_ATTRIBUTE}) OR {TTL_ATTRIBUTE} > :now)",
    ]
    if entry.life:  # an import's replace may leave floor and heads as they were
        values[":life0"] = {"S": entry.life}
        cond.append("life = :life0")
    else:
        cond.append("attribute_not_exists(life)")
    if entry.spilled:
        values[":t"] = {"S": entry.spilled}
        cond.append("spilled = :t")
    else:
        cond.append("attribute_not_exists(spilled)")
    for name, seen in (("heads", entry.heads), ("gone", entry.gone)):
        if seen:
            values[f":{name}0"] = {"SS": sorted(seen)}
            cond.append(f"{name} = :{name}0")
        else:
            cond.append(f"attribute_not_exists({name})")
    return values, cond


def _marked(values: dict[str, Any], mark: str | None) -> str:
    """The clause adding a removal's mark to an UpdateExpression ending in ADD."""
    if not mark:
        return ""
    values[":mk"] = {"SS": [mark]}
    return f", {REMOVING} :mk"


def _untimed(checkpoint_ns: str, ttl_seconds: int | None) -> str:
    """The clause dropping the TTL attribute an older version wrote on a subgraph
    namespace's item (DynamoDB would delete the namespace of a live thread)."""
    return f" REMOVE {TTL_ATTRIBUTE}" if checkpoint_ns and ttl_seconds else ""


def trim_gone(gone: Iterable[str], floor: str, now: float) -> set[str]:
    """``gone`` only has to outlive a writer still in flight on a removed checkpoint:
    keep ids above the floor from the last hour, at most the newest GONE_LIMIT, so
    the entry stays small (a rollback after every run would grow it forever)."""
    kept = sorted(
        (g for g in gone if g >= floor and (uuid6_time(g) or now) > now - GONE_SECONDS),
        reverse=True,
    )
    return set(kept[:GONE_LIMIT])


def demoted(entry: Entry) -> list[str]:
    """What joins ``heads`` when a new latest replaces ``entry``'s: the old latest and
    its parent, which stands in for it while its object is not there (see advance)."""
    out = {entry.latest_id}
    try:
        parent = parse_checkpoint_tail("", entry.latest_tail).parent_id
    except InvalidIdError:  # not a key this library wrote: nothing to stand in
        parent = None
    if parent is not None and parent >= entry.floor:
        out.add(parent)
    return sorted(out)


def _lowerable(entry: Entry, cid: str) -> bool:
    """Whether root ``cid`` may bring the floor down to it: no prune, deletion or
    copy raised or set the floor (it is still the one the life was born with), and
    ``cid`` was made within the hour before the floor's own root (two first writers
    of one thread, not a writer stalled across an expiry)."""
    if not entry.born or entry.floor != entry.born:
        return False
    born, made = uuid6_time(entry.floor), uuid6_time(cid)
    return born is not None and made is not None and born - made < GONE_SECONDS


def _decide(
    raw: Raw | None, cid: str, tail: str, parent: str | None, uses_delta: bool, now: float
) -> Fields | Entry | None:
    """How to commit ``cid`` (parent ``parent``) on top of ``raw``: a new life's
    fields, the live entry to add a tip to, or None when it is already committed."""
    if raw is None or raw.tombstone or raw.expired(now) or "latest_id" not in raw.item:
        if parent is not None and raw is not None:
            what = "deleted" if raw.tombstone else "expired (thread_ttl_days)"
            raise CheckpointConflictError(
                f"checkpoint {cid} continues checkpoint {parent}, but its thread was {what} "
                "while this run was writing: the checkpoint was discarded; start the "
                "conversation again"
            )
        # the first commit starts the life: nothing older is part of it (a parent it
        # names may belong to a life that was deleted or expired, item and all)
        # Only a life begun over nothing may have its floor lowered later: over a
        # tombstone or an expired item, runs of the old life may still be in flight
        # and a deletion may have removed objects below the floor.
        lowerable = parent is None and raw is None
        return Fields(
            cid, tail, cid, uses_delta, 0, set(), born=cid if lowerable else "", life=new_life()
        )
    entry = entry_of(raw.item)
    if cid == entry.latest_id or cid in entry.heads:
        return None
    if parent is None and cid < entry.floor and _lowerable(entry, cid):
        # Two writers started the thread at once and the other's root, newer than
        # ours, committed first: ours is part of this life too, so the floor comes
        # down to it (no prune has raised the floor, so nothing below it was removed).
        return Fields(
            entry.latest_id,
            entry.latest_tail,
            cid,
            entry.uses_delta,
            entry.created_at,
            {*entry.heads, cid},
            set(entry.gone),
            born=cid,
            pack=entry.pack,
            spilled=entry.spilled,
            packings=entry.packings,
            life=entry.life,
            removing=entry.removing,
        )
    if parent is not None and (parent < entry.floor or parent in entry.gone):
        raise CheckpointConflictError(
            f"checkpoint {cid} continues checkpoint {parent}, which prune or delete_for_runs "
            "removed while this run was writing: the checkpoint was discarded"
        )
    if cid in entry.gone:
        raise CheckpointConflictError(
            f"checkpoint {cid} was removed by prune or delete_for_runs while this run was "
            "writing it (its object was listed and deleted): the checkpoint was discarded"
        )
    if cid < entry.floor:
        raise CheckpointConflictError(
            f"checkpoint {cid} is older than the thread's history, which starts at "
            f"{entry.floor} (a prune, a deletion or a copy came between): the checkpoint "
            "was discarded; start the run again"
        )
    return entry
