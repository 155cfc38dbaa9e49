"""LangGraph's Agent Server on langgraph-s3: ``langgraph dev`` runs the
example in ``examples/agent-server`` with our entry points (``langgraph.json``:
``langgraph_s3.agent_server.checkpointer`` / ``.store``) against the suite's moto
server, and is driven through ``langgraph-sdk``: chat turns, state and history,
an interrupt and its resume, streaming, update_state, copy, delete, a rollback,
the store, a DeltaChannel graph. What it stored is then read back from S3 by a
fresh saver and store, and the server is stopped.

The server packages are pinned in the ``agent-server`` extra (the feature is alpha);
where they are not installed the tests are skipped with that reason.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers import cfg, left_of
from langgraph_s3 import AsyncS3Saver, AsyncS3Store
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.graphs import delta_graph

EXAMPLE = Path(__file__).parent.parent / "examples" / "agent-server"
LANGGRAPH = Path(sys.executable).parent / "langgraph"
MISSING = [
    name
    for name in ("langgraph_api", "langgraph_sdk", "langgraph_runtime_inmem")
    if importlib.util.find_spec(name) is None
]
if MISSING or not LANGGRAPH.exists():
    pytest.skip(
        f"LangGraph's Agent Server is not installed ({', '.join(MISSING) or 'no langgraph CLI'}): "
        'pip install -e ".[agent-server]" (the dev extra includes it)',
        allow_module_level=True,
    )


@dataclass
class Server:
    url: str
    endpoint: str
    names: dict[str, str]
    process: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(app: Path, env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    out = log.open("wb")
    process = subprocess.Popen(
        [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--port", str(port)],
        cwd=app,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return process, f"http://127.0.0.1:{port}"


def wait_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server exited at start:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(f"{url}/ok", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"the server did not start in 90 s:\n{log.read_text()[-4000:]}")


def stop(process: subprocess.Popen[bytes]) -> int:
    """Ctrl-C, as a developer stops ``langgraph dev``; the exit code."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise AssertionError("the server did not stop within 30 s of Ctrl-C") from None
    return int(process.returncode)


def server_env(s3: MotoServer, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGGRAPH_S3_", "LANGSMITH"))}
    env.update(
        AWS_ENDPOINT_URL=s3.url,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_REGION="us-east-1",
        LANGSMITH_TRACING="false",
        LANGGRAPH_S3_SETUP="1",
    )
    env.update(extra)
    return env


@pytest.fixture
def server(s3_fresh: MotoServer, tmp_path: Path) -> Iterator[Server]:
    app = tmp_path / "app"
    shutil.copytree(EXAMPLE, app, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    names = unique_names()
    env = server_env(
        s3_fresh, LANGGRAPH_S3_URL=f"s3://{names['bucket']}/agents?table={names['table']}"
    )
    log = tmp_path / "server.log"
    process, url = start(app, env, log)
    try:
        wait_ready(process, url, log)
        yield Server(url, s3_fresh.url, names, process, log)
    finally:
        code = stop(process)
    assert code in (0, -signal.SIGINT, 130), f"exit {code}:\n{log.read_text()[-4000:]}"
    assert "Traceback" not in log.read_text(), log.read_text()[-4000:]


def texts(state: dict[str, Any]) -> list[str]:
    return [m["content"] for m in state["values"].get("messages", [])]


async def test_the_agent_server_persists_to_s3(server: Server) -> None:
    from langgraph_sdk import get_client

    client = get_client(url=server.url)
    graphs = {a["graph_id"] for a in await client.assistants.search()}
    assert {"chat", "delta"} <= graphs

    # three chat turns; the store remembers across threads
    thread = (await client.threads.create())["thread_id"]
    for text in ("/remember Ada", "hi", "how are you?"):
        await client.runs.wait(
            thread, "chat", input={"messages": [{"role": "user", "content": text}]}
        )
    state = await client.threads.get_state(thread)
    assert texts(state)[-1] == "hello Ada, you said 'how are you?'" and len(texts(state)) == 6
    history = await client.threads.get_history(thread, limit=10)
    assert len(history) == 9 and history[0]["checkpoint"] == state["checkpoint"]  # 3 a turn
    loops = await client.threads.get_history(thread, limit=10, metadata={"source": "loop"})
    assert loops and all(h["metadata"]["source"] == "loop" for h in loops)
    before = {"configurable": {**history[2]["checkpoint"], "thread_id": thread}}
    older = await client.threads.get_history(thread, limit=2, before=before)
    assert [h["checkpoint"]["checkpoint_id"] for h in older] == [
        h["checkpoint"]["checkpoint_id"] for h in history[3:5]
    ]
    other = (await client.threads.create())["thread_id"]
    await client.runs.wait(other, "chat", input={"messages": [{"role": "user", "content": "yo"}]})
    assert texts(await client.threads.get_state(other))[-1] == "hello Ada, you said 'yo'"

    # an interrupt, then its resume; streaming; update_state
    asking = (await client.threads.create())["thread_id"]
    await client.runs.wait(
        asking, "chat", input={"messages": [{"role": "user", "content": "/approve deploy"}]}
    )
    waiting = await client.threads.get_state(asking)
    assert waiting["next"] == ["agent"] and waiting["tasks"][0]["interrupts"]
    assert waiting["tasks"][0]["interrupts"][0]["value"]["request"] == "/approve deploy"
    await client.runs.wait(asking, "chat", command={"resume": "yes"})
    assert texts(await client.threads.get_state(asking))[-1] == "the human said 'yes'"
    chunks = [
        c
        async for c in client.runs.stream(
            asking,
            "chat",
            input={"messages": [{"role": "user", "content": "streamed"}]},
            stream_mode="values",
        )
    ]
    assert any(
        c.event == "values" and c.data["messages"][-1]["content"].endswith("'streamed'")
        for c in chunks
    )
    await client.threads.update_state(
        asking, {"messages": [{"role": "user", "content": "added by update_state"}]}
    )
    assert texts(await client.threads.get_state(asking))[-1] == "added by update_state"

    # copy, then delete the copy: nothing of it is left in S3
    copy = (await client.threads.copy(thread))["thread_id"]
    assert texts(await client.threads.get_state(copy)) == texts(state)
    await client.threads.delete(copy)

    # a rollback: the slow run is cancelled and its checkpoints deleted
    rolled = (await client.threads.create())["thread_id"]
    slow = await client.runs.create(
        rolled, "chat", input={"messages": [{"role": "user", "content": "/slow"}]}
    )
    await asyncio.sleep(0.5)
    after = await client.runs.create(
        rolled,
        "chat",
        input={"messages": [{"role": "user", "content": "after"}]},
        multitask_strategy="rollback",
    )
    await client.runs.join(rolled, after["run_id"])
    assert texts(await client.threads.get_state(rolled)) == ["after", "hello Ada, you said 'after'"]

    # the store, through the SDK
    await client.store.put_item(["notes"], "n1", {"text": "buy milk"})
    await client.store.put_item(["notes"], "n2", {"text": "call Bob"})
    found = await client.store.search_items(["notes"], filter={"text": "call Bob"})
    assert [i["key"] for i in found["items"]] == ["n2"]
    await client.store.delete_item(["notes"], "n1")
    assert [i["key"] for i in (await client.store.search_items(["notes"]))["items"]] == ["n2"]

    # a DeltaChannel graph
    deltas = (await client.threads.create())["thread_id"]
    for i in range(7):
        await client.runs.wait(
            deltas, "delta", input={"messages": [{"role": "user", "content": f"d{i}"}]}
        )
    delta_state = await client.threads.get_state(deltas)
    assert len(texts(delta_state)) == 14

    # S3 holds it all: a fresh saver and store read the same
    names = server.names
    async with AsyncS3Saver(prefix="agents", endpoint_url=server.endpoint, **names) as saver:
        latest = await saver.aget_tuple(cfg(thread))
        assert latest is not None
        stored = [m.content for m in latest.checkpoint["channel_values"]["messages"]]
        assert stored == texts(state)
        assert await left_of(saver, copy) == []
        assert [t async for t in saver.alist(cfg(copy))] == []
        rolled_back = [
            m.content
            for t in [x async for x in saver.alist(cfg(rolled))]
            for m in t.checkpoint["channel_values"].get("messages", [])
        ]
        assert "/slow" not in rolled_back
        rebuilt = await delta_graph(5).compile(checkpointer=saver).aget_state(cfg(deltas))
        assert [m.content for m in rebuilt.values["messages"]] == texts(delta_state)
    async with AsyncS3Store(
        bucket=names["bucket"], prefix="agents", endpoint_url=server.endpoint
    ) as store:
        profile = await store.aget(("users", "me"), "profile")
        assert profile is not None and profile.value == {"name": "Ada"}
        assert await store.aget(("notes",), "n1") is None
        assert (await store.aget(("notes",), "n2")).value == {"text": "call Bob"}  # type: ignore[union-attr]
    assert slow["run_id"] != after["run_id"]


def test_a_missing_setting_stops_the_server_at_start_with_the_fix(
    s3_fresh: MotoServer, tmp_path: Path
) -> None:
    app = tmp_path / "app"
    shutil.copytree(EXAMPLE, app, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    unset = server_env(s3_fresh)
    process, _ = start(app, unset, tmp_path / "unset.log")
    assert process.wait(timeout=90) != 0
    assert "LANGGRAPH_S3_URL is not set" in (tmp_path / "unset.log").read_text()

    names = unique_names()
    absent = server_env(
        s3_fresh,
        LANGGRAPH_S3_URL=f"s3://{names['bucket']}/agents?table={names['table']}",
        LANGGRAPH_S3_SETUP="0",
    )
    process, _ = start(app, absent, tmp_path / "absent.log")
    assert process.wait(timeout=90) != 0
    log = (tmp_path / "absent.log").read_text()
    assert f"the bucket '{names['bucket']}' does not exist: set LANGGRAPH_S3_SETUP=1" in log


def test_a_delta_channel_turn_under_the_servers_adapter_costs_the_same_at_any_length() -> None:
    """The server's adapter does not forward ``aget_delta_channel_history``: LangGraph's
    generic walk reads the ancestors one ``aget_tuple`` by id at a time (141 requests
    in 69 round trips at the 12th turn, growing with the thread, before ``Listed``).
    One listing from the top now serves the whole walk: every turn after the first
    costs about the same, 25-27 requests in 11-13 round trips, whatever the thread's
    length (on the saver directly: 11 in 5)."""
    script = Path(__file__).parent / "scripts" / "adapter_delta.py"
    proc = subprocess.run(
        [sys.executable, str(script), "12"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    direct, adapted = got["direct"][:-1], got["adapter"][:-1]
    # on the saver: 3 commits and 2 tasks' writes held (5 UpdateItem), their 5 objects
    # PUT beside; the first turn's writes wait for the thread's first commit
    # (50 ms a request keeps requests sent together in flight together; a loaded machine
    # may still start one object PUT a wave late, once in a run at most)
    costs = [(t["requests"], t["round_trips"]) for t in direct]
    assert costs[0] == (11, 6) and all(c in ((11, 5), (11, 6)) for c in costs[1:]), costs
    assert costs[1:].count((11, 6)) <= 1, costs
    assert adapted[0]["requests"] == 11  # the first turn has no history to walk
    # through the adapter, the walk's one listing and 0-3 GETs of older writes no child
    # carried (LangGraph may begin the child's put before the writes): bounded, never
    # growing with the thread
    walked = [(t["requests"], t["round_trips"]) for t in adapted[1:]]
    assert all(25 <= r <= 28 and 11 <= rt <= 14 for r, rt in walked), walked
    ops = dict(adapted[-1]["by_operation"])
    assert ops.pop("s3.GetObject", 0) <= 3
    assert ops == {
        "dynamodb.GetItem": 4,  # the manifest, for the latest and the walk's first reads
        "s3.ListObjectsV2": 10,  # ... and the one listing that serves the rest of the walk
        "s3.PutObject": 5,
        "dynamodb.UpdateItem": 5,  # 3 commits, 2 tasks' writes held
    }
    # a thread continued in turn by direct calls and by the server loses no turn: both
    # pad versions alike (LangGraph compares them as strings)
    assert [m for m in got["mixed"] if m.endswith(" turn")] == ["direct turn", "server turn"] * 2
    assert len(got["mixed"]) == 8
    # a thread begun with 12-digit versions is refused by name, not silently skipped;
    # carried over once (export, import --replace), the server continues it
    assert "holds channel versions of two widths" in got["refused"]
    assert "langgraph-s3 import t.jsonl --replace" in got["refused"]
    assert got["carried"][0] == "old turn" and got["carried"][-2] == "server turn"
    # and the state rebuilt through the adapter is the state
    assert got["adapter"][-1]["messages"] == got["direct"][-1]["messages"]
    assert len(got["adapter"][-1]["messages"]) == 24


def test_the_dev_helper_says_its_port_and_stops_moto_with_the_server(tmp_path: Path) -> None:
    """examples/agent-server/dev.py: a taken port is said before the server starts, the
    server answers there, and Ctrl-C ends the server and its moto server both."""
    import re

    app = tmp_path / "app"
    shutil.copytree(EXAMPLE, app, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGGRAPH_S3_", "AWS_"))}
    env["LANGSMITH_TRACING"] = "false"
    log = tmp_path / "dev.log"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "dev.py", "--port", str(busy)],
                cwd=app,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            deadline = time.monotonic() + 60
            while "Agent Server at" not in log.read_text() and time.monotonic() < deadline:
                assert process.poll() is None, log.read_text()[-3000:]
                time.sleep(0.2)
            text = log.read_text()
            said = re.search(r"port \d+ is taken: the Agent Server uses (\d+)", text)
            assert said is not None, text[-3000:]
            moto = re.search(r"moto at (http://127\.0\.0\.1:\d+)", text)
            assert moto is not None, text[-3000:]
            url = f"http://127.0.0.1:{said.group(1)}"
            wait_ready(process, url, log)
        finally:
            code = stop(process)
    assert code in (0, -signal.SIGINT, 130), log.read_text()[-3000:]
    assert "stopped the Agent Server and moto" in log.read_text()
    with pytest.raises(OSError):  # moto is gone with it
        urllib.request.urlopen(moto.group(1), timeout=2)
