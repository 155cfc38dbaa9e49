"""The thread TTL sweeper at scale: an AWS Lambda handler for the manifest table's
DynamoDB Stream.

DynamoDB's TTL removes an expired thread's root item by itself (lazily, within
days); the stream then carries a ``REMOVE`` record with the item's old image, and
:func:`handler` deletes that thread's objects. No process scans the table.

Wiring (the terraform module does it with ``enable_ttl_sweeper = true``): the
table's stream with ``OLD_IMAGE`` (or ``NEW_AND_OLD_IMAGES``) records, an event
source mapping filtered to TTL deletions with ``ReportBatchItemFailures``, and a
role that may read the stream, query and update the table, list the deployment's
prefix and delete its thread objects. The handler is ``langgraph_s3.sweeper.handler``.

Records it acts on: a ``REMOVE`` of a thread's root namespace item that held a
life (not a tombstone) whose ``expires_at`` had passed when it was removed. It
ignores the rest (tombstones expiring, hand deletions of live items, other
tables' layouts). Environment:

* ``LANGGRAPH_S3_BUCKET`` / ``LANGGRAPH_S3_PREFIX``: only this deployment's
  threads (a table shared by several deployments); unset: every deployment the
  role may reach.
* ``LANGGRAPH_S3_TABLE``: the table, when a record has no ``eventSourceARN``.
* the usual AWS variables (``AWS_ENDPOINT_URL`` for moto).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from datetime import datetime
from typing import Any

from .errors import InvalidIdError
from .keys import decode
from .manifest import ROOT_SK, TTL_ATTRIBUTE, deployment_key
from .report import Report
from .saver import AsyncS3Saver

__all__ = ["ahandle", "handler"]

logger = logging.getLogger(__name__)

_savers: dict[tuple[str, str, str], AsyncS3Saver] = {}
"""One saver per (bucket, prefix, table), kept across warm invocations."""


def handler(event: dict[str, Any], context: object = None) -> dict[str, Any]:
    """The Lambda entry point: sweep the threads the batch's TTL deletions name.

    Returns:
        ``{"batchItemFailures": [...]}``: the records whose sweep failed (Lambda
        retries from the first), for ``ReportBatchItemFailures``.
    """
    return asyncio.run(ahandle(event.get("Records", [])))


async def ahandle(records: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`handler` on the running loop (tests, or a handler of your own)."""
    results = await asyncio.gather(*(_one(r) for r in records), return_exceptions=True)
    failures = []
    for record, result in zip(records, results, strict=True):
        if isinstance(result, BaseException):
            seq = record.get("dynamodb", {}).get("SequenceNumber", "")
            logger.error("sweeping after stream record %s failed: %r", seq, result)
            failures.append({"itemIdentifier": seq})
    return {"batchItemFailures": failures}


async def _one(record: dict[str, Any]) -> Report | None:
    found = expired_thread(record)
    if found is None:
        return None
    bucket, prefix, table, thread, expired_at = found
    key = (bucket, prefix, table)
    saver = _savers.get(key)
    if saver is None:
        saver = _savers[key] = AsyncS3Saver(bucket=bucket, prefix=prefix, table=table)
    report = await saver._maintenance().sweep_removed(thread, expired_at)
    logger.info("swept expired thread %r of s3://%s/%s: %s", thread, bucket, prefix, report)
    return report


def expired_thread(record: dict[str, Any]) -> tuple[str, str, str, str, float] | None:
    """(bucket, prefix, table, thread, expired_at) when ``record`` is the TTL removal
    of a live thread's root item of a deployment this sweeper serves; else None."""
    if record.get("eventName") != "REMOVE":
        return None
    change = record.get("dynamodb", {})
    old = change.get("OldImage")
    if old is None:
        logger.warning(
            "stream record without OldImage: set the table's stream view type to "
            "OLD_IMAGE or NEW_AND_OLD_IMAGES so the sweeper can tell what expired"
        )
        return None
    pk = old.get("pk", {}).get("S", "")
    if old.get("sk", {}).get("S") != ROOT_SK or "latest_id" not in old or "deleted" in old:
        return None  # a subgraph namespace, a tombstone, the layout marker
    expires = old.get(TTL_ATTRIBUTE, {}).get("N")
    removed_at = _seconds(change.get("ApproximateCreationDateTime"))
    if expires is None or float(expires) > removed_at:
        return None  # not expired: a hand deletion is not a sweep order
    thread = old.get("thread_id", {}).get("S")
    parts = pk.split("/")
    if thread is None or len(parts) != 3:
        return None
    want_bucket = os.environ.get("LANGGRAPH_S3_BUCKET")
    if want_bucket is not None:
        bucket, prefix = want_bucket, os.environ.get("LANGGRAPH_S3_PREFIX", "").strip("/")
        if not pk.startswith(deployment_key(bucket, prefix)):
            return None  # another deployment's thread
    else:
        try:
            bucket, prefix = decode(parts[0]), decode(parts[1])
        except (InvalidIdError, ValueError, UnicodeDecodeError):
            logger.warning("cannot tell the deployment of %r: set LANGGRAPH_S3_BUCKET", pk)
            return None
    table = _table(record)
    if table is None:
        logger.warning("stream record without eventSourceARN: set LANGGRAPH_S3_TABLE")
        return None
    return bucket, prefix, table, thread, float(expires)


def _table(record: dict[str, Any]) -> str | None:
    arn = str(record.get("eventSourceARN", ""))
    if ":table/" in arn:
        return arn.split(":table/", 1)[1].split("/", 1)[0]
    return os.environ.get("LANGGRAPH_S3_TABLE")


def _seconds(when: Any) -> float:
    """A record's ApproximateCreationDateTime: epoch seconds in Lambda events, a
    datetime from boto3's GetRecords; now when absent."""
    if isinstance(when, datetime):
        return when.timestamp()
    if isinstance(when, (int, float)):
        return float(when)
    return time.time()
