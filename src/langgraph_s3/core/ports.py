"""The interfaces the saver's logic runs on: an object store and a manifest (the table
the manifest keeps its items in is the manifest's own: :mod:`langgraph_s3.manifest.table`).

:class:`~langgraph_s3.aws.s3.ObjectStore` (S3) and
:class:`~langgraph_s3.manifest.Manifest` (DynamoDB) implement them for AWS;
:class:`~langgraph_s3.testing.fakes.MemoryObjectStore` and
:class:`~langgraph_s3.testing.fakes.MemoryManifest` implement them in memory, for tests
and offline experiments, and the fault-injecting wrappers of
:mod:`langgraph_s3.testing.fakes` wrap any implementation. ``mypy --strict`` checks
that every one of them satisfies these protocols (see the end of ``testing/fakes.py``).

The protocols say what a caller may rely on; the semantics (conditional
writes, listing order, what a compare-and-swap refuses) are those documented
on the AWS implementations, and ``tests/unit/test_contract_*.py`` run the same
assertions against both kinds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Protocol, runtime_checkable

from langgraph_s3.core.cache import ByteLRU
from langgraph_s3.core.manifest_ports import ManifestPort
from langgraph_s3.core.put_mode import PutMode
from langgraph_s3.core.records import (
    Lifecycle,
    Listed,
)

__all__ = ["KeyVaultPort", "ManifestPort", "ObjectStorePort", "VersionedObjects"]


class ObjectStorePort(Protocol):
    """Objects of one bucket: conditional writes, reads, ordered listings, deletes."""

    @property
    def bucket(self) -> str:
        """The bucket's name."""

    @property
    def concurrency(self) -> int:
        """Requests in flight per operation."""

    @property
    def cache(self) -> ByteLRU | None:
        """The cache of immutable objects (``put``/``get`` with ``cache=True``), if any."""

    async def put(
        self,
        key: str,
        body: bytes,
        *,
        mode: PutMode = None,
        cache: bool = False,
        tagging: str | None = None,
    ) -> str | None:
        """Write an object; its ETag, or None when ``mode``'s condition failed (the
        object exists, for ``CREATE``; it changed or is gone, for ``Update(etag)``)."""

    async def copy(self, source_key: str, target_key: str, *, if_match: str | None = None) -> None:
        """Copy one object (its tags too); NotFoundError when the source is gone or,
        given ``if_match`` (an ETag a listing showed), is no longer that version (412:
        what lies there now, an erasure marker say, is not copied)."""

    async def delete(self, keys: Sequence[str]) -> int:
        """Delete keys (missing ones are fine); returns how many were asked for."""

    async def delete_if_match(self, key: str, etag: str) -> bool:
        """Delete ``key`` only while its ETag is ``etag``; False when it changed or is gone."""

    async def get(self, key: str, *, cache: bool = False) -> bytes | None:
        """An object's body; None when it does not exist."""

    async def get_with_etag(self, key: str) -> tuple[bytes | None, str | None]:
        """The body and ETag, or ``(None, None)`` when the object does not exist."""

    async def get_many(self, keys: Sequence[str], *, cache: bool = False) -> list[bytes | None]:
        """Bodies of ``keys``, in order, read concurrently."""

    async def get_range(self, key: str, start: int, length: int) -> bytes | None:
        """``length`` bytes from ``start`` (a ranged GET); None when the object is gone."""

    def list_pages(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[list[Listed]]:
        """Pages (one request each) of the keys under ``prefix``, ascending;
        ``start_after`` counts only when it sorts after ``prefix``."""

    async def list_all(self, prefix: str, *, start_after: str | None = None) -> list[Listed]:
        """Every key under ``prefix``, ascending."""

    async def bucket_exists(self) -> bool:
        """Whether the bucket exists (and may be reached with these credentials)."""

    async def create_bucket(self) -> None:
        """Create the bucket; one that exists already is fine."""

    async def lifecycle(self) -> Lifecycle:
        """The bucket's lifecycle configuration (none: no rules)."""

    async def set_lifecycle(self, config: Lifecycle) -> None:
        """Replace the bucket's lifecycle configuration whole (S3 has no partial
        update): pass what :meth:`lifecycle` gave, changed."""


@runtime_checkable
class VersionedObjects(Protocol):
    """An object store whose bucket may keep overwritten objects' versions (S3's)."""

    async def delete_noncurrent(self, prefix: str) -> int:
        """Delete every noncurrent version and delete marker under ``prefix``."""


class KeyVaultPort(Protocol):
    """Data keys made and unwrapped by a key only the vault holds (a KMS key): a data
    key exists in the clear only in the memory of a process that unwrapped it."""

    async def new_data_key(self, context: Mapping[str, str]) -> tuple[bytes, bytes]:
        """A fresh 32-byte data key and the same key wrapped; ``context`` is bound to
        the wrapping (KMS's encryption context). One request."""

    async def unwrap(self, wrapped: bytes, context: Mapping[str, str]) -> bytes:
        """The data key ``wrapped`` wraps, given the context it was made with;
        KeyUnavailableError when the vault's key is disabled, pending deletion or gone,
        or ``wrapped`` and ``context`` are not what it made. One request."""
