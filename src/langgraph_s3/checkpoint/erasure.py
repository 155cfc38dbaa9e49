"""Erasure markers: what a deletion (or a removal) leaves under a checkpoint key a PUT
may still reach, so that a writer frozen right after it answered cannot bring a removed
conversation back (docs/guarantees.md, "Erasure is erasure")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from langgraph_s3.core.keys import ERASURE_MARKER
from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.core.records import SIGNED_REQUEST_SECONDS

HELD_LICENSE = 5.0
"""Seconds after the item was last seen holding a copy within which its PUT may begin
without asking again (a frozen writer that thaws later reads the item first, 1 GetItem:
a deleted conversation's copy is never PUT after its deletion)."""

ERASED = ERASURE_MARKER
"""The body of an erasure marker: a deletion leaves one under each key a PUT may still
be on its way to (``Deletion.held``, and objects stored within ``late_put_seconds``), so
that a late ``If-None-Match`` PUT finds the key taken and stores nothing."""
ERASED_TAGGING = "lgs3-ttl=1d"
"""An erasure marker's tag: the store's one-day lifecycle rule (installed by the
terraform module and ``AsyncS3Store.setup``) expires it; without that rule, a later
deletion or packing of the thread takes it once it is older than ``late_put_seconds``."""
WRITE_LICENSE = 300.0
"""Seconds after this process last saw a namespace's life (a put, a read) within which
a ``put_writes`` of it may begin without asking the item again (1 GetItem past it: a
task that ran longer, or a writer frozen mid-task and thawed later, stores no writes
for a life that was deleted or replaced meanwhile)."""
LATE_RETRY_SECONDS = 300.0
"""How long after a late pass that met its thread changing (a busy thread, a new life
racing it) the pass is due again."""
LATE_MARGIN = 60.0
"""Seconds added for clocks (the deleter's and S3's) and a request's own transit."""


def mark_erased(objects: ObjectStorePort) -> Callable[[str], Awaitable[None]]:
    """An erasure marker under a key, whatever is there (1 PUT), tagged for the one-day
    lifecycle rule: a late ``If-None-Match`` PUT finds the key taken."""

    async def mark(key: str) -> None:
        await objects.put(key, ERASED, tagging=ERASED_TAGGING)

    return mark


def late_put_seconds(request_timeout: float) -> float:
    """How long after the item was last seen holding a copy its PUT may still land:
    begun within :data:`HELD_LICENSE`, then applied by S3 within the request's deadline
    or, sent by a process frozen meanwhile, within its signature's 15 minutes
    (:data:`~langgraph_s3.core.records.SIGNED_REQUEST_SECONDS`), plus
    :data:`LATE_MARGIN` (16 min 5 s by default)."""
    return HELD_LICENSE + max(request_timeout, SIGNED_REQUEST_SECONDS) + LATE_MARGIN


def late_pass_seconds(request_timeout: float) -> float:
    """How long after a deletion began its late pass is due: a ``put_writes`` PUT begun
    within :data:`WRITE_LICENSE` of its writer's last sight of the life lands within its
    signature's 15 minutes, plus :data:`LATE_MARGIN` (21 minutes by default). Write
    objects name task ids a deletion cannot know, so no marker can refuse them: the
    pass lists the thread again and removes what came back."""
    return WRITE_LICENSE + max(request_timeout, SIGNED_REQUEST_SECONDS) + LATE_MARGIN
