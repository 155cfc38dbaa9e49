"""The in-process cache of immutable objects (checkpoints, values, pack parts)."""

from __future__ import annotations

from cachetools import LRUCache

__all__ = ["ByteLRU"]


class ByteLRU:
    """An in-process cache of immutable objects, bounded by total bytes.

    Only immutable keys (checkpoints, blobs) are cached, so an entry is never
    stale; an object larger than a quarter of the budget is not cached at all.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lru: LRUCache[str, bytes] = LRUCache(maxsize=max_bytes, getsizeof=len)

    def get(self, key: str) -> bytes | None:
        return self._lru.get(key)

    def put(self, key: str, value: bytes) -> None:
        if len(value) <= self.max_bytes // 4:
            self._lru[key] = value

    def evict(self, key: str) -> None:
        self._lru.pop(key, None)

    def evict_prefix(self, prefix: str) -> None:
        """Drop every key under ``prefix`` (a thread replaced by an import: its keys
        now name other bytes). Walks the whole cache: for a rare event."""
        for key in [k for k in self._lru if k.startswith(prefix)]:
            self._lru.pop(key, None)

    @property
    def bytes(self) -> int:
        """Bytes held now."""
        return int(self._lru.currsize)
