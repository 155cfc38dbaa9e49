"""Archive packs: their format (a thread's objects in one immutable object, with an
index), and which threads are packed (:class:`PackLookup`): what
:class:`~langgraph_s3.checkpoint.packs.PackedObjects` serves packed keys by.

Format (version 1)::

    b"LGS3PK" | version (1 byte) | 0 (1 byte) | index length (4 bytes, big-endian)
    index: zstd(msgpack {"v": 1, "thread": thread_id, "made": epoch seconds,
                         "objects": [[key below the thread's prefix, offset, length, etag], ...]})
    the objects' bytes, at their offsets (counted from the end of the index)
"""

from __future__ import annotations

import asyncio
import functools
import struct
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ormsgpack
import zstandard
from cachetools import LRUCache

from langgraph_s3.core.keys import encode, thread_prefix_in
from langgraph_s3.core.records import PackRef
from langgraph_s3.errors import CorruptObjectError, NewerFormatError

if TYPE_CHECKING:  # ports names manifest, which names PackRef
    from langgraph_s3.core.ports import ObjectStorePort

__all__ = [
    "HEAD",
    "MAGIC",
    "VERSION",
    "PackGoneError",
    "PackIndex",
    "PackLookup",
    "build",
    "data_start",
    "parse_index",
]

MAGIC = b"LGS3PK"
VERSION = 1
HEAD = len(MAGIC) + 2 + 4
WHOLE_BELOW = 1024 * 1024
"""A pack up to this size is read whole, once: smaller than the round trips it saves."""
INDEX_GUESS = 64 * 1024
"""The first ranged GET of a large pack: its header and, usually, its whole index."""


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


class PackGoneError(CorruptObjectError):
    """A pack the manifest named is not there (repacked or deleted meanwhile)."""

    def __init__(self, key: str) -> None:
        super().__init__(key, "missing: the thread's manifest entry names this pack")
