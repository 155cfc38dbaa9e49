"""The public conformance suite (langgraph-checkpoint-conformance) against AsyncS3Saver."""

from __future__ import annotations

from collections.abc import AsyncIterator

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing import MotoServer, unique_names


async def test_conformance_all_capabilities_full(s3_fresh: MotoServer) -> None:
    @checkpointer_test(name="AsyncS3Saver")
    async def factory() -> AsyncIterator[AsyncS3Saver]:
        async with AsyncS3Saver(endpoint_url=s3_fresh.url, **unique_names()) as saver:
            await saver.setup()
            yield saver

    report = await validate(factory, progress=ProgressCallbacks.verbose())
    report.print_report()
    results = report.results
    assert len(results) == 8
    failures = {cap: r.failures for cap, r in results.items() if r.failures}
    assert not failures, failures
    assert all(r.detected and r.passed for r in results.values()), results
    assert sum(r.tests_passed for r in results.values()) == 81
    assert sum(r.tests_skipped for r in results.values()) == 0
