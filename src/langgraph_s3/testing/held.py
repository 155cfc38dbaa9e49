"""What a deployment's manifest still holds: the committed checkpoints whose envelopes
sit in their items (``inline:<id>`` attributes, ``manifest/schema.py``) because no write
has yet known their S3 objects stored, read straight from the table and the bucket
(botocore, not the library: a test or a benchmark checks the library with it).

Cost: a Scan of the table and a listing of the bucket: for test-sized deployments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langgraph_s3.manifest.schema import INLINE_PREFIX, inline_copies


@dataclass(frozen=True)
class Held:
    """The copies a table's items hold, and which of them have no S3 object."""

    copies: int = 0
    items: int = 0
    """Items holding at least one copy."""
    bytes: int = 0
    """Their envelopes' bytes."""
    missing: int = 0
    """Held checkpoints whose object is not in the bucket: only the item has them."""
    partitions: dict[str, int] = field(default_factory=dict)
    """Held copies by partition key (one a thread: the deployment, then the thread id)."""

    def line(self) -> str:
        """One line for a report."""
        return (
            f"{self.copies} copies held in {self.items} items ({self.bytes / 1024:.1f} KiB), "
            f"{self.missing} of them with no S3 object"
        )


def held(endpoint_url: str, table: str, bucket: str) -> Held:
    """Read every item of ``table`` and every key of ``bucket`` (botocore's own
    clients, the environment's credentials and region)."""
    import botocore.session

    session = botocore.session.get_session()
    ddb = session.create_client("dynamodb", endpoint_url=endpoint_url)
    s3 = session.create_client("s3", endpoint_url=endpoint_url)
    try:
        keys = [
            obj["Key"]
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for obj in page.get("Contents", [])
        ]
        items: list[dict[str, Any]] = [
            item
            for page in ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
            for item in page["Items"]
            if any(name.startswith(INLINE_PREFIX) for name in item)
        ]
    finally:
        ddb.close()
        s3.close()
    copies, missing, partitions = 0, 0, dict[str, int]()
    size = 0
    for item in items:
        found = inline_copies(item)
        pk = str(item.get("pk", {}).get("S", ""))
        partitions[pk] = partitions.get(pk, 0) + len(found)
        copies += len(found)
        size += sum(len(c.body) for c in found)
        missing += sum(1 for c in found if not any(k.endswith(c.tail) for k in keys))
    return Held(copies, len(items), size, missing, partitions)
