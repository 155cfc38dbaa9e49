"""langgraph-checkpoint-aws 1.2.6: DynamoDBSaver (sync boto3; a* methods = run_in_executor).

Install (venv-a): pip install "langgraph==1.2.24" "langgraph-checkpoint-aws==1.2.6"
Needs boto3>=1.43.64, so it can NOT share a venv with aioboto3 15.5 (botocore 1.40).
Table: PK (S) HASH + SK (S) RANGE, any billing mode; no GSI. The bucket is only used
for items > 350 KB (s3_offload_config); we create it so the saver can offload.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import boto3
from _common import REGION, url_of
from langgraph_checkpoint_aws import DynamoDBSaver

LABEL = "langgraph-checkpoint-aws (DynamoDBSaver)"


def create_resources(endpoint_url: str, names: dict[str, str]) -> None:
    ddb = boto3.client("dynamodb", endpoint_url=endpoint_url, region_name=REGION)
    s3 = boto3.client("s3", endpoint_url=endpoint_url, region_name=REGION)
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
        s3.create_bucket(Bucket=names["bucket"])
    if names["table"] in ddb.list_tables()["TableNames"]:
        return
    ddb.create_table(
        TableName=names["table"],
        KeySchema=[
            {"AttributeName": "PK", "KeyType": "HASH"},
            {"AttributeName": "SK", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "PK", "AttributeType": "S"},
            {"AttributeName": "SK", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.get_waiter("table_exists").wait(TableName=names["table"])


@contextlib.asynccontextmanager
async def make(endpoint_url: Any, names: dict[str, str]) -> AsyncIterator[DynamoDBSaver]:
    url = url_of(endpoint_url)
    create_resources(url, names)
    saver = DynamoDBSaver(
        table_name=names["table"],
        region_name=REGION,
        endpoint_url=url,
        s3_offload_config={"bucket_name": names["bucket"], "endpoint_url": url},
    )
    yield saver
