"""Structured concurrency with one request limit per operation.

Every public saver or store call is one *operation*:
:func:`~langgraph_s3.runtime.operations.operation` gives it a
semaphore of ``concurrency`` permits, and :func:`aws.call <langgraph_s3.aws.door.call>`
holds one permit for each request. However the operation fans out (nested
``gather_all`` / ``bounded_map`` calls, the writes listing beside the blob
reads), at most ``concurrency`` of its requests are in flight. Permits are held
around requests only, never around tasks that wait for other tasks, so nesting
cannot deadlock. An operation called from inside another (``alist`` reading one
checkpoint through ``aget_tuple``) shares the outer one's permits.

Fan-out is structured: :func:`gather_all` cancels the siblings of a failed call
(but those past their point of no return, :func:`committed`) and waits for them
before raising its error (not an ``ExceptionGroup``);
:func:`settle_all` lets independent work (per-thread maintenance) finish first.
No task outlives the call that started it.
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Sequence,
)
from contextlib import asynccontextmanager
from typing import Any, ParamSpec, TypeVar, cast

T = TypeVar("T")
A = TypeVar("A")
P = ParamSpec("P")

BACKGROUND: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "langgraph_s3_background", default=False
)
"""True in the tasks that store held checkpoints' and writes' objects: their requests may
outlive the call that began them (it returns once the manifest holds them), so they
are not counted in it (``aws/telemetry.py`` marks their spans)."""
PERMITS: contextvars.ContextVar[asyncio.Semaphore | None] = contextvars.ContextVar(
    "langgraph_s3_permits", default=None
)


@asynccontextmanager
async def permit() -> AsyncIterator[None]:
    """Hold one of the current operation's permits (none outside an operation)."""
    sem = PERMITS.get()
    if sem is None:
        yield
        return
    async with sem:
        yield


async def gather_all(*aws: Awaitable[Any]) -> list[Any]:
    """Run awaitables together; results in order. The first failure cancels the
    others, waits for them to end, and is raised as it was (its ``__cause__``, the
    AWS error, kept). No task outlives the call, even when the caller is cancelled.

    Structured like ``asyncio.TaskGroup``, but built on ``asyncio.wait``: on
    Python 3.11 a TaskGroup whose child fails leaves a cancellation pending on the
    caller's task (CPython gh-116720), turning the caller's next timeout into a
    bare CancelledError.
    """
    if not aws:
        return []
    if len(aws) == 1:
        return [await aws[0]]
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    except asyncio.CancelledError:
        await _cancel_all(tasks)
        raise
    failed = next((t for t in tasks if t.done() and not t.cancelled() and t.exception()), None)
    if failed is not None:
        await _cancel_all(tasks, spare=True)  # a committed sibling finishes first
        raise _first_failure(tasks, failed)
    return [t.result() for t in tasks]  # a task cancelled from outside raises here


async def settle_all(*aws: Awaitable[Any]) -> list[Any]:
    """Like :func:`gather_all`, but a failure does not cancel the others: every
    call runs to its end, then the first failure is raised. For independent work
    whose halves must not be cut (a deletion between its tombstone and release)."""
    if len(aws) == 1:
        return [await aws[0]]
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(tasks)
    except asyncio.CancelledError:
        await _cancel_all(tasks)
        raise
    failed = next((t for t in tasks if not t.cancelled() and t.exception()), None)
    if failed is not None:
        raise _first_failure(tasks, failed)
    return [t.result() for t in tasks]


_COMMITTED: weakref.WeakSet[asyncio.Future[Any]] = weakref.WeakSet()


def committed() -> None:
    """From here on, the current task runs to its end even when a sibling fails.

    For work whose halves must not be parted by a sibling's failure: a deletion
    between its tombstone and its release would leave the thread under its lease
    (a new conversation on it waits two minutes). Only :func:`gather_all`'s own
    cancel of siblings spares it; a cancel of the whole call (Ctrl-C, a deadline)
    still ends it, as a crash would.
    """
    task = asyncio.current_task()
    if task is not None:
        _COMMITTED.add(task)


async def _cancel_all(tasks: Sequence[asyncio.Future[Any]], *, spare: bool = False) -> None:
    for t in tasks:
        if not (spare and t in _COMMITTED):
            t.cancel()
    await asyncio.wait(tasks)


def _first_failure(
    tasks: Sequence[asyncio.Future[Any]], failed: asyncio.Future[Any]
) -> BaseException:
    """``failed``'s exception, the one raised; every other task's failure is retrieved
    too (all ended by now), so a bulk call failing in many places at once logs no
    "Task exception was never retrieved" per sibling."""
    for t in tasks:
        if t.done() and not t.cancelled():
            t.exception()
    return cast(BaseException, failed.exception())


async def bounded_map(
    fn: Callable[[A], Awaitable[T]],
    items: Iterable[A],
    limit: int | None = None,
    *,
    settle: bool = False,
) -> list[T]:
    """``[await fn(x) for x in items]``, concurrently, results in order.

    Requests are bounded by the operation's permits; ``limit`` additionally bounds
    how many calls run at once (for callers outside an operation, such as tests).
    ``settle``: let every call finish before raising (see :func:`settle_all`).
    """
    todo = list(items)
    if len(todo) <= 1:
        return [await fn(x) for x in todo]
    run = settle_all if settle else gather_all
    if limit is None:
        return await run(*(fn(x) for x in todo))
    sem = asyncio.Semaphore(limit)

    async def one(x: A) -> T:
        async with sem:
            return await fn(x)

    return await run(*(one(x) for x in todo))


BACKGROUND_TASK = "langgraph-s3 held object"
"""The name of every task :func:`in_background` makes (to find them in
``asyncio.all_tasks()``: a test waits for them before it counts a call's requests)."""


def in_background(coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """``coro`` as a task of its own, its requests marked :data:`BACKGROUND`."""
    context = contextvars.copy_context()
    context.run(BACKGROUND.set, True)
    return asyncio.get_running_loop().create_task(coro, name=BACKGROUND_TASK, context=context)
