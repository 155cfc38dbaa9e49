"""Archive packs: a thread's many small objects in one immutable object.

S3 lifecycle transitions skip objects under 128 KB, and the cheaper classes bill
a small object as 128 KB, so a history of a few-KB checkpoints never reaches
cold storage. A pack holds every object of one thread, so the lifecycle rule on
the ``packs/`` prefix can move it.

The format and the lookup of which threads are packed are :mod:`.pack_lookup`'s.

The thread's root namespace item in the manifest names its pack (key, size,
index length): no listing finds it. :class:`PackedObjects` serves a packed
thread's keys from its pack, beside the plain objects written since, so every
reader and writer works over packs unchanged: a small pack is read whole in one
GET; a large one's index in one ranged GET, then each object in one ranged GET.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from langgraph_s3.checkpoint.pack_lookup import (
    HEAD,
    MAGIC,
    VERSION,
    PackGoneError,
    PackIndex,
    PackLookup,
    build,
    data_start,
    parse_index,
)
from langgraph_s3.core.cache import ByteLRU
from langgraph_s3.core.keys import ERASURE_MARKER, erasure_marker
from langgraph_s3.core.put_mode import CREATE, Create, PutMode, Update
from langgraph_s3.core.records import Lifecycle, Listed, PackRef
from langgraph_s3.core.tasks import bounded_map, gather_all
from langgraph_s3.errors import NotFoundError

if TYPE_CHECKING:  # ports names manifest, which names PackRef
    from langgraph_s3.core.ports import ObjectStorePort

T = TypeVar("T")

__all__ = [
    "HEAD",
    "MAGIC",
    "VERSION",
    "PackGoneError",
    "PackIndex",
    "PackRef",
    "PackedObjects",
    "build",
    "data_start",
    "packed_view",
    "parse_index",
]


def packed_view(objects: object) -> PackedObjects | None:
    """The packed view an object store is, or lies over (a sealing or overlay view's
    ``inner``); None when packs are not served (a caller's own object store)."""
    for _ in range(4):
        if isinstance(objects, PackedObjects):
            return objects
        objects = getattr(objects, "inner", None)
        if objects is None:
            return None
    return None


class PackedObjects:
    """An object store that serves packed threads' keys from their packs.

    Which threads are packed, and by which pack, is what the manifest said last
    (:meth:`note`, from every entry a call reads); a key missing from S3 under a
    thread this process has not seen yet is looked up once in the manifest
    (``lookup``). A plain object written after packing is listed beside the
    pack's; where both hold a key (a crash between the two steps of packing,
    a special write rewritten since) the listing shows the plain one and reads
    follow it.

    Args: as :class:`PackLookup`'s, which it holds (``packs``).
    """

    def __init__(
        self,
        inner: ObjectStorePort,
        threads_prefix: str,
        lookup: Callable[[str], Awaitable[PackRef | None]],
    ) -> None:
        self.inner = inner
        self.packs = PackLookup(inner, threads_prefix, lookup)
        self.note, self.pack_of = self.packs.note, self.packs.pack_of
        self.index, self.forget_pack = self.packs.index, self.packs.forget_pack

    @property
    def bucket(self) -> str:
        return self.inner.bucket

    @property
    def concurrency(self) -> int:
        return self.inner.concurrency

    @property
    def cache(self) -> ByteLRU | None:
        return self.inner.cache

    async def put(
        self,
        key: str,
        body: bytes,
        *,
        mode: PutMode = None,
        cache: bool = False,
        tagging: str | None = None,
    ) -> str | None:
        # by the pack the manifest names now: the one this writer read may be gone (a
        # repack, an unpack, an import's replace or a deletion since; no damage)
        packed = await self._following(key, self.packs.packed)
        if packed is not None and isinstance(mode, Create):
            return None  # the pack holds it: it exists (a merge reads it from there)
        if packed is not None and isinstance(mode, Update):
            if packed[1].entries[packed[2]][2] != mode.etag:
                return None  # the pack's copy is not the one the caller read
            # rewriting a packed object (a special write, a merge): it becomes a plain
            # one, which shadows the pack's from now on
            etag = await self.inner.put(key, body, mode=CREATE, cache=cache)
            # written, or another process made the plain copy first: either way the
            # plain object is the current one (read it, not the pack's, from now on)
            self.packs.shadowed[key] = packed[0].key
            return etag
        etag = await self.inner.put(key, body, mode=mode, cache=cache, tagging=tagging)
        if packed is not None:  # an unconditional overwrite of a packed object
            self.packs.shadowed[key] = packed[0].key
        return etag

    async def copy(self, source_key: str, target_key: str, *, if_match: str | None = None) -> None:
        """Copy one object, from wherever it is now: a plain object that is not there
        may have moved into a pack since this process last noted the thread's (a
        packing beside a copy), so the manifest is asked once (1 GetItem, on that miss
        only) before the miss is the caller's ``NotFoundError``."""
        for attempt in range(3):
            packed = await self._following(source_key, self.packs.from_pack)
            if packed is not None:
                await self.inner.put(target_key, packed[0])
                return
            try:
                await self.inner.copy(source_key, target_key, if_match=if_match)
                return
            except NotFoundError:
                if attempt == 2:
                    raise
                if self.packs.shadowed.pop(source_key, None) is not None:
                    continue  # the plain copy that shadowed the pack's is gone
                prefix = self.packs.thread_prefix(source_key)
                if prefix is None:
                    raise
                was = self.packs.known.pop(prefix, None)
                if not await self.packs.relearn(source_key) or self.packs.known.get(prefix) == was:
                    raise  # packed nowhere else: it is not there
        raise AssertionError("unreachable")  # pragma: no cover

    async def delete(self, keys: Sequence[str]) -> int:
        """Plain objects go; a packed one goes with its pack (delete_thread, a repack)."""
        return await self.inner.delete(keys)

    async def delete_if_match(self, key: str, etag: str) -> bool:
        return await self.inner.delete_if_match(key, etag)

    async def get(self, key: str, *, cache: bool = False) -> bytes | None:
        """The object; None for a deletion's erasure marker, as for any object gone
        (``get_with_etag`` shows it: a writer replaces it)."""
        body, _ = await self.get_with_etag(key, cache=cache)
        return None if body == ERASURE_MARKER else body

    async def _following(self, key: str, use: Callable[[str], Awaitable[T | None]]) -> T | None:
        """``use(key)``, following the manifest when the pack it knew is gone: repacked or
        unpacked (the objects are the same wherever they are), or a new life (an import's
        replace, a deletion). PackGoneError only when the manifest still names it."""
        for attempt in range(3):
            try:
                return await use(key)
            except PackGoneError:
                prefix = self.packs.thread_prefix(key)
                if prefix is None or attempt == 2:
                    raise
                self.packs.known.pop(prefix, None)
                if not await self.packs.relearn(key):
                    return None  # not packed any more: the key is plain, or not there
        raise AssertionError("unreachable")  # pragma: no cover

    async def get_with_etag(
        self, key: str, *, cache: bool = False
    ) -> tuple[bytes | None, str | None]:
        packed = await self._following(key, self.packs.from_pack)
        if packed is not None:
            return packed
        if cache:
            body = await self.inner.get(key, cache=True)
            got: tuple[bytes | None, str | None] = (body, None)
        else:
            got = await self.inner.get_with_etag(key)
        if got[0] is None and self.packs.shadowed.pop(key, None) is not None:
            return await self.get_with_etag(key, cache=cache)  # the pack's copy, then
        if got[0] is None and await self.packs.relearn(key):
            return await self.get_with_etag(key, cache=cache)
        return got

    async def get_many(self, keys: Sequence[str], *, cache: bool = False) -> list[bytes | None]:
        async def one(key: str) -> bytes | None:
            return await self.get(key, cache=cache)

        return await bounded_map(one, keys)

    async def get_range(self, key: str, start: int, length: int) -> bytes | None:
        packed = await self._following(key, self.packs.from_pack)
        if packed is not None:
            return packed[0][start : start + length]
        return await self.inner.get_range(key, start, length)

    async def list_pages(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[list[Listed]]:
        """The plain listing merged with the pack's keys under ``prefix``, ascending;
        a key in both is listed once, as the plain object."""
        thread = self.packs.thread_prefix(prefix)
        pack = self.packs.known.get(thread) if thread is not None else None
        pages = self.inner.list_pages(prefix, start_after=start_after, page_size=page_size)
        if thread is not None:  # a deletion's erasure markers are no checkpoints
            pages = _unerased(thread, pages)
        if pack is None or thread is None:
            async for got in pages:
                yield got
            return
        # the pack's index and the first page of plain objects together
        index, first = await gather_all(self.packs.index(pack, thread), _first(pages))
        after = start_after if start_after is not None and start_after > prefix else None
        packed = [
            Listed(thread + rel, etag, index.made, length)
            for rel in index.sorted_keys()
            if (thread + rel).startswith(prefix) and (after is None or thread + rel > after)
            for _, length, etag in [index.entries[rel]]
        ]
        plain = self._flat(first, pages)
        page: list[Listed] = []
        shadows: set[str] = set()
        async for item in _merge(packed, plain, shadows):
            page.append(item)
            if len(page) >= page_size:
                self._shadow(shadows, pack)
                yield page
                page = []
        self._shadow(shadows, pack)
        if page:
            yield page

    def _shadow(self, keys: set[str], pack: PackRef) -> None:
        for key in keys:
            self.packs.shadowed[key] = pack.key
        keys.clear()

    async def _flat(
        self, first: list[Listed] | None, pages: AsyncIterator[list[Listed]]
    ) -> AsyncIterator[Listed]:
        if first is None:
            return
        for item in first:
            yield item
        async for page in pages:
            for item in page:
                yield item

    async def list_all(self, prefix: str, *, start_after: str | None = None) -> list[Listed]:
        out: list[Listed] = []
        async for page in self.list_pages(prefix, start_after=start_after):
            out.extend(page)
        return out

    async def bucket_exists(self) -> bool:
        return await self.inner.bucket_exists()

    async def create_bucket(self) -> None:
        await self.inner.create_bucket()

    async def lifecycle(self) -> Lifecycle:
        return await self.inner.lifecycle()

    async def set_lifecycle(self, config: Lifecycle) -> None:
        await self.inner.set_lifecycle(config)


async def _first(pages: AsyncIterator[list[Listed]]) -> list[Listed] | None:
    """The first page (None: there is none; S3 lists an empty prefix as no page)."""
    try:
        return await pages.__anext__()
    except StopAsyncIteration:
        return None


async def _merge(
    packed: list[Listed], plain: AsyncIterator[Listed], shadowed: set[str]
) -> AsyncIterator[Listed]:
    """Both sorted by key; a key in both is the plain object (recorded in ``shadowed``)."""
    i = 0
    async for item in plain:
        while i < len(packed) and packed[i].key < item.key:
            yield packed[i]
            i += 1
        yield item
        if i < len(packed) and packed[i].key == item.key:
            shadowed.add(item.key)
            i += 1
    for rest in packed[i:]:
        yield rest


async def _unerased(thread: str, pages: AsyncIterator[list[Listed]]) -> AsyncIterator[list[Listed]]:
    """The pages without a deletion's erasure markers (:func:`~.keys.erasure_marker`)."""
    async for page in pages:
        yield [o for o in page if not erasure_marker(thread, o.key, o.size)]
