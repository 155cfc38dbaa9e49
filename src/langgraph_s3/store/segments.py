"""Segments: many items folded into one object, so a search reads a handful of objects.

A segment (``Layout.store_segment(prefix)``) maps item keys to ``[etag, item]``.
It is only a cache: the listing of the items decides what exists and which
version, and a segment entry is used only while its ETag is the listed one.
Segments are written where they pay: by a search that had to read many items
one by one (for the prefix it searched), by a large batch of puts (for each
namespace it filled), and by :meth:`Segments.compact` on demand.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
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
from langgraph_s3.store.seals import ItemSeals

logger = logging.getLogger("langgraph_s3.store")

COMPACT_AFTER = 16
"""A read that had to fetch this many items one by one writes a new segment."""
PAGE = 1000
"""Keys per listing request (S3's most)."""
SPAN = 900
"""Keys the segments know that one listing of a cut range covers: a page holds
:data:`PAGE`, so a range takes one request unless more than ``PAGE - SPAN`` items
came into it since its segment was written (then it takes one more page)."""

Entries = dict[str, Live]
"""A segment's content: item key -> the item at the ETag the segment holds it at."""


async def segment_entries(items: ItemStore, key: str, body: bytes | None) -> Entries:
    """A segment's entries (sealed ones opened); a corrupt one is only a cache: skipped,
    and said.

    An entry counts only for the item it names; any other is dropped, so that item is
    read from its own object (and checked there). So is a sealed one that fails its check,
    or whose subject was forgotten.
    """
    if body is None:
        return {}
    try:
        with codec.reading(key):
            raw = it.load_segment(body)
    except CorruptObjectError as exc:
        logger.warning("ignoring a segment: %s", exc)
        return {}
    out: Entries = {}
    sealed: list[tuple[str, str, bytes]] = []
    for k, (etag, item) in raw.items():
        if isinstance(item, bytes):
            sealed.append((k, etag, item))
        elif items.layout.store_item(item.namespace, item.key) == k:
            out[k] = Live(k, etag, item)

    async def one(entry: tuple[str, str, bytes]) -> Live | None:
        k, etag, stored = entry
        return await items.decoded(k, stored, etag)

    for live in await bounded_map(one, sealed):
        if live is not None:
            out[live.key] = live
    return out


def partition(listed: Sequence[Listed], cached: Mapping[str, Live]) -> tuple[list[Live], list[str]]:
    """Split a listing into the items a segment holds at the listed ETag, and the keys
    that must be read one by one."""
    hits: list[Live] = []
    loose: list[str] = []
    for entry in listed:
        seg = cached.get(entry.key)
        if seg is not None and seg.etag == entry.etag:
            hits.append(seg)
        else:
            loose.append(entry.key)
    return hits, loose


def entries(live: Sequence[Live]) -> Entries:
    """A segment's content for these items."""
    return {h.key: h for h in live}


def dumped(held: Entries, seals: ItemSeals | None) -> bytes:
    """A segment's bytes: each entry as stored (a sealed item stays sealed). An item of a
    subject's namespace still stored plain (before ``langgraph-s3 seal`` rewrote it) is
    left out: its plaintext is copied nowhere, and reads take it from its own object."""
    return it.dump_segment(
        {
            k: (h.etag, h.sealed if h.sealed is not None else h.item)
            for k, h in held.items()
            if h.sealed is not None or seals is None or not seals.has_subject(h.item.namespace)
        }
    )


def by_namespace(written: Sequence[Live], at_least: int) -> dict[tuple[str, ...], list[Live]]:
    """The namespaces a batch wrote ``at_least`` items to, with those items."""
    groups: dict[tuple[str, ...], list[Live]] = {}
    for entry in written:
        groups.setdefault(entry.item.namespace, []).append(entry)
    return {ns: group for ns, group in groups.items() if len(group) >= at_least}


DECODED_BYTES = 16 * 1024 * 1024
"""Bytes of segments (as stored) whose decoded items a store keeps, in all: the least
recently used leave first; decoded, they take a few times as much memory."""


class DecodedSegments:
    """Segments decoded by this process, by key, each at the ETag it was read at: an
    object is immutable at an ETag, so a segment listed at the same one is the same. Held
    items are shared between searches, which hand out copies of their values. Safe from
    several threads (the sync store's callers)."""

    def __init__(self, limit: int = DECODED_BYTES) -> None:
        self.limit = limit
        self._held: OrderedDict[str, tuple[str, Entries, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: str, etag: str) -> Entries | None:
        with self._lock:
            got = self._held.get(key)
            if got is None or not etag or got[0] != etag:
                return None
            self._held.move_to_end(key)
            return got[1]

    def put(self, key: str, etag: str, found: Entries, size: int) -> None:
        """Keep ``found``, decoded from ``size`` bytes read at ``etag``."""
        with self._lock:
            old = self._held.pop(key, None)
            self._bytes -= old[2] if old is not None else 0
            if size > self.limit or not etag:
                return
            self._held[key] = (etag, found, size)
            self._bytes += size
            while self._bytes > self.limit:
                _, (_, _, gone) = self._held.popitem(last=False)
                self._bytes -= gone


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
        page: keys per listing request (:data:`PAGE`).
        span: known keys per cut range (:data:`SPAN`, below ``page``).
    """

    def __init__(
        self,
        objects: ObjectStorePort,
        layout: Layout,
        items: ItemStore,
        *,
        compact_after: int,
        page: int = PAGE,
        span: int = SPAN,
    ) -> None:
        if not 0 < span <= page:
            raise ValueError(f"span {span} must be between 1 and the page size {page}")
        self.objects = objects
        self.layout = layout
        self.items = items
        self.compact_after = compact_after
        self.page, self.span = page, span
        self.decoded = DecodedSegments()
        """The segments this process decoded, by key and ETag."""

    async def read(self, prefix: tuple[str, ...]) -> Scan:
        """Every item under a namespace prefix, expired ones included.

        The first page of the items' listing and the listing of the segments at once,
        then the segments (while the items' listing goes on), then the rest of the
        items' listing cut into ranges at keys the segments hold, all ranges at once
        (one page each; as many in flight as the object store's concurrency, 32 by
        default), then the items whose listed ETag no segment holds: two round trips up
        to :data:`PAGE` items when the segments are current, four up to ~30,000, one
        more per further 32 pages (a listing of 1,000 keys per request either way).
        """
        items = self.layout.store_namespace(prefix)
        head: list[Listed] = []
        cut: list[str | None] = [None]
        paged = asyncio.Event()
        listing = asyncio.ensure_future(self._listed(items, None, head, cut, paged))
        try:
            segments, cached = await self._segments(prefix)
            if not listing.done() and not paged.is_set():  # cut past the first page
                first = asyncio.ensure_future(paged.wait())
                try:
                    await asyncio.wait([listing, first], return_when=asyncio.FIRST_COMPLETED)
                finally:
                    first.cancel()
            listed = await self._rest(items, listing, head, cut, cached)
        finally:  # the head listing ends here, and its error is retrieved, whatever raised
            listing.cancel()
            await asyncio.gather(listing, return_exceptions=True)
        if not listed:
            return Scan([], 0, segments)
        hits, loose = partition(listed, cached)
        hits += await self.items.read_all(loose)
        return Scan(hits, len(loose), segments)

    async def _segments(self, prefix: tuple[str, ...]) -> tuple[list[Listed], Entries]:
        """The segments under ``prefix`` and what they hold (a listing, then the GETs of
        those this process has not decoded at their listed ETag: a search that finds its
        segments unchanged reads and decodes none)."""
        segments = await self.objects.list_all(self.layout.store_segments(prefix))
        known = [self.decoded.get(s.key, s.etag) for s in segments]
        missing = [s.key for s, got in zip(segments, known, strict=True) if got is None]
        read = dict(zip(missing, await bounded_map(self._decode, missing), strict=True))
        cached: Entries = {}
        for seg, got in zip(segments, known, strict=True):
            cached.update(got if got is not None else read[seg.key])
        return segments, cached

    async def _decode(self, key: str) -> Entries:
        """A segment's entries, kept by the ETag its GET answered with (1 GET)."""
        body, etag = await self.objects.get_with_etag(key)
        found = await segment_entries(self.items, key, body)
        if etag and body is not None:
            self.decoded.put(key, etag, found, len(body))
        return found

    async def _rest(
        self,
        items: str,
        listing: asyncio.Future[None],
        head: list[Listed],
        cut: list[str | None],
        cached: Entries,
    ) -> list[Listed]:
        """The items' listing, whole: the head listing (under way) ends at the first
        cut, and ranges between the next cuts are listed at once."""
        if listing.done():
            await listing
            return head
        after = head[-1].key if head else ""  # the head's next page lists from here
        known = sorted(k for k in cached if k.startswith(items) and k > after)
        cuts = known[self.span - 1 :: self.span]
        if not cuts:
            await listing
            return head
        cut[0] = cuts[0]
        parts: list[list[Listed]] = [[] for _ in cuts]
        ranges = [
            self._listed(items, start, parts[i], [cuts[i + 1] if i + 1 < len(cuts) else None])
            for i, start in enumerate(cuts)
        ]
        await gather_all(listing, *ranges)
        return [e for e in head if e.key <= cuts[0]] + [e for part in parts for e in part]

    async def _listed(
        self,
        prefix: str,
        start_after: str | None,
        out: list[Listed],
        end: list[str | None],
        paged: asyncio.Event | None = None,
    ) -> None:
        """List keys after ``start_after`` into ``out`` until a page reaches ``end[0]``
        (read at each page: it may be set while the listing runs; None: to the end). The
        keys past ``end[0]`` are left out; ``paged`` is set once a page is in."""
        pages = self.objects.list_pages(prefix, start_after=start_after, page_size=self.page)
        try:
            async for page in pages:
                out.extend(page)
                if paged is not None:
                    paged.set()
                if end[0] is not None and page[-1].key >= end[0]:
                    break
        finally:
            close = getattr(pages, "aclose", None)
            if close is not None:  # an async generator left early: its request ends here
                await close()
        if end[0] is not None:
            out[:] = [e for e in out if e.key <= end[0]]

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
        await self.objects.put(key, dumped(entries(live), self.items.seals))
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
            held = await segment_entries(self.items, key, await self.objects.get(key))
            held.update(entries(group[1]))
            await self.objects.put(key, dumped(held, self.items.seals))

        due = by_namespace(written, self.compact_after)
        await bounded_map(fold_one, list(due.items()))
