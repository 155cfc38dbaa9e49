"""The IAM actions the library needs, derived from the API calls it makes.

The terraform module's policy grants exactly ``RUNTIME_ACTIONS``; a test runs
the saver and the store against what terraform created and checks that
every call they made maps into it.
"""

from __future__ import annotations

# API operation (as botocore names it) -> the IAM actions it needs at run time
OPERATION_ACTIONS: dict[str, tuple[str, ...]] = {
    "s3.GetObject": ("s3:GetObject",),
    "s3.HeadObject": ("s3:GetObject",),  # after S3 kept answering 409 to a write
    "s3.PutObject": ("s3:PutObject",),
    "s3.PutObject+tagging": ("s3:PutObject", "s3:PutObjectTagging"),
    "s3.CopyObject": ("s3:GetObject", "s3:PutObject", "s3:GetObjectTagging", "s3:PutObjectTagging"),
    "s3.DeleteObjects": ("s3:DeleteObject",),
    "s3.DeleteObject": ("s3:DeleteObject", "s3:GetObject"),  # If-Match needs GetObject
    "s3.ListObjectsV2": ("s3:ListBucket",),
    "dynamodb.GetItem": ("dynamodb:GetItem",),
    "dynamodb.BatchGetItem": ("dynamodb:BatchGetItem",),
    "dynamodb.UpdateItem": ("dynamodb:UpdateItem",),
    "dynamodb.PutItem": ("dynamodb:PutItem",),
    "dynamodb.DeleteItem": ("dynamodb:DeleteItem",),
    "dynamodb.Query": ("dynamodb:Query",),
    "dynamodb.Scan": ("dynamodb:Scan",),
}

# setup() only: creating the bucket, the table and the lifecycle rules; the
# terraform module does this instead, so the agent's policy leaves them out
SETUP_OPERATIONS = frozenset(
    {
        "s3.HeadBucket",
        "s3.CreateBucket",
        "s3.GetBucketLifecycleConfiguration",
        "s3.PutBucketLifecycleConfiguration",
        "dynamodb.DescribeTable",
        "dynamodb.CreateTable",
        "dynamodb.UpdateTimeToLive",
    }
)

RUNTIME_ACTIONS: frozenset[str] = frozenset(a for acts in OPERATION_ACTIONS.values() for a in acts)


def actions_for(operation: str) -> tuple[str, ...]:
    """IAM actions for one recorded operation; KeyError for one we never expect."""
    return OPERATION_ACTIONS[operation]
