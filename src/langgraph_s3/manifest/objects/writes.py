"""Single-item writes of an object manifest, grouped: the writes one process makes to
one item at once become one version.

DynamoDB applies two UpdateItems of one item that arrive together one after the other,
each in its round trip. Two create-only PUTs of one item's next version cannot both
land: one would lose, read, and try again (3 round trips more). So the writes a
process has in flight for one item queue, and each PUT carries every write queued
while the one before it was in flight, applied in order, each on the image the one
before it left (as DynamoDB would have applied them, in some order). A write whose
condition fails is refused alone; the group's others still land.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field

from langgraph_s3.core.retry import backoff
from langgraph_s3.errors import ConditionFailedError, ConflictError
from langgraph_s3.manifest.conditions import Cond
from langgraph_s3.manifest.evaluate import holds, valid_item
from langgraph_s3.manifest.objects.codec import Image, Version
from langgraph_s3.manifest.objects.heads import Versions, new_token

__all__ = ["CARRIED", "MAX_ROUNDS", "Make", "Writes"]

CARRIED: contextvars.ContextVar[tuple[contextvars.Context, ...]] = contextvars.ContextVar(
    "langgraph_s3_carried", default=()
)
"""While a group's version is sent: the contexts of the calls whose writes it carries
(the group's PUT runs in a task of its own). For what watches requests per call (a
trace, a test that crashes a call's requests)."""

MAX_ROUNDS = 64
"""Rounds a group may lose to other writers before ConflictError."""

Make = Callable[[Image | None], Image | None]
"""A write: the item's next image from its image (the same object: no change)."""


def _failed() -> ConditionFailedError:
    return ConditionFailedError("ConditionalCheckFailedException: the condition failed")


@dataclass(eq=False)
class _Write:
    when: Cond | None
    make: Make
    future: asyncio.Future[Image | None]
    context: contextvars.Context
    outcome: tuple[BaseException | None, Image | None] = field(default=(None, None))


class Writes:
    """The queues of one object manifest's writes, one per item (and event loop)."""

    def __init__(self, versions: Versions) -> None:
        self.versions = versions
        self._queues: dict[tuple[int, str], list[_Write]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def write(self, prefix: str, when: Cond | None, make: Make) -> Image | None:
        """Write ``make(image)`` as the item's next version if ``when`` holds of it:
        the image it replaced. Cost: one create-only PUT per group of writes, on the
        fast path; a condition failing on a cached copy reads the item before it fails.

        Raises:
            ConditionFailedError: ``when`` does not hold of the item as it is.
            ConflictError: other writers won :data:`MAX_ROUNDS` rounds in a row.
        """
        loop = asyncio.get_running_loop()
        key = (id(loop), prefix)
        mine = _Write(when, make, loop.create_future(), contextvars.copy_context())
        queue = self._queues.get(key)
        if queue is None:
            self._queues[key] = [mine]
            task = loop.create_task(self._drain(key, prefix))
            self._tasks.add(task)  # held: a task only the loop refers to may be collected
            task.add_done_callback(self._tasks.discard)
        else:
            queue.append(mine)
        return await mine.future

    async def _drain(self, key: tuple[int, str], prefix: str) -> None:
        """Write the queue's groups until it is empty (a writer cancelled while it
        waited is left out)."""
        queue = self._queues[key]
        try:
            while True:
                group = [w for w in queue if not w.future.done()]
                queue.clear()
                if not group:
                    return
                token = CARRIED.set(tuple(w.context for w in group))
                try:
                    await self._group(prefix, group)
                except BaseException as exc:
                    for w in group:
                        if not w.future.done():
                            w.future.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise
                    continue
                finally:
                    CARRIED.reset(token)
                for w in group:
                    if not w.future.done():
                        error, was = w.outcome
                        if error is not None:
                            w.future.set_exception(error)
                        else:
                            w.future.set_result(was)
        finally:
            del self._queues[key]
            for w in queue:  # joined while a cancellation ended the loop
                if not w.future.done():
                    w.future.set_exception(ConflictError("the manifest's writer was cancelled"))

    async def _group(self, prefix: str, group: list[_Write]) -> None:
        """One version carrying every write of ``group`` that holds, in order."""
        fresh = False
        for attempt in range(MAX_ROUNDS):
            head = await self.versions.head(prefix, fresh=fresh)
            image, stale = head.image, False
            for w in group:
                if w.when is not None and not holds(w.when, image):
                    if not fresh:  # a cached copy may be behind: read before failing
                        stale = True
                        break
                    w.outcome = (_failed(), None)
                    continue
                try:
                    new = w.make(image)
                    if new is not image and new is not None:
                        valid_item(new)
                except Exception as exc:
                    w.outcome = (exc, None)
                    continue
                w.outcome = (None, image)
                image = new
            if stale:
                fresh = True
                continue
            if image is head.image:  # nothing changes (deleting what is absent)
                return
            version = Version(head.seq + 1, image, new_token())
            if await self.versions.try_create(prefix, version, head.basis):
                return
            fresh = True
            await backoff(attempt)
        raise ConflictError(f"manifest item {prefix!r} kept changing: retry")
