"""One thread of an import, written aside and published whole (``core.staging``)."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Iterator
from typing import Any, Protocol

from langgraph_s3.core.records import Expiry
from langgraph_s3.core.staging import STAGE_LEASE_SECONDS, Claim, staging
from langgraph_s3.errors import CheckpointConflictError, ConflictError

CLAIM_ROUNDS = 4
"""Dead imports' stages an import drops before it gives up claiming a thread."""
WAIT_POLL = 1.0
"""Seconds between looks at a live claim in the way (1 GetItem each)."""


class Stage(Protocol):
    """Where one thread of an import is written, and how it is made visible."""

    async def begin(self) -> None:
        """Take the thread for the import (before its first write)."""

    def writing(self) -> contextlib.AbstractContextManager[Any]:
        """The block whose ``put`` and ``put_writes`` calls write the thread."""

    async def keep(self) -> None:
        """Before each call: keep the hold on the thread (or stop the import)."""

    async def publish(self) -> None:
        """Make what was written the thread, all at once."""

    async def abandon(self) -> None:
        """Remove what was written (nothing of it was published)."""


class InPlace:
    """Another library's saver: written where readers look, deleted on failure."""

    def __init__(self, side: Any, thread_id: str) -> None:
        self.side, self.thread_id = side, thread_id

    async def begin(self) -> None:
        return None

    def writing(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    async def keep(self) -> None:
        return None

    async def publish(self) -> None:
        return None

    async def abandon(self) -> None:
        await self.side.call("delete_thread", self.thread_id)


class Staged:
    """Ours: the thread's items go to the import's stage partition and are moved into
    the thread's in one transaction (``Manifest.publish``); readers see the thread as
    it was until then. A failure drops the stage and what was written, which no
    reader could see.

    Cost, beside the writes: claiming, 2 GetItems and 1 PutItem (and a dead import's
    stage dropped first, if one is in the way); 1 UpdateItem per minute of writing;
    publishing, the held copies stored (``aflush``), 1 GetItem, 2 Queries and 1
    TransactWriteItems per 49 namespaces.
    """

    def __init__(self, saver: Any, thread_id: str, upto: str) -> None:
        self.saver, self.thread_id, self.upto = saver, thread_id, upto
        self.manifest = saver.manifest
        self.token = secrets.token_hex(8)
        self.claim = Claim(self.token, 0, upto)
        self.lives: set[str] = {self.token}
        """What the thread's root's life is once published (``_published``)."""

    def _lease(self) -> Claim:
        return Claim(self.token, int(self.manifest.now() + STAGE_LEASE_SECONDS), self.upto)

    async def _swept(self) -> None:
        """A thread whose TTL passed but that no sweep reached yet reads as absent: its
        expired life is swept first (as a first commit over it would), else the
        import could not be published over it."""
        raw = await self.manifest.reads.read(self.thread_id, "")
        if raw is not None and raw.committed and raw.expired(self.manifest.now()):
            await self.saver.maintenance().sweep_thread(Expiry(self.thread_id, raw.rev))

    async def begin(self) -> None:
        """Claim the thread. A live claim in the way is waited for while it is not
        renewed (an import that failed and could not clean up: its hold runs out
        within :data:`STAGE_LEASE_SECONDS`), then dropped; one renewed meanwhile is
        another import at work: a ``ConflictError``."""
        await self._swept()
        drops, watched = 0, None
        while True:
            claim = self._lease()
            other = await self.manifest.staging.stage(self.thread_id, claim)
            if other is None or other.token == self.token:  # (ours, its answer lost)
                self.claim = claim if other is None else other
                return
            now = self.manifest.now()
            if other.until > now:  # an import at work, one that failed, or a deletion
                renewed = watched is not None and watched.token == other.token != ""
                if renewed and watched is not None and watched.until != other.until:
                    raise CheckpointConflictError(
                        f"thread {self.thread_id!r} is being imported by another process "
                        "(it renewed its hold while this one waited): import it again "
                        "once that import is over"
                    )
                watched = other
                await asyncio.sleep(min(other.until - now, WAIT_POLL))
                continue
            drops += 1
            if drops > CLAIM_ROUNDS:
                raise ConflictError(
                    f"thread {self.thread_id!r} could not be taken for the import (other "
                    "imports kept claiming it): import it again"
                )
            await self.saver.maintenance().drop_stage(self.thread_id, other.token, dead=True)

    @contextlib.contextmanager
    def _staging(self) -> Iterator[None]:
        with staging(self.manifest.deployment, self.thread_id, self.token):
            yield

    def writing(self) -> contextlib.AbstractContextManager[Any]:
        return self._staging()

    async def keep(self) -> None:
        if self.manifest.now() < self.claim.until - STAGE_LEASE_SECONDS / 2:
            return
        claim = self._lease()
        if await self.manifest.staging.stage(self.thread_id, claim, renew=True) is not None:
            raise ConflictError(
                f"the import's hold on thread {self.thread_id!r} ran out (the process was "
                f"paused for more than {STAGE_LEASE_SECONDS} s) and a sweep dropped what "
                "it wrote: nothing of it was published; import it again"
            )
        self.claim = claim

    async def publish(self) -> None:
        with self._staging():
            await self.saver.aflush()  # the items move with nothing in flight to them
            staged = await self.manifest.reads.read(self.thread_id, "")
        self.lives = {self.token}
        if staged is not None and staged.life:
            self.lives.add(staged.life)
        try:
            published = await self.manifest.staging.publish(self.thread_id, self.token)
        except Exception:
            if not await self._published():
                raise
            published = True  # applied, its answer lost
        if not published:
            raise CheckpointConflictError(
                f"thread {self.thread_id!r} changed while it was imported (deleted, a "
                "conversation begun on it, or the import's hold ran out): nothing of the "
                "import was published; import it again (with replace if it exists now)"
            )

    async def _published(self) -> bool:
        """After a publishing call failed: whether it was applied all the same (the
        claim gone, the thread's root of the staged life). Cost: 2 GetItems."""
        claim = await self.manifest.staging.staged_claim(self.thread_id)
        if claim is not None and claim.token == self.token:
            return False
        root = await self.manifest.reads.read(self.thread_id, "")  # ours: the stage's life
        return root is not None and root.life in self.lives

    async def abandon(self) -> None:
        with self._staging(), contextlib.suppress(Exception):
            await self.saver.aflush()  # its own PUTs land before the removal lists
        await self.saver.maintenance().drop_stage(self.thread_id, self.token)
