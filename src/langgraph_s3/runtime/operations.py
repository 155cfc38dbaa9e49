"""One *operation* per public saver or store call: its request permits (see
:mod:`langgraph_s3.core.tasks`) and its span (:mod:`langgraph_s3.aws.telemetry`)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, cast

from langgraph_s3.aws.telemetry import traced
from langgraph_s3.core.tasks import PERMITS

__all__ = ["Bounded", "operation", "operation_iter"]

T = TypeVar("T")
P = ParamSpec("P")


class Bounded(Protocol):
    """Anything with a ``concurrency`` attribute: the saver, the store, their parts."""

    @property
    def concurrency(self) -> int:
        """Requests in flight at most, per call."""


B = TypeVar("B", bound=Bounded)


def operation(
    fn: Callable[Concatenate[B, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[B, P], Coroutine[Any, Any, T]]:
    """Decorate an async method of a :class:`Bounded` object: one limit per call."""

    @functools.wraps(fn)
    async def run(self: B, /, *args: P.args, **kwargs: P.kwargs) -> T:
        if PERMITS.get() is not None:
            return await fn(self, *args, **kwargs)
        token = PERMITS.set(asyncio.Semaphore(self.concurrency))
        try:
            with traced(self, fn.__name__, args, kwargs):  # the outermost call only
                return await fn(self, *args, **kwargs)
        finally:
            PERMITS.reset(token)

    return run


def operation_iter(
    fn: Callable[Concatenate[B, P], AsyncIterator[T]],
) -> Callable[Concatenate[B, P], AsyncIterator[T]]:
    """:func:`operation` for async generators (``alist``).

    A generator's body runs in whichever task pulls the next item, so the
    permits are set around each step, in the consumer's own context, and reset
    before the item is handed out: context the consumer sets between items (a
    ``stats.label``, a tracing span) applies to the steps that follow.
    """

    @functools.wraps(fn)
    async def run(self: B, /, *args: P.args, **kwargs: P.kwargs) -> AsyncIterator[T]:
        agen = cast(AsyncGenerator[T, None], fn(self, *args, **kwargs))
        if PERMITS.get() is not None:
            async for item in agen:
                yield item
            return
        sem = asyncio.Semaphore(self.concurrency)
        try:
            while True:
                token = PERMITS.set(sem)
                try:
                    with traced(self, fn.__name__, args, kwargs):  # a span per step
                        item = await agen.__anext__()
                except StopAsyncIteration:
                    return
                finally:
                    PERMITS.reset(token)
                yield item
        finally:
            token = PERMITS.set(sem)
            try:
                await agen.aclose()
            finally:
                PERMITS.reset(token)

    return run
