"""An object manifest's superseded versions, freed: what keeps an item's versions few
and a listing of a thread's items short.

**The rules** (SlateDB's, with the fence of :mod:`langgraph_s3.core.fence`):

* G1, an item's newest version is never freed (a deleted item keeps its ⊥ version,
  under :data:`~.codec.DEAD_MAX` bytes), so a create-only PUT can never re-create
  the newest slot.
* G2, a superseded version is freed only once the version after it is
  :data:`~langgraph_s3.core.fence.GC_SECONDS` old by the store's own clock
  (``LastModified``), longer than any write built on a read from before that version
  can still land (the fence). A slot a stale writer could aim at is never free.

**Who frees.** The writer of every :data:`EVERY`-th version of an item, after its call
(in the background): one LIST of the item's versions and one DeleteObjects of what G2
allows ("now" is the newest listed version's ``LastModified``, the store's time). The
sweep frees the rest, a whole table's listing at a time (:func:`collect_table`).
"""

from __future__ import annotations

import logging

from langgraph_s3.core.fence import GC_SECONDS
from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.core.records import Listed

__all__ = ["EVERY", "collect_item", "collect_table", "freeable"]

logger = logging.getLogger(__name__)

EVERY = 16
"""An item's writer frees its superseded versions at every 16th version."""


def freeable(
    versions: list[Listed], *, now: float | None = None, after: float = GC_SECONDS
) -> list[str]:
    """The keys of one item's versions (listed newest first) that G1 and G2 free, at
    ``now`` by the store's clock (by default the newest version's ``LastModified``)."""
    if len(versions) < 2:
        return []
    now = max(v.modified for v in versions) if now is None else now
    return [
        versions[i].key for i in range(1, len(versions)) if versions[i - 1].modified <= now - after
    ]


async def collect_item(store: ObjectStorePort, prefix: str) -> int:
    """Free one item's superseded versions: 1 LIST (a page per 1,000 versions) and a
    DeleteObjects per 1,000 freed. Returns how many were freed."""
    doomed = freeable(await store.list_all(prefix))
    if doomed:
        await store.delete(doomed)
    return len(doomed)


async def store_now(store: ObjectStorePort, root: str) -> float:
    """The store's time now: the ``LastModified`` of a small object written for it
    (``{root}clock``, rewritten by each sweep). Cost: 1 PUT and 1 LIST."""
    key = f"{root}clock"
    await store.put(key, b"")
    listed = await store.list_all(key)
    return max((x.modified for x in listed if x.key == key), default=0.0)


async def collect_table(store: ObjectStorePort, root: str) -> int:
    """Free every item's superseded versions under ``root``: the store's time (1 PUT,
    1 LIST), a listing of the whole manifest (1 LIST per 1,000 versions) and a
    DeleteObjects per 1,000 freed."""
    now = await store_now(store, root)
    freed = 0
    item: list[Listed] = []
    doomed: list[str] = []

    def close() -> None:
        doomed.extend(freeable(item, now=now))
        item.clear()

    async for page in store.list_pages(f"{root}i/"):
        for listed in page:
            if item and listed.key[:-12] != item[0].key[:-12]:
                close()
            item.append(listed)
        if len(doomed) >= 1000:
            await store.delete(doomed)
            freed += len(doomed)
            doomed.clear()
    close()
    doomed += await _aborted_decisions(store, root, now)
    if doomed:
        await store.delete(doomed)
        freed += len(doomed)
    return freed


async def _aborted_decisions(store: ObjectStorePort, root: str, now: float) -> list[str]:
    """The decisions of aborted transactions an hour old (a pending intent that meets
    none aborts its transaction again, to the same outcome); a commit's stays until its
    committer resolved every part. 1 LIST, 1 GET per old decision."""
    old = [x.key for x in await store.list_all(f"{root}t/") if x.modified <= now - GC_SECONDS]
    bodies = await store.get_many(old)
    return [key for key, body in zip(old, bodies, strict=True) if body == b"abort"]
