"""How an object store's put is conditioned, as data (as Arrow's ``object_store`` says
``PutMode``): the S3 adapter renders it as ``If-None-Match``/``If-Match`` headers, the
in-memory store evaluates it in Python. Pure: no request is made here."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CREATE", "Create", "PutMode", "Update"]


@dataclass(frozen=True, slots=True)
class Create:
    """Put only where no object is (S3's ``If-None-Match: *``)."""


@dataclass(frozen=True, slots=True)
class Update:
    """Put only over the object whose ETag is ``etag`` (S3's ``If-Match``): one deleted
    meanwhile fails the condition too."""

    etag: str


CREATE = Create()
PutMode = Create | Update | None
"""How an object store's put is conditioned, as data (as ``object_store``'s ``PutMode``):
``CREATE``, ``Update(etag)``, or None to overwrite whatever is there."""
