"""The IAM actions the library needs, derived from the API calls it makes, and the
manifest partition keys one deployment's runtime may touch.

The terraform module's agent policy grants exactly ``RUNTIME_ACTIONS``, its DynamoDB
ones only on the partition keys :func:`leading_keys` names (``dynamodb:LeadingKeys``,
``ForAllValues:StringLike``); a test runs the saver and the store against what
terraform created and checks that every call they made maps into it, and another
renders the module's patterns for awkward buckets and prefixes and compares them
with :func:`leading_keys`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from langgraph_s3.manifest.decide import deployment_key

# API operation (as botocore names it) -> the IAM actions it needs
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
    # IAM authorizes each part of a transaction by its own action: a subgraph's first
    # commit (an Update and a ConditionCheck), a failed deletion's revive (Puts, Deletes)
    "dynamodb.TransactWriteItems": (
        "dynamodb:ConditionCheckItem",
        "dynamodb:UpdateItem",
        "dynamodb:PutItem",
        "dynamodb:DeleteItem",
    ),
    "dynamodb.Query": ("dynamodb:Query",),
    "dynamodb.Scan": ("dynamodb:Scan",),
}

WHOLE_TABLE_OPERATIONS = frozenset({"dynamodb.Scan"})
"""Reads of every deployment's items: a Scan names no partition key, so
``dynamodb:LeadingKeys`` cannot limit it (IAM evaluates ``ForAllValues`` over no keys
as true). The runtime makes none. Listing every thread (``list(None)``,
``list_threads``), the TTL sweep, ``setup()``'s backfills and ``delete_for_runs`` on a
deployment whose run index is not marked complete do: an operator's role, or the
archiver's."""

RUNTIME_ACTIONS: frozenset[str] = frozenset(
    a for op, acts in OPERATION_ACTIONS.items() if op not in WHOLE_TABLE_OPERATIONS for a in acts
)
"""What an agent's role needs at run time (the terraform module's agent policy)."""
OBJECT_MANIFEST_ACTIONS: frozenset[str] = frozenset(
    {"s3:ListBucketVersions", "s3:DeleteObjectVersion"}
)
"""Granted beside the S3 ones of ``RUNTIME_ACTIONS`` when the manifest is in the bucket
(``manifest="s3"``), on its ``manifest/`` prefix only: forgetting a subject deletes its
key record's noncurrent versions (ListObjectVersions, DeleteObjects by version id)."""
WHOLE_TABLE_ACTIONS: frozenset[str] = frozenset(
    a for op in WHOLE_TABLE_OPERATIONS for a in OPERATION_ACTIONS[op]
)
"""What a role that reads every deployment needs besides ``RUNTIME_ACTIONS``."""

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


def actions_for(operation: str) -> tuple[str, ...]:
    """IAM actions for one recorded operation; KeyError for one we never expect."""
    return OPERATION_ACTIONS[operation]


def leading_keys(bucket: str, prefix: str) -> tuple[str, ...]:
    """The ``dynamodb:LeadingKeys`` patterns (IAM ``StringLike``) of one deployment.

    Every partition key its runtime reads or writes starts with the deployment key
    ``{bucket}/{prefix}/`` (``manifest.deployment_key``: each part ``keys.encode``'d,
    so neither holds a ``/`` and prefix ``app`` is ``app/``, never a start of ``app2/``
    or of ``app/eu``'s ``app~2feu/``): its threads' items (``+ {thread}``), its marker
    (the key itself), its run index (``+ ~runs/{run}``), the doctor's probe
    (``+ ~doctor~{id}``) and the hash keys of its metadata indexes (``+ {value}``).
    terraform/main.tf renders the same patterns (``local.leading_keys``).
    """
    return (f"{deployment_key(bucket, prefix)}*",)


def like(pattern: str, value: str) -> bool:
    """IAM's ``StringLike``: ``*`` any run of characters, ``?`` one, case-sensitive."""
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch("".join(parts), value, re.DOTALL) is not None


def allows(patterns: Iterable[str], pk: str) -> bool:
    """Whether ``ForAllValues:StringLike`` on ``patterns`` lets a request name ``pk``."""
    return any(like(p, pk) for p in patterns)
