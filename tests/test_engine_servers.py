"""The suite's launchers of other S3 implementations (``langgraph_s3.testing.seaweed``,
``.ministack``, ``.servers``): free ports, servers that die with their session, a
squatter on the port not taken for the server, a cache that cannot be used refused with
the reason, and more buckets than ``weed mini`` would take writes in by default."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import aiobotocore.session
import pytest

from langgraph_s3.testing.ministack import ministack_python
from langgraph_s3.testing.seaweed import seaweed_server
from langgraph_s3.testing.servers import free_ports, start, stop, wait_ready

BUCKETS = 40
"""More than ``weed mini``'s default 25 volumes."""


async def _first_writes(url: str) -> list[str]:
    """Create ``BUCKETS`` buckets and write each one's first object, all at once; the
    keys listed back, one per bucket."""
    session = aiobotocore.session.get_session()
    async with session.create_client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    ) as s3:

        async def one(n: int) -> str:
            bucket = f"first-write-{n}"
            await s3.create_bucket(Bucket=bucket)
            await s3.put_object(Bucket=bucket, Key="k", Body=b"x", IfNoneMatch="*")
            listed = await s3.list_objects_v2(Bucket=bucket)
            return f"{bucket}/{listed['Contents'][0]['Key']}"

        return await asyncio.gather(*(one(n) for n in range(BUCKETS)))


def test_a_second_server_runs_beside_the_sessions_and_takes_writes_in_many_buckets(
    seaweed_url: str,
) -> None:
    with seaweed_server() as url:
        assert urlsplit(url).port != urlsplit(seaweed_url).port  # free ports, no clash
        written = asyncio.run(_first_writes(url))
    assert sorted(written) == sorted(f"first-write-{n}/k" for n in range(BUCKETS))


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=1)
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


@pytest.mark.parametrize("engine", ["seaweed", "ministack"])
def test_a_killed_session_leaves_no_server_behind(
    engine: str, request: pytest.FixtureRequest
) -> None:
    """A session SIGKILLed (a CI timeout) runs no clean-up: its servers die with it
    (the parent-death signal), not linger holding ports and files."""
    request.getfixturevalue(f"{engine}_url")  # the engine is installed here
    script = textwrap.dedent(f"""
        import sys, time
        from langgraph_s3.testing.{engine} import {engine}_server
        with {engine}_server() as url:
            print(url, flush=True)
            time.sleep(120)
    """)
    session = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        assert session.stdout is not None
        url = session.stdout.readline().decode().strip()
        assert url.startswith("http://127.0.0.1:") and _answers(url)
    finally:
        session.kill()
        session.wait()
    deadline = time.monotonic() + 20
    while _answers(url) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _answers(url), f"{engine} outlived its session at {url}"


def test_another_server_on_the_port_is_not_taken_for_ours(tmp_path: Path) -> None:
    """A port found free may be taken before the server binds it: the readiness check
    asks the answer whose it is, and says no to a stranger's."""
    (port,) = free_ports(1)
    stranger = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with open(tmp_path / "log", "wb") as log:
        ours = start([sys.executable, "-c", "import time; time.sleep(60)"], log, tmp_path)
    try:
        url = f"http://127.0.0.1:{port}/_ministack/health"
        while not _answers(url):
            time.sleep(0.1)
        assert not wait_ready(url, ours, 5, ours=lambda _h, body: b"1.5.33" in body)
        assert wait_ready(url, ours, 5, ours=lambda _h, _b: True)  # it does answer
    finally:
        stop(ours)
        stranger.kill()
        stranger.wait()


def test_a_cache_that_cannot_hold_ministack_is_refused_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An unwritable cache raises RuntimeError, which the suite turns into those tests'
    skip (or failure under CI), not an error that stops the whole session."""
    monkeypatch.setenv("LANGGRAPH_S3_MINISTACK_HOME", "/dev/null/cache")
    with pytest.raises(RuntimeError, match="could not build ministack's environment"):
        ministack_python()


def test_a_cached_environment_whose_interpreter_is_gone_is_built_again(tmp_path: Path) -> None:
    """A venv links to the interpreter that built it: one gone (a Python upgraded or
    removed) fails the check and is rebuilt, not trusted for its marker."""
    from langgraph_s3.testing.ministack import _works

    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").symlink_to(tmp_path / "no-such-python")
    (env / ".complete").write_text("1.5.33")
    assert not _works(env)
    assert _works(Path(ministack_python()).parent.parent)  # the suite's own: sound
