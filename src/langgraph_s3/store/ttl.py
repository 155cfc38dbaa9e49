"""TTL: refresh on read, the precise sweep, lifecycle rules.

An expired item is never returned by any read (the readers check
``expires_at``). Three things remove it for good:

* :meth:`ItemExpiry.sweep` deletes every expired item, each conditional on the
  version seen expired, so an item rewritten meanwhile survives;
* :class:`~langgraph_s3.runtime.periodic.PeriodicSweep` runs that sweep every few
  minutes in the background;
* S3 lifecycle rules, one per TTL class (:data:`items.TTL_CLASSES_DAYS`),
  expire objects by their tag: the coarse backstop that works when no
  process runs. A class rounds the TTL up, so it never deletes a live item.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from langgraph.store.base import TTLConfig

from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.core.shards import Shard
from langgraph_s3.core.tasks import bounded_map
from langgraph_s3.store import format as it
from langgraph_s3.store.items import ItemStore, Live
from langgraph_s3.store.segments import Segments

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


async def install_lifecycle_rules(objects: ObjectStorePort, *, dry_run: bool = False) -> bool:
    """One expiration rule per TTL class, merged with the bucket's configuration: its
    own rules and its ``TransitionDefaultMinimumObjectSize`` stay (a PUT replaces the
    configuration whole). True when they were (with ``dry_run``: would be) written.

    One GetBucketLifecycleConfiguration, and a PutBucketLifecycleConfiguration
    only when our rules are missing or outdated.
    """
    existing = await objects.lifecycle()
    if rules_installed(existing.rules):
        return False
    if not dry_run:
        await objects.set_lifecycle(replace(existing, rules=merged_rules(existing.rules)))
    return True


# ------------------------------------------------------------ refresh, sweep
def sweep_interval(minutes: float | None, config: TTLConfig | None) -> float:
    """Minutes between sweeps: the argument, else the TTL config's, else 5."""
    return minutes or (config or {}).get("sweep_interval_minutes") or DEFAULT_SWEEP_MINUTES


class ItemExpiry:
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

    async def sweep(self, shard: Shard | None = None) -> int:
        """Delete every expired item now (of ``shard``: by its key's hash); how many.

        Requests: a :meth:`Segments.scan` of the whole store, then one
        DeleteObject (``If-Match``) per expired item, concurrently. An item
        rewritten since the listing (a fresh value, maybe without TTL) is left
        alone, and not counted.
        """
        at = it.now()
        expired = [
            h
            for h in await self.segments.scan(())
            if h.item.expired(at) and (shard is None or shard.holds(h.key))
        ]
        deleted = await bounded_map(self.items.delete_version, expired)
        return sum(deleted)
