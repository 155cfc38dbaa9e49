"""A thread's deletion: tombstones under a lease, renewed, released, or revived."""

from __future__ import annotations

import contextlib
from typing import Any

from langgraph_s3.core.keys import encode
from langgraph_s3.core.records import (
    DELETE_LEASE_SECONDS,
    SIGNED_REQUEST_SECONDS,
    Deletion,
    Expiry,
    Late,
    uuid6_time,
)
from langgraph_s3.core.tasks import gather_all
from langgraph_s3.errors import ConditionFailedError, ConflictError, S3PersistenceError
from langgraph_s3.manifest.conditions import (
    BOOL,
    SS,
    TX_ITEMS,
    Absent,
    All,
    Change,
    Compare,
    Cond,
    N,
    S,
    TxDelete,
    TxPut,
    TxWrite,
    all_of,
    eq,
)
from langgraph_s3.manifest.decide import (
    LATE_DUE,
    LATE_MARK,
    LATE_SK,
    LATE_UPTO,
    META_SK,
    RETIRED,
    TOMBSTONE_SECONDS,
)
from langgraph_s3.manifest.items import Items
from langgraph_s3.manifest.schema import (
    HELD_BYTES,
    INLINE_PREFIX,
    METADATA_ATTRIBUTE,
    REVIVABLE,
    ROOT_SK,
    TTL_ATTRIBUTE,
    WRITE_PREFIX,
    held_writes,
    inline_copies,
)


class Deletions:
    """delete_thread's and the TTL sweep's hold on a thread while its objects go:
    tombstones under a lease, renewed, released or revived, and the late passes
    they leave."""

    def __init__(self, items: Items) -> None:
        self.items = items

    async def tombstone(self, thread_id: str, *, revivable: bool = True) -> Deletion:
        """delete_thread's first step: every namespace becomes a tombstone at once
        (``revivable``: a failure of the deletion may put the thread back; not for a
        removal that must not, a failed import's).

        Readers see the thread gone before any object goes; the root namespace is
        always tombstoned, so a new life on the id waits for the deletion (its lease,
        ``DELETE_LEASE_SECONDS``).

        Cost: 1 UpdateItem of the root (and 1 more that takes out its content and
        records its keys to mark), then 1 Query per page of the thread's items, then
        1 UpdateItem per other namespace, concurrently (three or four round trips).

        Returns:
            The deletion's stamp and item keys, for :meth:`renew` and :meth:`release`.
        """
        deletion = await self._tombstone(thread_id, None, revivable)
        assert deletion is not None  # unconditional
        return deletion

    async def tombstone_expired(self, expiry: Expiry) -> Deletion | None:
        """The TTL sweep's first step: :meth:`tombstone`, if the thread is still the
        expired one ``expiry`` names (its root item at that ``rev``, or still absent).

        Cost: as :meth:`tombstone`, the root's UpdateItem conditioned on ``expiry``.

        Returns:
            None when the root item changed since (a new life began, another sweep).
        """
        return await self._tombstone(expiry.thread_id, expiry, False)

    async def _tombstone(
        self, thread_id: str, expect: Expiry | None, revivable: bool
    ) -> Deletion | None:
        stamp = self.items.stamp()
        now = int(self.items.now())
        keys = {ROOT_SK: self.items.key(thread_id, "")}  # the root always: a new life waits
        content: dict[str, tuple[str, ...]] = {}  # sk -> its held copies and metadata
        erasing: dict[str, set[str]] = {}  # sk -> key tails a late PUT may reach
        sets: dict[str, Any] = {
            "deleted": BOOL(True),
            "deleted_at": N(stamp),
            "lease_until": N(now + DELETE_LEASE_SECONDS),
            TTL_ATTRIBUTE: N(now + TOMBSTONE_SECONDS),
        }
        # a delete_thread may fail and revive the thread (a removal that meets it
        # waits for it); a sweep never does
        retired: tuple[str, ...] = (*RETIRED, REVIVABLE)
        if revivable:
            sets, retired = {**sets, REVIVABLE: BOOL(True)}, RETIRED
        before: dict[str, dict[str, Any]] = {}
        sent: set[str] = set()  # the items a tombstone's update was sent to
        held: list[tuple[str, str]] = []

        async def one(sk: str) -> None:
            when = None
            if expect is not None and sk == ROOT_SK:
                when = Absent("pk") if expect.rev is None else eq("rev", N(expect.rev))
            # the held envelopes and the metadata are the conversation's content: they
            # leave with the life; the keys a late PUT may reach stay (no content), so a
            # deletion begun again after a crash still knows them
            gone = (*retired, HELD_BYTES, *content.get(sk, ()))
            tails = erasing.get(sk, set())
            more = {ERASING: SS(tails)} if tails else {}
            change = Change(sets | more, gone, {"rev": N(1)})
            sent.add(sk)
            old = await self.items.db.update(keys[sk], change, when=when, old=True)
            if old:
                before[sk] = old
                ns = str(old.get("checkpoint_ns", {}).get("S", sk))
                found = reachable(old, now)
                held.extend((ns, t) for t in found)
                late = [n for n in old if _content(n) and n not in gone]
                if late or not found <= tails:
                    # content committed since it was read (or never read: the root's)
                    # goes too, and the tombstone records the keys to mark
                    out = Change(remove=tuple(late), add={ERASING: SS(found)} if found else {})
                    await self.items.applied(
                        self.items.db.update(keys[sk], out, when=eq("deleted_at", N(stamp)))
                    )

        # the root first: from then on no subgraph namespace is born (its first commit
        # checks the root), so the Query after it finds every namespace there will be
        try:
            await one(ROOT_SK)
        except ConditionFailedError:
            if expect is None:
                raise
            return None  # the thread began a new life (or another sweep came first)
        except S3PersistenceError:
            await self._undo(revivable, stamp, keys, sent, before)
            raise
        try:
            async for page in self.items.thread_pages(thread_id):
                for i in page:
                    sk = i["sk"]["S"]
                    if sk not in (META_SK, ROOT_SK):
                        keys.setdefault(sk, {"pk": i["pk"], "sk": i["sk"]})
                        content[sk] = tuple(n for n in i if _content(n))
                        erasing[sk] = reachable(i, now)
            await gather_all(*(one(sk) for sk in keys if sk != ROOT_SK))
        except S3PersistenceError:
            await self._undo(revivable, stamp, keys, sent, before)
            raise
        return Deletion(stamp, list(keys.values()), before, tuple(sorted(held)))

    async def _undo(
        self,
        revivable: bool,
        stamp: int,
        keys: dict[str, dict[str, Any]],
        sent: set[str],
        before: dict[str, dict[str, Any]],
    ) -> None:
        """A delete_thread cut short while it tombstoned puts back what it tombstoned
        (its held copies and metadata with it: nothing half-erased stays in a tombstone),
        when it knows each of those items as it was (else a namespace could come back
        empty); a sweep's tombstones stay, and any not ``revivable`` (a later sweep
        finishes). Cost: as
        :meth:`revive`; nothing when nothing may be put back."""
        if not revivable or not sent or not sent <= set(before):
            return
        undo = Deletion(stamp, [keys[sk] for sk in sorted(sent)], before, ())
        with contextlib.suppress(S3PersistenceError):  # the failure is the news
            await self.revive(undo)

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
        lease = Change({"lease_until": N(int(self.items.now()) + DELETE_LEASE_SECONDS)})
        when = eq("deleted_at", N(stamp))
        return all(
            await gather_all(
                *(self.items.applied(self.items.db.update(k, lease, when=when)) for k in keys)
            )
        )

    async def release(self, keys: list[dict[str, Any]], stamp: int) -> None:
        """delete_thread's last step: the deletion is over, new lives may start.

        Cost: 1 conditional UpdateItem per key, concurrently (one round trip). A
        tombstone a newer deletion or a new life replaced is left to them.
        """
        ended = Change({"lease_until": N(0)})
        when = eq("deleted_at", N(stamp))
        await gather_all(
            *(self.items.applied(self.items.db.update(k, ended, when=when)) for k in keys)
        )

    async def note_late(self, thread_id: str, late: Late) -> None:
        """Record that a deletion of the thread needs a late pass at ``late.due`` (epoch
        seconds): the writes a frozen writer's PUTs bring back after the deletion
        listed the thread are removed then (``expired`` yields it once due; DynamoDB's
        TTL removes the record :data:`LATE_RECORD_SECONDS` later, and the stream
        sweeper runs the pass on that removal, for deployments with no sweep). One
        record per thread, always whole: another deletion's moves its due time and its
        ``upto`` each only later (deleters' clocks may differ).

        Cost: 1 GetItem and 1 conditional UpdateItem of the thread's late partition
        (a round more per deletion of the thread that wrote it meanwhile).
        """
        key = self._late_key(thread_id)
        for _ in range(self.items.conflict_rounds()):
            item = await self.items.db.get(key)
            due, upto = late
            when: Cond = Absent("pk")
            if item is not None:
                had = (
                    int(item.get(LATE_DUE, {}).get("N", 0)),
                    str(item.get(LATE_UPTO, {}).get("S", "")),
                )
                due, upto = max(due, had[0]), max(upto, had[1])
                if (due, upto) == had:
                    return
                when = All(
                    (
                        eq(LATE_DUE, N(had[0])) if LATE_DUE in item else Absent(LATE_DUE),
                        eq(LATE_UPTO, S(had[1])) if LATE_UPTO in item else Absent(LATE_UPTO),
                    )
                )
            change = Change(
                {
                    "thread_id": S(thread_id),
                    LATE_DUE: N(due),
                    LATE_UPTO: S(upto),
                    TTL_ATTRIBUTE: N(due + LATE_RECORD_SECONDS),
                }
            )
            if await self.items.applied(self.items.db.update(key, change, when=when)):
                return
        raise ConflictError(f"the late pass of thread {thread_id!r} kept changing: retry")

    async def late_done(self, thread_id: str, due: int) -> None:
        """The late pass of ``due`` is over: its record goes, unless a later deletion
        moved it. Cost: 1 conditional DeleteItem."""
        when = eq(LATE_DUE, N(due))
        await self.items.applied(self.items.db.delete(self._late_key(thread_id), when=when))

    def _late_key(self, thread_id: str) -> dict[str, Any]:
        pk = f"{self.items.deployment}{LATE_MARK}{encode(thread_id, 'thread_id')}"
        return {"pk": {"S": pk}, "sk": {"S": LATE_SK}}

    async def revive(self, deletion: Deletion) -> None:
        """Undo a deletion that failed before it removed any object: each tombstone
        goes back to the item it replaced (or away, where there was none), all at once
        or none, so the thread is as it was and a call cut short leaves nothing
        half-done (no namespace live under the root's tombstone).

        Cost: 1 TransactWriteItems (of 100 items at most each: a thread of more
        namespaces goes back in several, the root's last). A deletion whose tombstones
        a new life or another deletion replaced, or whose lease ran out, is left as
        it is: a removal that met it took the thread as gone for good.
        """
        when = all_of(
            eq("deleted_at", N(deletion.stamp)),
            Compare("lease_until", ">", N(int(self.items.now()))),
        )
        assert when is not None

        def back(key: dict[str, Any]) -> TxWrite:
            old = deletion.before.get(key["sk"]["S"])
            return TxDelete(key, when) if old is None else TxPut(old, when)

        # the root last: once it lives again, so does every namespace under it
        keys = sorted(deletion.keys, key=lambda k: k["sk"]["S"] == ROOT_SK)
        for start in range(0, len(keys), TX_ITEMS):
            if not await self.items.applied(
                self.items.db.transact([back(k) for k in keys[start : start + TX_ITEMS]])
            ):
                return


LATE_RECORD_SECONDS = 86400
"""How long after its due time a late-pass record stays for the sweeps to find
(``asweep_ttl``, any interval up to a day) before DynamoDB's TTL removes it."""

ERASING = "erasing"
"""On a tombstone: the key tails (no content) its deletion leaves erasure markers under."""


LATEST_WINDOW = SIGNED_REQUEST_SECONDS + 300.0
"""Seconds within which a latest checkpoint's own PUT may still be on its way (it is
made, by its id's clock, at most this long before the deletion): its key is marked. A
PUT is applied within 15 minutes of its signing (``SIGNED_REQUEST_SECONDS``); 5 more
for the writer's clock."""


def reachable(item: dict[str, Any], now: float) -> set[str]:
    """The key tails a late PUT may still reach, read off an item: its held copies, its
    latest when made within :data:`LATEST_WINDOW` (a checkpoint over the carried size is
    committed beside its PUT), and those an earlier attempt of the deletion recorded."""
    tails = {c.tail for c in inline_copies(item)} | {w.tail for w in held_writes(item)}
    latest = item.get("latest_tail", {}).get("S")
    made = uuid6_time(item.get("latest_id", {}).get("S", ""))
    if latest and (made is None or made >= now - LATEST_WINDOW):
        tails.add(latest)
    return tails | set(item.get(ERASING, {}).get("SS", ()))


def _content(name: str) -> bool:
    """An attribute holding the conversation's content (a held envelope, metadata)."""
    if "." in name:  # no name of ours (an update names top-level attributes only)
        return False
    return name.startswith((INLINE_PREFIX, WRITE_PREFIX, "ix_")) or name == METADATA_ATTRIBUTE
