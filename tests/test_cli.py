"""The README's main job: `langgraph-s3 demo` on an embedded moto server."""

from __future__ import annotations

import re
import subprocess
import sys
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
    assert "agent> assistant: Oslo is a fine pick." in out  # replies that read as a chat
    assert "agent> assistant: It's sunny and 21C in Oslo" in out  # the tool's answer, used
    assert "agent> assistant: Bergen it is" in out  # the fork went elsewhere
    assert "agent> assistant: → weather(" not in out  # the turn's last message is the reply
    assert "reply #" not in out
    tail = out.split("what to try next:")[1]
    assert [line.split()[0] for line in tail.splitlines() if line.startswith("  .venv")] == [
        ".venv/bin/moto_server",
        ".venv/bin/langgraph-s3",
        ".venv/bin/langgraph-s3",
        ".venv/bin/langgraph-s3",
        ".venv/bin/langgraph-s3",
    ]
    assert "demo --endpoint-url http://127.0.0.1:5000" in tail


def test_demo_against_a_given_endpoint(capsys: Any, s3_fresh: MotoServer) -> None:
    code = main(["demo", "--bucket", "given-bucket", "--endpoint-url", s3_fresh.url])
    assert code == 0
    out = capsys.readouterr().out
    assert "bucket 'given-bucket'" in out and "the configured AWS endpoint" in out
    # the server stays: the demo ends with the commands that browse what it wrote
    browse = out.split("browse what it wrote (the server stays):")[1]
    assert f"langgraph-s3 --endpoint-url {s3_fresh.url} --url 's3://given-bucket/demo?" in browse
    assert "what to try next" not in out
    history = next(ln for ln in browse.splitlines() if " history " in ln).split()
    shown = subprocess.run(
        [sys.executable, "-m", "langgraph_s3.cli", *(a.strip("'") for a in history[1:])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert f"thread {history[-1]!r}: 19 checkpoints, newest first" in shown.stdout
