"""Run by tests/test_telemetry.py in a process of its own (OpenTelemetry's providers
are global): a chat turn and a cold read on the endpoint given, with the SDK's
in-memory exporters; prints what they recorded as JSON."""

from __future__ import annotations

import asyncio
import json
import logging
import sys

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing.graphs import chat_graph
from langgraph_s3.testing.moto import moto_server as local_moto_server
from langgraph_s3.testing.moto import unique_names, use_dummy_credentials


class Unended(SpanProcessor):
    """The spans started and not (yet) ended."""

    def __init__(self) -> None:
        self.open: dict[int, str] = {}

    def on_start(self, span, parent_context=None):  # type: ignore[no-untyped-def]
        self.open[span.context.span_id] = span.name

    def on_end(self, span):  # type: ignore[no-untyped-def]
        self.open.pop(span.context.span_id, None)


spans = InMemorySpanExporter()
unended = Unended()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(spans))
provider.add_span_processor(unended)
trace.set_tracer_provider(provider)
reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
lines: list[str] = []


class Keep(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        lines.append(record.getMessage())


logging.getLogger("langgraph_s3.calls").addHandler(Keep())
logging.getLogger("langgraph_s3.calls").setLevel(logging.DEBUG)


async def main(url: str) -> None:
    use_dummy_credentials()
    names = unique_names()
    async with AsyncS3Saver(endpoint_url=url, **names) as saver:
        await saver.setup()
        graph = chat_graph().compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": "t"}}
        await graph.ainvoke({"messages": [("user", "what is the weather?")]}, cfg)
        total = saver.stats.snapshot()["requests"]
    async with AsyncS3Saver(endpoint_url=url, **names) as cold:
        with cold.stats.label("read"):
            await cold.aget_tuple(cfg)
        read = cold.stats.labels["read"]
        listed = [t async for t in cold.alist(cfg, limit=2)]
    # calls cut off mid-request (every request takes 0.3 s, the caller waits 0.1 s):
    # botocore never reports back on such an attempt; its span ends all the same
    cancelled_calls = 0
    with local_moto_server() as slow:
        async with AsyncS3Saver(endpoint_url=slow.url, **names) as saver:
            await saver.setup()
            with slow.delayed(0.3):
                for _ in range(3):
                    try:
                        await asyncio.wait_for(saver.aget_tuple(cfg), 0.1)
                    except TimeoutError:
                        cancelled_calls += 1
    out = {
        "spans": [
            {
                "name": s.name,
                "attributes": dict(s.attributes or {}),
                "status": s.status.status_code.name,
                "kind": s.kind.name,
                "span_id": s.context.span_id,
                "parent_id": s.parent.span_id if s.parent is not None else None,
            }
            for s in spans.get_finished_spans()
        ],
        "metrics": {
            m.name: [
                {
                    "attributes": dict(p.attributes or {}),
                    "value": getattr(p, "value", None),
                    "count": getattr(p, "count", None),
                    "sum": getattr(p, "sum", None),
                }
                for p in m.data.data_points
            ]
            for rm in reader.get_metrics_data().resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
        },
        "setup_and_turn_requests": total,
        "read": {
            "requests": read.requests,
            "round_trips": read.round_trips,
            "bytes_sent": read.bytes_sent,
        },
        "listed": len(listed),
        "cancelled_calls": cancelled_calls,
        "unended": list(unended.open.values()),
        "log": lines,
    }
    print(json.dumps(out, default=str))


asyncio.run(main(sys.argv[1]))
