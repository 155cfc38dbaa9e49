"""The Lambda extension's decisions without a runtime: when it registers, and what its
thread does with an INVOKE event (waits for the handler's end, flushes, logs a failed
flush and goes on). Under AWS's runtime client: tests/test_lambda_host.py."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from langgraph_s3.ops.handlers import lambda_extension
from langgraph_s3.ops.handlers.lambda_extension import Extension, enabled, start
from langgraph_s3.testing.moto import free_port


@pytest.mark.parametrize(
    ("flag", "env", "on"),
    [
        (None, None, True),
        (None, "off", False),
        (None, " FALSE ", False),
        (None, "0", False),
        (None, "on", True),
        (True, "off", True),  # the constructor's flag wins
        (False, None, False),
    ],
)
def test_extension_is_on_unless_turned_off(
    flag: bool | None, env: str | None, on: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if env is None:
        monkeypatch.delenv(lambda_extension.ENV_SWITCH, raising=False)
    else:
        monkeypatch.setenv(lambda_extension.ENV_SWITCH, env)
    assert enabled(flag) is on


@pytest.mark.parametrize(
    ("api", "flag", "said"),
    [
        (None, None, "not on Lambda"),
        ("127.0.0.1:1", False, "is off"),
        ("closed", None, "refused"),  # nothing listens: the app runs as without it
    ],
)
def test_no_extension_outside_lambda_says_why_at_debug_level(
    api: str | None,
    flag: bool | None,
    said: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.delenv(lambda_extension.ENV_SWITCH, raising=False)
    if api is None:
        monkeypatch.delenv("AWS_LAMBDA_RUNTIME_API", raising=False)
    else:
        port = free_port()
        monkeypatch.setenv(
            "AWS_LAMBDA_RUNTIME_API", f"127.0.0.1:{port}" if api == "closed" else api
        )
    with caplog.at_level(logging.DEBUG, "langgraph_s3"):
        assert start(lambda seconds: None, flag=flag) is None
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]
    assert said in caplog.text


def invoke_event(request_id: str, seconds: float) -> dict[str, object]:
    return {
        "eventType": "INVOKE",
        "requestId": request_id,
        "deadlineMs": int((time.time() + seconds) * 1000),
    }


def test_the_flush_runs_once_the_handler_ended_its_invocation() -> None:
    flushed: list[float] = []
    ext = Extension("127.0.0.1:1", "id", flushed.append)
    ender = threading.Timer(0.2, ext.ended, args=("r1",))
    ender.start()
    began = time.monotonic()
    ext._after(invoke_event("r1", 30))  # an INVOKE comes as the handler starts
    assert time.monotonic() - began >= 0.15  # it waited for the handler's end
    assert ext.flushes == 1 and 25 < flushed[0] <= 30  # given what is left of the deadline
    ext.ended("r2")  # a handler faster than the extension's thread
    ext._after(invoke_event("r2", 30))
    assert ext.flushes == 2


def test_a_failed_flush_is_logged_and_the_extension_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def fail(seconds: float) -> None:
        raise ConnectionError("S3 unreachable")

    ext = Extension("127.0.0.1:1", "id", fail)
    ext.ended("r1")
    with caplog.at_level(logging.INFO, "langgraph_s3"):
        ext._after(invoke_event("r1", 30))  # raises nothing
    assert ext.flushes == 1
    assert "r1" in caplog.text and "S3 unreachable" in caplog.text
    assert caplog.records[-1].levelno == logging.ERROR


def test_an_invocation_not_ended_by_its_deadline_is_not_flushed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    flushed: list[float] = []
    ext = Extension("127.0.0.1:1", "id", flushed.append)
    with caplog.at_level(logging.INFO, "langgraph_s3"):
        ext._after(invoke_event("r1", 0.1))
    assert flushed == [] and "did not end before its deadline" in caplog.text
