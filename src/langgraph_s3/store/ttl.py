"""TTL: refresh on read, the precise sweep, the background sweeper, lifecycle rules.

An expired item is never returned by any read (the readers check
``expires_at``). Three things remove it for good:

* :meth:`Expiry.sweep` deletes every expired item, each conditional on the
  version seen expired, so an item rewritten meanwhile survives;
* :class:`Sweeper` runs that sweep every few minutes in the background;
* S3 lifecycle rules, one per TTL class (:data:`items.TTL_CLASSES_DAYS`),
  expire objects by their tag: the coarse backstop that works when no
  process runs. A class rounds the TTL up, so it never deletes a live item.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from langgraph.store.base import TTLConfig

from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.core.tasks import bounded_map
from langgraph_s3.store import format as it
from langgraph_s3.store.items import ItemStore, Live
from langgraph_s3.store.segments import Segments

logger = logging.getLogger("langgraph_s3.store")

RULE_PREFIX = "langgraph-s3-ttl-"
"""The ID prefix of the lifecycle rules the store owns; any other rule is left as is."""
DEFAULT_SWEEP_MINUTES = 5.0


# ------------------------------------------------------------ lifecycle rules
def lifecycle_rules() -> list[dict[str, Any]]:
    """The S3 lifecycle rules that expire what each TTL class tag marks."""
    return [
        {
            "ID": f"{RULE_PREFIX}{days}d",
            "Filter": {"Tag": {"Key": it.TTL_TAG, "Value": f"{days}d"}},
            "Status": "Enabled",
            "Expiration": {"Days": days},
        }
        for days in it.TTL_CLASSES_DAYS
    ]


def _ours(rule: dict[str, Any]) -> bool:
    return str(rule.get("ID", "")).startswith(RULE_PREFIX)


def rules_installed(existing: Sequence[dict[str, Any]]) -> bool:
    """True when the bucket's rules already hold exactly ours."""
    return [r for r in existing if _ours(r)] == lifecycle_rules()


def merged_rules(existing: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bucket's own rules, then ours (replacing any earlier version of ours)."""
    return [r for r in existing if not _ours(r)] + lifecycle_rules()


async def install_lifecycle_rules(objects: ObjectStorePort) -> None:
    """One expiration rule per TTL class, merged with the bucket's configuration: its
    own rules and its ``TransitionDefaultMinimumObjectSize`` stay (a PUT replaces the
    configuration whole).

    One GetBucketLifecycleConfiguration, and a PutBucketLifecycleConfiguration
    only when our rules are missing or outdated.
    """
    existing = await objects.lifecycle()
    if not rules_installed(existing.rules):
        await objects.set_lifecycle(replace(existing, rules=merged_rules(existing.rules)))


# ------------------------------------------------------------ refresh, sweep
def sweep_interval(minutes: float | None, config: TTLConfig | None) -> float:
    """Minutes between sweeps: the argument, else the TTL config's, else 5."""
    return minutes or (config or {}).get("sweep_interval_minutes") or DEFAULT_SWEEP_MINUTES


class Expiry:
    """Moves expiry forward on read, and deletes what has expired.

    Args:
        items: writes and deletes items conditionally.
        segments: reads the whole store for a sweep.
    """

    def __init__(self, items: ItemStore, segments: Segments) -> None:
        self.items = items
        self.segments = segments

    async def refresh(self, live: Sequence[Live], at: datetime) -> None:
        """Restart the TTL of the entries that have one, from ``at``.

        One conditional PUT each, concurrently (rewriting also restarts the
        lifecycle clock). An entry changed since it was read is left alone: the
        concurrent write set its own expiry.
        """
        due = [entry for entry in live if entry.item.ttl is not None]
        await bounded_map(lambda e: self.items.rewrite(e, e.item.refreshed(at)), due)

    async def sweep(self) -> int:
        """Delete every expired item now; how many were deleted.

        Requests: a :meth:`Segments.scan` of the whole store, then one
        DeleteObject (``If-Match``) per expired item, concurrently. An item
        rewritten since the listing (a fresh value, maybe without TTL) is left
        alone, and not counted.
        """
        at = it.now()
        expired = [h for h in await self.segments.scan(()) if h.item.expired(at)]
        deleted = await bounded_map(self.items.delete_version, expired)
        return sum(deleted)


class Sweeper:
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
