"""Archive packs: a thread's many small objects in one immutable object.

S3 lifecycle transitions skip objects under 128 KB, and the cheaper classes bill
a small object as 128 KB, so a history of a few-KB checkpoints never reaches
cold storage. A pack holds every object of one thread, so the lifecycle rule on
the ``packs/`` prefix can move it.

Format (version 1)::

    b"LGS3PK" | version (1 byte) | 0 (1 byte) | index length (4 bytes, big-endian)
    index: zstd(msgpack {"v": 1, "thread": thread_id, "made": epoch seconds,
                         "objects": [[key below the thread's prefix, offset, length, etag], ...]})
    the objects' bytes, at their offsets (counted from the end of the index)

The thread's root namespace item in the manifest names its pack (key, size,
index length): no listing finds it. :class:`PackedObjects` serves a packed
thread's keys from its pack, beside the plain objects written since, so every
reader and writer works over packs unchanged: a small pack is read whole in one
GET; a large one's index in one ranged GET, then each object in one ranged GET.
"""

from __future__ import annotations

import asyncio
import functools
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import ormsgpack
import zstandard
from cachetools import LRUCache

from langgraph_s3.core.cache import ByteLRU
from langgraph_s3.core.keys import ERASURE_MARKER, encode, erasure_marker, thread_prefix_in
from langgraph_s3.core.put_mode import CREATE, Create, PutMode, Update
from langgraph_s3.core.records import Lifecycle, Listed, PackRef
from langgraph_s3.core.tasks import bounded_map, gather_all
from langgraph_s3.errors import CorruptObjectError, NewerFormatError, NotFoundError

if TYPE_CHECKING:  # ports names manifest, which names PackRef
    from langgraph_s3.core.ports import ObjectStorePort

__all__ = ["MAGIC", "VERSION", "PackIndex", "PackRef", "PackedObjects", "build"]

MAGIC = b"LGS3PK"
VERSION = 1
HEAD = len(MAGIC) + 2 + 4
WHOLE_BELOW = 1024 * 1024
"""A pack up to this size is read whole, once: smaller than the round trips it saves."""
INDEX_GUESS = 64 * 1024
"""The first ranged GET of a large pack: its header and, usually, its whole index."""
T = TypeVar("T")


def data_start(ref: PackRef) -> int:
    """Where the pack's objects begin: after its header and its index."""
    return HEAD + ref.index_length


@dataclass(frozen=True, slots=True)
class PackIndex:
    """A pack's table of contents."""

    thread_id: str
    made: float
    entries: dict[str, tuple[int, int, str]]
    """Key below the thread's prefix -> (offset, length, ETag)."""
    data: bytes | None = None
    """The objects' bytes, when the whole pack was read."""

    def sorted_keys(self) -> list[str]:
        return sorted(self.entries)


def build(thread_id: str, made: float, objects: Iterable[tuple[str, bytes, str]]) -> bytes:
    """A pack of ``objects`` (key below the thread's prefix, body, ETag)."""
    table: list[list[Any]] = []
    bodies: list[bytes] = []
    at = 0
    for rel, body, etag in sorted(objects):
        table.append([rel, at, len(body), etag])
        bodies.append(body)
        at += len(body)
    index = zstandard.ZstdCompressor(level=6).compress(
        ormsgpack.packb({"v": VERSION, "thread": thread_id, "made": made, "objects": table})
    )
    head = MAGIC + bytes([VERSION, 0]) + struct.pack(">I", len(index))
    return b"".join([head, index, *bodies])


def parse_index(key: str, head: bytes) -> tuple[PackIndex, int]:
    """The index from a pack's first bytes (at least HEAD + its index length), and
    where its objects start."""
    if len(head) < HEAD or head[: len(MAGIC)] != MAGIC:
        raise CorruptObjectError(key, "not a langgraph-s3 pack")
    if head[len(MAGIC)] > VERSION:
        raise NewerFormatError(key, f"pack {head[len(MAGIC)]}", VERSION)
    (length,) = struct.unpack(">I", head[len(MAGIC) + 2 : HEAD])
    if len(head) < HEAD + length:
        raise CorruptObjectError(key, "the pack's index is cut off")
    try:
        raw = ormsgpack.unpackb(
            zstandard.ZstdDecompressor().decompress(bytes(head[HEAD : HEAD + length]))
        )
        entries = {str(r): (int(o), int(n), str(e)) for r, o, n, e in raw["objects"]}
        index = PackIndex(str(raw["thread"]), float(raw["made"]), entries)
    except (
        ormsgpack.MsgpackDecodeError,
        zstandard.ZstdError,
        KeyError,
        TypeError,
        ValueError,
    ) as exc:
        raise CorruptObjectError(key, f"the pack's index is damaged: {exc}") from exc
    return index, HEAD + length


class PackLookup:
    """Which threads are packed, by which pack, and the packs' indexes: what
    :class:`PackedObjects` serves packed keys by (one per saver, shared by its calls)."""

    def __init__(
        self,
        inner: ObjectStorePort,
        threads_prefix: str,
        lookup: Callable[[str], Awaitable[PackRef | None]],
    ) -> None:
        self.inner = inner
        self.threads_prefix = threads_prefix
        self.lookup = lookup
        self.known: LRUCache[str, PackRef | None] = LRUCache(maxsize=4096)
        """Thread prefix -> its pack (None: not packed), as last noted."""
        self.indexes: LRUCache[str, PackIndex] = LRUCache(maxsize=64)
        self.shadowed: LRUCache[str, str] = LRUCache(maxsize=4096)
        """Key -> the pack whose copy of it a plain object shadows (found in a listing, or
        written over the pack's copy); a shadow whose plain object is gone falls back."""
        self._loading: dict[str, asyncio.Future[PackIndex]] = {}

    # -- what is packed --------------------------------------------------------
    def thread_prefix(self, key: str) -> str | None:
        """The thread prefix of a key under the threads (``keys.thread_prefix_in``)."""
        return thread_prefix_in(self.threads_prefix, key)

    def note(self, thread_prefix: str, pack: PackRef | None) -> bool:
        """Record what the manifest says; True when it differs from what was known
        (a read that listed without it must list again)."""
        before = self.known.get(thread_prefix, None)
        self.known[thread_prefix] = pack
        if before != pack and before is not None:
            self.indexes.pop(before.key, None)
        return before != pack

    def forget_pack(self, pack: PackRef) -> None:
        """A pack that is gone (repacked, unpacked): read the manifest again."""
        self.indexes.pop(pack.key, None)
        for prefix in [p for p, ref in self.known.items() if ref == pack]:
            self.known.pop(prefix, None)

    def pack_of(self, thread_prefix: str) -> PackRef | None:
        return self.known.get(thread_prefix)

    async def index(self, pack: PackRef, thread_prefix: str | None = None) -> PackIndex:
        """The pack's index (and, for a small pack, its bytes), read once.

        Args:
            pack: the pack, as a manifest entry names it.
            thread_prefix: the thread it is read for: a pack whose index names
                another thread (an object replaced by hand, a bad restore) is
                refused instead of serving that thread's keys, or none, as this one's.

        Raises:
            CorruptObjectError: the pack is damaged, or belongs to another thread.
        """
        hit = self.indexes.get(pack.key)
        if hit is None:
            loading = self._loading.get(pack.key)
            if loading is None:
                loading = self._loading[pack.key] = asyncio.ensure_future(self._load(pack))
                # forgotten once done, whoever awaits it: a load that failed after its
                # caller gave up (a deadline) is never handed to the next read
                loading.add_done_callback(functools.partial(self._forget_load, pack.key))
            hit = await asyncio.shield(loading)
        if thread_prefix is not None:
            owner = f"{self.threads_prefix}{encode(hit.thread_id, 'thread_id')}/"
            if owner != thread_prefix:
                self.indexes.pop(pack.key, None)
                raise CorruptObjectError(
                    pack.key,
                    f"it is a pack of thread {hit.thread_id!r}, but the manifest names it "
                    f"for {thread_prefix[len(self.threads_prefix) : -1]!r}",
                )
        return hit

    def _forget_load(self, key: str, done: asyncio.Future[PackIndex]) -> None:
        if self._loading.get(key) is done:
            self._loading.pop(key, None)
        if not done.cancelled():
            done.exception()  # retrieved: a failure nobody awaited is no warning

    async def _load(self, pack: PackRef) -> PackIndex:
        whole = pack.size <= WHOLE_BELOW
        if whole:
            head = await self.inner.get(pack.key)
        else:
            head = await self.inner.get_range(pack.key, 0, max(data_start(pack), INDEX_GUESS))
        if head is None:
            self.forget_pack(pack)
            raise PackGoneError(pack.key)
        if not whole and len(head) >= HEAD and head[: len(MAGIC)] == MAGIC:
            (length,) = struct.unpack(">I", head[len(MAGIC) + 2 : HEAD])
            if len(head) < HEAD + length:  # a larger index than guessed: the rest of it
                rest = await self.inner.get_range(pack.key, len(head), HEAD + length - len(head))
                head = head + (rest or b"")
        index, start = parse_index(pack.key, head)
        if whole:
            index = PackIndex(index.thread_id, index.made, index.entries, bytes(head[start:]))
        self.indexes[pack.key] = index
        return index

    async def packed(self, key: str) -> tuple[PackRef, PackIndex, str] | None:
        prefix = self.thread_prefix(key)
        if prefix is None:
            return None
        pack = self.known.get(prefix)
        if pack is None or self.shadowed.get(key) == pack.key:
            return None
        index = await self.index(pack, prefix)
        rel = key[len(prefix) :]
        return (pack, index, rel) if rel in index.entries else None

    async def from_pack(self, key: str) -> tuple[bytes, str] | None:
        found = await self.packed(key)
        if found is None:
            return None
        pack, index, rel = found
        offset, length, etag = index.entries[rel]
        if index.data is not None:
            return index.data[offset : offset + length], etag
        body = await self.inner.get_range(pack.key, data_start(pack) + offset, length)
        if body is None:
            self.forget_pack(pack)
            raise PackGoneError(pack.key)
        return body, etag

    async def relearn(self, key: str) -> bool:
        """After a miss: whether the manifest names a pack this process did not know."""
        prefix = self.thread_prefix(key)
        if prefix is None or prefix in self.known:
            return False
        pack = await self.lookup(prefix[len(self.threads_prefix) : -1])
        self.known[prefix] = pack
        return pack is not None


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


class PackGoneError(CorruptObjectError):
    """A pack the manifest named is not there (repacked or deleted meanwhile)."""

    def __init__(self, key: str) -> None:
        super().__init__(key, "missing: the thread's manifest entry names this pack")


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
