"""Single-item writes of an object manifest, grouped: the writes one process makes to
one item at once become one version.

DynamoDB applies two UpdateItems of one item that arrive together one after the other,
each in its round trip. Two create-only PUTs of one item's next version cannot both
land: one would lose, read, and try again (3 round trips more). So the writes a
process has in flight for one item queue, and each PUT carries every write queued
while the one before it was in flight, applied in order, each on the image the one
before it left (as DynamoDB would have applied them, in some order). A write whose
condition fails is refused alone; the group's others still land.

**Every request in its caller's task.** The first writer leads: it sends its group's
PUT in its own task, then hands the lead to the first writer still waiting, who sends
the next group. No request outlives every call it serves; a leader cancelled with its
PUT in flight leaves its group to the next leader, who first reads whether that PUT
landed (by its token) before it writes the group's writes again.
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
from langgraph_s3.manifest.objects.heads import ERASED, Versions, new_token

__all__ = ["CARRIED", "MAX_ROUNDS", "Make", "Writes"]

CARRIED: contextvars.ContextVar[tuple[contextvars.Context, ...]] = contextvars.ContextVar(
    "langgraph_s3_carried", default=()
)
"""While a group's version is sent: the contexts of the other calls whose writes it
carries. For what watches requests per call (a trace, a test that crashes a call's
requests)."""

MAX_ROUNDS = 64
"""Rounds a group may lose to other writers before ConflictError."""

Make = Callable[[Image | None], Image | None]
"""A write: the item's next image from its image (the same object: no change)."""

_LEAD = object()


def _answer(writes: list[_Write]) -> None:
    """Give each write not answered yet its outcome."""
    for w in writes:
        if not w.future.done():
            error, was = w.outcome
            if error is not None:
                w.future.set_exception(error)
            else:
                w.future.set_result(was)


def _failed() -> ConditionFailedError:
    return ConditionFailedError("ConditionalCheckFailedException: the condition failed")


@dataclass(eq=False)
class _Write:
    when: Cond | None
    make: Make
    future: asyncio.Future[object]
    context: contextvars.Context
    outcome: tuple[BaseException | None, Image | None] = field(default=(None, None))
    settled: bool = False
    """Its outcome stands: the version carrying it landed, or it was refused alone."""


@dataclass(eq=False)
class _Queue:
    waiting: list[_Write] = field(default_factory=list)
    leading: bool = False
    """A writer is sending a group (or is about to: the lead handed on)."""
    unsure: tuple[int, str, list[_Write], asyncio.Task[bool]] | None = None
    """A cancelled leader's PUT, still on its way for the writes it carries: (its
    version's number, its token, its writes, the task sending it)."""


class Writes:
    """The queues of one object manifest's writes, one per item (and event loop)."""

    def __init__(self, versions: Versions) -> None:
        self.versions = versions
        self._queues: dict[tuple[int, str], _Queue] = {}

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
        queue = self._queues.setdefault(key, _Queue())
        if queue.leading:
            queue.waiting.append(mine)
            try:
                role = await mine.future
            except asyncio.CancelledError:
                if mine in queue.waiting:
                    queue.waiting.remove(mine)
                given = mine.future.done() and not mine.future.cancelled()
                if given and mine.future.result() is _LEAD:  # handed the lead, cancelled
                    self._hand_on(key, queue)
                raise
            if role is not _LEAD:
                return role  # type: ignore[return-value]
        queue.leading = True
        return await self._lead(key, prefix, queue, mine)

    async def _lead(
        self, key: tuple[int, str], prefix: str, queue: _Queue, mine: _Write
    ) -> Image | None:
        """Send the queued group (``mine`` first) in this task; then hand on the lead."""
        group = [mine]
        try:
            await asyncio.sleep(0)  # writes begun beside this one join its group
            group += [w for w in queue.waiting if not w.future.done() and w is not mine]
            queue.waiting.clear()
            if queue.unsure is not None:
                await self._settle_unsure(prefix, queue, mine)
            todo = [w for w in group if not w.settled]
            if todo:
                carried = CARRIED.set(tuple(w.context for w in todo if w is not mine))
                try:
                    await self._group(prefix, queue, todo)
                finally:
                    CARRIED.reset(carried)
        except asyncio.CancelledError:  # the others' turn: the next leader writes them
            _answer([w for w in group if w is not mine and w.settled])
            queue.waiting[:0] = [
                w for w in group if w is not mine and not w.settled and not w.future.done()
            ]
            self._drop_lone_put(queue, mine)
            self._hand_on(key, queue)
            raise
        except BaseException as exc:  # the request failed: for every write it carried
            queue.unsure = None
            _answer([w for w in group if w is not mine and w.settled])
            for w in group:
                if w is not mine and not w.future.done():
                    w.future.set_exception(exc)
            self._hand_on(key, queue)
            raise
        _answer([w for w in group if w is not mine])
        self._hand_on(key, queue)
        error, was = mine.outcome
        if error is not None:
            raise error
        return was

    @staticmethod
    def _drop_lone_put(queue: _Queue, mine: _Write) -> None:
        """A cancelled leader's PUT that carries no other caller's write goes with it
        (as a cancelled request would); one that does is left to land, or not, for
        the next leader to wait for."""
        if queue.unsure is None:
            return
        others = [w for w in queue.unsure[2] if w is not mine and not w.future.done()]
        if not others:
            queue.unsure[3].cancel()
            queue.unsure = None

    def _hand_on(self, key: tuple[int, str], queue: _Queue) -> None:
        """The lead to the first writer still waiting, or the queue closed."""
        while queue.waiting:
            nxt = queue.waiting.pop(0)
            if not nxt.future.done():
                nxt.future.set_result(_LEAD)
                return
        queue.leading = False
        if queue.unsure is None:
            self._queues.pop(key, None)

    async def _settle_unsure(self, prefix: str, queue: _Queue, mine: _Write) -> None:
        """A cancelled leader's PUT, waited for: landed (its writes stand as it computed
        them, answered now) or not (they are written again, in this group). When its
        request failed, 1 GET of its version's key says (the request is over)."""
        assert queue.unsure is not None
        seq, token, writes, put = queue.unsure
        try:
            landed: bool | None = await asyncio.shield(put)
        except asyncio.CancelledError:
            if not put.done():
                raise  # this leader is cancelled: the next one waits for the PUT
            landed = None
        except Exception:
            landed = None
        if landed is None:
            there = await self.versions.version_at(prefix, seq)
            if there is not None and there.token == ERASED:  # erased since: unknown
                unknown = ConflictError("a manifest write's outcome is unknown: read again")
                for w in writes:
                    w.outcome, w.settled = (unknown, None), True
            landed = there is not None and there.token == token
        queue.unsure = None
        if landed:
            for w in writes:
                w.settled = True
        _answer([w for w in writes if w is not mine and w.settled])

    async def _group(self, prefix: str, queue: _Queue, group: list[_Write]) -> None:
        """One version carrying every write of ``group`` that holds, in order."""
        fresh = False
        for attempt in range(MAX_ROUNDS):
            head = await self.versions.head(prefix, fresh=fresh)
            image, stale = head.image, False
            for w in group:
                w.outcome = (None, None)
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
            changed = image is not head.image  # else deleting what is absent, say
            refused = any(w.outcome[0] is not None for w in group)
            if not fresh and (stale or refused or not changed):
                fresh = True  # decided on a cached copy: read the item before answering
                continue
            if changed:
                version = Version(head.seq + 1, image, new_token())
                put = asyncio.ensure_future(self.versions.try_create(prefix, version, head.basis))
                queue.unsure = (version.seq, version.token, list(group), put)
                landed = await asyncio.shield(put)  # a cancelled leader leaves it on its way
                queue.unsure = None
                if not landed:
                    fresh = True
                    await backoff(attempt)
                    continue
            for w in group:
                w.settled = True
            return
        raise ConflictError(f"a manifest item kept changing ({prefix[-60:]!r}): retry")
