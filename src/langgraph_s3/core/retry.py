"""The one retry policy above botocore's, and the one compare-and-swap loop.

botocore retries a *request* (5xx, throttling, connection errors) up to
``Limits.max_attempts`` times. What it cannot retry is a *conditional write
that lost a race*: the state it was conditioned on changed, so the caller must
read again and decide again. Every read-modify-write in the library (manifest
commits and maintenance, the first-write-wins merge of pending writes, the
store's upserts) runs through :func:`cas`, bounded by ``Limits.max_conflicts``
rounds with full-jitter exponential backoff between them, so 32 writers on one
key spread out instead of retrying in lockstep.

Example::

    async def read() -> tuple[bytes | None, str | None]:
        return await objects.get_with_etag(key)

    async def update(state):
        body, etag = state
        if nothing_to_do(body):
            return Done(None)
        ok = await objects.put(key, merged(body), mode=Update(etag))
        return Done(None) if ok else LOST

    await cas(read, update, attempts=limits.max_conflicts, what=f"writes {key!r}")
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from langgraph_s3.errors import ConflictError

S = TypeVar("S")
T = TypeVar("T")

BASE_DELAY = 0.01
MAX_DELAY = 0.5


@dataclass(frozen=True, slots=True)
class Done(Generic[T]):
    """The update is settled (written, or nothing to write): return ``value``."""

    value: T


@dataclass(frozen=True, slots=True)
class Retry:
    """Read again: the conditional write lost a race (counts as an attempt), or the
    state is not ready yet (``after`` seconds, e.g. a deletion holds a lease on the
    item: waits are bounded by the lease, not counted as attempts)."""

    after: float | None = None


LOST = Retry()


async def backoff(attempt: int) -> None:
    """Full jitter: a random pause up to ``min(MAX_DELAY, BASE_DELAY * 2**attempt)``."""
    await asyncio.sleep(random.uniform(0, min(MAX_DELAY, BASE_DELAY * 2**attempt)))


async def cas(
    read: Callable[[], Awaitable[S]],
    update: Callable[[S], Awaitable[Done[T] | Retry]],
    *,
    attempts: int,
    what: str,
    error: type[ConflictError] = ConflictError,
) -> T:
    """Read → mutate → conditional write, until the write lands or nothing is left to do.

    Args:
        read: fetches the current state (an item, a body and its ETag...).
        update: decides from the state and performs the conditional write; returns
            ``Done(value)`` when settled, ``LOST`` when the condition failed, or
            ``Retry(after=s)`` to wait ``s`` seconds before reading again.
        attempts: rounds before giving up (``Limits.max_conflicts``).
        what: names the contended thing in the error message.
        error: the ``ConflictError`` subclass to raise.

    Raises:
        ConflictError: (or ``error``) after ``attempts`` rounds without settling.
    """
    attempt = 0
    while attempt < attempts:
        outcome = await update(await read())
        if isinstance(outcome, Done):
            return outcome.value
        if outcome.after is not None:
            await asyncio.sleep(outcome.after)
            continue
        attempt += 1
        if attempt < attempts:
            await backoff(attempt)
    raise error(
        f"{what} kept changing under concurrent writers for {attempts} "
        f"attempt{'s' if attempts != 1 else ''}: "
        "retry the call, or raise max_conflicts"
    )
