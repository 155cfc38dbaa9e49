"""An import's stage partition: claimed, renewed, published whole, or dropped."""

from __future__ import annotations

from typing import Any

import orjson

from langgraph_s3.core.conditions import (
    TX_ITEMS,
    Absent,
    Change,
    Cond,
    N,
    S,
    TxCheck,
    TxDelete,
    TxPut,
    TxWrite,
    all_of,
    eq,
)
from langgraph_s3.core.keys import encode
from langgraph_s3.core.records import ROOT_SK, TTL_ATTRIBUTE, Late, Raw
from langgraph_s3.core.staging import Claim, staging
from langgraph_s3.core.tasks import gather_all
from langgraph_s3.manifest.decide import (
    STAGE_REV,
    STAGE_SK,
    STAGE_TOKEN,
    STAGE_UNTIL,
    STAGE_UPTO,
    claim_of,
)
from langgraph_s3.manifest.deletions import LATE_RECORD_SECONDS, Deletions

TX_BYTES = 3 * 1024 * 1024
"""Bytes of items one publishing transaction carries at most (DynamoDB's limit is
4 MB a transaction; the items' sizes are estimated)."""


class Staging(Deletions):
    """The manifest's part in an import's staging (``core.staging``)."""

    def _claim_key(self, thread_id: str) -> dict[str, Any]:
        return {"pk": {"S": self._claim_pk(thread_id)}, "sk": {"S": STAGE_SK}}

    def _real_pk(self, thread_id: str) -> str:
        return f"{self.deployment}{encode(thread_id, 'thread_id')}"

    async def staged_claim(self, thread_id: str) -> Claim | None:
        """The claim on the thread's stage, if any. Cost: 1 GetItem."""
        return claim_of(await self.db.get(self._claim_key(thread_id)))

    async def stage(self, thread_id: str, claim: Claim, *, renew: bool = False) -> Claim | None:
        """Make ``claim`` where the thread has none, or (``renew``) move its ``until``.

        Cost: renewing, 1 conditional UpdateItem; making, 1 GetItem of the claim and
        1 of the thread's root item, then 1 conditional PutItem.
        """
        key = self._claim_key(thread_id)
        if renew:
            renewed = Change({STAGE_UNTIL: N(claim.until), TTL_ATTRIBUTE: N(_expiry(claim))})
            if await self._if(self.db.update(key, renewed, when=eq(STAGE_TOKEN, S(claim.token)))):
                return None
            return claim._replace(until=0)  # dropped as dead: the import must stop
        other = await self.staged_claim(thread_id)
        root = await self.db.get({"pk": {"S": self._real_pk(thread_id)}, "sk": {"S": ROOT_SK}})
        if other is not None:
            return other
        item = {
            **key,
            "thread_id": {"S": thread_id},
            STAGE_TOKEN: {"S": claim.token},
            STAGE_UNTIL: {"N": str(claim.until)},
            STAGE_UPTO: {"S": claim.upto},
            TTL_ATTRIBUTE: {"N": str(_expiry(claim))},
        }
        if root is not None:
            item[STAGE_REV] = {"N": str(Raw(root).rev)}
        return None if await self._if(self.db.put(item, when=Absent("pk"))) else claim

    async def publish(self, thread_id: str, token: str) -> bool:
        """Move the stage's items into the thread's partition (each at a ``rev``
        above the one it replaces, so no condition read before matches it again).

        Cost: 1 GetItem and 2 Queries, then 1 TransactWriteItems (one per 49
        namespaces, or per 3 MB of items: a thread of more is published in several,
        its subgraph namespaces first and its root with the claim's removal last).
        """
        with staging(self.deployment, thread_id, token):
            stage_pk = self._pk(thread_id)
        claim, items, found = await gather_all(
            self.staged_claim(thread_id),
            self._items(stage_pk),
            self._items(self._real_pk(thread_id)),
        )
        if claim is None or claim.token != token:
            return False  # dropped as dead (a sweep, or another import, found it so)
        real = {i["sk"]["S"]: i for i in found}
        root = real.get(ROOT_SK)
        if (Raw(root).rev if root is not None else None) != claim.rev:
            return False  # deleted, or a new life, since the claim
        moves: list[tuple[int, list[TxWrite]]] = []
        root_key = {"pk": {"S": self._real_pk(thread_id)}, "sk": {"S": ROOT_SK}}
        last: list[TxWrite] = [
            TxCheck(root_key, Absent("pk") if claim.rev is None else eq("rev", N(claim.rev)))
        ]
        for item in items:
            sk = item["sk"]["S"]
            old = real.get(sk)
            if sk != ROOT_SK and old is not None and "deleted" not in old:
                return False  # a conversation began in one of its namespaces
            old_rev = Raw(old).rev if old is not None else 0
            new = {**item, "pk": {"S": self._real_pk(thread_id)}}
            new["rev"] = {"N": str(old_rev + Raw(item).rev)}
            when: Cond = Absent("pk") if old is None else eq("rev", N(old_rev))
            move: list[TxWrite] = [TxPut(new, when), TxDelete({"pk": item["pk"], "sk": item["sk"]})]
            if sk == ROOT_SK:
                last = move
            else:
                moves.append((len(orjson.dumps(new)), move))
        chunks: list[list[TxWrite]] = [[]]
        size = 0
        for nbytes, move in moves:
            if len(chunks[-1]) + len(move) > TX_ITEMS - 1 or size + nbytes > TX_BYTES:
                chunks.append([])
                size = 0
            chunks[-1] += move
            size += nbytes
        if len(chunks[-1]) + len(last) > TX_ITEMS - 1:
            chunks.append([])
        chunks[-1] += last
        claim_key, ours = self._claim_key(thread_id), eq(STAGE_TOKEN, S(token))
        for i, chunk in enumerate(chunks):
            end = TxDelete(claim_key, ours) if i == len(chunks) - 1 else TxCheck(claim_key, ours)
            if not await self._if(self.db.transact([*chunk, end])):
                return False
        return True

    async def unstage(self, thread_id: str, token: str, *, dead: bool = False) -> Late | None:
        """Drop the stage (see ``StagingPort.unstage``).

        Cost: 1 GetItem and 1 Query; then :meth:`note_late`'s, 1 conditional
        DeleteItem of the claim and 1 DeleteItem per other item, concurrently.
        """
        with staging(self.deployment, thread_id, token):
            stage_pk = self._pk(thread_id)
        claim, items = await gather_all(self.staged_claim(thread_id), self._items(stage_pk))
        ours = claim is not None and claim.token == token
        if dead and ours and claim is not None and claim.until > self.now():
            return None  # alive
        if not ours and not items:
            return None
        ids = [i.get("latest_id", {}).get("S", "") for i in items]
        upto = max([claim.upto if ours and claim is not None else "", *ids])
        late = Late(int(self.now()), upto)
        await self.note_late(thread_id, late)
        if ours and claim is not None:
            when = all_of(eq(STAGE_TOKEN, S(token)), eq(STAGE_UNTIL, N(claim.until)))
            if not await self._if(self.db.delete(self._claim_key(thread_id), when=when)):
                return None  # renewed meanwhile: that import goes on
        await gather_all(*(self.db.delete({"pk": i["pk"], "sk": i["sk"]}) for i in items))
        return late


def _expiry(claim: Claim) -> int:
    """A claim's TTL: a day after its lease (the stream sweeper drops the stage on its
    removal, where no sweep runs)."""
    return claim.until + LATE_RECORD_SECONDS
