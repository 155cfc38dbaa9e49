"""Structured concurrency with one request limit per operation.

Every public saver or store call is one *operation*: :func:`operation` gives it a
semaphore of ``concurrency`` permits, and :func:`aws.call <langgraph_s3.aws.call>`
holds one permit for each request. However the operation fans out (nested
``gather_all`` / ``bounded_map`` calls, the writes listing beside the blob
reads), at most ``concurrency`` of its requests are in flight. Permits are held
around requests only, never around tasks that wait for other tasks, so nesting
cannot deadlock. An operation called from inside another (``alist`` reading one
checkpoint through ``aget_tuple``) shares the outer one's permits.

Fan-out uses :class:`asyncio.TaskGroup`: when one call fails, its siblings are
cancelled and the first error is raised (not an ``ExceptionGroup``).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from contextlib import asynccontextmanager
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, cast

T = TypeVar("T")
A = TypeVar("A")
P = ParamSpec("P")

_PERMITS: contextvars.ContextVar[asyncio.Semaphore | None] = contextvars.ContextVar(
    "langgraph_s3_permits", default=None
)


class Bounded(Protocol):
    """Anything with a ``concurrency`` attribute: the saver, the store."""

    concurrency: int


B = TypeVar("B", bound=Bounded)


@asynccontextmanager
async def permit() -> AsyncIterator[None]:
    """Hold one of the current operation's permits (none outside an operation)."""
    sem = _PERMITS.get()
    if sem is None:
        yield
        return
    async with sem:
        yield


def operation(
    fn: Callable[Concatenate[B, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[B, P], Coroutine[Any, Any, T]]:
    """Decorate an async method of a :class:`Bounded` object: one limit per call."""

    @functools.wraps(fn)
    async def run(self: B, /, *args: P.args, **kwargs: P.kwargs) -> T:
        if _PERMITS.get() is not None:
            return await fn(self, *args, **kwargs)
        token = _PERMITS.set(asyncio.Semaphore(self.concurrency))
        try:
            return await fn(self, *args, **kwargs)
        finally:
            _PERMITS.reset(token)

    return run


def operation_iter(
    fn: Callable[Concatenate[B, P], AsyncIterator[T]],
) -> Callable[Concatenate[B, P], AsyncIterator[T]]:
    """:func:`operation` for async generators (``alist``).

    A generator's body runs in whichever task pulls the next item, so each step
    runs in a context of its own that carries the operation's permits.
    """

    @functools.wraps(fn)
    async def run(self: B, /, *args: P.args, **kwargs: P.kwargs) -> AsyncIterator[T]:
        agen = cast(AsyncGenerator[T, None], fn(self, *args, **kwargs))
        if _PERMITS.get() is not None:
            async for item in agen:
                yield item
            return
        ctx = contextvars.copy_context()
        ctx.run(_PERMITS.set, asyncio.Semaphore(self.concurrency))
        try:
            while True:
                try:
                    item = await asyncio.create_task(_anext(agen), context=ctx)
                except StopAsyncIteration:
                    return
                yield item
        finally:
            await asyncio.create_task(agen.aclose(), context=ctx)

    return run


async def _anext(agen: AsyncIterator[T]) -> T:
    return await agen.__anext__()


async def gather_all(*aws: Awaitable[Any]) -> list[Any]:
    """Run awaitables together in a TaskGroup; the first failure cancels the rest."""
    if len(aws) == 1:
        return [await aws[0]]
    try:
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(_wrap(a)) for a in aws]
    except BaseExceptionGroup as group:
        raise _first(group) from None
    return [t.result() for t in tasks]


async def bounded_map(
    fn: Callable[[A], Awaitable[T]], items: Iterable[A], limit: int | None = None
) -> list[T]:
    """``[await fn(x) for x in items]``, concurrently, results in order.

    Requests are bounded by the operation's permits; ``limit`` additionally bounds
    how many calls run at once (for callers outside an operation, such as tests).
    """
    todo = list(items)
    if len(todo) <= 1:
        return [await fn(x) for x in todo]
    if limit is None:
        return await gather_all(*(fn(x) for x in todo))
    sem = asyncio.Semaphore(limit)

    async def one(x: A) -> T:
        async with sem:
            return await fn(x)

    return await gather_all(*(one(x) for x in todo))


async def _wrap(aw: Awaitable[T]) -> T:
    return await aw


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first leaf error, preferring a real failure over a cancellation."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for e in exc.exceptions:
                walk(e)
        else:
            leaves.append(exc)

    walk(group)
    real = [e for e in leaves if not isinstance(e, asyncio.CancelledError)]
    return (real or leaves)[0]
