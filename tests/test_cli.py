"""The README's main job: `langgraph-s3 demo` on an embedded moto server."""

from __future__ import annotations

import re
from typing import Any

from langgraph_s3.ops.tools.cli import main
from langgraph_s3.testing import MotoServer


def test_demo_on_embedded_moto(capsys: Any, monkeypatch: Any) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    assert main(["demo", "--thread", "readme"]) == 0
    out = capsys.readouterr().out
    assert "on an embedded moto server" in out
    assert "resumed with 8 messages" in out
    assert "history of thread 'readme' (17 checkpoints, newest first)" in out
    assert "the thread now follows the fork: 4 messages (the original branch had 12" in out
    # every phase reports its cost, and resuming is a cold read of 3 round trips
    resume = re.search(r"resume: read latest state\s+(\d+)\s+(\d+)", out)
    assert resume is not None and resume.group(2) == "3"
    for phase in ("setup", "turn 1", "turn 5", "history", "fork from turn 1"):
        assert phase in out
    # replies whole, as the conversation views show them; then what to try next
    assert 'agent> assistant: reply #1 to "Hi! I\'m planning a trip to Oslo."' in out
    assert "agent> assistant: → weather(" not in out  # the turn's last message is the reply
    tail = out.split("what to try next:")[1]
    assert [line.split()[1] for line in tail.splitlines() if line.startswith("  .venv")] == [
        "setup",
        "lambda",
        "--help",
    ]


def test_demo_against_a_given_endpoint(capsys: Any, s3_fresh: MotoServer) -> None:
    code = main(["demo", "--bucket", "given-bucket", "--endpoint-url", s3_fresh.url])
    assert code == 0
    out = capsys.readouterr().out
    assert "bucket 'given-bucket'" in out and "the configured AWS endpoint" in out
