"""Forgetting a subject: every thread of theirs deleted, their key destroyed, and a
receipt kept (docs/subjects.md).

The steps, each safe to run again after a crash at any request (a run resumes where
the subject's record says it is):

1. The subject's life is marked *forgetting*: from their next read of the record (the
   deployment's bound at most) writers refuse to seal anything more for the subject.
2. Their threads are deleted, a page of the subject's index at a time (a page is one
   Query: thousands of threads), each page's threads side by side.
3. The bound (and a margin for clocks) is waited out from when forgetting began: a
   process that held the key may have written until then, into threads that are then
   deleted again (as are threads named for the subject meanwhile).
4. The key is destroyed: what is left of the subject anywhere (an object version, a
   straggler's object, a backup of the table without the wrapped key) opens no more.
5. The subject's index is cleared and the receipt written (:mod:`~langgraph_s3.runtime.receipts`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

from langgraph_s3.aws.config import receipts_location
from langgraph_s3.aws.s3 import ObjectStore
from langgraph_s3.checkpoint.saver.wiring import Wiring
from langgraph_s3.core.keys import Layout, decode
from langgraph_s3.core.report import Progress, Report
from langgraph_s3.core.tasks import bounded_map
from langgraph_s3.errors import InvalidRequestError
from langgraph_s3.manifest.schema import ROOT_SK
from langgraph_s3.manifest.subjects import LifeRecord, NamedThread, SubjectRecord
from langgraph_s3.runtime.operations import operation
from langgraph_s3.runtime.receipts import Receipts
from langgraph_s3.runtime.remains import iso, table_copies
from langgraph_s3.runtime.store_erasure import StoreErasure
from langgraph_s3.runtime.subjects import SKEW
from langgraph_s3.runtime.thread_seals import ThreadSeals, seal_of_item

__all__ = ["Forgetting"]

RECEIPT_LEASE = 30.0
"""Seconds a forgetting run holds the right to write its life's receipt (a GET, a PUT and
two UpdateItems take far less; a run that stopped is taken over after it)."""


class Forgetting:
    """``AsyncS3Saver.aforget``: one subject forgotten, its receipt kept."""

    def __init__(self, w: Wiring) -> None:
        self.w = w

    @property
    def concurrency(self) -> int:
        return self.w.concurrency

    def _seals(self) -> ThreadSeals:
        if self.w.seals is None:
            raise InvalidRequestError(
                "this saver declares no subjects: pass subjects= (a metadata key such as "
                "'user_id') and kms_key= to seal and forget a subject's threads"
            )
        return self.w.seals

    def _place(self) -> str:
        """Where this saver keeps receipts: ``receipts=``'s URL, or "" (the deployment's)."""
        at = self.w.receipts_at
        return "" if at is None else f"s3://{at[0]}/{at[1]}".rstrip("/")

    def receipts(self, place: str | None = None) -> Receipts:
        """The deployment's chain of forgetting receipts kept at ``place`` (None: where
        this saver keeps them): in its own bucket under ``{prefix}/receipts/``, or at
        ``receipts=``'s place under ``{bucket}/{prefix}/receipts/`` (one chain, and one
        head in the table, per deployment and place)."""
        seals = self._seals()
        registry = seals.subjects.registry
        place = self._place() if place is None else place
        if not place:
            objects, prefix = self.w.raw_objects, f"{self.w.layout.root}receipts/"
            return Receipts(objects, prefix, registry.table, registry.deployment)
        bucket, root = receipts_location(place) or ("", "")
        objects = (
            self.w.raw_objects
            if bucket == self.w.target.bucket
            else ObjectStore(self.w.clients, bucket, concurrency=4, cache_bytes=0)
        )
        prefix = f"{Layout(root).root}{registry.deployment}receipts/"
        chain = hashlib.sha256(place.encode()).hexdigest()[:16]
        return Receipts(objects, prefix, registry.table, registry.deployment, chain=chain)

    @operation
    async def aforget(
        self,
        subject: str,
        *,
        dry_run: bool = False,
        wait: bool = True,
        progress: Progress | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> dict[str, Any]:
        """``AsyncS3Saver.aforget``."""
        subjects = self._seals().subjects
        registry, token = subjects.registry, await subjects.token(subject)
        record = await registry.get(token)
        life = record.life if record is not None else 0
        if not dry_run:  # a life forgotten earlier whose run stopped before its receipt
            for owed in await registry.owed(token, below=life):
                await self._receipt(token, owed.life, await self._fields(token, owed), sleep)
        if record is not None and record.state == "forgotten":
            kept = await registry.life_of(token, life)
            if kept is not None and kept.receipt is not None:
                chain = self.receipts(kept.receipt_at)
                await chain.catch_up()  # its run may have stopped before the head moved
                return {**await chain.get(kept.receipt), "state": "forgotten"}
        threads = await self._threads(token, life)
        stores = self._stores()
        if dry_run:
            return {
                "subject": token,
                "state": "dry-run",
                "life": record.life if record is not None else None,
                "threads": len({t.thread for t in threads}),
                "store_namespaces": len({n.labels for n in await stores.named(token, life)}),
                "key": record.state if record is not None else "none",
            }
        if record is not None and record.state == "live":
            began = await subjects.forget_begins(subject, record.life)
            # another run may have ended this life meanwhile, and the subject come back
            ours = began is not None and began.life == record.life
            record = began if ours else dataclasses.replace(record, state="forgotten")
        if record is not None and record.state == "forgetting":
            await registry.open_life(record)
        total = await self._pass(token, life, record, threads, progress)
        if record is not None and record.state == "forgetting":
            ends = subjects.forget_ends_after(record)
            now = registry.now()
            if now < ends and not wait:
                return {
                    "subject": token,
                    "state": "forgetting",
                    "life": record.life,
                    "resume_after": iso(ends),
                    "deleted": total,
                }  # (its threads counted once the second pass is done)
            if now < ends:
                await sleep(ends - now)
            await self._pass(token, life, record, await self._threads(token, life), progress)
            await subjects.forget_ends(record)
            await registry.note_destroyed(token, life, registry.now())
        for named in await self._threads(token, life):  # a later life's are not this one's
            await registry.drop_named(token, named)
        for ns in await stores.named(token, life):
            await registry.drop_named(token, ns)
        kept = await registry.life_of(token, life) if record is not None else None
        if kept is None:  # no life (a subject never sealed for): what this run deleted
            fields = await self._fields(token, None, total)
            return {**await self._receipt(token, None, fields, sleep), "state": "forgotten"}
        fields = await self._fields(token, kept)
        return {**await self._receipt(token, life, fields, sleep), "state": "forgotten"}

    def _stores(self) -> StoreErasure:
        """The deployment's store namespaces, as forgetting erases them."""
        registry = self._seals().subjects.registry
        return StoreErasure(
            self.w.raw_objects, self.w.layout, registry, concurrency=self.concurrency
        )

    async def _pass(
        self,
        token: str,
        life: int,
        record: SubjectRecord | None,
        threads: list[NamedThread],
        progress: Progress | None,
    ) -> dict[str, int]:
        """One pass: the subject's threads deleted, then their store namespaces erased
        (each item checked first once a new life may have begun), and what it deleted
        added to the record (and returned)."""
        done, gone = await self._delete(token, life, threads, progress)
        stores, subjects = self._stores(), self._seals().subjects
        fresh = await subjects.registry.get(token)  # another run may have ended the life
        batch = fresh is not None and fresh.state == "forgetting" and fresh.life == life
        erased = await stores.erase(
            token,
            life,
            await stores.named(token, life),
            batch_until=subjects.forget_ends_after(fresh) - SKEW if batch and fresh else None,
            now=subjects.registry.now,
        )
        counts = {k: getattr(done, k) for k in _COUNTED if hasattr(done, k)}
        counts["threads"] = len(gone)
        counts.update(
            store_namespaces=len(erased.namespaces),
            store_items=erased.items,
            store_bytes=erased.bytes,
        )
        if record is not None:
            await self._seals().subjects.registry.count_deleted(token, record.life, counts)
        return counts

    async def _receipt(
        self,
        token: str,
        life: int | None,
        fields: dict[str, Any],
        sleep: Callable[[float], Awaitable[None]],
    ) -> dict[str, Any]:
        """The life's one receipt: written by the run that claims the right to on the
        life's item (a run beside it waits for it; one that finds a claim run out takes
        over, and finds the receipt its holder may have written before it stopped)."""
        registry, receipts = self._seals().subjects.registry, self.receipts()
        if life is None:  # no life: nothing to write twice
            return await receipts.append(fields, same=lambda r: _same(r, fields))
        while True:
            kept = await registry.life_of(token, life)
            if kept is not None and kept.receipt is not None:
                chain = self.receipts(kept.receipt_at)
                await chain.catch_up()
                return await chain.get(kept.receipt)
            if await registry.claim_receipt(token, life, registry.now() + RECEIPT_LEASE):
                found = None
                if kept is not None and kept.receipt_claim is not None:  # a run that stopped
                    await receipts.catch_up()
                    found = await receipts.find(token, life)
                if found is None:
                    found = await receipts.append(fields, same=lambda r: _same(r, fields))
                await registry.note_receipt(token, life, int(found["seq"]), self._place())
                return found
            await sleep(1.0)  # another run writes it

    async def _threads(self, token: str, life: int) -> list[NamedThread]:
        """The threads named for the subject up to its life ``life`` (one name per life
        a thread had)."""
        out: list[NamedThread] = []
        async for page in self._seals().subjects.registry.threads(token, upto=life):
            out.extend(page)
        return out

    async def _delete(
        self, token: str, life: int, threads: list[NamedThread], progress: Progress | None
    ) -> tuple[Report, set[str]]:
        """Delete the named threads that are still the subject's (the index may name a
        thread another subject, or a plain conversation, began on the id since): what
        was removed, and which threads."""
        total, gone = Report(), set[str]()
        maintenance = self.w.maintenance()
        threads = [*{t.thread: t for t in threads}.values()]  # each thread deleted once

        async def one(named: NamedThread) -> Report:
            thread_id = await self._owned(token, life, named)
            if thread_id is None:
                return Report()
            report = await maintenance.delete_thread(thread_id)
            if await self._seals().subjects.registry.mark_deleted(token, named):
                gone.add(named.thread)  # counted once, whatever the passes and runs
            return report

        for at in range(0, len(threads), 100):  # a shard at a time: progress, bounded memory
            for report in await bounded_map(one, threads[at : at + 100]):
                total = total + report
            if progress is not None:
                progress(total, min(at + 100, len(threads)), len(threads))
        return total, gone

    async def _owned(self, token: str, life: int, named: NamedThread) -> str | None:
        """The id of a named thread when it is still the subject's (its root item names
        the subject in a life up to ``life``; or it is plain and named so; or it is gone
        or being deleted, its objects still to remove); None otherwise (1 GetItem)."""
        registry = self._seals().subjects.registry
        key = {"pk": {"S": registry.deployment + named.thread}, "sk": {"S": ROOT_SK}}
        item = await registry.table.get(key)
        if item is not None and not item.get("deleted", {}).get("BOOL"):
            seal = seal_of_item(item)
            mine = seal.token == token and seal.life <= life if seal else named.life == 0
            if not mine:
                return None  # another subject's now, or a plain conversation begun since
        if named.thread_id is not None:
            return named.thread_id
        if item is not None and "thread_id" in item:
            return str(item["thread_id"]["S"])
        try:
            return decode(named.thread)
        except ValueError:
            return None  # a long id, its items gone: nothing left to find it by

    async def _fields(
        self, token: str, kept: LifeRecord | None, counts: dict[str, int] | None = None
    ) -> dict[str, Any]:
        """The receipt of forgetting the life ``kept`` (None: a subject never sealed for,
        with what this run deleted, ``counts``)."""
        registry = self._seals().subjects.registry
        record = await registry.get(token) if kept is not None else None
        destroyed = kept.destroyed if kept is not None else None
        if kept is not None and destroyed is None:  # a run stopped between the two
            destroyed = record.since if record is not None and record.life == kept.life else None
        exports = dict(kept.exports) if kept is not None else {}
        if kept is not None and record is not None and record.life == kept.life:
            for kind, n in record.exports.items():  # made while it was being forgotten
                exports[kind] = max(n, exports.get(kind, 0))
        done = kept.deleted if kept is not None else (counts or {})
        return {
            "receipt": "langgraph-s3 forgetting",
            "format": 1,
            "subject": token,
            "life": kept.life if kept is not None else None,
            "key_id": kept.key_id.hex() if kept is not None and kept.key_id else None,
            "began": iso(kept.began) if kept is not None else None,
            "key_destroyed": iso(destroyed),
            "ended": iso(registry.now()),
            "deleted": {k: int(done.get(k, 0)) for k in _COUNTED},
            "exports": _exports(exports),
            "remains": await self._remains(destroyed if destroyed is not None else registry.now()),
        }

    async def _remains(self, destroyed: float) -> list[dict[str, Any]]:
        """What may still hold the subject's content or key, and until when."""
        out: list[dict[str, Any]] = [
            {
                "what": "object versions a bucket's versioning or object lock keeps, and any "
                "object a writer sent after the deletion",
                "readable_until": iso(destroyed),
                "why": "sealed with the destroyed key",
            }
        ]
        if getattr(self.w.manifest, "clients", None) is None:  # no DynamoDB table to ask
            return out
        return out + await table_copies(
            self.w.clients,
            self.w.target.table or "",
            destroyed,
            "the subject's item (its wrapped key), and held copies sealed with it",
        )


_COUNTED = (
    *("threads", "namespaces", "checkpoints", "objects", "bytes"),
    *("store_namespaces", "store_items", "store_bytes"),
)
"""What a receipt counts: the threads deleted (their checkpoint namespaces, checkpoints,
objects and bytes), and the store namespaces erased (their items and bytes)."""


def _exports(made: dict[str, int]) -> dict[str, Any]:
    """What the receipt says of the exports of the subject's threads this life."""
    sealed, plain = made.get("sealed", 0), made.get("plain", 0)
    return {
        "sealed": sealed,
        "plaintext": plain,
        "note": (
            "sealed exports are unreadable now (sealed with the destroyed key); " if sealed else ""
        )
        + (
            "plaintext exports are the operator's own copies, outside the library's "
            "reach: delete them where they are kept"
            if plain
            else "no plaintext export of the subject's threads was made in this life"
        ),
    }


def _same(receipt: dict[str, Any], fields: dict[str, Any]) -> bool:
    return bool(
        receipt.get("subject") == fields["subject"] and receipt.get("life") == fields["life"]
    )
