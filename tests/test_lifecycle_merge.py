"""setup() merges the store's lifecycle rules into the bucket's configuration: a PUT
replaces it whole, so the bucket's own rules and its TransitionDefaultMinimumObjectSize
(which decides whether small objects transition at all) must be written back."""

from __future__ import annotations

import boto3

from langgraph_s3 import AsyncS3Store
from langgraph_s3.store.facade import lifecycle_rules
from langgraph_s3.testing import MotoServer, unique_names

MINE = {
    "ID": "my-archive",
    "Status": "Enabled",
    "Filter": {"Prefix": "reports/"},
    "Transitions": [{"Days": 30, "StorageClass": "STANDARD_IA"}],
}


async def test_setup_keeps_the_buckets_rules_and_minimum_object_size(
    s3_fresh: MotoServer,
) -> None:
    bucket = unique_names()["bucket"]
    s3 = boto3.client("s3", endpoint_url=s3_fresh.url)
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_lifecycle_configuration(
        Bucket=bucket,
        LifecycleConfiguration={"Rules": [MINE]},
        TransitionDefaultMinimumObjectSize="varies_by_storage_class",
    )
    async with AsyncS3Store(endpoint_url=s3_fresh.url, bucket=bucket, prefix="mem") as store:
        await store.setup()
        await store.setup()  # again: nothing to change
    got = s3.get_bucket_lifecycle_configuration(Bucket=bucket)
    assert got["TransitionDefaultMinimumObjectSize"] == "varies_by_storage_class"
    ids = [r["ID"] for r in got["Rules"]]
    assert ids == ["my-archive", *(r["ID"] for r in lifecycle_rules())]
    assert got["Rules"][0]["Transitions"] == MINE["Transitions"]


async def test_the_strict_server_keeps_the_minimum_size_as_s3_does(s3_fresh: MotoServer) -> None:
    bucket = unique_names()["bucket"]
    s3 = boto3.client("s3", endpoint_url=s3_fresh.url)
    s3.create_bucket(Bucket=bucket)
    for size in ("varies_by_storage_class", None):
        extra = {"TransitionDefaultMinimumObjectSize": size} if size else {}
        s3.put_bucket_lifecycle_configuration(
            Bucket=bucket, LifecycleConfiguration={"Rules": [MINE]}, **extra
        )
        got = s3.get_bucket_lifecycle_configuration(Bucket=bucket)
        assert got["TransitionDefaultMinimumObjectSize"] == (size or "all_storage_classes_128K")
