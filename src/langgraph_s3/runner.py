"""A private event loop on a daemon thread: how sync callers drive the async core."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import weakref
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

from .errors import S3PersistenceError

T = TypeVar("T")


class BackgroundLoop:
    """Runs coroutines on one long-lived loop so clients survive between calls."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._finalizer: weakref.finalize[Any, Any] | None = None

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed() or not self._thread_alive():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                thread = threading.Thread(target=serve, name="langgraph-s3-loop", daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
                # the thread holds only the loop: when this object goes, so do they
                self._finalizer = weakref.finalize(self, _stop, loop, thread)
            return self._loop

    def _thread_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        loop = self._ensure()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            coro.close()
            raise RuntimeError(
                "a sync langgraph-s3 method was called from inside its own event loop; "
                "use the async method (a-prefixed) instead"
            )
        try:
            return asyncio.run_coroutine_threadsafe(coro, loop).result()
        except concurrent.futures.CancelledError:
            raise S3PersistenceError(
                "the saver or store was closed while this call was running; nothing after "
                "its last completed request was done: retry it on an open one"
            ) from None

    def iterate(self, agen: AsyncIterator[T]) -> Iterator[T]:
        """Drive an async iterator from sync code, one item per hop."""
        while True:
            try:
                yield self.run(_anext(agen))
            except StopAsyncIteration:
                return

    def close(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
            finalizer, self._finalizer = self._finalizer, None
        if finalizer is not None:
            finalizer.detach()
        if loop is not None:
            _stop(loop, thread)


def _stop(loop: asyncio.AbstractEventLoop, thread: threading.Thread | None) -> None:
    """Wind a background loop down as asyncio.run ends one, then end its thread.

    Also the finalizer of a BackgroundLoop nobody closed (a saver dropped without
    close(), or the interpreter exiting): its thread and clients never outlive it.
    """
    if loop.is_closed():
        return
    if thread is not None and thread is not threading.current_thread() and thread.is_alive():
        # cancel what is in flight (its callers get an error, not a wait forever), then
        # finalize async generators, which closes the loop's clients
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(_wind_down(loop), loop).result(10)
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(loop.stop)
    if thread is not None and thread is not threading.current_thread():
        thread.join(timeout=5)
    if not loop.is_running():
        loop.close()


async def _wind_down(loop: asyncio.AbstractEventLoop) -> None:
    here = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks(loop) if t is not here]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await loop.shutdown_asyncgens()


async def _anext(agen: AsyncIterator[T]) -> T:
    return await agen.__anext__()
