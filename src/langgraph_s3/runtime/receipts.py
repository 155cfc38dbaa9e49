"""Forgetting receipts: what each forgetting of a subject did, kept as a chain that
shows any change made to it afterwards.

A receipt is a JSON object under the deployment's ``receipts/`` prefix, numbered
(``0000000001.json`` ...), written create-only. Each names the digest (SHA-256 of the
bytes) of the one before it, and the manifest keeps the newest's number and digest
(``{deployment}~receipts``): a receipt changed, removed or slipped in breaks the chain
at that point (:meth:`Receipts.verify`), and so does a chain cut short. A receipt names
the subject by its token (a keyed hash), never by its id.

Cost of one receipt: a GetItem, a create-only PUT and a conditional UpdateItem (a
forgetting running beside it at the same number makes one of them go again).
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.core.put_mode import CREATE
from langgraph_s3.errors import ConditionFailedError, CorruptObjectError
from langgraph_s3.manifest.conditions import Absent, Change, N, S, eq
from langgraph_s3.manifest.schema import ROOT_SK
from langgraph_s3.manifest.table import TablePort

__all__ = ["RECEIPTS_MARK", "ChainBroken", "Receipts"]

RECEIPTS_MARK = "~receipts/head"
"""After the deployment key, the partition key of the chain's head."""
GENESIS = "0" * 64
"""The digest the first receipt names as the one before it."""


@dataclass(frozen=True)
class ChainBroken:
    """Where a chain of receipts fails its check, and why."""

    seq: int
    reason: str


class Receipts:
    """The forgetting receipts of one deployment: in ``objects`` under ``prefix``, the
    chain's head in ``table``."""

    def __init__(
        self,
        objects: ObjectStorePort,
        prefix: str,
        table: TablePort,
        deployment: str,
        *,
        chain: str = "",
    ) -> None:
        """``chain``: the chain's name among the deployment's (a place it kept receipts
        in: each place has a chain, and a head, of its own); "" for the default place."""
        self.objects, self.prefix = objects, prefix
        self.table, self.deployment, self.chain = table, deployment, chain

    def key(self, seq: int) -> str:
        return f"{self.prefix}{seq:010d}.json"

    def _head_key(self) -> dict[str, Any]:
        name = self.deployment + RECEIPTS_MARK + (f"/{self.chain}" if self.chain else "")
        return {"pk": S(name), "sk": S(ROOT_SK)}

    async def head(self) -> tuple[int, str]:
        """The newest receipt's number and digest ((0, GENESIS) before the first)."""
        item = await self.table.get(self._head_key())
        if item is None:
            return 0, GENESIS
        return int(item["seq"]["N"]), str(item["digest"]["S"])

    async def append(
        self, fields: dict[str, Any], *, same: Callable[[dict[str, Any]], bool]
    ) -> dict[str, Any]:
        """Write the next receipt of ``fields`` (``seq``, ``previous`` and ``digest``
        added): the receipt as kept. ``same``: whether a receipt found at the next
        number is this one (a run of the same forgetting that stopped before the
        head moved), so that a resumed forgetting writes no second receipt."""
        while True:
            seq, digest = await self.head()
            receipt = {**fields, "seq": seq + 1, "previous": digest}
            body = orjson.dumps(receipt, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)
            if await self.objects.put(self.key(seq + 1), body, mode=CREATE) is None:
                body = await self._body(seq + 1)  # another's, or ours from a run that stopped
                receipt = orjson.loads(body)
            # the head moves to it (or another run of ours, or another's, moved it)
            await self._advance(seq, _digest(body))
            if same(receipt):
                return {**receipt, "digest": _digest(body)}
            # another forgetting's receipt took this number: ours goes after it

    async def catch_up(self) -> tuple[int, str]:
        """Move the head past receipts stored after it (a forgetting that stopped
        between its receipt's PUT and the head's update): the head after. A GET per
        receipt found, and an UpdateItem each."""
        while True:
            seq, digest = await self.head()
            body = await self.objects.get(self.key(seq + 1))
            if body is None:
                return seq, digest
            await self._advance(seq, _digest(body))

    async def _advance(self, seq: int, new: str) -> bool:
        when = Absent("pk") if seq == 0 else eq("seq", N(seq))
        change = Change(set={"seq": N(seq + 1), "digest": S(new)})
        try:
            await self.table.update(self._head_key(), change, when=when)
        except ConditionFailedError:
            return False
        return True

    async def get(self, seq: int) -> dict[str, Any]:
        """The receipt numbered ``seq``, with its ``digest`` (1 GET)."""
        body = await self._body(seq)
        return {**orjson.loads(body), "digest": _digest(body)}

    async def _body(self, seq: int) -> bytes:
        body = await self.objects.get(self.key(seq))
        if body is None:
            raise CorruptObjectError(self.key(seq), "a receipt the chain names is missing")
        return body

    async def find(self, token: str, life: int | None = None) -> dict[str, Any] | None:
        """The newest receipt of the subject ``token`` (of its life ``life``, when
        given), or None."""
        found = None
        async for receipt in self.all():
            if receipt.get("subject") == token and life in (None, receipt.get("life")):
                found = receipt
        return found

    async def all(self) -> AsyncIterator[dict[str, Any]]:
        """Every receipt, oldest first, each with its ``digest`` (1 LIST per 1,000 and a
        GET each)."""
        for listed in await self.objects.list_all(self.prefix):
            body = await self.objects.get(listed.key)
            if body is None:
                continue
            try:
                receipt = orjson.loads(body)
            except orjson.JSONDecodeError:
                receipt = {"seq": -1, "unreadable": listed.key}
            yield {**receipt, "digest": _digest(body)}

    async def verify(self) -> ChainBroken | None:
        """Where the chain fails its check (None: every receipt is as written): each
        receipt names the digest of the one before, the numbers run on from 1, and the
        head names the last."""
        seq, digest = 0, GENESIS
        async for receipt in self.all():
            if receipt.get("seq") != seq + 1:
                return ChainBroken(seq + 1, f"found number {receipt.get('seq')!r} instead")
            if receipt.get("previous") != digest:
                return ChainBroken(seq + 1, "the digest it names is not the previous receipt's")
            seq, digest = seq + 1, str(receipt["digest"])
        head = await self.head()
        if head != (seq, digest):
            return ChainBroken(
                head[0], f"the manifest's head names receipt {head[0]}; the chain ends at {seq}"
            )
        return None


def _digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()
