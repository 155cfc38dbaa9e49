"""A forgotten subject's store namespaces erased: their items deleted, their segments too.

The subject's index names each namespace its items were sealed in (once per life,
before the first item: :mod:`langgraph_s3.store.seals`). Erasing one lists the items
directly in it (its sub-namespaces are named on their own when they are the subject's)
and deletes them, with the namespace's own segment. A segment of a wider prefix keeps
the subject's sealed entries sealed with their key (unreadable once it is destroyed, and
dropped at its next rewrite); one that holds an entry of theirs in plain (written before
the deployment declared subjects) is deleted (a GET of each wider prefix's segment).

While the subject's life is being forgotten no new life can begin, so every item in its
namespaces is that life's, an earlier one's, or plain: all are deleted at once (a
listing and a DeleteObjects per 1,000 items), as long as no run may have ended the life
yet (``batch_until``: its key may not be destroyed before then, by any clock). After
that a new life may write into the same namespaces: each item's first bytes (its
subject's token and life) are read, and those of lives up to the forgotten one and plain
ones deleted, only while unchanged (a ranged GET and a conditional DeleteObject each).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import orjson

from langgraph_s3.core.clock import wall_clock
from langgraph_s3.core.keys import Layout
from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.core.records import Listed
from langgraph_s3.core.sealing import NAMED_HEAD, named_head
from langgraph_s3.core.tasks import bounded_map
from langgraph_s3.manifest.subjects import NamedNamespace, SubjectRegistry

__all__ = ["Erased", "StoreErasure", "plain_namespaces"]


@dataclass
class Erased:
    """What one pass erased: items and their bytes, and the namespaces counted (each
    once, whatever the passes and runs)."""

    items: int = 0
    bytes: int = 0
    namespaces: set[tuple[str, ...]] = field(default_factory=set)


class StoreErasure:
    """Erases the store namespaces a subject's index names.

    Args:
        objects: the deployment's bucket (its raw objects).
        layout: the deployment's layout (the store's items are under its root).
        registry: the deployment's subjects' items.
        concurrency: requests in flight at most.
    """

    def __init__(
        self,
        objects: ObjectStorePort,
        layout: Layout,
        registry: SubjectRegistry,
        *,
        concurrency: int = 32,
    ) -> None:
        self.objects = objects
        self.layout = layout
        self.registry = registry
        self.concurrency = concurrency

    async def named(self, token: str, life: int) -> list[NamedNamespace]:
        """The namespaces named for the subject in lives up to ``life`` (1 Query per MB)."""
        out: list[NamedNamespace] = []
        async for page in self.registry.namespaces(token, upto=life):
            out.extend(page)
        return out

    async def erase(
        self,
        token: str,
        life: int,
        named: list[NamedNamespace],
        *,
        batch_until: float | None = None,
        now: Callable[[], float] = wall_clock,
    ) -> Erased:
        """Delete the items of the named namespaces: all of them while ``now()`` is
        before ``batch_until``, else only the subject's of lives up to ``life`` and
        plain ones (see the module). Per namespace: a listing and a DeleteObjects (after
        ``batch_until``: a ranged GET and a DeleteObject per item)."""
        done = Erased()
        unique = [*{n.labels: n for n in named}.values()]

        async def one(ns: NamedNamespace) -> None:
            prefix = self.layout.store_namespace(ns.labels)
            listed = [
                e for e in await self.objects.list_all(prefix) if "/" not in e.key[len(prefix) :]
            ]
            if batch_until is None or now() >= batch_until:
                kept = await bounded_map(lambda e: self._erase_one(token, life, e), listed)
                gone = [e for e, ok in zip(listed, kept, strict=True) if ok]
            else:
                await self.objects.delete([e.key for e in listed])
                gone = listed
            await self.objects.delete([self.layout.store_segment(ns.labels)])
            done.items += len(gone)
            done.bytes += sum(e.size for e in gone)
            if await self.registry.mark_deleted(token, ns):
                done.namespaces.add(ns.labels)

        await bounded_map(one, unique)
        await self._plain_segments({n.labels for n in unique})
        return done

    async def _plain_segments(self, labels: set[tuple[str, ...]]) -> None:
        """Delete the segments of wider prefixes that hold an item of these namespaces
        in plain (segments are caches: the next search writes them again)."""
        wider = {ns[:i] for ns in labels for i in range(len(ns))}

        async def one(prefix: tuple[str, ...]) -> None:
            key = self.layout.store_segment(prefix)
            body = await self.objects.get(key)
            if body is None:
                return
            if plain_namespaces(body) & labels:
                await self.objects.delete([key])

        await bounded_map(one, sorted(wider))

    async def _erase_one(self, token: str, life: int, entry: Listed) -> bool:
        """Delete the item while it is this version, if it is the subject's up to
        ``life`` or plain: whether it was deleted."""
        head = await self.objects.get_range(entry.key, 0, NAMED_HEAD)
        if head is None:
            return False
        named = named_head(head)
        if named is not None and (named[0] != token or named[1] > life):
            return False  # another subject's, or the subject's next life's
        return await self.objects.delete_if_match(entry.key, entry.etag)


def plain_namespaces(segment: bytes) -> set[tuple[str, ...]]:
    """The namespaces of the entries a store segment holds in plain (the store's segment
    format 1, ``store/format.py``: ``{"v": 1, "items": {key: [etag, item]}}``, a sealed
    entry a string, a plain one an object naming its ``ns``; a leading space marks the
    stdlib's JSON). A segment that cannot be read holds none that can be read either."""
    try:
        raw = json.loads(segment) if segment[:1] == b" " else orjson.loads(segment)
        entries = raw["items"].values()
        return {
            tuple(e[1]["ns"])
            for e in entries
            if isinstance(e, list)
            and len(e) == 2
            and isinstance(e[1], dict)
            and isinstance(e[1].get("ns"), list)
        }
    except (ValueError, TypeError, KeyError, AttributeError):
        return set()
