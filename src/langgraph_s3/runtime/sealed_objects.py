"""The object store as a deployment with subjects sees it: the bodies of sealed
threads sealed on their way in and opened on their way out (:mod:`.thread_seals`).

It lies over the packed view (``checkpoint/packs.py``): a pack holds its thread's
bodies as stored, sealed ones sealed, and so does every server-side copy within a
thread (prune's moves): a body is bound to its subject and thread, not to its key. A
copy into another thread (``copy_thread``) is opened and sealed again for the target.
Keys outside threads (the store's, packs', the subjects' secret) pass as they are.

Cost: none for a plain thread; for a sealed one, one AES-GCM and one HMAC pass per
body (about a gigabyte a second each) and, once per subject and bound, the record read
and the key unwrapped (``Subjects``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from langgraph_s3.core.cache import ByteLRU
from langgraph_s3.core.keys import Layout, thread_prefix_in
from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.core.put_mode import PutMode
from langgraph_s3.core.records import Lifecycle, Listed
from langgraph_s3.core.tasks import bounded_map
from langgraph_s3.errors import InvalidRequestError, NotFoundError
from langgraph_s3.runtime.thread_seals import ThreadSeals

__all__ = ["SealedObjects"]


class SealedObjects:
    """An :class:`~langgraph_s3.core.ports.ObjectStorePort` over ``inner`` that seals
    and opens the bodies of sealed threads (``seals`` says which)."""

    def __init__(self, inner: ObjectStorePort, layout: Layout, seals: ThreadSeals) -> None:
        self.inner = inner
        self.seals = seals
        self._threads = layout.threads()

    def thread_of(self, key: str) -> str | None:
        """The thread (``keys.encode``'d) a key is under, or None."""
        prefix = thread_prefix_in(self._threads, key)
        return None if prefix is None else prefix[len(self._threads) : -1]

    @property
    def bucket(self) -> str:
        return self.inner.bucket

    @property
    def concurrency(self) -> int:
        return self.inner.concurrency

    @property
    def cache(self) -> ByteLRU | None:
        """The inner store's cache: it keeps bodies as stored; what callers put there
        themselves (write versions, ``history.write_version``) they read back the same."""
        return self.inner.cache

    async def _sealed(self, key: str, body: bytes) -> bytes:
        thread = self.thread_of(key)
        return body if thread is None else await self.seals.seal_body(thread, body, key)

    async def _opened(self, key: str, body: bytes | None) -> bytes | None:
        thread = self.thread_of(key)
        if body is None or thread is None:
            return body
        return await self.seals.open_body(thread, body, key)

    async def put(
        self,
        key: str,
        body: bytes,
        *,
        mode: PutMode = None,
        cache: bool = False,
        tagging: str | None = None,
    ) -> str | None:
        return await self.inner.put(
            key, await self._sealed(key, body), mode=mode, cache=cache, tagging=tagging
        )

    async def copy(self, source_key: str, target_key: str, *, if_match: str | None = None) -> None:
        """A copy within a thread is the server's (its seal still holds); into another
        thread, of a sealed body or into a sealed thread, it is read, opened and sealed
        for the target (a GET and a PUT)."""
        source, target = self.thread_of(source_key), self.thread_of(target_key)
        seal = None if source is None or source == target else await self.seals.seal_of(source)
        if seal is not None and target is not None:
            await self.seals.adopt(target, seal)  # a copy is the same subject's
        if source == target or (
            (source is None or await self.seals.seal_of(source) is None)
            and (target is None or await self.seals.seal_of(target) is None)
        ):
            await self.inner.copy(source_key, target_key, if_match=if_match)
            return
        body, etag = await self.inner.get_with_etag(source_key)
        if body is None or (if_match is not None and etag is not None and etag != if_match):
            raise NotFoundError(source_key)
        opened = await self._opened(source_key, body)
        assert opened is not None
        await self.inner.put(target_key, await self._sealed(target_key, opened))

    async def delete(self, keys: Sequence[str]) -> int:
        return await self.inner.delete(keys)

    async def delete_if_match(self, key: str, etag: str) -> bool:
        return await self.inner.delete_if_match(key, etag)

    async def get(self, key: str, *, cache: bool = False) -> bytes | None:
        return await self._opened(key, await self.inner.get(key, cache=cache))

    async def get_with_etag(self, key: str) -> tuple[bytes | None, str | None]:
        body, etag = await self.inner.get_with_etag(key)
        return await self._opened(key, body), etag

    async def get_many(self, keys: Sequence[str], *, cache: bool = False) -> list[bytes | None]:
        bodies = await self.inner.get_many(keys, cache=cache)

        async def one(at: int) -> bytes | None:
            return await self._opened(keys[at], bodies[at])

        return await bounded_map(one, range(len(keys)))

    async def get_range(self, key: str, start: int, length: int) -> bytes | None:
        """A range of a plain body; a sealed thread's bodies open whole only."""
        thread = self.thread_of(key)
        if thread is not None and await self.seals.seal_of(thread) is not None:
            raise InvalidRequestError(f"{key!r} is sealed: it is read whole, not by ranges")
        return await self.inner.get_range(key, start, length)

    def list_pages(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[list[Listed]]:
        return self.inner.list_pages(prefix, start_after=start_after, page_size=page_size)

    async def list_all(self, prefix: str, *, start_after: str | None = None) -> list[Listed]:
        return await self.inner.list_all(prefix, start_after=start_after)

    async def bucket_exists(self) -> bool:
        return await self.inner.bucket_exists()

    async def create_bucket(self) -> None:
        await self.inner.create_bucket()

    async def lifecycle(self) -> Lifecycle:
        return await self.inner.lifecycle()

    async def set_lifecycle(self, config: Lifecycle) -> None:
        await self.inner.set_lifecycle(config)
