"""The background task the saver and the store share: a TTL sweep every few minutes,
on the loop that started it, until stopped (from that loop or any other)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

__all__ = ["PeriodicSweep"]

logger = logging.getLogger("langgraph_s3.store")
"""The name the store's sweeps always logged under (the saver's too)."""


class PeriodicSweep:
    """The background task that sweeps every few minutes until stopped."""

    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None

    def start(self, sweep: Callable[[], Awaitable[int]], minutes: float) -> asyncio.Task[None]:
        """Run ``sweep`` every ``minutes`` on the running loop; the running sweeper
        if there is one.

        Args:
            sweep: one sweep (the store's ``sweep_ttl``, an operation of its own);
                held by the task alone, so an idle sweeper makes no reference cycle
                through its store.
            minutes: the pause after each sweep.
        """
        if self.task is not None and not self.task.done():
            return self.task
        loop = _sweep_every(sweep, minutes)
        self.task = asyncio.create_task(loop, name="langgraph-s3-ttl-sweeper")
        return self.task

    async def stop(
        self, timeout: float | None, *, blocked: asyncio.AbstractEventLoop | None = None
    ) -> bool:
        """Cancel the sweeper; True when it stopped within ``timeout`` seconds.

        The sweeper may run on another loop (the sync façade's, an earlier
        ``asyncio.run``): it is cancelled there. ``blocked`` is a loop whose
        thread waits for this call (a sync ``close()`` from async code): a
        sweeper there is cancelled, never waited for.
        """
        task, self.task = self.task, None
        if task is None or task.done():
            return True
        home = task.get_loop()
        if home is asyncio.get_running_loop():
            task.cancel()
            return await _stopped(task, timeout)
        return await _stop_elsewhere(task, home, timeout, blocked)


async def _sweep_every(sweep: Callable[[], Awaitable[int]], minutes: float) -> None:
    while True:
        try:
            n = await sweep()
            if n:
                logger.info("TTL sweep deleted %d expired item(s)", n)
        except Exception:
            logger.exception("TTL sweep failed; retrying at the next interval")
        await asyncio.sleep(minutes * 60)


async def _stop_elsewhere(
    task: asyncio.Task[None],
    home: asyncio.AbstractEventLoop,
    timeout: float | None,
    blocked: asyncio.AbstractEventLoop | None,
) -> bool:
    """Cancel a task that runs on another loop, and wait for it there if we can."""
    if home.is_closed():
        return True
    try:
        home.call_soon_threadsafe(task.cancel)
    except RuntimeError:  # closed meanwhile
        return True
    if home is blocked or not home.is_running():
        return False  # it stops when that loop next runs
    fut = asyncio.run_coroutine_threadsafe(_stopped(task, timeout), home)
    try:
        return await asyncio.wait_for(asyncio.wrap_future(fut), timeout)
    except TimeoutError:
        return False


async def _stopped(task: asyncio.Task[None], timeout: float | None) -> bool:
    """Wait for a cancelled task on its own loop. asyncio.wait never raises the task's
    cancellation, so a cancellation of the caller itself still propagates."""
    done, _ = await asyncio.wait({task}, timeout=timeout)
    return task in done
