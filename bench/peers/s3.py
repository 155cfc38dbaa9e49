"""langgraph-checkpoint-s3 0.1.3: AsyncS3CheckpointSaver (aioboto3; a new client per call).

Install (venv-b): pip install "langgraph==1.2.24" "langgraph-checkpoint-s3==0.1.3"
(aioboto3 15.5 -> aiobotocore 2.25.1 / boto3 1.40.61; conflicts with langgraph-checkpoint-aws).
Needs only a bucket. The saver calls session.client("s3") with no endpoint_url, so this
adapter subclasses it to pass one (setting AWS_ENDPOINT_URL_S3 in the environment would
also work, but would redirect every other S3 client in the process). Must be constructed
inside a running event loop (it stores asyncio.get_running_loop()).
It also calls serde.dumps()/serde.loads() for metadata, which langgraph-checkpoint 4.x
serializers no longer have (AttributeError: 'JsonPlusSerializer' object has no attribute
'dumps'), so the adapter passes a JsonPlusSerializer with those two methods added.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aioboto3
from _common import REGION, create_bucket, url_of
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph_checkpoint_s3 import AsyncS3CheckpointSaver

LABEL = "langgraph-checkpoint-s3 (AsyncS3CheckpointSaver)"


class _Serde(JsonPlusSerializer):
    """Adds the dumps/loads pair langgraph-checkpoint < 3 had, on top of the typed API."""

    def dumps(self, obj: Any) -> bytes:
        type_, data = self.dumps_typed(obj)
        return type_.encode() + b"\0" + data

    def loads(self, data: bytes) -> Any:
        type_, _, body = bytes(data).partition(b"\0")
        return self.loads_typed((type_.decode(), body))


class EndpointS3Saver(AsyncS3CheckpointSaver):
    def __init__(self, bucket_name: str, *, endpoint_url: str, **kw: Any) -> None:
        super().__init__(bucket_name, **kw)
        self.endpoint_url = endpoint_url

    @contextlib.asynccontextmanager
    async def _get_s3_client(self):  # type: ignore[override]
        async with self.session.client(
            "s3", endpoint_url=self.endpoint_url, region_name=REGION
        ) as client:
            yield client


@contextlib.asynccontextmanager
async def make(endpoint_url: Any, names: dict[str, str]) -> AsyncIterator[AsyncS3CheckpointSaver]:
    url = url_of(endpoint_url)
    create_bucket(url, names["bucket"])
    yield EndpointS3Saver(
        names["bucket"],
        prefix="checkpoints/",
        session=aioboto3.Session(),
        endpoint_url=url,
        serde=_Serde(),
    )
