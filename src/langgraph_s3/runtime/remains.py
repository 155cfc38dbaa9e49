"""What a deployment keeps beyond the library's reach, and until when: the copies a
forgetting's receipt and a sealing migration's report name (bucket versions, the
table's stream and point-in-time backups), read from the deployment's own settings,
best effort (a narrow policy that may not read them gets the longest bound, said so).

Cost: up to four requests (GetBucketVersioning, GetBucketLifecycleConfiguration,
DescribeTable, DescribeContinuousBackups), once per call.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from langgraph_s3.aws import door
from langgraph_s3.aws.clients import ClientFactory

__all__ = ["PITR_DAYS", "STREAM_HOURS", "iso", "noncurrent_days", "table_copies", "versions"]

STREAM_HOURS = 24
"""How long a DynamoDB stream keeps a record."""
PITR_DAYS = 35
"""The longest point-in-time recovery window (a table may be set to fewer days)."""


def iso(epoch: float | None) -> str | None:
    """Epoch seconds as an ISO 8601 UTC time, to the second."""
    if epoch is None:
        return None
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="seconds")


async def asked(clients: ClientFactory, service: str, op: str, **params: Any) -> Any:
    """A describe call's answer; None when it was refused (a narrow policy) or failed."""
    try:
        return await door.call(clients, service, op, **params)
    except Exception:
        return None


def noncurrent_days(rules: list[dict[str, Any]]) -> int | None:
    """The days after which an enabled rule covering the whole bucket expires noncurrent
    versions (the shortest), None when none does."""
    days = [
        int(r["NoncurrentVersionExpiration"]["NoncurrentDays"])
        for r in rules
        if r.get("Status") == "Enabled"
        and "NoncurrentDays" in r.get("NoncurrentVersionExpiration", {})
        and _whole_bucket(r)
    ]
    return min(days) if days else None


def _whole_bucket(rule: dict[str, Any]) -> bool:
    """Whether a rule covers every object: no prefix, tag or size filter (an empty
    ``Filter``, or one whose prefix alone is empty)."""
    if rule.get("Prefix"):
        return False
    found = rule.get("Filter")
    return not found or (set(found) == {"Prefix"} and not found["Prefix"])


async def versions(
    clients: ClientFactory, bucket: str, at: float, what: str
) -> list[dict[str, Any]]:
    """The bucket's noncurrent versions of what was rewritten or deleted at ``at`` (none
    when versioning was never on)."""
    got = await asked(clients, "s3", "get_bucket_versioning", Bucket=bucket)
    if got is not None and got.get("Status") not in ("Enabled", "Suspended"):
        return []
    life = await asked(clients, "s3", "get_bucket_lifecycle_configuration", Bucket=bucket)
    days = noncurrent_days((life or {}).get("Rules", []))
    until = iso(at + days * 86400) if days is not None else "until deleted"
    why = (
        f"the bucket expires noncurrent versions after {days} days"
        if days is not None
        else "no lifecycle rule expires noncurrent versions: add one, or delete them"
    )
    if got is None:
        why += " (whether versioning is on was not readable)"
    return [{"what": what, "readable_until": until, "why": why}]


async def table_copies(
    clients: ClientFactory, table: str, at: float, what: str
) -> list[dict[str, Any]]:
    """The table's stream records and point-in-time backups of items changed at ``at``."""
    out: list[dict[str, Any]] = []
    desc = await asked(clients, "dynamodb", "describe_table", TableName=table)
    if desc is None or desc.get("Table", {}).get("StreamSpecification", {}).get("StreamEnabled"):
        out.append(
            {
                "what": f"the table's stream records of {what}",
                "readable_until": iso(at + STREAM_HOURS * 3600),
                "why": "a DynamoDB stream keeps records 24 hours"
                + ("" if desc is not None else " (whether one is on was not readable)"),
            }
        )
    pitr = await asked(clients, "dynamodb", "describe_continuous_backups", TableName=table)
    point = (
        (pitr or {})
        .get("ContinuousBackupsDescription", {})
        .get("PointInTimeRecoveryDescription", {})
    )
    if pitr is None or point.get("PointInTimeRecoveryStatus") == "ENABLED":
        days = int(point.get("RecoveryPeriodInDays", PITR_DAYS))
        out.append(
            {
                "what": f"point-in-time backups of the table ({what})",
                "readable_until": iso(at + days * 86400),
                "why": f"restorable for {days} days"
                + ("" if pitr is not None else " (the setting was not readable: at most)"),
            }
        )
    return out
