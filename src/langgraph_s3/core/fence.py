"""The fence of an object manifest's writes: a version is created only while the read
it is built on is younger than :data:`BASIS_SECONDS`. Pure, no I/O.

An object manifest frees an item's superseded version only once the version after it
is :data:`GC_SECONDS` old (``manifest/objects/gc.py``). A writer paused for longer (a
frozen Lambda) must never re-create a freed slot: its create-only PUT would succeed
beside the item's newer versions, and an acknowledged write would be lost. The fence:
the request leaves (is signed) at most :data:`BASIS_SECONDS` after its basis was read,
checked by the S3 client's ``before-send`` hook after signing (every retry is signed
and checked again); S3 refuses a request that arrives more than 15 minutes after it was
signed (``RequestTimeTooSkewed``, :data:`~langgraph_s3.core.records.SIGNED_REQUEST_SECONDS`,
and as much again of clock error at most). So no stale request lands later than
300 + 900 + 900 s after its basis, and a slot is freed no sooner than 3,600 s after it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from langgraph_s3.core.records import SIGNED_REQUEST_SECONDS
from langgraph_s3.errors import StaleBasisError

__all__ = ["BASIS_SECONDS", "GC_SECONDS", "based_on", "check"]

BASIS_SECONDS = 300.0
"""The oldest read a manifest version's create may be built on when it leaves."""
GC_SECONDS = 3600.0
"""How old the version after a superseded one must be before it is freed."""
SKEW_SECONDS = 900.0
"""The most a client's clock may be off S3's (more, and S3 refuses every request)."""
assert GC_SECONDS > BASIS_SECONDS + SIGNED_REQUEST_SECONDS + SKEW_SECONDS

_BASIS: ContextVar[float | None] = ContextVar("langgraph_s3_fence_basis", default=None)


@contextmanager
def based_on(basis: float) -> Iterator[None]:
    """Requests made inside are built on a read at ``basis`` (``time.monotonic()``)."""
    token = _BASIS.set(basis)
    try:
        yield
    finally:
        _BASIS.reset(token)


def check(now: float | None = None) -> None:
    """Refuse a request about to leave on a basis older than :data:`BASIS_SECONDS`.

    Raises:
        StaleBasisError: it is; the request is not sent.
    """
    basis = _BASIS.get()
    if basis is None:
        return
    age = (time.monotonic() if now is None else now) - basis
    if age > BASIS_SECONDS:
        raise StaleBasisError(
            f"a manifest write built on a read {age:.0f} s old was not sent (the fence "
            f"allows {BASIS_SECONDS:.0f} s): the item is read again"
        )
