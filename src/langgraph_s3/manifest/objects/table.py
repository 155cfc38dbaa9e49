""":class:`ObjectTable`: the manifest's table port on an object store's conditional
writes (``manifest="s3"``), so the manifest's rules run unchanged without DynamoDB.

Cost in requests, beside DynamoDB's (round trips in brackets):

* ``get``: 1 GET from a copy cached less than 300 s ago (the next version's 404),
  else 1 LIST + 1 GET [2]; an absent item, the LIST alone. DynamoDB: 1 GetItem.
* ``update``/``put``/``delete``: 1 create-only PUT from a cached copy [1]; a lost
  race 1 GET more and another PUT. A condition that fails on a cached copy is read
  again before it is said to fail.
* ``query(pk)``: 1 LIST per 1,000 versions of the partition and 1 GET per item whose
  newest version is not cached, all at once [2]. ``scan``: the same over the table,
  a page at a time; a deleted item is skipped by its listed size, unread.
* ``transact``: 3 round trips (:mod:`.tx`); one write with no check is a plain write.
* ``query_index``: a scan of the table, filtered (no index is kept: metadata queries
  cost a listing of every thread).
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from langgraph_s3.core.ports import ObjectStorePort, VersionedObjects
from langgraph_s3.core.put_mode import CREATE
from langgraph_s3.core.shards import Shard
from langgraph_s3.core.tasks import bounded_map, gather_all
from langgraph_s3.errors import (
    ConditionFailedError,
    MissingResourceError,
    TransactionFailedError,
)
from langgraph_s3.manifest.conditions import (
    Change,
    Cond,
    TxCheck,
    TxDelete,
    TxPut,
    TxUpdate,
    TxWrite,
)
from langgraph_s3.manifest.evaluate import applied, holds, key_of, refused
from langgraph_s3.manifest.objects import gc, keys
from langgraph_s3.manifest.objects.codec import Image, Version, encode
from langgraph_s3.manifest.objects.heads import ERASED, Head, Versions
from langgraph_s3.manifest.objects.tx import refuse_malformed, transact
from langgraph_s3.manifest.objects.writes import Make, Writes

__all__ = ["ObjectTable"]

Item = dict[str, Any]
MAX_ROUNDS = 64
"""Rounds a single write may lose to other writers before ConflictError."""
FORMAT = 1


async def _nothing() -> AsyncIterator[list[Item]]:
    return
    yield


def _failed_tx() -> TransactionFailedError:
    return TransactionFailedError("TransactionCanceledException: ConditionalCheckFailed", (0,))


def _failed() -> ConditionFailedError:
    return ConditionFailedError("ConditionalCheckFailedException: the condition failed")


class ObjectTable:
    """The manifest's :class:`~langgraph_s3.manifest.table.TablePort` on objects under
    ``root`` of ``store``'s bucket (a deployment's ``{prefix}/manifest/``).

    Args:
        store: the deployment's object store (its raw one: no sealing, no packing).
        root: the key prefix of the manifest's objects, ending in ``/``.
        strip: the prefix every partition key has (the deployment key), left out of
            object keys; a key without it is refused.
        page_items: the most keys a listing page asks for.
    """

    def __init__(
        self, store: ObjectStorePort, root: str, *, strip: str = "", page_items: int = 1000
    ) -> None:
        self.store, self.root, self.strip = store, root, strip
        self.versions = Versions(store, root, strip)
        self.writes = Writes(self.versions)
        self.page_items = page_items
        self._known = False

    @property
    def name(self) -> str:
        return f"s3://{self.store.bucket}/{self.root}"

    def _prefix(self, key: Item) -> str:
        pk, sk = key_of(key)
        return keys.item_prefix(self.root, self.strip, pk, sk)

    async def _ready(self) -> None:
        """Refuse a manifest ``create`` has not made (1 GET, once per table object)."""
        if self._known:
            return
        if await self.store.get(keys.format_key(self.root)) is None:
            raise MissingResourceError(
                "object manifest",
                self.name,
                fix="call setup() or run `langgraph-s3 setup` with ?manifest=s3 to create it",
            )
        self._known = True

    # -- reads --------------------------------------------------------------
    async def get(self, key: Item) -> Item | None:
        prefix = self._prefix(key)
        _, head = await gather_all(self._ready(), self.versions.head(prefix, fresh=True))
        image: Item | None = copy.deepcopy(head.image)
        return image

    async def get_many(self, keys_: Sequence[Item]) -> list[Item]:
        if len({key_of(k) for k in keys_}) != len(keys_):
            raise refused("Provided list of item keys contains duplicates")
        await self._ready()
        prefixes = [self._prefix(k) for k in keys_]
        heads = await bounded_map(
            lambda p: self.versions.head(p, fresh=True), prefixes, self.store.concurrency
        )
        return [copy.deepcopy(h.image) for h in heads if h.image is not None]

    async def _pages(
        self, prefix: str, start_after: str | None, shard: Shard | None
    ) -> AsyncIterator[list[Item]]:
        await self._ready()
        last = ""
        basis = time.monotonic()  # the first page's listing begins now
        async for page in self.store.list_pages(
            prefix, start_after=start_after, page_size=self.page_items
        ):
            firsts = Versions.firsts(page, last)
            if page:
                last = page[-1].key[:-12]
            if shard is not None:
                firsts = [
                    (p, listed)
                    for p, listed in firsts
                    if (found := keys.split(self.root, self.strip, listed.key)) is not None
                    and shard.holds(found[0])
                ]

            async def one(first: tuple[str, Any], listed_at: float = basis) -> Head:
                return await self.versions.at(first[1], first[0], listed_at)

            heads = await bounded_map(one, firsts, self.store.concurrency)
            yield [copy.deepcopy(h.image) for h in heads if h.image is not None]
            basis = time.monotonic()  # the next page's listing begins now

    def query(self, pk: str) -> AsyncIterator[list[Item]]:
        return self._pages(keys.partition_of(self.root, self.strip, pk), None, None)

    def scan(
        self, *, prefix: str = "", after: Item | None = None, shard: Shard | None = None
    ) -> AsyncIterator[list[Item]]:
        if not (self.strip.startswith(prefix) or prefix.startswith(self.strip)):
            return _nothing()  # another deployment's: none of its items are here
        under = keys.partition_prefix(self.root, self.strip, prefix)
        start = f"{self._prefix(after)}~" if after is not None else None
        return self._pages(under, start, shard)

    # -- single writes ------------------------------------------------------
    async def _write(self, key: Item, when: Cond | None, make: Make) -> Image | None:
        prefix = self._prefix(key)
        await self._ready()
        return await self.writes.write(prefix, when, make)

    async def update(
        self, key: Item, change: Change, *, when: Cond | None = None, old: bool = False
    ) -> Item | None:
        pk, sk = key_of(key)
        was = await self._write(
            key, when, lambda image: applied(change, image or {"pk": {"S": pk}, "sk": {"S": sk}})
        )
        before: Item | None = copy.deepcopy(was) if old else None
        return before

    async def put(self, item: Item, *, when: Cond | None = None) -> None:
        new = copy.deepcopy(item)
        await self._write(item, when, lambda _image: new)

    async def delete(self, key: Item, *, when: Cond | None = None) -> None:
        await self._write(key, when, lambda image: image if image is None else None)

    async def transact(self, writes: Sequence[TxWrite]) -> None:
        refuse_malformed(writes)
        await self._ready()
        if len(writes) == 1:
            await self._single(writes[0])
        else:
            await transact(self.versions, self._prefix, writes)

    async def _single(self, write: TxWrite) -> None:
        """One part: a plain conditional write (or a strong read, for a lone check)."""
        try:
            if isinstance(write, TxCheck):
                if not holds(write.when, await self.get(write.key)):
                    raise _failed_tx()
            elif isinstance(write, TxUpdate):
                await self.update(write.key, write.change, when=write.when)
            elif isinstance(write, TxPut):
                await self.put(write.item, when=write.when)
            else:
                assert isinstance(write, TxDelete)
                await self.delete(write.key, when=write.when)
        except TransactionFailedError:
            raise
        except ConditionFailedError as exc:  # the condition failed on a fresh read
            raise _failed_tx() from exc

    # -- indexes ------------------------------------------------------------
    def query_index(self, index: str, attribute: str, value: str) -> AsyncIterator[list[Item]]:
        async def pages() -> AsyncIterator[list[Item]]:
            got = await self.store.get(keys.index_key(self.root, index))
            if got is None or got.decode() != attribute:
                raise refused(f"The table does not have the specified index: {index}")
            async for page in self.scan(prefix=self.strip):
                yield [
                    {"pk": i["pk"], "sk": i["sk"], attribute: i[attribute]}
                    for i in page
                    if i.get(attribute) == {"S": value}
                ]

        return pages()

    async def indexes(self) -> list[str]:
        await self._ready()
        listed = await self.store.list_all(f"{self.root}x/")
        return sorted(keys.unescape(x.key[len(self.root) + 2 :]) for x in listed)

    async def create_index(self, index: str, attribute: str) -> None:
        await self._ready()
        await self.store.put(keys.index_key(self.root, index), attribute.encode())

    # -- the table ----------------------------------------------------------
    async def collect(self) -> int:
        """Free every item's superseded versions that the rules of :mod:`.gc` allow
        (the sweep's part: the writers free theirs every 16th version). Cost: a listing
        of the whole manifest, 1 LIST per 1,000 versions, and a DeleteObjects per 1,000
        freed. Returns how many were freed."""
        await self._ready()
        return await gc.collect_table(self.store, self.root)

    async def erase_history(self, key: Item) -> None:
        """Overwrite every version of the item but its newest with an empty one that
        readers never take for the newest (the slot stays taken: the fence holds). Cost: 1
        LIST, 1 PUT per earlier version (concurrently). A bucket with versioning keeps
        the overwritten bodies as noncurrent versions: they are deleted by version id
        (1 ListObjectVersions and 1 DeleteObjects more)."""
        await self._ready()
        prefix = self._prefix(key)
        listed = await self.store.list_all(prefix)

        async def blank(key_: str) -> None:
            seq = keys.seq_of(key_)
            await self.store.put(key_, encode(Version(seq, None, ERASED)))

        await bounded_map(blank, [x.key for x in listed[1:]], self.store.concurrency)
        if isinstance(self.store, VersionedObjects):  # what versioning kept of them
            await self.store.delete_noncurrent(prefix)

    async def exists(self) -> bool:
        return await self.store.get(keys.format_key(self.root)) is not None

    async def create(self, *, ttl_attribute: str) -> None:
        """Write the manifest's marker (an existing one is fine): 1 PUT. Expired items
        are removed by the sweep (no table service removes them)."""
        body = json.dumps({"format": FORMAT, "ttl": ttl_attribute}).encode()
        await self.store.put(keys.format_key(self.root), body, mode=CREATE)
        self._known = True
