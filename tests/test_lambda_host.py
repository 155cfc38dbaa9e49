"""Lambda's lifecycle under AWS's own runtime interface client (``awslambdaric``), on a
local stand-in of the Runtime and Extensions APIs (``langgraph_s3.testing.lambda_host``)
that freezes the process (SIGSTOP) once the runtime and every extension wait, and can
reap it (SIGKILL). The handler is the one ``langgraph-s3 lambda build`` generates; the
saver in the runtime process talks to the session's moto server.

What the manifest holds is read from the table itself (``testing.held``: the items'
``inline:`` attributes), while the environment is frozen or after it was reaped.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from langgraph_s3 import S3Saver
from langgraph_s3.ops.deploy.packaging import HANDLER, _handler_source
from langgraph_s3.ops.handlers import lambda_extension
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.held import held
from langgraph_s3.testing.lambda_host import LambdaHost, LambdaHostError

pytestmark = pytest.mark.lambda_host

WEATHER = "What's the weather?"  # input, start, agent, tool, agent: 5 checkpoints a turn


class Deployment:
    """A set-up bucket and table, and a task root holding the generated handler."""

    def __init__(self, server: MotoServer, root: Path) -> None:
        self.server, self.root = server, root
        self.names = unique_names()
        self.conn = f"s3://{self.names['bucket']}/lambda?table={self.names['table']}"
        with S3Saver.from_url(self.conn, endpoint_url=server.url) as saver:
            saver.setup()  # terraform's job in production
        (root / "agent.py").write_text(
            "from langgraph_s3.testing.graphs import chat_graph\ngraph = chat_graph()\n"
        )
        (root / f"{HANDLER}.py").write_text(_handler_source("agent:graph"))

    def host(self, **env: str) -> LambdaHost:
        """A new execution environment (started by ``with``)."""
        full = {"LANGGRAPH_S3_CHECKPOINTER": self.conn, "AWS_ENDPOINT_URL": self.server.url}
        return LambdaHost(f"{HANDLER}.handler", task_root=self.root, env={**full, **env})

    def held(self) -> Any:
        return held(self.server.url, self.names["table"], self.names["bucket"])

    def history(self, thread_id: str) -> tuple[int, int]:
        """A fresh saver's view of a thread: (checkpoints listed, messages in the latest)."""
        cfg: Any = {"configurable": {"thread_id": thread_id}}
        with S3Saver.from_url(self.conn, endpoint_url=self.server.url) as saver:
            listed = list(saver.list(cfg))
            latest = saver.get_tuple(cfg)
        assert latest is not None
        return len(listed), len(latest.checkpoint["channel_values"]["messages"])


@pytest.fixture
def deployment(s3_fresh: MotoServer, tmp_path: Path) -> Deployment:
    return Deployment(s3_fresh, tmp_path)


def held_by(held: Any) -> dict[str, int]:
    """Held copies by thread id (a partition key ends with its thread's id)."""
    return {pk.rpartition("/")[2]: n for pk, n in held.partitions.items()}


def turn(host: LambdaHost, thread_id: str, messages: int) -> None:
    """One chat turn, answered, and the environment frozen after it."""
    inv = host.invoke({"thread_id": thread_id, "message": WEATHER, "state": False})
    assert inv.error is None and inv.response["messages"] == messages, inv.response
    host.wait_frozen()
    assert inv.billed_ms >= inv.response_ms > 0


def test_with_the_extension_a_frozen_or_reaped_environment_holds_nothing(
    deployment: Deployment,
) -> None:
    with deployment.host() as host:
        assert [e.name for e in host.extensions.values()] == ["langgraph-s3"]
        for thread, messages in (("a", 4), ("b", 4), ("a", 8)):
            turn(host, thread, messages)
            # frozen: the extension stored what the turn's puts held, before the freeze
            assert deployment.held().copies == 0, thread
        # a bad event is answered, and the extension is still told the invocation ended
        bad = host.invoke({"thread_id": "a"})
        assert "error" in bad.response
        host.wait_frozen(timeout=10)  # not the 60 s deadline
        host.reap()
    assert deployment.held().copies == 0
    assert deployment.history("a") == (10, 8) and deployment.history("b") == (5, 4)


def test_without_the_extension_copies_stay_held_until_the_next_writer_stores_them(
    deployment: Deployment,
) -> None:
    with deployment.host(LANGGRAPH_S3_LAMBDA_EXTENSION="off") as host:
        assert host.extensions == {}
        turn(host, "a", 4)
        turn(host, "b", 4)
        frozen = deployment.held()
        # the PUTs of the turns' last checkpoints froze with the loop: their copies
        # stay in both threads' items (a PUT whose request had left may have landed)
        assert frozen.copies >= 2 and frozen.items == 2, frozen
        host.reap()
    left = deployment.held()
    assert left.partitions == frozen.partitions and set(held_by(left)) == {"a", "b"}
    # readers lay the held copies over what S3 lists: the whole history, nothing lost
    assert deployment.history("a") == (5, 4) and deployment.history("b") == (5, 4)

    with deployment.host() as host:  # the next environment, which writes "a"
        turn(host, "a", 8)
    after = deployment.held()
    # its first commit learned "a"'s held copies from the old item and stored them;
    # "b"'s stay until a writer or maintenance reads it
    assert held_by(after) == {"b": held_by(left)["b"]}, after
    with S3Saver.from_url(deployment.conn, endpoint_url=deployment.server.url) as saver:
        saver.prune(["b"], keep_last=100)  # maintenance stores what it reads held
    assert deployment.held().copies == 0
    assert deployment.history("a") == (10, 8) and deployment.history("b") == (5, 4)


ECHO = """
def handler(event, context):
    if event.get("fail"):
        raise ValueError("asked to fail")
    return {"echo": event, "request_id": context.aws_request_id}
"""


def test_the_local_host_answers_and_refuses_as_lambda_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "echo.py").write_text(ECHO)
    with LambdaHost("echo.handler", task_root=tmp_path) as host:
        assert host.frozen and host.init_ms is not None
        done = host.invoke({"n": 1})
        assert done.response == {"echo": {"n": 1}, "request_id": done.request_id}
        assert host.wait_frozen() is done and done.billed_ms >= done.response_ms
        failed = host.invoke({"fail": True})
        assert failed.error is not None and failed.error["errorType"] == "ValueError"
        # an extension registers in the init phase only: after it, the app runs without
        monkeypatch.setenv("AWS_LAMBDA_RUNTIME_API", host.api)
        with caplog.at_level(logging.DEBUG, "langgraph_s3"):
            assert lambda_extension.start(lambda seconds: None) is None
        assert "refused" in caplog.text and "403" in caplog.text
        host.reap()
        with pytest.raises(LambdaHostError, match="exited"):
            host.invoke({"n": 2}, timeout=5)
    (tmp_path / "broken.py").write_text("raise ImportError('no such graph')\n")
    with pytest.raises(LambdaHostError, match="init failed"):
        LambdaHost("broken.handler", task_root=tmp_path).start(timeout=30)
