"""The suite's SeaweedFS launcher (``langgraph_s3.testing.seaweed``): a server on free
ports beside the session's own, and more buckets than ``weed mini`` would take writes
in by default (it caps its volumes at 25, one per bucket written)."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import aiobotocore.session

from langgraph_s3.testing.seaweed import seaweed_server

BUCKETS = 40
"""More than ``weed mini``'s default 25 volumes."""


async def _first_writes(url: str) -> list[str]:
    """Create ``BUCKETS`` buckets and write each one's first object, all at once; the
    keys listed back, one per bucket."""
    session = aiobotocore.session.get_session()
    async with session.create_client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    ) as s3:

        async def one(n: int) -> str:
            bucket = f"first-write-{n}"
            await s3.create_bucket(Bucket=bucket)
            await s3.put_object(Bucket=bucket, Key="k", Body=b"x", IfNoneMatch="*")
            listed = await s3.list_objects_v2(Bucket=bucket)
            return f"{bucket}/{listed['Contents'][0]['Key']}"

        return await asyncio.gather(*(one(n) for n in range(BUCKETS)))


def test_a_second_server_runs_beside_the_sessions_and_takes_writes_in_many_buckets(
    seaweed_url: str,
) -> None:
    with seaweed_server() as url:
        assert urlsplit(url).port != urlsplit(seaweed_url).port  # free ports, no clash
        written = asyncio.run(_first_writes(url))
    assert sorted(written) == sorted(f"first-write-{n}/k" for n in range(BUCKETS))
