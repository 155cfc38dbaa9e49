"""What the peer adapters share: the endpoint as a URL, and a bucket made with boto3."""

from __future__ import annotations

import contextlib
from typing import Any

import boto3

REGION = "us-east-1"


def url_of(endpoint: Any) -> str:
    """A URL string, or a MotoServer's ``url``."""
    return str(getattr(endpoint, "url", endpoint))


def create_bucket(url: str, bucket: str) -> None:
    s3 = boto3.client("s3", endpoint_url=url, region_name=REGION)
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
        s3.create_bucket(Bucket=bucket)
