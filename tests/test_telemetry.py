"""OpenTelemetry: a span per saver call with what it cost, the same
figures as metrics, and a debug log line; checked with the SDK's in-memory exporters
in a process of its own (the providers are global)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from langgraph_s3.testing import MotoServer

SCRIPT = Path(__file__).parent / "scripts" / "otel_run.py"


def test_spans_metrics_and_log_lines_say_what_each_call_cost(s3_fresh: MotoServer) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), s3_fresh.url], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    every = got["spans"]
    spans = [s for s in every if s["name"].startswith("langgraph_s3.")]  # one per call
    requests = [s for s in every if not s["name"].startswith("langgraph_s3.")]  # per attempt
    names = {s["name"] for s in spans}
    assert {"langgraph_s3.aput", "langgraph_s3.aput_writes", "langgraph_s3.aget_tuple"} <= names
    assert "langgraph_s3._asetup" in names and "langgraph_s3.alist" in names
    failed = [s for s in spans if s["status"] == "ERROR"]  # the three cut off, below
    assert [s["name"] for s in failed] == ["langgraph_s3.aget_tuple"] * 3, failed
    for s in spans:
        a = s["attributes"]
        assert a["langgraph_s3.requests"] >= 0 and "langgraph_s3.retries" in a, s
        if s["name"] in ("langgraph_s3.aput", "langgraph_s3.aput_writes"):
            assert a["langgraph_s3.thread_id"] == "t" and a["langgraph_s3.checkpoint_ns"] == ""
            assert a["langgraph_s3.requests"] >= 1 and a["langgraph_s3.bytes_sent"] > 0
    # the cold read's span says exactly what the saver's own count says
    reads = [
        s["attributes"]
        for s in spans
        if s["name"] == "langgraph_s3.aget_tuple" and s["status"] != "ERROR"
    ]
    cold = reads[-1]
    assert (
        cold["langgraph_s3.requests"],
        cold["langgraph_s3.round_trips"],
        cold["langgraph_s3.bytes_sent"],
    ) == (got["read"]["requests"], got["read"]["round_trips"], got["read"]["bytes_sent"])
    assert cold["langgraph_s3.round_trips"] == 3
    # metrics: requests by call add up to every request the spans counted
    counted = sum(s["attributes"]["langgraph_s3.requests"] for s in spans)
    recorded = sum(p["value"] for p in got["metrics"]["langgraph_s3.requests"])
    assert recorded == counted > 0
    assert got["setup_and_turn_requests"] <= counted
    assert {"langgraph_s3.round_trips", "langgraph_s3.duration", "langgraph_s3.bytes_sent"} <= set(
        got["metrics"]
    )
    # a span per HTTP attempt, child of its call's span: as many as the call counted
    assert requests and all(r["kind"] == "CLIENT" for r in requests)
    by_id = {s["span_id"]: s for s in spans}
    assert all(r["parent_id"] in by_id for r in requests), "a request span outside any call"
    # a put_writes returns once the item holds the writes; their object's PUT follows
    assert any(r["attributes"].get("langgraph_s3.after_call") for r in requests)
    for s in spans:  # a held object's PUT goes on after its call: marked, not counted
        children = [
            r
            for r in requests
            if r["parent_id"] == s["span_id"] and not r["attributes"].get("langgraph_s3.after_call")
        ]
        assert len(children) == s["attributes"]["langgraph_s3.requests"], s["name"]
    cold_span = [
        s for s in spans if s["name"] == "langgraph_s3.aget_tuple" and s["status"] != "ERROR"
    ][-1]
    cold_requests = [r for r in requests if r["parent_id"] == cold_span["span_id"]]
    assert {r["name"] for r in cold_requests} <= {
        "S3.GetObject",
        "S3.ListObjectsV2",
        "DynamoDB.GetItem",
        "DynamoDB.BatchGetItem",
    }
    for r in cold_requests:
        a = r["attributes"]
        assert a["rpc.system"] == "aws-api" and a["rpc.service"] in ("S3", "DynamoDB")
        assert a["rpc.method"] == r["name"].split(".")[1]
        assert a["http.response.status_code"] in (200, 206, 404) and a["aws.request_id"]
        assert a["server.address"] == "127.0.0.1" and r["status"] != "ERROR"
    # an attempt cut off by a cancel is a span all the same, ended, saying so
    assert got["cancelled_calls"] == 3 and got["unended"] == []
    cut = [r for r in requests if r["attributes"].get("error.type") == "CancelledError"]
    assert len(cut) >= 3 and all(r["status"] == "ERROR" for r in cut)
    # a debug line per call, with the figures and no values
    assert any(line.startswith("aget_tuple t: ") and "round trips" in line for line in got["log"])
    assert not any("weather" in line for line in got["log"])


def test_a_failing_tracer_never_fails_a_request(monkeypatch: pytest.MonkeyPatch) -> None:
    from langgraph_s3.aws import telemetry

    class Broken:
        def start_span(self, *a: Any, **kw: Any) -> Any:
            raise RuntimeError("exporter down")

    class BadSpan:
        def set_attribute(self, *a: Any) -> None:
            raise RuntimeError("span gone")

    monkeypatch.setattr(telemetry, "_otel", lambda: (Broken(), {}))
    started, ended = (h for _, h in telemetry.request_hooks("s3"))
    request = type("Request", (), {"url": "https://b.s3.amazonaws.com/k", "method": "GET"})()
    started(request, event_name="before-send.s3.GetObject")  # no exception
    ended(attempts=1, response=None, caught_exception=None)
    token = telemetry._REQUEST.set(BadSpan())
    try:
        ended(attempts=2, response=None, caught_exception=None)  # no exception
        assert telemetry._REQUEST.get() is None
        telemetry._REQUEST.set(BadSpan())
        telemetry.abandon_request_span("CancelledError")  # no exception
        assert telemetry._REQUEST.get() is None
    finally:
        telemetry._REQUEST.reset(token)
