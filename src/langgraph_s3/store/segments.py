"""Segments: many items folded into one object, so a search reads a handful of objects.

A segment (``Layout.store_segment(prefix)``) maps item keys to ``[etag, item]``.
It is only a cache: the listing of the items decides what exists and which
version, and a segment entry is used only while its ETag is the listed one.
Segments are written where they pay: by a search that had to read many items
one by one (for the prefix it searched), by a large batch of puts (for each
namespace it filled), and by :meth:`Segments.compact` on demand.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from langgraph_s3.core import codec
from langgraph_s3.core.keys import Layout
from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.core.records import Listed
from langgraph_s3.core.tasks import bounded_map, gather_all
from langgraph_s3.errors import CorruptObjectError
from langgraph_s3.store import format as it
from langgraph_s3.store.items import ItemStore, Live

logger = logging.getLogger("langgraph_s3.store")

COMPACT_AFTER = 16
"""A read that had to fetch this many items one by one writes a new segment."""

Entries = dict[str, tuple[str, it.StoredItem]]
"""A segment's content: item key -> (ETag, item)."""


def segment_entries(layout: Layout, key: str, body: bytes | None) -> Entries:
    """A segment's entries; a corrupt one is only a cache: skipped, and said.

    An entry counts only for the item it names; any other is dropped, so
    that item is read from its own object (and checked there).
    """
    if body is None:
        return {}
    try:
        with codec.reading(key):
            entries = it.load_segment(body)
            return {
                k: e for k, e in entries.items() if layout.store_item(e[1].namespace, e[1].key) == k
            }
    except CorruptObjectError as exc:
        logger.warning("ignoring a segment: %s", exc)
        return {}


def partition(
    listed: Sequence[Listed], cached: Mapping[str, tuple[str, it.StoredItem]]
) -> tuple[list[Live], list[str]]:
    """Split a listing into the items a segment holds at the listed ETag, and the keys
    that must be read one by one."""
    hits: list[Live] = []
    loose: list[str] = []
    for entry in listed:
        seg = cached.get(entry.key)
        if seg is not None and seg[0] == entry.etag:
            hits.append(Live(entry.key, entry.etag, seg[1]))
        else:
            loose.append(entry.key)
    return hits, loose


def entries(live: Sequence[Live]) -> Entries:
    """A segment's content for these items."""
    return {h.key: (h.etag, h.item) for h in live}


def by_namespace(written: Sequence[Live], at_least: int) -> dict[tuple[str, ...], list[Live]]:
    """The namespaces a batch wrote ``at_least`` items to, with those items."""
    groups: dict[tuple[str, ...], list[Live]] = {}
    for entry in written:
        groups.setdefault(entry.item.namespace, []).append(entry)
    return {ns: group for ns, group in groups.items() if len(group) >= at_least}


@dataclass(slots=True)
class Scan:
    """What one read of a prefix found.

    Attributes:
        live: every item under the prefix, expired ones included.
        loose: how many of them were read one by one (no segment held them).
        segments: the segments listed under the prefix.
    """

    live: list[Live]
    loose: int
    segments: list[Listed]


class Segments:
    """Reads prefixes through their segments, and keeps the segments useful.

    Args:
        objects: the bucket's object store.
        layout: where items and segments live.
        items: reads the items no segment holds.
        compact_after: items read one by one that make a read write a segment,
            and items one batch writes to a namespace that make it fold them in.
    """

    def __init__(
        self, objects: ObjectStorePort, layout: Layout, items: ItemStore, *, compact_after: int
    ) -> None:
        self.objects = objects
        self.layout = layout
        self.items = items
        self.compact_after = compact_after

    async def read(self, prefix: tuple[str, ...]) -> Scan:
        """Every item under a namespace prefix, expired ones included.

        Two listings at once (items, segments; one more round trip per 1,000
        keys), then the segments at once, then the items whose listed ETag no
        segment holds at once: one round trip per step that has something to
        read (two when the segments are current, three at most).
        """
        listed, segments = await gather_all(
            self.objects.list_all(self.layout.store_namespace(prefix)),
            self.objects.list_all(self.layout.store_segments(prefix)),
        )
        if not listed:
            return Scan([], 0, segments)
        bodies = await self.objects.get_many([s.key for s in segments])
        cached: Entries = {}
        for seg, body in zip(segments, bodies, strict=True):
            cached.update(segment_entries(self.layout, seg.key, body))
        hits, loose = partition(listed, cached)
        hits += await self.items.read_all(loose)
        return Scan(hits, len(loose), segments)

    async def scan(self, prefix: tuple[str, ...]) -> list[Live]:
        """:meth:`read`, then a fresh segment for the prefix when many items were loose.

        Segments belong to the prefixes people search, so a search over many
        small namespaces (``("users", id)``) compacts as well as one big one:
        one PUT, then a DeleteObjects for the segments beneath it (a round trip
        each).
        """
        found = await self.read(prefix)
        if found.loose >= self.compact_after:
            key = await self.write(prefix, found.live)
            await self.objects.delete([s.key for s in found.segments if s.key != key])
        return found.live

    async def write(self, prefix: tuple[str, ...], live: Sequence[Live]) -> str:
        """Write the segment of ``prefix`` holding ``live`` (one PUT); its key."""
        key = self.layout.store_segment(prefix)
        await self.objects.put(key, it.dump_segment(entries(live)))
        return key

    async def compact(self, prefix: tuple[str, ...]) -> int:
        """Write the segment for a prefix now, whatever it held; how many items it holds."""
        found = await self.read(prefix)
        await self.write(prefix, found.live)
        return len(found.live)

    async def fold(self, written: Sequence[Live]) -> None:
        """A large batch (a bulk load) updates its namespaces' segments itself.

        One GET and one PUT per namespace that got ``compact_after`` items or
        more, never per item: the first search after a bulk load then reads a
        segment instead of every item. The segment is only a cache, so a lost
        race here costs a later search some GETs, never a wrong answer.
        """

        async def fold_one(group: tuple[tuple[str, ...], list[Live]]) -> None:
            key = self.layout.store_segment(group[0])
            held = segment_entries(self.layout, key, await self.objects.get(key))
            held.update(entries(group[1]))
            await self.objects.put(key, it.dump_segment(held))

        due = by_namespace(written, self.compact_after)
        await bounded_map(fold_one, list(due.items()))
