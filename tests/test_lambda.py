"""examples/lambda: the handler called as Lambda would, warm and cold, on one thread.

The handler keeps one event loop (``asyncio.Runner``) at module scope, so warm
invocations reuse its clients and their connections.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import urllib.parse
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from helpers import dropped_connections
from langgraph_s3 import S3Saver
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.held import held
from langgraph_s3.testing.lambda_host import LambdaHost
from langgraph_s3.testing.moto import TcpRelay

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "lambda"


def load_handler(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLE / "handler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # module scope: builds the saver, no event loop
    return module


@pytest.fixture
def lambda_env(s3_fresh: MotoServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    names = unique_names()
    conn = f"s3://{names['bucket']}/lambda?table={names['table']}"
    with S3Saver.from_url(conn, endpoint_url=s3_fresh.url) as saver:
        saver.setup()  # what terraform does in production
    env = {"LANGGRAPH_S3_CHECKPOINTER": conn, "AWS_ENDPOINT_URL": s3_fresh.url}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


def cold(
    env: dict[str, str],
    event: dict[str, Any],
    *,
    cwd: Path = EXAMPLE,
    isolated: bool = False,
    module: str = "handler",
) -> dict[str, Any]:
    """One invocation in a fresh Python process: a cold start."""
    code = (
        f"import json, sys, {module} as handler; "
        "print(json.dumps(handler.handler(json.loads(sys.argv[1]), None)))"
    )

    full = {**os.environ, **env, "PYTHONPATH": str(cwd)}
    cmd = [sys.executable, *(["-S"] if isolated else []), "-c", code, json.dumps(event)]
    proc = subprocess.run(cmd, cwd=cwd, env=full, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the process exits cleanly: its loop, and so the clients, closed at exit
    assert "Unclosed client session" not in proc.stderr, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_warm_and_cold_invocations_continue_one_conversation(lambda_env: dict[str, str]) -> None:
    handler = load_handler("lambda_handler_warm")
    try:
        thread = "user-42"
        first = handler.handler({"thread_id": thread, "message": "Hi, I'm planning a trip"}, None)
        assert first["messages"] == 2
        second = handler.handler({"thread_id": thread, "message": "What's the weather?"}, None)
        assert second["messages"] == 6 and "sunny" in second["reply"]  # tool call + answer
        third = handler.handler({"thread_id": thread, "message": "Thanks"}, None)
        assert third["messages"] == 8
        # a cold start (new process) picks the thread up where the warm one left it
        fourth = cold(lambda_env, {"thread_id": thread, "message": "And a museum tip?"})
        assert fourth["messages"] == 10 and "museum" in fourth["reply"]
        # and the warm container sees what the cold one wrote
        fifth = handler.handler({"thread_id": thread, "message": "Bye"}, None)
        assert fifth["messages"] == 12
        # another thread is its own conversation
        assert handler.handler({"thread_id": "user-7", "message": "Hello"}, None)["messages"] == 2
        # one loop for the container: one S3 and one DynamoDB client for all 5 invocations
        assert handler.saver.clients.created == 2
        assert "error" in handler.handler({"message": "no thread"}, None)
    finally:
        handler.runner.close()  # what atexit does; Lambda just ends the container
    assert handler.saver.clients.open_loops == 0  # closed with the loop


def test_warm_invocations_open_no_connection(
    lambda_env: dict[str, str], s3_fresh: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with TcpRelay(s3_fresh.url) as relay:
        monkeypatch.setenv("AWS_ENDPOINT_URL", relay.url)  # the handler's clients go through it
        handler = load_handler("lambda_handler_relay")
        try:
            counts = []
            for i in range(7):  # every event a new conversation: the same work each time
                before = relay.accepted
                got = handler.handler(
                    {"thread_id": f"t-{i}", "message": "What's the weather?"}, None
                )
                assert got["messages"] == 4 and "sunny" in got["reply"], got
                counts.append(relay.accepted - before)
            assert counts[0] >= 2, counts  # the cold invocation opens S3 and DynamoDB ones
            # Warm ones reuse the clients and their pools: new clients would open at least
            # one S3 and one DynamoDB connection every time (10 or more in five turns,
            # none with 0). A pool still grows when a turn happens to have more requests
            # in flight than any turn before it (timing on a loaded machine; the last
            # invocation's background PUTs of held checkpoints and writes resume beside
            # the next one's requests): some warm turns open one or more, most none.
            warm = counts[2:]
            assert warm.count(0) >= 2 and sum(warm) <= 7, counts
            # all kept alive between invocations (or closed by the pool's keep-alive expiry)
            assert dropped_connections(relay) == 0, (
                relay.accepted,
                relay.idle_closes(),
                relay.other_closes(),
            )
        finally:
            handler.runner.close()


@pytest.mark.deploy
def test_deployment_zip_is_self_contained_with_bytecode(
    lambda_env: dict[str, str], tmp_path: Path
) -> None:
    spec = importlib.util.spec_from_file_location("build_zip", EXAMPLE / "build_zip.py")
    assert spec is not None and spec.loader is not None
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    out = build.build(tmp_path / "lambda.zip")
    with zipfile.ZipFile(out) as zf:
        names = zf.namelist()
        zf.extractall(tmp_path / "unzipped")
    assert "handler.py" in names and "langgraph_s3/checkpoint/saver/__init__.py" in names
    assert "langgraph_s3/checkpoint/saver/__pycache__/__init__.cpython-311.pyc" in names
    # built from the sources alone: no module of an earlier layout (a stale build/)
    assert "langgraph_s3/saver.py" not in names and "langgraph_s3/keys.py" not in names
    assert not any(n.startswith(("moto/", "pytest/")) for n in names)
    pyc = (
        tmp_path / "unzipped/langgraph_s3/checkpoint/saver/__pycache__/__init__.cpython-311.pyc"
    ).read_bytes()
    assert pyc[4:8] == b"\x01\x00\x00\x00"  # unchecked hash: never recompiled at cold start
    # run it with `python -S`: no site-packages, only what the zip holds
    got = cold(
        lambda_env,
        {"thread_id": "zip", "message": "Hello"},
        cwd=tmp_path / "unzipped",
        isolated=True,
    )
    assert got["messages"] == 2
    assert not list((tmp_path / "unzipped").rglob("*.pyc.*"))  # nothing was rewritten


GRAPH = """
from langchain_core.messages import AIMessage
from langgraph.graph import MessagesState, StateGraph

from helper import REPLY  # a sibling module, brought by --include


def reply(state: MessagesState) -> dict:
    return {"messages": [AIMessage(content=REPLY + state["messages"][-1].content)]}


def make():
    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.set_entry_point("reply")
    return builder  # a builder: the handler compiles it with the saver
"""


@pytest.mark.deploy
def test_your_own_graph_in_a_lambda_zip(lambda_env: dict[str, str], tmp_path: Path) -> None:
    """`langgraph-s3 lambda build`: a user's graph file, a sibling module and a
    requirements file become a zip whose handler runs with `python -S` (only what the
    zip holds) and keeps the conversation across cold starts; bad input is one line and
    exit 1 (--image's folder: tests/unit/test_packaging.py)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent.py").write_text(GRAPH)
    (project / "helper.py").write_text('REPLY = "you said: "\n')
    (project / "requirements.txt").write_text("six==1.17.0\n")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "langgraph_s3.cli", "lambda", "build", *args],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=600,
        )

    built = cli("agent.py:make", "-r", "requirements.txt", "--include", "helper.py", "--json")
    assert built.returncode == 0, built.stderr
    facts = json.loads(built.stdout)
    assert facts["handler"] == "langgraph_s3_handler.handler" and facts["trimmed_bytes"] > 10e6
    # never quiet for long: a line per phase on stderr, with sizes (stdout is the JSON)
    phases = [ln for ln in built.stderr.splitlines() if ln.startswith("lambda build: ")]
    said = "\n".join(phases)
    for phase in ("pip: resolving", "pip: installing", "installed", "trimmed", "compiling"):
        assert f"lambda build: {phase}" in said, said
    assert "MB unzipped" in said and "zipping into dist/lambda.zip" in said, said
    out = project / "dist" / "lambda.zip"
    with zipfile.ZipFile(out) as zf:
        names = zf.namelist()
        zf.extractall(tmp_path / "unzipped")
    assert {"langgraph_s3_handler.py", "agent.py", "helper.py", "six.py"} <= set(names)
    assert "langgraph_s3/checkpoint/saver/__pycache__/__init__.cpython-311.pyc" in names
    services = {
        n.split("/")[2] for n in names if n.startswith("botocore/data/") and n.count("/") > 2
    }
    assert services == {"s3", "dynamodb", "sts", "sso", "sso-oidc", "secretsmanager", "ssm"}
    assert not any(n.startswith(("zstandard/_cffi", "moto/", "pytest/")) for n in names)
    assert facts["zipped_bytes"] == out.stat().st_size < 50e6
    where = tmp_path / "unzipped"
    # the zip reads its secrets at cold start: it carries the SDK models to (a trimmed
    # zip without Secrets Manager's would fail its init)
    import botocore.session

    sm = botocore.session.get_session().create_client(
        "secretsmanager", region_name="us-east-1", endpoint_url=lambda_env["AWS_ENDPOINT_URL"]
    )
    arn = sm.create_secret(Name=f"zip-{tmp_path.name}", SecretString="sk-zip")["ARN"]
    first = cold(
        {**lambda_env, "LANGGRAPH_S3_SECRETS": json.dumps({"AGENT_KEY": arn})},
        {"thread_id": "own", "message": "hi"},
        cwd=where,
        isolated=True,
        module="langgraph_s3_handler",
    )
    assert first["reply"] == "you said: hi" and first["messages"] == 2
    again = cold(
        lambda_env,
        {"thread_id": "own", "message": "again", "state": False},
        cwd=where,
        isolated=True,
        module="langgraph_s3_handler",
    )
    assert again["messages"] == 4 and "state" not in again  # one conversation, persisted
    # under AWS's runtime client, the zip's own handler registers its extension, which
    # stores what the turn's puts held before the environment freezes
    with LambdaHost("langgraph_s3_handler.handler", task_root=where, env=lambda_env) as host:
        assert [e.name for e in host.extensions.values()] == ["langgraph-s3"]
        turn = host.invoke({"thread_id": "own", "message": "frozen", "state": False})
        assert turn.response["messages"] == 6, turn
        host.wait_frozen()
        conn = urllib.parse.urlsplit(lambda_env["LANGGRAPH_S3_CHECKPOINTER"])
        table = urllib.parse.parse_qs(conn.query)["table"][0]
        assert held(lambda_env["AWS_ENDPOINT_URL"], table, conn.netloc).copies == 0
    bad = cold(
        lambda_env, {"thread_id": "own"}, cwd=where, isolated=True, module="langgraph_s3_handler"
    )
    assert "error" in bad
    for event, said in (
        ({"thread_id": "own", "input": "not a state"}, "refused the input"),
        ({"thread_id": "\x1b]0;x\x07", "message": "hi"}, "printable"),
        ({"thread_id": "own", "message": "hi", "state": "false"}, "true or false"),
    ):
        answered = cold(lambda_env, event, cwd=where, isolated=True, module="langgraph_s3_handler")
        assert said in answered["error"], answered

    for args, said in (
        (["agent.py"], "give path/to/graph.py:GRAPH"),
        (["nope.py:graph"], "no such file"),
        (["agent.py:make", "-r", "missing.txt"], "missing.txt"),
    ):
        failed = cli(*args)
        assert failed.returncode in (1, 2) and said in failed.stderr, failed.stderr
