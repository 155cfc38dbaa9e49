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
life (not a tombstone) whose ``expires_at`` had passed when it was removed, and of a
deletion's late-pass record (``Deletions.note_late``: the pass runs, for deployments
where no ``asweep_ttl`` found it first), and of an import's claim (the import died
a day before: its stage and what it wrote go, ``core.staging``). It
ignores the rest (tombstones expiring, hand deletions of live items, other
tables' layouts). A malformed record (a field of the wrong type, an ``expires_at``
that is not a finite number) is dropped with a warning naming it: reported as failed,
Lambda would retry it until it aged out, holding up its shard. Only a sweep that
failed (an AWS error) is reported, so that Lambda retries it. Environment:

* ``LANGGRAPH_S3_BUCKET`` / ``LANGGRAPH_S3_PREFIX``: only this deployment's
  threads (a table shared by several deployments); unset: every deployment the
  role may reach.
* ``LANGGRAPH_S3_TABLE``: the table, when a record has no ``eventSourceARN``.
* the usual AWS variables (``AWS_ENDPOINT_URL`` for moto).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
from datetime import datetime
from typing import Any, cast

from langgraph_s3.checkpoint.saver import AsyncS3Saver
from langgraph_s3.core.clock import wall_clock
from langgraph_s3.core.records import Late
from langgraph_s3.core.report import Report
from langgraph_s3.errors import InvalidIdError, InvalidRequestError
from langgraph_s3.manifest.decide import (
    LATE_DUE,
    LATE_MARK,
    LATE_SK,
    LATE_UPTO,
    deployment_key,
    deployment_of,
)
from langgraph_s3.manifest.schema import ROOT_SK, TTL_ATTRIBUTE
from langgraph_s3.manifest.stage_items import (
    STAGE_MARK,
    STAGE_SK,
    STAGE_TOKEN,
    STAGE_UPTO,
)

__all__ = ["MalformedRecord", "ahandle", "handler"]

logger = logging.getLogger(__name__)

_savers: dict[tuple[str, str, str], AsyncS3Saver] = {}
"""One saver per (bucket, prefix, table), kept across warm invocations."""


class MalformedRecord(InvalidRequestError):
    """A stream record of a shape DynamoDB never sends (a field missing or of the
    wrong type, a TTL that is no number): dropped with a warning, never reported as
    failed, since Lambda would retry it until it aged out, holding up the records
    behind it on its shard."""


def handler(event: dict[str, Any], context: object = None) -> dict[str, Any]:
    """The Lambda entry point: sweep the threads the batch's TTL deletions name.

    Returns:
        ``{"batchItemFailures": [...]}``: the records whose sweep failed (an AWS
        error: Lambda retries from the first), for ``ReportBatchItemFailures``.
        Malformed records are dropped with a warning, never reported.
    """
    records = event.get("Records") if isinstance(event, dict) else None
    return asyncio.run(ahandle(records))


async def ahandle(records: object) -> dict[str, Any]:
    """:func:`handler` on the running loop (tests, or a handler of your own).

    Cost: nothing for a record it ignores or drops; for a TTL removal, the sweep
    of one thread (see ``Maintenance.sweep_removed``). Records run concurrently.
    """
    if not isinstance(records, list):
        logger.warning("event without a Records list (%r): nothing to sweep", records)
        return {"batchItemFailures": []}
    # on purpose: records are independent, each one's failure is reported alone
    results = await asyncio.gather(
        *(_one(i, r) for i, r in enumerate(records)), return_exceptions=True
    )
    failures = []
    for record, result in zip(records, results, strict=True):
        if isinstance(result, BaseException):
            seq = record["dynamodb"]["SequenceNumber"]  # checked before the sweep began
            logger.error("sweeping after stream record %s failed: %r", seq, result)
            failures.append({"itemIdentifier": seq})
    return {"batchItemFailures": failures}


async def _one(i: int, record: object) -> Report | None:
    try:
        found = expired_thread(record)
    except MalformedRecord as exc:
        logger.warning("dropped stream record %s: %s (not retried)", _named(i, record), exc)
        return None
    except Exception:  # a shape nobody foresaw: retrying cannot help either
        logger.exception("dropped stream record %s: it cannot be read", _named(i, record))
        return None
    if found is None:
        return None
    bucket, prefix, table, thread, expired_at = found
    key = (bucket, prefix, table)
    saver = _savers.get(key)
    if saver is None:
        saver = _savers[key] = AsyncS3Saver(bucket=bucket, prefix=prefix, table=table)
    old = record["dynamodb"]["OldImage"]  # type: ignore[index]
    if _attribute(old, "sk", "S") == STAGE_SK:
        return await _dead_import(saver, thread, old)
    late = _late_of(record)
    if late is not None:
        report = await saver.maintenance().late_pass(thread, late)
        logger.info(
            "late pass of deleted thread %r of s3://%s/%s: %s", thread, bucket, prefix, report
        )
        return report
    report = await saver.maintenance().sweep_removed(thread, expired_at)
    logger.info("swept expired thread %r of s3://%s/%s: %s", thread, bucket, prefix, report)
    return report


async def _dead_import(saver: AsyncS3Saver, thread: str, claim: dict[str, Any]) -> Report:
    """An import's claim removed by its TTL (a day after its hold ran out): the import
    died; its stage goes, and what it wrote with a late pass (``core.staging``)."""
    maintenance = saver.maintenance()
    token, upto = _attribute(claim, STAGE_TOKEN, "S") or "", _attribute(claim, STAGE_UPTO, "S")
    report = await maintenance.drop_stage(thread, token, dead=True)
    if report.skipped:  # nothing staged: what it wrote before its first commit goes
        report = await maintenance.late_pass(thread, Late(int(wall_clock()), upto or ""))
    logger.info("dropped a dead import of thread %r: %s", thread, report)
    return report


def _late_of(record: Any) -> Late | None:
    """The late-pass record a REMOVE names (None: a thread's root)."""
    old = record["dynamodb"]["OldImage"]
    if _attribute(old, "sk", "S") != LATE_SK:
        return None
    due = int(_finite(_attribute(old, LATE_DUE, "N") or "nan", LATE_DUE))
    return Late(due, _attribute(old, LATE_UPTO, "S") or "")


def _named(i: int, record: object) -> str:
    """A record as a warning names it: its eventID and sequence number when it has them."""
    parts = [f"#{i} of the batch"]
    if isinstance(record, dict):
        if isinstance(record.get("eventID"), str):
            parts.append(f"eventID {record['eventID']}")
        change = record.get("dynamodb")
        if isinstance(change, dict) and isinstance(change.get("SequenceNumber"), str):
            parts.append(f"sequence number {change['SequenceNumber']}")
    return ", ".join(parts)


def expired_thread(record: object) -> tuple[str, str, str, str, float] | None:
    """(bucket, prefix, table, thread, expired_at) when ``record`` is the TTL removal
    of a live thread's root item of a deployment this sweeper serves; else None.

    Raises:
        MalformedRecord: a record no DynamoDB stream sends (not an object, a field
            of the wrong type, a TTL or time that is not a finite number).
    """
    if not isinstance(record, dict):
        raise MalformedRecord(f"a {type(record).__name__}, not an object")
    if record.get("eventName") != "REMOVE":
        return None
    change = record.get("dynamodb")
    if not isinstance(change, dict):
        raise MalformedRecord(f'its "dynamodb" is {_shown(change)}, not an object')
    if not isinstance(change.get("SequenceNumber"), str):
        raise MalformedRecord("no SequenceNumber: a failure could not be reported for it")
    old = change.get("OldImage")
    if old is None:
        logger.warning(
            "stream record without OldImage: set the table's stream view type to "
            "OLD_IMAGE or NEW_AND_OLD_IMAGES so the sweeper can tell what expired"
        )
        return None
    if not isinstance(old, dict):
        raise MalformedRecord(f"its OldImage is {_shown(old)}, not an item")
    pk, sk = _attribute(old, "pk", "S"), _attribute(old, "sk", "S")
    late = sk == LATE_SK and pk is not None and LATE_MARK in pk
    staged = sk == STAGE_SK and pk is not None and STAGE_MARK in pk
    if late and pk is not None:  # a deletion's late pass: its record's TTL passed
        _finite(_attribute(old, LATE_DUE, "N") or "nan", LATE_DUE)
        if _attribute(old, LATE_UPTO, "S") is None:
            raise MalformedRecord(f"a late-pass record without {LATE_UPTO!r}")
        pk = pk.replace(LATE_MARK, "", 1)
    elif staged and pk is not None:  # an import that died: its claim's TTL passed
        if _attribute(old, STAGE_TOKEN, "S") is None or _attribute(old, STAGE_UPTO, "S") is None:
            raise MalformedRecord(f"an import's claim without {STAGE_TOKEN!r} or {STAGE_UPTO!r}")
        pk = pk.replace(STAGE_MARK, "", 1)
    elif pk is None or sk != ROOT_SK or "latest_id" not in old or "deleted" in old:
        return None  # a subgraph namespace, a tombstone, the layout marker
    expires = _attribute(old, TTL_ATTRIBUTE, "N")
    if expires is None:
        return None  # no TTL: a hand deletion
    expired_at = _finite(expires, TTL_ATTRIBUTE)
    if expired_at > _seconds(change.get("ApproximateCreationDateTime")):
        return None  # not expired: a hand deletion is not a sweep order
    thread = _attribute(old, "thread_id", "S")
    try:
        named: tuple[str, str] | None = deployment_of(pk)
    except (InvalidIdError, ValueError, UnicodeDecodeError):
        named = ("", "")  # a thread's key whose deployment does not decode
    if thread is None or named is None:
        return None
    want_bucket = os.environ.get("LANGGRAPH_S3_BUCKET")
    if want_bucket is not None:
        bucket, prefix = want_bucket, os.environ.get("LANGGRAPH_S3_PREFIX", "").strip("/")
        if not pk.startswith(deployment_key(bucket, prefix)):
            return None  # another deployment's thread
    elif named == ("", ""):
        logger.warning("cannot tell the deployment of %r: set LANGGRAPH_S3_BUCKET", pk)
        return None
    else:
        bucket, prefix = named
    table = _table(record)
    if table is None:
        logger.warning("stream record without eventSourceARN: set LANGGRAPH_S3_TABLE")
        return None
    return bucket, prefix, table, thread, expired_at


def _shown(value: object) -> str:
    return "null" if value is None else f"a {type(value).__name__}"


def _attribute(item: dict[str, Any], name: str, kind: str) -> str | None:
    """An attribute of a stream image (``{"S": "..."}``), None when absent."""
    if name not in item:
        return None
    value = item[name]
    if not isinstance(value, dict) or not isinstance(value.get(kind), str):
        raise MalformedRecord(f'its {name!r} is {str(value)[:60]}, not a {{"{kind}": string}}')
    return cast(str, value[kind])


def _finite(text: str, name: str) -> float:
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):  # "nan" compares false with every time: never expired
        raise MalformedRecord(f"its {name!r} is {text[:40]!r}, not a time")
    return number


def _table(record: dict[str, Any]) -> str | None:
    arn = str(record.get("eventSourceARN", ""))
    if ":table/" in arn:
        return arn.split(":table/", 1)[1].split("/", 1)[0]
    return os.environ.get("LANGGRAPH_S3_TABLE")


def _seconds(when: Any) -> float:
    """A record's ApproximateCreationDateTime: epoch seconds in Lambda events, a
    datetime from boto3's GetRecords; now when absent."""
    if when is None:
        return wall_clock()
    if isinstance(when, datetime):
        return when.timestamp()
    if isinstance(when, (int, float)) and not isinstance(when, bool) and math.isfinite(when):
        return float(when)
    raise MalformedRecord(f"its ApproximateCreationDateTime is {str(when)[:40]!r}, not a time")
