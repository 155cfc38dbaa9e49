"""The only code that talks to S3: conditional writes, reads, listings, deletes.

botocore retries 5xx, throttling and connection errors (standard mode). This
module adds what botocore cannot know: a truncated body is re-read, and a 412
on a conditional write is resolved by the caller reading back and comparing.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from botocore.exceptions import ClientError

from .clients import ClientFactory
from .errors import MissingResourceError

T = TypeVar("T")
A = TypeVar("A")
BODY_READ_ATTEMPTS = 4
DELETE_BATCH = 1000  # S3's DeleteObjects limit


def error_code(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


async def bounded_map(fn: Callable[[A], Awaitable[T]], items: Iterable[A], limit: int) -> list[T]:
    """``[await fn(x) for x in items]`` concurrently, at most ``limit`` at a time."""
    todo = list(items)
    if len(todo) <= 1:
        return [await fn(x) for x in todo]
    sem = asyncio.Semaphore(limit)

    async def run(item: A) -> T:
        async with sem:
            return await fn(item)

    return list(await asyncio.gather(*(run(x) for x in todo)))


class ByteLRU:
    """An in-process cache of immutable objects, bounded by total bytes."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._data: OrderedDict[str, bytes] = OrderedDict()
        self._size = 0

    def get(self, key: str) -> bytes | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: str, value: bytes) -> None:
        if len(value) > self.max_bytes // 4:
            return
        old = self._data.pop(key, None)
        if old is not None:
            self._size -= len(old)
        self._data[key] = value
        self._size += len(value)
        while self._size > self.max_bytes and self._data:
            _, dropped = self._data.popitem(last=False)
            self._size -= len(dropped)

    def evict(self, key: str) -> None:
        old = self._data.pop(key, None)
        if old is not None:
            self._size -= len(old)

    def evict_prefix(self, prefix: str) -> None:
        for key in [k for k in self._data if k.startswith(prefix)]:
            self._size -= len(self._data.pop(key))


@dataclass(frozen=True, slots=True)
class Listed:
    key: str
    size: int
    etag: str = ""


class ObjectStore:
    """S3 operations on one bucket, with an optional cache of immutable objects."""

    def __init__(
        self, clients: ClientFactory, bucket: str, *, concurrency: int, cache_bytes: int
    ) -> None:
        self.clients = clients
        self.bucket = bucket
        self.concurrency = concurrency
        self.cache = ByteLRU(cache_bytes) if cache_bytes > 0 else None

    async def _s3(self) -> Any:
        return await self.clients.client("s3")

    def _missing_bucket(self, exc: ClientError) -> None:
        if error_code(exc) == "NoSuchBucket":
            raise MissingResourceError("bucket", self.bucket) from exc

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
        """Write an object; its ETag, or None when a condition failed (412/409)."""
        s3 = await self._s3()
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": key, "Body": body}
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"
        if if_match is not None:
            kwargs["IfMatch"] = if_match
        if tagging is not None:
            kwargs["Tagging"] = tagging
        try:
            resp = await s3.put_object(**kwargs)
        except ClientError as exc:
            self._missing_bucket(exc)
            # 409 ConditionalRequestConflict: a concurrent conditional write won.
            if _status(exc) in (412, 409) and (if_none_match or if_match is not None):
                return None
            raise
        if cache and self.cache is not None:
            self.cache.put(key, body)
        return str(resp.get("ETag") or '""')

    async def copy(self, source_key: str, target_key: str) -> None:
        s3 = await self._s3()
        try:
            await s3.copy_object(
                Bucket=self.bucket,
                Key=target_key,
                CopySource={"Bucket": self.bucket, "Key": source_key},
            )
        except ClientError as exc:
            self._missing_bucket(exc)
            raise

    async def delete(self, keys: Sequence[str]) -> int:
        """Delete keys in batches of 1,000, batches concurrently. Returns how many."""
        if not keys:
            return 0
        if self.cache is not None:
            for key in keys:
                self.cache.evict(key)
        s3 = await self._s3()
        batches = [keys[i : i + DELETE_BATCH] for i in range(0, len(keys), DELETE_BATCH)]

        async def one(batch: Sequence[str]) -> int:
            resp = await s3.delete_objects(
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
            )
            errors = resp.get("Errors") or []
            if errors:
                first = errors[0]
                raise RuntimeError(
                    f"S3 refused to delete {len(errors)} object(s), first "
                    f"{first.get('Key')!r}: {first.get('Code')} {first.get('Message')}"
                )
            return len(batch)

        return sum(await bounded_map(one, batches, self.concurrency))

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
        from aiohttp import ClientPayloadError
        from botocore.exceptions import IncompleteReadError, ResponseStreamingError

        s3 = await self._s3()
        for attempt in range(BODY_READ_ATTEMPTS):
            try:
                resp = await s3.get_object(Bucket=self.bucket, Key=key)
            except ClientError as exc:
                if error_code(exc) in ("NoSuchKey", "404"):
                    return None, None
                self._missing_bucket(exc)
                raise
            try:
                async with resp["Body"] as stream:
                    body: bytes = await stream.read()
            except (
                TimeoutError,
                ClientPayloadError,
                IncompleteReadError,
                ResponseStreamingError,
                ConnectionError,
            ):
                if attempt == BODY_READ_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(0.05 * 2**attempt)
                continue
            length = resp.get("ContentLength")
            if length is not None and len(body) != length:
                if attempt == BODY_READ_ATTEMPTS - 1:
                    raise ConnectionError(f"truncated body for {key}: {len(body)}/{length}")
                continue
            return body, resp.get("ETag")
        raise AssertionError("unreachable")

    async def get_many(self, keys: Sequence[str], *, cache: bool = False) -> list[bytes | None]:
        async def one(key: str) -> bytes | None:
            return await self.get(key, cache=cache)

        return await bounded_map(one, keys, self.concurrency)

    async def list_pages(
        self,
        prefix: str,
        *,
        start_after: str | None = None,
        page_size: int = 1000,
    ) -> AsyncIterator[list[Listed]]:
        """Yield pages of keys under ``prefix`` in ascending key order."""
        s3 = await self._s3()
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix, "MaxKeys": page_size}
        if start_after is not None and start_after > prefix:
            kwargs["StartAfter"] = start_after
        while True:
            try:
                resp = await s3.list_objects_v2(**kwargs)
            except ClientError as exc:
                self._missing_bucket(exc)
                raise
            page = [
                Listed(o["Key"], int(o.get("Size", 0)), str(o.get("ETag", "")))
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

    async def bucket_exists(self) -> bool:
        s3 = await self._s3()
        try:
            await s3.head_bucket(Bucket=self.bucket)
            return True
        except ClientError as exc:
            if error_code(exc) in ("404", "NoSuchBucket", "NotFound"):
                return False
            raise

    async def create_bucket(self) -> None:
        s3 = await self._s3()
        region = s3.meta.region_name  # what the client really talks to
        kwargs: dict[str, Any] = {"Bucket": self.bucket}
        if region and region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
        try:
            await s3.create_bucket(**kwargs)
        except ClientError as exc:
            if error_code(exc) not in ("BucketAlreadyOwnedByYou",):
                raise
