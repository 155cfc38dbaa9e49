"""An import's stage partition: claimed, renewed, published whole, or dropped."""

from __future__ import annotations

from typing import Any

import orjson

from langgraph_s3.core.keys import encode
from langgraph_s3.core.records import Late, Raw, bound_live
from langgraph_s3.core.staging import Claim, staging
from langgraph_s3.core.tasks import gather_all
from langgraph_s3.manifest.conditions import (
    TX_ITEMS,
    Absent,
    Change,
    N,
    S,
    TxCheck,
    TxDelete,
    TxPut,
    TxWrite,
    all_of,
    eq,
)
from langgraph_s3.manifest.deletions import LATE_RECORD_SECONDS, Deletions
from langgraph_s3.manifest.items import Items, logger
from langgraph_s3.manifest.schema import ROOT_SK, STAGED_BY, TTL_ATTRIBUTE, raw_of
from langgraph_s3.manifest.stage_items import (
    STAGE_REV,
    STAGE_ROOT,
    STAGE_SK,
    STAGE_TOKEN,
    STAGE_UNTIL,
    STAGE_UPTO,
    claim_of,
)

TX_BYTES = 3 * 1024 * 1024
"""Bytes of items one publishing transaction carries at most (DynamoDB's limit is
4 MB a transaction; the items' sizes are estimated)."""


class Staging:
    """An import's role: its claim, its publishing and its dropping
    (``core.staging``); a dropped stage's late pass is a deletion's."""

    def __init__(self, items: Items, deletions: Deletions) -> None:
        self.items = items
        self.deletions = deletions

    def _claim_key(self, thread_id: str) -> dict[str, Any]:
        return {"pk": {"S": self.items.claim_pk(thread_id)}, "sk": {"S": STAGE_SK}}

    def _real_pk(self, thread_id: str) -> str:
        return f"{self.items.deployment}{encode(thread_id, 'thread_id')}"

    async def staged_claim(self, thread_id: str) -> Claim | None:
        """The claim on the thread's stage, if any. Cost: 1 GetItem."""
        return claim_of(await self.items.db.get(self._claim_key(thread_id)))

    async def stage(self, thread_id: str, claim: Claim, *, renew: bool = False) -> Claim | None:
        """Make ``claim`` where the thread has none, or (``renew``) move its ``until``.

        Cost: renewing, 1 conditional UpdateItem; making, 1 GetItem of the claim and
        1 of the thread's root item, then 1 conditional PutItem.
        """
        key = self._claim_key(thread_id)
        if renew:
            renewed = Change({STAGE_UNTIL: N(claim.until), TTL_ATTRIBUTE: N(_expiry(claim))})
            if await self.items.applied(
                self.items.db.update(key, renewed, when=eq(STAGE_TOKEN, S(claim.token)))
            ):
                return None
            return claim._replace(until=0)  # dropped as dead: the import must stop
        other = await self.staged_claim(thread_id)
        root = await self.items.db.get(self._root_key(thread_id))
        if other is not None:
            return other
        raw = raw_of(root) if root is not None else None
        now = self.items.now()
        if raw is not None and raw.tombstone and raw.held_until(now) > now:
            return Claim("", int(raw.held_until(now)), "")  # a deletion at work: wait
        item = {
            **key,
            "thread_id": {"S": thread_id},
            STAGE_TOKEN: {"S": claim.token},
            STAGE_UNTIL: {"N": str(claim.until)},
            STAGE_UPTO: {"S": claim.upto},
            TTL_ATTRIBUTE: {"N": str(_expiry(claim))},
        }
        if raw is not None:
            item[STAGE_REV] = {"N": str(raw.rev)}
            item[STAGE_ROOT] = {"S": _identity(raw)}
        return (
            None if await self.items.applied(self.items.db.put(item, when=Absent("pk"))) else claim
        )

    def _root_key(self, thread_id: str) -> dict[str, Any]:
        return {"pk": {"S": self._real_pk(thread_id)}, "sk": {"S": ROOT_SK}}

    async def publish(self, thread_id: str, token: str) -> bool:
        """Publish the stage whole (see ``StagingPort.publish``); the cost is
        :meth:`_publish`'s."""
        done = await self._publish(thread_id, token)
        what = "an import published" if done else "an import not published"
        logger.debug("%s: thread %r", what, thread_id)
        return done

    async def _publish(self, thread_id: str, token: str) -> bool:
        """Move the stage's items into the thread's partition (each at a ``rev``
        above the one it replaces, so no condition read before matches it again), if
        the thread's root is the one the claim saw (its ``rev``, deletion stamp and
        life) and no other namespace of it lives.

        Cost: 1 GetItem and 2 Queries, then 1 TransactWriteItems (one per 48
        namespaces, or per 3 MB of items). A thread of more is published in several,
        each checking the root, its subgraph namespaces first and its root (its life
        the import's token) with the claim's removal last; until that last one, those
        namespaces carry the token (``STAGED_BY``) and no reader sees them.
        """
        with staging(self.items.deployment, thread_id, token):
            stage_pk = self.items.pk(thread_id)
        claim, items, found = await gather_all(
            self.staged_claim(thread_id),
            self.items.partition(stage_pk),
            self.items.partition(self._real_pk(thread_id)),
        )
        if claim is None or claim.token != token:
            return False  # dropped as dead (a sweep, or another import, found it so)
        real = {i["sk"]["S"]: i for i in found}
        root = raw_of(real[ROOT_SK]) if ROOT_SK in real else None
        if (root.rev if root else None, _identity(root) if root else "") != (claim.rev, claim.root):
            return False  # deleted, or a new life, since the claim
        now = self.items.now()
        same_root = _as_claimed(self._root_key(thread_id), claim)
        subs: list[tuple[int, list[TxWrite]]] = []
        last: list[TxWrite] = [same_root]  # (the root's own move, when it has one)
        staged_root: dict[str, Any] | None = None
        for item in items:
            sk = item["sk"]["S"]
            old = raw_of(real[sk]) if sk in real else None
            if sk != ROOT_SK and old is not None and _lives(old, root, now):
                return False  # a conversation began in one of its namespaces
            new = {**item, "pk": {"S": self._real_pk(thread_id)}}
            new["rev"] = {"N": str((old.rev if old else 0) + raw_of(item).rev)}
            when = same_root.when if sk == ROOT_SK else None
            when = when or (Absent("pk") if old is None else eq("rev", N(old.rev)))
            move: list[TxWrite] = [TxPut(new, when), TxDelete({"pk": item["pk"], "sk": item["sk"]})]
            if sk == ROOT_SK:
                staged_root, last = new, move
            else:
                subs.append((_size(new), move))
        chunks = _chunks(subs)
        several = len(chunks) > 1 or len(chunks[-1]) + len(last) > TX_ITEMS - 1
        if several and staged_root is not None:
            # the namespaces moved ahead show once the root does (``bound_live``)
            staged_root["life"] = {"S": token}
            for chunk in chunks:
                for w in chunk:
                    if isinstance(w, TxPut):
                        w.item[STAGED_BY] = {"S": token}
        if len(chunks[-1]) + len(last) > TX_ITEMS - 1:
            chunks.append([])
        chunks[-1] += last
        claim_key, ours = self._claim_key(thread_id), eq(STAGE_TOKEN, S(token))
        for i, chunk in enumerate(chunks):
            done = i == len(chunks) - 1
            end = [TxDelete(claim_key, ours)] if done else [TxCheck(claim_key, ours), same_root]
            if not await self.items.applied(self.items.db.transact([*chunk, *end])):
                return False
        return True

    async def unstage(self, thread_id: str, token: str, *, dead: bool = False) -> Late | None:
        """Drop the stage (see ``StagingPort.unstage``).

        Cost: 1 GetItem and 1 Query; then :meth:`note_late`'s, 1 conditional
        DeleteItem of the claim and 1 DeleteItem per other item, concurrently, and 1
        Query of the thread (``_unpublished``).
        """
        with staging(self.items.deployment, thread_id, token):
            stage_pk = self.items.pk(thread_id)
        claim, items = await gather_all(
            self.staged_claim(thread_id), self.items.partition(stage_pk)
        )
        ours = claim is not None and claim.token == token != ""  # ("": not ours to drop)
        if dead and ours and claim is not None and claim.until > self.items.now():
            return None  # alive
        if not ours and not items:
            return None
        ids = [i.get("latest_id", {}).get("S", "") for i in items]
        upto = max([claim.upto if ours and claim is not None else "", *ids])
        late = Late(int(self.items.now()), upto)
        await self.deletions.note_late(thread_id, late)
        if ours and claim is not None:
            when = all_of(eq(STAGE_TOKEN, S(token)), eq(STAGE_UNTIL, N(claim.until)))
            if not await self.items.applied(
                self.items.db.delete(self._claim_key(thread_id), when=when)
            ):
                return None  # renewed meanwhile: that import goes on
        await gather_all(*(self.items.db.delete({"pk": i["pk"], "sk": i["sk"]}) for i in items))
        await self._unpublished(thread_id, token)
        what = "a dead import's stage dropped" if dead else "a failed import's stage dropped"
        logger.debug("%s: thread %r", what, thread_id)
        return late

    async def _unpublished(self, thread_id: str, token: str) -> None:
        """The namespaces a publishing moved ahead of a root it never moved (its later
        transaction failed) go: no reader sees them (``bound_live``), yet they hold
        the import's entries. Cost: 1 Query, 1 conditional DeleteItem each."""
        found = await self.items.partition(self._real_pk(thread_id))
        root = next((i for i in found if i["sk"]["S"] == ROOT_SK), None)
        if root is not None and root.get("life", {}).get("S") == token:
            return  # published whole after all
        ahead = [i for i in found if i.get(STAGED_BY, {}).get("S") == token]
        when = eq(STAGED_BY, S(token))
        await gather_all(
            *(self.items.db.delete({"pk": i["pk"], "sk": i["sk"]}, when=when) for i in ahead)
        )


def _identity(root: Raw) -> str:
    """What tells one root item from another at the same ``rev`` (an item removed and
    made again starts its count over): its deletion stamp and its life."""
    return f"{root.deleted_at}/{root.life}"


def _as_claimed(key: dict[str, Any], claim: Claim) -> TxCheck:
    """The root item is the one the claim saw (or still absent)."""
    if claim.rev is None:
        return TxCheck(key, Absent("pk"))
    deleted, life = claim.root.split("/", 1)
    when = all_of(
        eq("rev", N(claim.rev)),
        eq("deleted_at", N(int(deleted))) if deleted else Absent("deleted_at"),
        eq("life", S(life)) if life else Absent("life"),
    )
    assert when is not None
    return TxCheck(key, when)


def _size(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB counts it, about (a binary value by its bytes)."""
    return len(orjson.dumps(item, default=_bytes_size))


def _bytes_size(value: Any) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "0" * len(value)
    return str(value)


def _chunks(moves: list[tuple[int, list[TxWrite]]]) -> list[list[TxWrite]]:
    """The subgraph namespaces' moves, a transaction's worth each (room left for the
    root's check and the claim's)."""
    chunks: list[list[TxWrite]] = [[]]
    size = 0
    for nbytes, move in moves:
        if len(chunks[-1]) + len(move) > TX_ITEMS - 2 or size + nbytes > TX_BYTES:
            chunks.append([])
            size = 0
        chunks[-1] += move
        size += nbytes
    return chunks


def _lives(sub: Raw, root: Raw | None, now: float) -> bool:
    """Whether a subgraph namespace's item is a live one of the thread (not deleted,
    expired, or another import's never published)."""
    return sub.committed and not sub.expired(now) and bound_live(sub, root, now)


def _expiry(claim: Claim) -> int:
    """A claim's TTL: a day after its lease (the stream sweeper drops the stage on its
    removal, where no sweep runs)."""
    return claim.until + LATE_RECORD_SECONDS
