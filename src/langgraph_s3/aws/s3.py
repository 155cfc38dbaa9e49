"""The only code that talks to S3: conditional writes, reads, listings, deletes.

Every request goes through ``aws.call`` (deadline, truncated bodies re-read,
failures translated). botocore retries 5xx, throttling and connection errors
(standard mode); a 412 on a conditional write comes back here as ``None``, and
the caller resolves it by reading back and comparing. A 409
ConditionalRequestConflict (another conditional write of the key in progress:
nothing was written, no condition evaluated) is no answer yet: the request is
sent again here (``_conditional``), so callers never see one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from langgraph_s3.aws import door as aws
from langgraph_s3.aws.clients import ClientFactory
from langgraph_s3.core.cache import ByteLRU
from langgraph_s3.core.keys import ERASURE_MARKER
from langgraph_s3.core.put_mode import Create, PutMode
from langgraph_s3.core.records import Lifecycle, Listed
from langgraph_s3.core.retry import backoff
from langgraph_s3.core.tasks import bounded_map
from langgraph_s3.errors import (
    ConditionFailedError,
    ConflictError,
    MissingResourceError,
    NotFoundError,
    RequestConflictError,
    ServiceError,
)

if TYPE_CHECKING:
    pass

__all__ = [
    "ByteLRU",
    "Lifecycle",
    "Listed",
    "ObjectStore",
    "bounded_map",
]

T = TypeVar("T")
A = TypeVar("A")
DELETE_BATCH = 1000  # S3's DeleteObjects limit
CONFLICT_RESENDS = 8
"""How many more times a conditional request answered 409 is sent (about 2 s of
backoff at most, ``retry.backoff``)."""


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

    async def _conditional(
        self, op: str, key: str, params: Callable[[], dict[str, Any]]
    ) -> dict[str, Any]:
        """A conditional request, sent again while S3 answers 409
        ConditionalRequestConflict (AWS: "retry"): up to :data:`CONFLICT_RESENDS` more
        times, after the jittered backoff of ``retry.cas``. ``params()`` makes each
        attempt's parameters (a body to read from its start). A 412 leaves as it comes.

        Raises:
            RequestConflictError: S3 still answered 409; the caller decides.
        """
        for attempt in range(CONFLICT_RESENDS + 1):
            try:
                return await self._call(op, Key=key, **params())
            except RequestConflictError:
                if attempt >= CONFLICT_RESENDS:
                    raise
            await backoff(attempt + 1)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _exists(self, key: str) -> bool:
        """One HeadObject."""
        try:
            await self._call("head_object", Key=key)
        except NotFoundError:
            return False
        return True

    # -- writes -------------------------------------------------------------
    async def put(
        self,
        key: str,
        body: bytes,
        *,
        mode: PutMode = None,
        cache: bool = False,
        tagging: str | None = None,
    ) -> str | None:
        """Write an object; its ETag, or None when ``mode``'s condition failed (412).

        ``Update(etag)`` on an object deleted meanwhile (404 NoSuchKey) is a failed
        condition too: the caller starts over from what is there now. A 409 is
        sent again (``_conditional``): one request, more only under contention; when
        S3 keeps answering 409, an ``Update`` is lost (None) and a ``CREATE`` is None
        when a HeadObject finds the object.

        Raises:
            ConflictError: S3 kept answering 409 to a ``CREATE`` and the object is not
                there.
        """
        if_none_match, if_match = isinstance(mode, Create), getattr(mode, "etag", None)

        def params() -> dict[str, Any]:
            sent: Any = aws.Upload(body) if len(body) >= aws.LARGE_BODY else body
            kwargs: dict[str, Any] = {"Body": sent}
            if if_none_match:
                kwargs["IfNoneMatch"] = "*"
            if if_match is not None:
                kwargs["IfMatch"] = if_match
            if tagging is not None:
                kwargs["Tagging"] = tagging
            return kwargs

        conditional = if_none_match or if_match is not None
        try:
            if conditional:
                resp = await self._conditional("put_object", key, params)
            else:
                resp = await self._call("put_object", Key=key, **params())
        except RequestConflictError as exc:  # S3 kept answering 409
            if if_match is not None or await self._exists(key):
                return None  # as good as lost: the caller reads and decides again
            raise ConflictError(
                f"s3://{self.bucket}/{key}: S3 answered 409 ConditionalRequestConflict "
                f"{CONFLICT_RESENDS + 1} times in a row and the object is still not there "
                "(another writer kept a conditional write of it in progress): retry the call"
            ) from exc
        except ConditionFailedError:
            if conditional:
                return None
            raise
        except NotFoundError:
            if if_match is not None:
                return None
            raise
        if self.cache is not None:  # a write replaces what this process cached of the key
            if cache:
                self.cache.put(key, body)
            else:
                self.cache.evict(key)
        return str(resp.get("ETag") or '""')

    async def copy(self, source_key: str, target_key: str, *, if_match: str | None = None) -> None:
        """CopyObject; ``if_match``: CopySourceIfMatch (a 412 is a NotFoundError: that
        version of the source is gone)."""
        condition: dict[str, Any] = {"CopySourceIfMatch": if_match} if if_match else {}
        try:
            await self._call(
                "copy_object",
                Key=target_key,
                CopySource={"Bucket": self.bucket, "Key": source_key},
                **condition,
            )
        except ConditionFailedError as exc:
            raise NotFoundError(
                f"s3://{self.bucket}/{source_key} is no longer the version {if_match} a "
                "listing showed (replaced since): not copied"
            ) from exc

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

    async def delete_noncurrent(self, prefix: str) -> int:
        """Delete every noncurrent version and delete marker under ``prefix`` (what a
        versioned bucket keeps of overwritten objects), by version id; the current
        versions stay. Cost: 1 ListObjectVersions per 1,000 versions, 1 DeleteObjects
        per 1,000 deleted; an unversioned bucket, 1 request. Needs
        s3:ListBucketVersions and s3:DeleteObjectVersion on the prefix."""
        doomed: list[dict[str, str]] = []
        marker: dict[str, Any] = {}
        while True:
            resp = await self._call("list_object_versions", Prefix=prefix, **marker)
            # noncurrent ones only ("null": written while versioning was off or
            # suspended); a current delete marker stays (deleting it would bring back
            # the version under it)
            for v in [*(resp.get("Versions") or []), *(resp.get("DeleteMarkers") or [])]:
                if not v.get("IsLatest") and v.get("VersionId"):
                    doomed.append({"Key": v["Key"], "VersionId": v["VersionId"]})
            if not resp.get("IsTruncated"):
                break
            marker = {
                "KeyMarker": resp.get("NextKeyMarker"),
                "VersionIdMarker": resp.get("NextVersionIdMarker"),
            }
        for i in range(0, len(doomed), DELETE_BATCH):
            batch = doomed[i : i + DELETE_BATCH]
            resp = await self._call("delete_objects", Delete={"Objects": batch, "Quiet": True})
            if resp.get("Errors"):
                first = resp["Errors"][0]
                raise ServiceError(
                    f"S3 refused to delete {len(resp['Errors'])} object version(s) under "
                    f"s3://{self.bucket}/{prefix}, first {first.get('Key')!r}: "
                    f"{first.get('Code')}; allow s3:DeleteObjectVersion under the prefix",
                    code=str(first.get("Code") or ""),
                )
        return len(doomed)

    async def delete_if_match(self, key: str, etag: str) -> bool:
        """Delete ``key`` only while its ETag is ``etag``. False when it changed (412),
        or is gone where the store says so (moto, Ceph: 404/412); S3 answers a missing
        key 204, as a deletion, so True means that version is not there any more:
        deleted by this call or before it.

        One DeleteObject per key (a 409 is sent again; one that does not stop is
        False, as for a change): it takes ``If-Match``, while DeleteObjects'
        per-object ETag is not implemented everywhere (moto ignores it).
        """
        try:
            await self._conditional("delete_object", key, lambda: {"IfMatch": etag})
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
        # an erasure marker is no immutable object: a new life's write replaces it
        if body is not None and cache and self.cache is not None and body != ERASURE_MARKER:
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

    async def lifecycle(self) -> Lifecycle:
        """The bucket's lifecycle configuration (none: no rules). One request."""
        try:
            resp = await self._call("get_bucket_lifecycle_configuration")
        except NotFoundError:  # NoSuchLifecycleConfiguration (a missing bucket is another error)
            return Lifecycle()
        size = resp.get("TransitionDefaultMinimumObjectSize")
        return Lifecycle(list(resp.get("Rules", [])), str(size) if size else None)

    async def set_lifecycle(self, config: Lifecycle) -> None:
        """Replace it whole, its minimum object size kept as given. One request."""
        extra: dict[str, Any] = {}
        if config.minimum_object_size is not None:
            extra["TransitionDefaultMinimumObjectSize"] = config.minimum_object_size
        await self._call(
            "put_bucket_lifecycle_configuration",
            LifecycleConfiguration={"Rules": config.rules},
            **extra,
        )
