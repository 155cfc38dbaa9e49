"""langgraph-checkpoint-tigris 0.1.0: AsyncTigrisSaver (aioboto3; a new S3 client per call).

Install (venv-b): pip install "langgraph==1.2.24" "langgraph-checkpoint-tigris==0.1.0"
(aioboto3 15.5 -> aiobotocore 2.25.1 / boto3 1.40.61; conflicts with langgraph-checkpoint-aws).
Needs only a bucket (setup() just does HeadBucket). Default region is "auto": pass us-east-1.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from _common import REGION, create_bucket, url_of
from langgraph.checkpoint.tigris.aio import AsyncTigrisSaver

LABEL = "langgraph-checkpoint-tigris (AsyncTigrisSaver)"


@contextlib.asynccontextmanager
async def make(endpoint_url: Any, names: dict[str, str]) -> AsyncIterator[AsyncTigrisSaver]:
    url = url_of(endpoint_url)
    create_bucket(url, names["bucket"])
    async with AsyncTigrisSaver.from_conn_string(
        names["bucket"], prefix="checkpoints", endpoint_url=url, region_name=REGION
    ) as saver:
        await saver.setup()
        yield saver
