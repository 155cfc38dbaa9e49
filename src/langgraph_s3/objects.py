"""The only code that talks to S3: conditional writes, reads, listings, deletes.

Every request goes through ``aws.call`` (deadline, truncated bodies re-read,
failures translated). botocore retries 5xx, throttling and connection errors
(standard mode); a 412 on a conditional write comes back here as ``None``, and
the caller resolves it by reading back and comparing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from cachetools import LRUCache

from . import aws
from .clients import ClientFactory
from .errors import ConditionFailedError, MissingResourceError, NotFoundError, ServiceError
from .tasks import bounded_map

__all__ = ["ByteLRU", "Listed", "ObjectStore", "bounded_map"]

T = TypeVar("T")
A = TypeVar("A")
DELETE_BATCH = 1000  # S3's DeleteObjects limit


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

    @property
    def bytes(self) -> int:
        """Bytes held now."""
        return int(self._lru.currsize)


@dataclass(frozen=True, slots=True)
class Listed:
    """One key of a listing, with what maintenance needs to know about it."""

    key: str
    etag: str = ""
    modified: float = 0.0
    """LastModified, epoch seconds (S3 lists it to the second or millisecond)."""
    size: int = 0
    """Bytes stored."""


class ObjectStore:
    """S3 operations on one bucket, with an optional cache of immutable objects."""

    def __init__(
        self, clients: ClientFactory, bucket: str, *, concurrency: int, cache_bytes: int
    ) -> None:
        self.clients = clients
        self.bucket = bucket
        self.concurrency = concurrency
        self.cache = ByteLRU(cache_bytes) if cache_bytes > 0 else None

    async def _call(self, op: str, *, read_body: bool = False, **params: Any) -> dict[str, Any]:
        return await aws.call(
            self.clients, "s3", op, read_body=read_body, Bucket=self.bucket, **params
        )

    # -- writes -------------------------------------------------------------
    async def put(
        self,
        key: str,
        body: bytes,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
        cache: bool = False,
        tagging: str | None = None,
    ) -> str | None:
        """Write an object; its ETag, or None when a condition failed (412/409).

        ``if_match`` on an object deleted meanwhile (404 NoSuchKey) is a failed
        condition too: the caller starts over from what is there now.
        """
        sent: Any = aws.Upload(body) if len(body) >= aws.LARGE_BODY else body
        kwargs: dict[str, Any] = {"Key": key, "Body": sent}
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"
        if if_match is not None:
            kwargs["IfMatch"] = if_match
        if tagging is not None:
            kwargs["Tagging"] = tagging
        conditional = if_none_match or if_match is not None
        try:
            resp = await self._call("put_object", **kwargs)
        except ConditionFailedError:
            if conditional:
                return None
            raise
        except NotFoundError:
            if if_match is not None:
                return None
            raise
        if cache and self.cache is not None:
            self.cache.put(key, body)
        return str(resp.get("ETag") or '""')

    async def copy(self, source_key: str, target_key: str) -> None:
        await self._call(
            "copy_object", Key=target_key, CopySource={"Bucket": self.bucket, "Key": source_key}
        )

    async def delete(self, keys: Sequence[str]) -> int:
        """Delete keys in batches of 1,000, batches concurrently. Returns how many."""
        if not keys:
            return 0
        if self.cache is not None:
            for key in keys:
                self.cache.evict(key)
        batches = [keys[i : i + DELETE_BATCH] for i in range(0, len(keys), DELETE_BATCH)]

        async def one(batch: Sequence[str]) -> int:
            resp = await self._call(
                "delete_objects", Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True}
            )
            errors = resp.get("Errors") or []
            if errors:
                first = errors[0]
                raise ServiceError(
                    f"S3 refused to delete {len(errors)} object(s) in s3://{self.bucket}/, "
                    f"first {first.get('Key')!r}: {first.get('Code')} {first.get('Message')}; "
                    "check that the IAM policy allows s3:DeleteObject under the prefix",
                    code=str(first.get("Code") or ""),
                )
            return len(batch)

        return sum(await bounded_map(one, batches))

    async def delete_if_match(self, key: str, etag: str) -> bool:
        """Delete ``key`` only while its ETag is ``etag``; False when it changed or is gone.

        One DeleteObject per key: it takes ``If-Match``, while DeleteObjects'
        per-object ETag is not implemented everywhere (moto ignores it).
        """
        try:
            await self._call("delete_object", Key=key, IfMatch=etag)
        except (ConditionFailedError, NotFoundError):
            return False
        if self.cache is not None:
            self.cache.evict(key)
        return True

    # -- reads --------------------------------------------------------------
    async def get(self, key: str, *, cache: bool = False) -> bytes | None:
        """Read an object; None when it does not exist."""
        if cache and self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                return hit
        body, _ = await self.get_with_etag(key)
        if body is not None and cache and self.cache is not None:
            self.cache.put(key, body)
        return body

    async def get_with_etag(self, key: str) -> tuple[bytes | None, str | None]:
        """The body and ETag, or ``(None, None)`` when the object does not exist."""
        try:
            resp = await self._call("get_object", read_body=True, Key=key)
        except NotFoundError:
            return None, None
        body: bytes = resp["Body"]
        return body, resp.get("ETag")

    async def get_many(self, keys: Sequence[str], *, cache: bool = False) -> list[bytes | None]:
        async def one(key: str) -> bytes | None:
            return await self.get(key, cache=cache)

        return await bounded_map(one, keys)

    async def get_range(self, key: str, start: int, length: int) -> bytes | None:
        """``length`` bytes of an object from ``start`` (one ranged GET); None when
        the object does not exist."""
        try:
            resp = await self._call(
                "get_object", read_body=True, Key=key, Range=f"bytes={start}-{start + length - 1}"
            )
        except NotFoundError:
            return None
        body: bytes = resp["Body"]
        return body

    async def list_pages(
        self,
        prefix: str,
        *,
        start_after: str | None = None,
        page_size: int = 1000,
    ) -> AsyncIterator[list[Listed]]:
        """Yield pages of keys under ``prefix`` in ascending key order."""
        kwargs: dict[str, Any] = {"Prefix": prefix, "MaxKeys": page_size}
        if start_after is not None and start_after > prefix:
            kwargs["StartAfter"] = start_after
        while True:
            resp = await self._call("list_objects_v2", **kwargs)
            page = [
                Listed(
                    o["Key"],
                    str(o.get("ETag", "")),
                    o["LastModified"].timestamp() if "LastModified" in o else 0.0,
                    int(o.get("Size", 0)),
                )
                for o in resp.get("Contents", [])
            ]
            if page:
                yield page
            token = resp.get("NextContinuationToken")
            if not resp.get("IsTruncated") or not token:
                return
            kwargs.pop("StartAfter", None)
            kwargs["ContinuationToken"] = token

    async def list_all(self, prefix: str, *, start_after: str | None = None) -> list[Listed]:
        out: list[Listed] = []
        async for page in self.list_pages(prefix, start_after=start_after):
            out.extend(page)
        return out

    # -- setup --------------------------------------------------------------
    async def bucket_exists(self) -> bool:
        try:
            await self._call("head_bucket")
            return True
        except (NotFoundError, MissingResourceError):
            return False

    async def create_bucket(self) -> None:
        s3 = await self.clients.client("s3")
        region = s3.meta.region_name  # what the client really talks to
        kwargs: dict[str, Any] = {}
        if region and region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
        try:
            await self._call("create_bucket", **kwargs)
        except ServiceError as exc:
            if exc.code != "BucketAlreadyOwnedByYou":
                raise

    async def lifecycle_rules(self) -> list[dict[str, Any]]:
        """The bucket's lifecycle rules (none: an empty list)."""
        try:
            resp = await self._call("get_bucket_lifecycle_configuration")
        except NotFoundError:  # NoSuchLifecycleConfiguration (a missing bucket is another error)
            return []
        return list(resp.get("Rules", []))

    async def set_lifecycle_rules(self, rules: list[dict[str, Any]]) -> None:
        await self._call(
            "put_bucket_lifecycle_configuration", LifecycleConfiguration={"Rules": rules}
        )
