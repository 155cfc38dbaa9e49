"""An import's staging: a thread's manifest items written aside, then published whole.

An import writes a thread through the saver's own ``put`` and ``put_writes``, one
commit per checkpoint. Committed where readers look, a killed import would leave
the oldest part of the thread readable. While :func:`staging` is in effect for a
thread, the manifest keeps that thread's items in a partition of their own that no
reader lists (``{deployment}~stage/{thread}/{token}``, the import's own); the
objects go where they always do, unseen, since nothing names them yet.
:meth:`StagingPort.publish` then moves every item into the thread's partition in
one transaction, so readers see the thread as it was or wholly imported. One claim
per thread (``{deployment}~stage/{thread}``) names the import that may publish and
holds its lease; a stage whose claim ran out, or names another import, is one that
died (or was paused past its lease), and the sweep drops it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import NamedTuple, Protocol

from langgraph_s3.core.records import DELETE_LEASE_SECONDS, Late

STAGE_LEASE_SECONDS = DELETE_LEASE_SECONDS
"""How long an import's claim on a thread holds without being renewed: an import
renews it past half (:meth:`StagingPort.stage`); a stage whose claim ran out is
dropped by the next sweep, or by the next import of the thread."""

STAGING: contextvars.ContextVar[tuple[str, str, str] | None] = contextvars.ContextVar(
    "langgraph_s3_staging", default=None
)
"""(deployment, thread id, import token) whose manifest items go to that import's
stage partition."""


@contextlib.contextmanager
def staging(deployment: str, thread_id: str, token: str) -> Iterator[None]:
    """Within the block (and the tasks it starts), the manifest of ``deployment``
    reads and writes ``thread_id``'s items in the stage partition of import
    ``token``."""
    var = STAGING.set((deployment, thread_id, token))
    try:
        yield
    finally:
        STAGING.reset(var)


def staged(deployment: str, thread_id: str) -> str | None:
    """The import token whose stage the thread's items go to here (:func:`staging`)."""
    now = STAGING.get()
    return now[2] if now is not None and now[:2] == (deployment, thread_id) else None


class Claim(NamedTuple):
    """An import's hold on a thread's stage partition."""

    token: str
    """The import's own (a new one per import)."""
    until: int
    """When (epoch seconds) the hold ends unless renewed."""
    upto: str
    """The newest checkpoint id the import writes: what it may leave is of ids up to
    this (the late pass that follows a dropped stage removes those)."""
    rev: int | None = None
    """The thread's root item's ``rev`` when the claim was first made (None: there was
    none): the import is published only over the thread as it was then."""
    root: str = ""
    """What else tells that root item from another at the same ``rev``: its deletion
    stamp and life (``{deleted_at}/{life}``)."""


class StagingPort(Protocol):
    """The manifest's part in an import's staging (see the module)."""

    async def stage(self, thread_id: str, claim: Claim, *, renew: bool = False) -> Claim | None:
        """Make ``claim`` on the thread's empty stage partition (its ``rev`` read from
        the thread's root item), or (``renew``) move its ``until``. Returns None when
        done; else what is in the way: another import's claim (a live one, or one
        whose lease ran out: a stage to drop first), a claim with an empty token for
        a stage left without one (to drop), ``claim`` itself when two imports made
        theirs at once, or, renewing, ``claim`` with ``until`` 0: the claim is gone
        (dropped as dead) and the import must stop."""

    async def staged_claim(self, thread_id: str) -> Claim | None:
        """The claim on the thread's stage partition, if any."""

    async def publish(self, thread_id: str, token: str) -> bool:
        """Move the stage's items into the thread's partition, all at once, if the
        claim is still ``token``'s and the thread is as it was at the claim (its
        root item at the claim's ``rev``; every other item of it absent or
        deleted). False, with nothing moved, when either does not hold."""

    async def unstage(self, thread_id: str, token: str, *, dead: bool = False) -> Late | None:
        """Drop import ``token``'s stage (``dead``: only if its claim ran out, or
        names another import). A late pass over the thread is recorded first (due
        now, up to the claim's ``upto`` and the stage's ids), then the claim (if
        still the import's) and the items go. Returns that late pass, for the caller
        to run; None when there was nothing to drop, or the import is alive."""
