"""A read's view of the objects: S3 (through the saver's object store) with the
checkpoints the manifest holds laid over it (``inline.py``), so that a committed
checkpoint whose object has not landed reads, lists and loads like a stored one.

Each read makes its own (``Loader``) and lays over it what the manifest items it read
hold: an item read before a listing names every held copy the listing can miss (a copy
leaves the item only once its object is stored), so a listing sent after the manifest
read sees every committed checkpoint.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence

from langgraph_s3.checkpoint.erasure import ERASED
from langgraph_s3.checkpoint.held_writes import md5_etag, merged
from langgraph_s3.core.cache import ByteLRU
from langgraph_s3.core.held import (
    InlineCopy,
)
from langgraph_s3.core.keys import NamespaceKeys
from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.core.put_mode import PutMode
from langgraph_s3.core.records import (
    Entry,
    Lifecycle,
    Listed,
)


class HeldOverlay:
    """An :class:`~langgraph_s3.core.ports.ObjectStorePort` over ``inner``: GETs of a
    held checkpoint's key answer from the copy (no request), listings merge its key in
    order. Writes, deletes and everything else go to ``inner`` unchanged."""

    def __init__(self, inner: ObjectStorePort) -> None:
        self.inner = inner
        self.held: dict[str, bytes] = {}
        """Object key -> the envelope (or writes) a manifest item holds for it."""
        self.writes: set[str] = set()
        """The held keys of write objects (their bodies answer GETs as S3's would)."""
        self.regular: set[str] = set()
        """Those of regular writes objects (first write wins per index)."""
        self.in_s3: dict[str, str] = {}
        """Write keys a listing found in S3 (before or after the item that holds one
        was read): a held regular one is then merged with S3's (``held_writes.merged``)."""

    def hold(self, keys: NamespaceKeys, entry: Entry | Iterable[InlineCopy]) -> None:
        """Lay ``entry``'s held copies and writes (or these copies) over the objects."""
        for copy in entry.inline if isinstance(entry, Entry) else entry:
            self.held[keys.checkpoint_at(copy.tail)] = copy.body
        if isinstance(entry, Entry):
            for write in entry.writes:
                key = keys.held_key(write.tail)
                self.held[key] = write.body
                self.writes.add(key)
                if write.regular:
                    self.regular.add(key)

    def drop(self, prefix: str) -> None:
        """Take out the copies laid under ``prefix`` (a read attempt starts over: the
        item it reads next may be another life's, whose ids are the same)."""
        for key in [k for k in self.held if k.startswith(prefix)]:
            del self.held[key]
            self.writes.discard(key)
            self.regular.discard(key)
            self.in_s3.pop(key, None)

    @property
    def bucket(self) -> str:
        """The bucket's name."""
        return self.inner.bucket

    @property
    def concurrency(self) -> int:
        """Requests in flight per operation."""
        return self.inner.concurrency

    @property
    def cache(self) -> ByteLRU | None:
        """The inner store's cache."""
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
        """Written to S3 (the overlay only reads)."""
        return await self.inner.put(key, body, mode=mode, cache=cache, tagging=tagging)

    async def copy(self, source_key: str, target_key: str, *, if_match: str | None = None) -> None:
        """S3's copy."""
        await self.inner.copy(source_key, target_key, if_match=if_match)

    async def delete(self, keys: Sequence[str]) -> int:
        """S3's delete."""
        return await self.inner.delete(keys)

    async def delete_if_match(self, key: str, etag: str) -> bool:
        """S3's conditional delete."""
        return await self.inner.delete_if_match(key, etag)

    async def get(self, key: str, *, cache: bool = False) -> bytes | None:
        """The held copy, else the object."""
        body = self.held.get(key)
        return body if body is not None else await self.inner.get(key, cache=cache)

    async def get_with_etag(self, key: str) -> tuple[bytes | None, str | None]:
        """The object with its ETag (a held copy has none: read from S3). A held write
        answers from the item (no ETag; no request), merged with S3's object when a
        listing found one there too."""
        body = self.held.get(key)
        if body is None or key not in self.writes:
            return await self.inner.get_with_etag(key)
        listed = self.in_s3.get(key)
        if listed is not None and key in self.regular and listed != md5_etag(body):
            stored, _ = await self.inner.get_with_etag(key)  # not (only) the held body
            if stored is not None and stored != body and stored != ERASED:
                return merged(stored, body, key), None
        return body, None

    async def get_many(self, keys: Sequence[str], *, cache: bool = False) -> list[bytes | None]:
        """Held copies from here, the rest in one concurrent batch."""
        missing = [k for k in keys if k not in self.held]
        got = dict(zip(missing, await self.inner.get_many(missing, cache=cache), strict=True))
        return [self.held[k] if k in self.held else got[k] for k in keys]

    async def get_range(self, key: str, start: int, length: int) -> bytes | None:
        """A range of the held copy, else of the object."""
        body = self.held.get(key)
        if body is not None:
            return body[start : start + length]
        return await self.inner.get_range(key, start, length)

    async def list_pages(
        self,
        prefix: str,
        *,
        start_after: str | None = None,
        page_size: int = 1000,
        first: list[Listed] | None = None,
    ) -> AsyncIterator[list[Listed]]:
        """S3's pages with the held keys under ``prefix`` merged in order: each page
        gains those up to its last key; what is left follows as one page more.

        ``first``: S3's first page, listed already (beside the manifest read whose
        held keys are laid over it now); the listing goes on after its last key, one
        LIST more only if asked for (an empty one: none)."""
        extra = self._under(prefix, start_after)
        async for page in self._inner_pages(prefix, start_after, page_size, first):
            if not page:
                continue
            last = page[-1].key
            now = [k for k in extra if k <= last]
            extra = [k for k in extra if k > last]
            self._saw(page)
            yield _merged(page, [self._listed(k) for k in now])
        if extra:
            yield [self._listed(k) for k in extra]

    async def _inner_pages(
        self, prefix: str, start_after: str | None, page_size: int, first: list[Listed] | None
    ) -> AsyncIterator[list[Listed]]:
        if first is not None:
            yield first
            if not first:
                return
            start_after = first[-1].key
        async for page in self.inner.list_pages(
            prefix, start_after=start_after, page_size=page_size
        ):
            yield page

    async def list_all(self, prefix: str, *, start_after: str | None = None) -> list[Listed]:
        """Every key under ``prefix``, the held ones among them."""
        found = await self.inner.list_all(prefix, start_after=start_after)
        self._saw(found)
        return _merged(found, [self._listed(k) for k in self._under(prefix, start_after)])

    def _listed(self, key: str) -> Listed:
        """A held key as a listing shows it: a write with the ETag its object gets once
        stored (S3's MD5 of its bytes: a child's carried copy of it then matches, as
        it will once the object lands), a checkpoint copy with none."""
        body = self.held[key]
        return Listed(key, etag=md5_etag(body) if key in self.writes else "", size=len(body))

    def _saw(self, page: list[Listed]) -> None:
        """Note the write keys S3 listed (a key holds ``/w/`` only as a write's)."""
        self.in_s3.update((o.key, o.etag) for o in page if "/w/" in o.key)

    def listed_etags(self, etags: dict[str, str]) -> dict[str, str]:
        """``etags`` (key -> the ETag a listing showed) without the held writes': their
        body is the item's (merged with S3's), never a cached or carried S3 version."""
        return {k: e for k, e in etags.items() if k not in self.writes}

    def held_under(self, prefix: str) -> list[Listed]:
        """The held keys under ``prefix`` (no request)."""
        return [self._listed(k) for k in self._under(prefix, None)]

    def _under(self, prefix: str, start_after: str | None) -> list[str]:
        return sorted(
            k
            for k in self.held
            if k.startswith(prefix) and (start_after is None or k > start_after)
        )

    async def bucket_exists(self) -> bool:
        """S3's answer."""
        return await self.inner.bucket_exists()

    async def create_bucket(self) -> None:
        """S3's bucket."""
        await self.inner.create_bucket()

    async def lifecycle(self) -> Lifecycle:
        """S3's lifecycle configuration."""
        return await self.inner.lifecycle()

    async def set_lifecycle(self, config: Lifecycle) -> None:
        """S3's lifecycle configuration."""
        await self.inner.set_lifecycle(config)


def _merged(page: list[Listed], held: list[Listed]) -> list[Listed]:
    """``page`` with the held keys it lacks, in key order."""
    have = {o.key for o in page}
    more = [o for o in held if o.key not in have]
    return sorted([*page, *more], key=lambda o: o.key) if more else page
