"""langgraph-checkpoint-objectstorage 0.1.15: ObjectStorageSaver over s3fs (async-native).

Install (venv-a): pip install "langgraph==1.2.24" "langgraph-checkpoint-objectstorage[s3]==0.1.15"
(s3fs 2026.9.0 -> aiobotocore 3.x; also resolves next to langgraph-s3).
Needs only a bucket. s3fs must be created with asynchronous=True inside the running loop:
the saver awaits fs._cat_file/_pipe_file/_find directly on the caller's loop.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import s3fs
from _common import REGION, create_bucket, url_of
from langgraph_checkpoint_objectstorage import ObjectStorageSaver

LABEL = "langgraph-checkpoint-objectstorage (s3fs)"


@contextlib.asynccontextmanager
async def make(endpoint_url: Any, names: dict[str, str]) -> AsyncIterator[ObjectStorageSaver]:
    url = url_of(endpoint_url)
    create_bucket(url, names["bucket"])
    fs = s3fs.S3FileSystem(
        asynchronous=True,
        skip_instance_cache=True,
        endpoint_url=url,
        client_kwargs={"region_name": REGION},
    )
    session = await fs.set_session()
    try:
        yield ObjectStorageSaver(fs, f"{names['bucket']}/checkpoints")
    finally:
        await session.close()
