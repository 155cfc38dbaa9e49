"""One shard of a deployment's upkeep: the archiver's worker, on Lambda or anywhere.

The terraform module's archiver (``enable_archiver``) starts a Step Functions
Distributed Map on a schedule, one Lambda invocation per shard of the manifest
table: :func:`handler`, event ``{"segment": I, "total_segments": N}``. Each
invocation runs :func:`arun_shard`, the function ``langgraph-s3 archive
--segment I/N`` runs too:

1. the TTL sweep of the shard's expired threads (``asweep_ttl``);
2. with ``pack_after_days`` (0: every thread now), packing of the shard's threads
   idle that long whose pack does not hold their last write (``apack(idle_days=...)``:
   threads packed already cost nothing but their share of the Scan);
3. with a store, the sweep of the store's expired items whose key hashes to the shard.

Shards are disjoint and together cover the table, so N workers handle each
thread once; their reports add up. A failure raises (Step Functions retries the
shard, then sends it to the dead-letter queue); what it did before is in the
exception's notes. Environment for :func:`handler`:

* ``LANGGRAPH_S3_BUCKET`` (required), ``LANGGRAPH_S3_PREFIX``, ``LANGGRAPH_S3_TABLE``, or
  ``LANGGRAPH_S3_MANIFEST=s3`` (the manifest in the bucket: its sweeps run here, from the
  schedule, since no table stream triggers them);
* ``LANGGRAPH_S3_PACK_AFTER_DAYS``: idle days before a thread is packed (unset or 0: no
  packing, as the module's ``archiver_pack_after_days = 0``; the CLI's
  ``--pack-after-days 0`` packs every thread now);
* ``LANGGRAPH_S3_STORE_PREFIX``: the store's prefix in the same bucket (unset: no store sweep);
* ``LANGGRAPH_S3_INDEX_METADATA``: comma-separated metadata keys the deployment indexes.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
from dataclasses import asdict, dataclass
from typing import Any

from langgraph_s3.aws.config import check_manifest_kind
from langgraph_s3.checkpoint.saver import AsyncS3Saver
from langgraph_s3.core.report import Report
from langgraph_s3.core.shards import Shard
from langgraph_s3.errors import InvalidRequestError
from langgraph_s3.store import AsyncS3Store

__all__ = ["ShardReport", "arun_shard", "handler", "settings_from_env"]

logger = logging.getLogger(__name__)

MAX_DAYS = 36500
"""The most idle days a packing waits (a hundred years)."""


@dataclass(slots=True)
class ShardReport:
    """What one shard's upkeep did: reports of the same total add up (``+``)."""

    shards: int
    """Shards it covers (1 for a worker; N once N workers' reports are added)."""
    swept: Report
    packed: Report
    store_items: int
    """Expired store items deleted."""

    def __add__(self, other: ShardReport) -> ShardReport:
        return ShardReport(
            self.shards + other.shards,
            self.swept + other.swept,
            self.packed + other.packed,
            self.store_items + other.store_items,
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (what the Lambda returns)."""
        return asdict(self)


async def arun_shard(
    saver: AsyncS3Saver,
    shard: Shard,
    *,
    pack_after_days: float | None = None,
    store: AsyncS3Store | None = None,
) -> ShardReport:
    """Sweep, pack and sweep the store, for one shard (see the module's docstring).

    Cost: a Scan of the shard's segment of the manifest table for the sweep and
    another for packing (each 1 request per 1 MB read); per expired thread what a
    deletion costs; per thread packed what ``apack`` costs per thread; with a store,
    a read of the whole store and one DeleteObject per expired item of the shard.
    """
    if pack_after_days is not None and not (
        math.isfinite(pack_after_days) and 0 <= pack_after_days <= MAX_DAYS
    ):
        raise InvalidRequestError(
            f"pack_after_days must be from 0 to {MAX_DAYS} days, got {pack_after_days!r}"
        )
    i, n = shard.segment, shard.total
    report = ShardReport(1, Report(), Report(), 0)
    try:
        report.swept = await saver.asweep_ttl(segment=i, total_segments=n)
        if pack_after_days is not None:
            report.packed = await saver.apack(
                idle_days=pack_after_days, segment=i, total_segments=n
            )
        if store is not None:
            report.store_items = await store.asweep_ttl(segment=i, total_segments=n)
    except Exception as exc:  # the retry redoes what is left: say what was done
        exc.add_note(f"shard {shard} did before this failure: {report}")
        raise
    logger.info("shard %s of s3://%s: %s", shard, saver.target.bucket, report)
    return report


@dataclass(frozen=True, slots=True)
class Settings:
    """The worker's deployment, from the environment (:func:`settings_from_env`)."""

    bucket: str
    prefix: str
    table: str | None
    pack_after_days: float | None
    store_prefix: str | None
    index_metadata: tuple[str, ...]
    manifest: str = "dynamodb"


def settings_from_env(env: dict[str, str] | None = None) -> Settings:
    """The worker's settings from ``LANGGRAPH_S3_*`` variables (``os.environ`` by default)."""
    env = dict(os.environ) if env is None else env
    bucket = env.get("LANGGRAPH_S3_BUCKET", "")
    if not bucket:
        raise InvalidRequestError("set LANGGRAPH_S3_BUCKET: the deployment's bucket")
    days_text = env.get("LANGGRAPH_S3_PACK_AFTER_DAYS", "").strip()
    try:
        days = float(days_text) if days_text else None
    except ValueError:
        raise InvalidRequestError(
            f"LANGGRAPH_S3_PACK_AFTER_DAYS must be a number of days, got {days_text!r}"
        ) from None
    keys = tuple(
        k.strip() for k in env.get("LANGGRAPH_S3_INDEX_METADATA", "").split(",") if k.strip()
    )
    return Settings(
        bucket,
        env.get("LANGGRAPH_S3_PREFIX", "").strip("/"),
        env.get("LANGGRAPH_S3_TABLE") or None,
        days or None,
        env.get("LANGGRAPH_S3_STORE_PREFIX") or None,
        keys,
        check_manifest_kind(env.get("LANGGRAPH_S3_MANIFEST") or "dynamodb", None),
    )


def shard_from_event(event: object) -> Shard:
    """The shard an event names: ``{"segment": I, "total_segments": N}``."""
    if not isinstance(event, dict):
        raise InvalidRequestError(
            f'the event must be {{"segment": I, "total_segments": N}}, got {str(event)[:80]}'
        )
    return Shard(event.get("segment"), event.get("total_segments"))  # type: ignore[arg-type]


_savers: dict[Settings, AsyncS3Saver] = {}
"""One saver per deployment, kept across warm invocations (its clients reopen on
each invocation's loop)."""


def handler(event: dict[str, Any], context: object = None) -> dict[str, Any]:
    """The Lambda entry point (``langgraph_s3.archiver.handler``): one shard's upkeep.

    Returns:
        The shard and its report (``ShardReport.as_dict``). Raises on failure, so
        that Step Functions retries the shard.
    """
    shard = shard_from_event(event)
    settings = settings_from_env()
    return asyncio.run(_ahandle(shard, settings))


async def _ahandle(shard: Shard, settings: Settings) -> dict[str, Any]:
    saver = _savers.get(settings)
    if saver is None:
        where: dict[str, Any] = {"table": settings.table}
        if settings.manifest == "s3":
            where = {"manifest": "s3"}
        saver = _savers[settings] = AsyncS3Saver(
            bucket=settings.bucket,
            prefix=settings.prefix,
            index_metadata=settings.index_metadata,
            **where,
        )
    store = None
    if settings.store_prefix is not None:
        store = AsyncS3Store(bucket=settings.bucket, prefix=settings.store_prefix)
    try:
        report = await arun_shard(
            saver, shard, pack_after_days=settings.pack_after_days, store=store
        )
    finally:
        if store is not None:
            await store.aclose()
    return {"segment": shard.segment, "total_segments": shard.total, **report.as_dict()}
