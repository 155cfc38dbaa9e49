"""A writer's commit: the latest moves forward to a stored checkpoint, or it joins heads."""

from __future__ import annotations

import secrets
from typing import Any

from langgraph_s3.core.commit import PLAIN, How, Need, NeedKind
from langgraph_s3.core.held import HELD_BUDGET, HELD_COPY_MAX
from langgraph_s3.core.keys import encode
from langgraph_s3.core.meta import Meta
from langgraph_s3.core.records import DELETING, Entry, Expiry, Fields, Raw, marks_until
from langgraph_s3.core.retry import LOST, Done, Retry, cas
from langgraph_s3.errors import CheckpointConflictError, ConditionFailedError, ConflictError
from langgraph_s3.manifest.conditions import (
    BOOL,
    SS,
    Absent,
    Change,
    Compare,
    Cond,
    Contains,
    Exists,
    N,
    Not,
    S,
    TxUpdate,
    all_of,
    any_of,
    eq,
)
from langgraph_s3.manifest.decide import (
    HEADS_INLINE,
    LEASE_POLL_SECONDS,
    carried_change,
    decide,
    demoted,
    expiring,
    new_life,
    not_expired,
    untimed,
)
from langgraph_s3.manifest.items import ROOT_LIVE, Items, logger
from langgraph_s3.manifest.reads import Reads
from langgraph_s3.manifest.schema import HELD_BYTES, TTL_ATTRIBUTE, held_writes, inline_copies


class Commits:
    """A writer's role: ``advance`` (the fast path in one conditional update, the
    contended rounds, read the item, :func:`~langgraph_s3.manifest.decide.decide`,
    write, otherwise), the run index and the TTL's refresh."""

    def __init__(self, items: Items, reads: Reads) -> None:
        self.items = items
        self.reads = reads

    async def note_run(self, thread_id: str, run_token: str) -> None:
        """Record that ``run_token``'s run wrote to the thread (``delete_for_runs``
        finds its threads by it): one item per (run, thread), under the run.

        Cost: 1 PutItem (unconditional: writing it again changes nothing).
        """
        item = {
            "pk": {"S": self.items.run_pk(run_token)},
            "sk": {"S": encode(thread_id, "thread_id")},
            "thread_id": {"S": thread_id},
        }
        await self.items.db.put(item)

    async def touch(self, thread_id: str) -> bool:
        """Refresh a live thread's TTL (a read, when the saver is asked to).

        Cost: 1 conditional UpdateItem of the root namespace's item.

        Returns:
            False when there is no TTL, or no live root namespace to refresh.
        """
        if not self.items.ttl_seconds:
            return False
        now = int(self.items.now())
        expires = N(now + self.items.ttl_seconds)
        when = all_of(
            Exists("latest_id"),
            Absent("deleted"),
            Compare(TTL_ATTRIBUTE, ">", N(now)),
            Compare(TTL_ATTRIBUTE, "<", expires),
        )
        change = Change({TTL_ATTRIBUTE: expires})
        return await self.items.applied(
            self.items.db.update(self.items.key(thread_id, ""), change, when=when)
        )

    async def advance(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        tail: str,
        parent_id: str | None,
        how: How = PLAIN,
    ) -> str | Need | None:
        """Commit a stored checkpoint: latest moves forward to it, or it joins ``heads``.

        A new life over a tombstone waits for that deletion to end (its lease); its
        writer then stores the objects again (the deletion may have taken them: a
        ``rewrite`` need) and it commits only if no other deletion began since. A
        checkpoint already committed (a replay, a lost answer) is left as it is.

        Cost: 1 UpdateItem when ``parent_id`` is the latest (or a new namespace);
        otherwise that failed attempt, then per round 1 GetItem + 1 conditional write
        (UpdateItem or PutItem), at most ``Limits.max_conflicts`` contended rounds per
        call. A need answered costs the writer's requests and one call more.

        Args, returns and raises: see ``ManifestCommits.advance``.
        """
        meta = self.items.meta_change(checkpoint_ns, how.metadata)
        if not how.started:
            fresh = new_life()  # the token of the life it begins, if it begins one
            at = (thread_id, checkpoint_ns, checkpoint_id, tail, parent_id)
            if await self._advance_fast(*at, how, fresh, meta):
                return fresh if parent_id is None else how.life
            logger.debug("a contended commit: thread %r", thread_id)
            if "stored" in how.meets:  # the contended path commits stored objects only
                return Need("stored", ensured=how.ensured, rewritten=how.rewritten, lost=how.lost)
        if how.spilled is not None and how.spilled.entry is not None:
            await _drop_spilled(self.items, how.spilled)
        return await self._advance_contended(
            thread_id, checkpoint_ns, checkpoint_id, tail, parent_id, how, meta
        )

    async def _advance_contended(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        tail: str,
        parent_id: str | None,
        how: How,
        meta: Meta | None,
    ) -> str | Need:
        """A fork, a concurrent writer, a replay, a new life: read and decide; the
        life it committed in (``meta`` set when it becomes the latest), or what the
        writer must do first. An item whose held copies leave no room for the next one
        (or that has no count) is cleared first, once."""
        meets, ensured, rewritten, lost = how.meets, how.ensured, how.rewritten, how.lost
        """The life in which the writer last ensured its objects, the tombstones after
        which it stored them again, the rounds lost so far (all carried by the needs)."""

        def ask(kind: NeedKind, **what: Any) -> Done[str | Need]:
            need = Need(kind, ensured=ensured, rewritten=rewritten, lost=lost, **what)
            return Done(need)

        async def commit(raw: Raw | None) -> Done[str | Need] | Retry:
            nonlocal ensured, rewritten, lost
            if "clear" in meets and not how.cleared and raw is not None and crowded(raw):
                logger.debug("a crowded item cleared: thread %r", thread_id)
                return ask("clear", raw=raw)
            at = self.items.now()
            expired = raw is not None and raw.committed and raw.expired(at)
            root = not checkpoint_ns  # only a root's expiry is a thread's
            if root and parent_id is None and expired and raw is not None and "sweep" in meets:
                if lost >= self.items.conflict_rounds():
                    return LOST  # swept again and again, the item as it was: give up
                lost += 1  # a sweep that leaves the item as it was (skipped) costs a round
                return ask("sweep", expiry=Expiry(thread_id, raw.rev))  # the old life
            step = decide(raw, checkpoint_id, tail, parent_id, how.uses_delta, at)
            if step is None:  # already committed (a replay, or our answer was lost)
                return Done(raw.entry().life if raw is not None else "")
            life = how.life
            if isinstance(step, Entry) and parent_id is not None and life and step.life != life:
                raise _replaced(checkpoint_id, parent_id, thread_id)
            if isinstance(step, Entry) and checkpoint_id < step.latest_id:
                # a head: a prune or rollback in progress may have listed its object
                # (uncommitted, off the latest's line) and delete it: wait for it,
                # then check the objects again
                busy = marks_until(step.removing, at, kinds=DELETING)
                if busy > at:
                    ensured = None
                    return Retry(after=min(busy - at, LEASE_POLL_SECONDS))
            current = "" if raw is None else raw.life
            if "ensure" in meets and not (raw is not None and raw.tombstone) and ensured != current:
                # its objects, whatever came between, once in each life it joins (a
                # deletion ended before that life began: what it took is put back)
                return ask("ensure", life=current)
            if isinstance(step, Entry):
                if "spill" in meets and len(step.heads) >= HEADS_INLINE:
                    return ask("spill", **_spill(step))  # then read it again, smaller
                done = await self._add_tip(
                    step, checkpoint_id, tail, parent_id, how.uses_delta, meta
                )
                lost += not done
                return Done(step.life) if done else LOST
            if meta is not None and step.latest_id == checkpoint_id:
                step.meta = tuple(sorted(meta[0].items()))
            rewrite = "rewrite" in meets
            out = await _begin_life(
                self, thread_id, checkpoint_ns, raw, step, at, rewritten, rewrite
            )
            if isinstance(out, tuple):  # a deletion ended: its objects first
                return ask("rewrite", revs=out)
            if isinstance(out, Retry):
                if out.after is not None:
                    rewritten = None  # waited for a deletion: stored again after it
                else:
                    lost += 1
            return out

        return await cas(
            lambda: self.reads.read_bound(thread_id, checkpoint_ns),
            commit,
            attempts=max(1, self.items.conflict_rounds() - how.lost),
            what=f"the manifest entry of thread {thread_id!r} namespace {checkpoint_ns!r}",
            error=ConflictError,
        )

    async def _advance_fast(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        tail: str,
        parent_id: str | None,
        how: How,
        fresh: str,
        meta: Meta | None,
    ) -> bool:
        """The common case in one UpdateItem: the parent is the latest (in ``life``, when
        known), or the namespace is new (its life's token is ``fresh``; a subgraph's, in
        a TransactWriteItems with a check of the root, which a deletion tombstones before
        it looks for namespaces). False when a condition failed.
        With ``inline``, the item also holds the checkpoint's envelope, drops the copies
        named, and hands the old item's copies back in ``inline.held``."""
        now, uses_delta, life, inline = int(self.items.now()), how.uses_delta, how.life, how.inline
        sets: dict[str, Any] = {
            "latest_id": S(checkpoint_id),
            "latest_tail": S(tail),
            "updated_at": N(now),
            "uses_delta": BOOL(uses_delta),
            **expiring(checkpoint_ns, now, self.items.ttl_seconds),
        }
        if parent_id is not None:
            when = all_of(
                eq("latest_id", S(parent_id)),
                Compare("latest_id", "<", S(checkpoint_id)),
                Absent("deleted"),
                not_expired(now),
                any_of(Absent("life"), eq("life", S(life))) if life else None,
            )
        else:
            sets |= {
                "thread_id": S(thread_id),
                "checkpoint_ns": S(checkpoint_ns),
                "floor": S(checkpoint_id),
                "born": S(checkpoint_id),
                "created_at": N(now),
                "life": S(fresh),
            }
            when = Absent("pk")
        removes = [*untimed(checkpoint_ns, self.items.ttl_seconds)]
        if meta is not None:
            sets |= {name: S(text) for name, text in meta[0].items()}
            removes += meta[1]
        adds: dict[str, Any] = {"rev": N(1)}
        key = self.items.key(thread_id, checkpoint_ns)
        born = parent_id is None and bool(checkpoint_ns)
        while True:
            more, gone, held = dict[str, Any](), list[str](), None
            if inline is not None:
                more, gone, held, delta = carried_change(
                    inline, checkpoint_id, tail, counted=parent_id is not None
                )
                adds[HELD_BYTES] = N(delta)  # a new item's count begins here
            change = Change(set=sets | more, remove=(*removes, *gone), add=adds)
            try:
                old = None
                if born:  # a new namespace drops nothing: no second try
                    if not await self.items.write_born(
                        thread_id, TxUpdate(key, change, all_of(when, held))
                    ):
                        return False
                else:
                    old = await self.items.db.update(
                        key, change, when=all_of(when, held), old=inline is not None
                    )
            except ConditionFailedError:
                if inline is None or not (inline.drop or inline.drop_writes):
                    return False
                # a copy it drops may have been taken out by another process (it stored
                # it too): once more without dropping any (the old item says what is left)
                inline.drop, inline.drop_writes = (), ()
                continue
            if inline is not None:
                inline.held = inline_copies(old) if old else ()
                inline.held_writes = held_writes(old) if old else ()
            return True

    async def _add_tip(
        self,
        entry: Entry,
        cid: str,
        tail: str,
        parent: str | None,
        uses_delta: bool,
        meta: Meta | None = None,
    ) -> bool:
        """Commit ``cid`` beside the tips of ``entry``'s life: as the new latest (the
        old one becomes a head) or, older than latest, as a head. One UpdateItem
        whose condition pins the life (floor) and, for a new latest, the old one:
        heads are only ever added, so losers never contend with each other."""
        now = int(self.items.now())
        live = (
            eq("floor", S(entry.floor)),
            Absent("deleted"),
            not_expired(now),
            # a replace may reuse the floor's id: the life is the life
            eq("life", S(entry.life)) if entry.life else Absent("life"),
            # maintenance may have removed the parent, or this very checkpoint (listed
            # while uncommitted), since the entry was read
            any_of(Absent("gone"), Not(Contains("gone", S(cid)))),
            any_of(Absent("gone"), Not(Contains("gone", S(parent)))) if parent else None,
        )
        if cid > entry.latest_id:
            sets, removes = meta if meta is not None else ({}, ())
            change = Change(
                set={
                    "latest_id": S(cid),
                    "latest_tail": S(tail),
                    "uses_delta": BOOL(uses_delta),
                    "updated_at": N(now),
                    **expiring(entry.checkpoint_ns, now, self.items.ttl_seconds),
                    **{name: S(text) for name, text in sets.items()},
                },
                remove=(*untimed(entry.checkpoint_ns, self.items.ttl_seconds), *removes),
                add={"heads": SS(demoted(entry)), "rev": N(1)},
            )
            when = all_of(eq("latest_id", S(entry.latest_id)), *live)
        else:
            # a head is a write too: the thread is not idle (its TTL starts again)
            change = Change(
                set={
                    "updated_at": N(now),
                    **expiring(entry.checkpoint_ns, now, self.items.ttl_seconds),
                },
                remove=untimed(entry.checkpoint_ns, self.items.ttl_seconds),
                add={"heads": SS([cid]), "rev": N(1)},
            )
            when = all_of(Compare("latest_id", ">", S(cid)), *live)
        key = self.items.key(entry.thread_id, entry.checkpoint_ns)
        return await self.items.applied(self.items.db.update(key, change, when=when))


async def _begin_life(
    self: Commits,
    thread_id: str,
    checkpoint_ns: str,
    raw: Raw | None,
    step: Fields,
    at: float,
    rewritten: tuple[int, ...] | None,
    rewrite: bool,
) -> Done[str | Need] | Retry | tuple[int, ...]:
    """A new life over ``raw`` (nothing, a tombstone, an expired life): once a
    deletion in progress is over and the writer stored its objects again, one PutItem
    on ``rev``; the tombstones' revs when the objects are yet to be stored again after
    them. A subgraph's namespace also waits for a deletion of its thread's root
    (1 GetItem more) and is written only if that root is still as it was read: no
    tombstone, or the same one (a TransactWriteItems)."""
    root: Cond | None = None
    tombs = [raw] if raw is not None and raw.tombstone else []
    if checkpoint_ns:
        top = await self.reads.read(thread_id, "")
        if top is not None and top.tombstone:
            tombs.append(top)
            root = any_of(ROOT_LIVE, eq("rev", N(top.rev)))  # no deletion since
        else:
            root = ROOT_LIVE
    if tombs:
        until = max(t.held_until(at) for t in tombs)
        if until > at:  # a deletion is removing objects: wait
            return Retry(after=min(until - at, LEASE_POLL_SECONDS))
        revs = tuple(t.rev for t in tombs)
        if rewrite and rewritten != revs:
            return revs  # after that deletion: whole again first
    rev = raw.rev if raw is not None else None
    done = await self.items.swap(thread_id, checkpoint_ns, step, rev=rev, root=root)
    return Done(step.life) if done else LOST


def _spill(step: Entry) -> dict[str, Any]:
    """A spill need's fields: the older half of the heads to tip markers (the
    writer's), under the entry's spill generation or a new one."""
    moved = tuple(sorted(step.heads)[: len(step.heads) - HEADS_INLINE // 2])
    return {"entry": step, "heads": moved, "generation": step.spilled or secrets.token_hex(8)}


async def _drop_spilled(items: Items, spilled: Need) -> None:
    """The heads whose markers the writer stored leave the item, if it is still at the
    rev read (one UpdateItem); a crash before leaves markers of heads still in it
    (harmless)."""
    assert spilled.entry is not None
    change = Change(
        {"spilled": S(spilled.generation)},
        delete={"heads": SS(list(spilled.heads))},
        add={"rev": N(1)},
    )
    key = items.key(spilled.entry.thread_id, spilled.entry.checkpoint_ns)
    await items.applied(items.db.update(key, change, when=eq("rev", N(spilled.entry.rev))))


def crowded(raw: Raw) -> bool:
    """Whether a live item's held copies leave less room than one more copy may need,
    or it has no count of them (an earlier version wrote it)."""
    if not raw.committed:
        return False
    count = raw.held_bytes
    return count is None or count > HELD_BUDGET - HELD_COPY_MAX


def _replaced(checkpoint_id: str, parent_id: str, thread_id: str) -> CheckpointConflictError:
    """The parent was read in a life the thread no longer has: replaced by an import,
    or deleted and begun again (its ids may be reused, its object may have outlived the
    deletion)."""
    return CheckpointConflictError(
        f"checkpoint {checkpoint_id} continues checkpoint {parent_id} of a "
        f"thread {thread_id!r} that was replaced (an import's replace, or a "
        "deletion and a new conversation) while this run was writing: the "
        "checkpoint was discarded; start the run again"
    )
