"""A private event loop on a daemon thread: how sync callers drive the async core.

Closing it ends it the way ``asyncio.run`` ends a loop: in-flight calls are
cancelled (their callers get an error, never a wait forever), the owner's
clients on that loop are closed, async generators are finalized, and the loop
is closed. A loop nobody closed (its saver dropped, or the interpreter
exiting) is wound down the same way by a finalizer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

from langgraph_s3.errors import ClosedError

T = TypeVar("T")
Closer = Callable[[], Coroutine[Any, Any, None]]


class BackgroundLoop:
    """Runs coroutines on one long-lived loop so clients survive between calls.

    ``closer`` (the client factory's close for the running loop) runs on the
    loop as it winds down, held strongly by the finalizer: async generators
    alone are not enough once the cyclic GC has cleared weak references.
    """

    def __init__(self, closer: Closer | None = None) -> None:
        self._closer = closer
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pending: set[concurrent.futures.Future[Any]] = set()
        self._finalizer: weakref.finalize[Any, Any] | None = None

    def _ensure(self) -> asyncio.AbstractEventLoop:
        """The running loop; the caller holds ``_lock``."""
        if self._loop is None or self._loop.is_closed() or not self._thread_alive():
            loop = asyncio.new_event_loop()
            ready = threading.Event()
            closer = self._closer

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()
                # stopped from inside (a finalizer on this thread): finish here
                if not loop.is_closed():
                    with contextlib.suppress(Exception):
                        loop.run_until_complete(_wind_down(loop, closer))
                    loop.close()

            thread = threading.Thread(target=serve, name="langgraph-s3-loop", daemon=True)
            thread.start()
            ready.wait()
            if self._finalizer is not None:
                self._finalizer.detach()
            self._loop, self._thread = loop, thread
            pending = self._pending = set()
            # the thread holds only the loop: when this object goes, so do they
            self._finalizer = weakref.finalize(self, _stop, loop, thread, closer, pending)
        return self._loop

    def _thread_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        with self._lock:  # submitted under the lock: close() sees every call it must end
            loop = self._ensure()
            if running is loop:
                coro.close()
                raise RuntimeError(
                    "a sync langgraph-s3 method was called from inside its own event loop; "
                    "use the async method (a-prefixed) instead"
                )
            fut = asyncio.run_coroutine_threadsafe(coro, loop)
            pending = self._pending
            pending.add(fut)
        fut.add_done_callback(pending.discard)
        try:
            return fut.result()
        except concurrent.futures.CancelledError:
            raise ClosedError() from None

    def iterate(self, agen: AsyncIterator[T]) -> Iterator[T]:
        """Drive an async iterator from sync code, one item per hop."""
        while True:
            try:
                yield self.run(_anext(agen))
            except StopAsyncIteration:
                return

    def close(self) -> None:
        with self._lock:
            loop, thread, pending = self._loop, self._thread, self._pending
            self._loop = self._thread = None
            self._pending = set()
            finalizer, self._finalizer = self._finalizer, None
        if finalizer is not None:
            finalizer.detach()
        if loop is not None:
            _stop(loop, thread, self._closer, pending)


def _stop(
    loop: asyncio.AbstractEventLoop,
    thread: threading.Thread | None,
    closer: Closer | None,
    pending: set[concurrent.futures.Future[Any]],
) -> None:
    """Wind a background loop down as asyncio.run ends one, then end its thread."""
    if loop.is_closed():
        return
    if thread is not None and thread is threading.current_thread():
        with contextlib.suppress(RuntimeError):
            loop.stop()  # serve() finishes the wind-down once run_forever returns
        return
    if thread is not None and thread.is_alive():
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(_wind_down(loop, closer), loop).result(10)
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(loop.stop)
    if thread is not None:
        thread.join(timeout=5)
    for fut in list(pending):  # anything the loop never got to: an error, not a hang
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            if not fut.done():
                fut.set_exception(ClosedError())
    if not loop.is_running():
        loop.close()


async def _wind_down(loop: asyncio.AbstractEventLoop, closer: Closer | None) -> None:
    here = asyncio.current_task()
    for _ in range(10):  # calls may start while earlier ones are being cancelled
        tasks = [t for t in asyncio.all_tasks(loop) if t is not here and not t.done()]
        if not tasks:
            break
        for task in tasks:
            task.cancel()
        # on purpose: the loop's own shutdown, each task's end awaited whatever it raises
        await asyncio.gather(*tasks, return_exceptions=True)
    if closer is not None:
        with contextlib.suppress(Exception):
            await closer()
    await loop.shutdown_asyncgens()


async def _anext(agen: AsyncIterator[T]) -> T:
    return await agen.__anext__()
