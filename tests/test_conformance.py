"""The public conformance suite (langgraph-checkpoint-conformance) against AsyncS3Saver."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import Capability
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from helpers import names_of
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing import MotoServer

pytestmark = pytest.mark.engines  # also on SeaweedFS and ministack (conftest)


async def test_conformance_all_capabilities_full(endpoint: str, manifest_kind: str) -> None:
    """Every capability, on either manifest: a DynamoDB table, or the bucket alone (on
    moto, and on SeaweedFS)."""

    @checkpointer_test(name=f"AsyncS3Saver ({manifest_kind})")
    async def factory() -> AsyncIterator[AsyncS3Saver]:
        async with AsyncS3Saver(endpoint_url=endpoint, **names_of(manifest_kind)) as saver:
            await saver.setup()
            yield saver

    report = await validate(factory, progress=ProgressCallbacks.verbose())
    report.print_report()
    results = report.results
    # every capability the installed suite knows: today's eight, and any a newer release
    # adds (0.0.3's DELTA_CHANNEL_HISTORY), each detected and passed in full
    known = {str(c.value) for c in Capability}
    assert {str(getattr(c, "value", c)) for c in results} == known
    assert known >= {"put", "put_writes", "get_tuple", "list", "delete_thread"}
    assert known >= {"delete_for_runs", "copy_thread", "prune"}
    failures = {cap: r.failures for cap, r in results.items() if r.failures}
    assert not failures, failures
    assert all(r.detected and r.passed for r in results.values()), results
    assert sum(r.tests_passed for r in results.values()) >= 81  # 0.0.2's count, at least
    assert sum(r.tests_skipped for r in results.values()) == 0


@pytest.mark.parametrize("manifest_kind", ["dynamodb", "s3"])  # KMS: moto's
async def test_conformance_with_every_thread_sealed_for_a_subject(
    s3_fresh: MotoServer, manifest_kind: str
) -> None:
    """The same suite, every thread sealed with one subject's key (``docs/subjects.md``):
    sealing changes nothing the contract sees."""
    import boto3

    from langgraph_s3 import SubjectPolicy
    from langgraph_s3.core import sealing

    kms = boto3.client("kms", endpoint_url=s3_fresh.url, region_name="us-east-1")
    key = kms.create_key(Description="conformance")["KeyMetadata"]["KeyId"]
    policy = SubjectPolicy(of_thread=lambda metadata: "conformance")
    buckets: list[str] = []

    @checkpointer_test(name="AsyncS3Saver (subjects)")
    async def factory() -> AsyncIterator[AsyncS3Saver]:
        names = names_of(manifest_kind)
        buckets.append(names["bucket"])
        async with AsyncS3Saver(
            endpoint_url=s3_fresh.url, subjects=policy, kms_key=key, **names
        ) as saver:
            await saver.setup()
            yield saver

    report = await validate(factory)
    failures = {cap: r.failures for cap, r in report.results.items() if r.failures}
    assert not failures, failures
    assert all(r.detected and r.passed for r in report.results.values()), report.results
    assert sum(r.tests_passed for r in report.results.values()) >= 81
    s3 = boto3.client("s3", endpoint_url=s3_fresh.url, region_name="us-east-1")
    bodies = [
        s3.get_object(Bucket=b, Key=o["Key"])["Body"].read()
        for b in buckets
        for o in s3.list_objects_v2(Bucket=b).get("Contents", [])
        if o["Key"].startswith("threads/") and o["Size"] > 22  # markers aside
    ]
    assert len(bodies) > 50 and all(sealing.is_sealed(b) for b in bodies)
