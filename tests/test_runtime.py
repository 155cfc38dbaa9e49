"""Long-running processes: memory, aiohttp sessions and TCP connections across invocations.

A saver at module scope with ``asyncio.run`` per invocation (a Lambda pattern
the README still supports) must not leak: every ``asyncio.run`` makes a new
loop and so new clients, which must be closed when that loop shuts down. The patterns that keep
one loop (``asyncio.Runner`` at module scope, the sync ``S3Saver``) must reuse
their keep-alive connections: 0 new TCP connections per warm invocation,
counted by a relay between the clients and moto.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypedDict

import aiohttp
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph

from helpers import cfg, dropped_connections
from langgraph_s3 import AsyncS3Saver, AsyncS3Store, S3Saver
from langgraph_s3.errors import EndpointUnreachableError, S3PersistenceError
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.moto import TcpRelay

UNCLOSED = "Unclosed client session"


# ------------------------------------------------------------------ helpers
class Count(TypedDict):
    n: int


def one_node_graph() -> StateGraph[Any]:
    b = StateGraph(Count)
    b.add_node("inc", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "inc")
    b.add_edge("inc", END)
    return b


def open_sessions(baseline: Sequence[aiohttp.ClientSession] = ()) -> list[aiohttp.ClientSession]:
    """aiohttp sessions alive in this process and not closed, minus ``baseline``
    (what earlier tests of the pytest session may have left open)."""
    gc.collect()
    known = {id(s) for s in baseline}  # baseline holds them: their ids are not reused
    return [
        o
        for o in gc.get_objects()
        if isinstance(o, aiohttp.ClientSession) and not o.closed and id(o) not in known
    ]


@pytest.fixture
def baseline() -> list[aiohttp.ClientSession]:
    """The sessions open before the test."""
    return open_sessions()


@pytest.fixture
def relay(s3_fresh: MotoServer) -> Iterator[TcpRelay]:
    with TcpRelay(s3_fresh.url) as r:
        yield r


# ------------------------------------------------------- leak, in a subprocess
# The child is the "Lambda container": module-scope objects, asyncio.run per
# invocation. moto runs in the test process, so the child's RSS is the client's.
CHILD = r"""
import asyncio, gc, json, os, sys
from typing import TypedDict

import aiohttp
from langgraph.graph import END, START, StateGraph

from langgraph_s3 import AsyncS3Saver, AsyncS3Store


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def sessions():
    gc.collect()
    found = [o for o in gc.get_objects() if isinstance(o, aiohttp.ClientSession)]
    return len(found), sum(not s.closed for s in found)


kind, total, warmup, durability = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
conn = os.environ["LGS3_CONN"]
if kind == "saver":
    class State(TypedDict):
        n: int

    saver = AsyncS3Saver.from_url(conn)
    b = StateGraph(State)
    b.add_node("inc", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "inc")
    b.add_edge("inc", END)
    graph = b.compile(checkpointer=saver)

    async def invoke(i):
        config = {"configurable": {"thread_id": f"leak-{i}"}}
        out = await graph.ainvoke({"n": i}, config, durability=durability)
        assert out["n"] == i + 1, out
else:
    store = AsyncS3Store.from_url(conn)

    async def invoke(i):
        await store.aput(("leak",), f"k{i}", {"i": i})
        item = await store.aget(("leak",), f"k{i}")
        assert item is not None and item.value == {"i": i}, item

for i in range(total):
    asyncio.run(invoke(i))
    if i + 1 == warmup:
        gc.collect()
        rss_warm = rss_mb()
gc.collect()
rss_end = rss_mb()
live, unclosed = sessions()
print(json.dumps({"rss_warm_mb": rss_warm, "rss_end_mb": rss_end,
                  "live_sessions": live, "unclosed_sessions": unclosed}))
"""


def run_child(
    kind: str, conn: str, total: int, warmup: int, durability: str = "exit"
) -> tuple[dict[str, Any], str]:
    env = {**os.environ, "LGS3_CONN": conn}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, kind, str(total), str(warmup), durability],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def check_no_leak(what: str, got: dict[str, Any], stderr: str, *, max_growth_mb: float) -> None:
    report = {
        **got,
        "rss_growth_mb": round(got["rss_end_mb"] - got["rss_warm_mb"], 1),
        "unclosed_warnings": stderr.count(UNCLOSED),
    }
    print(f"{what}: {report}")
    problems = []
    if report["unclosed_warnings"]:
        problems.append(f"{UNCLOSED!r} printed {report['unclosed_warnings']} times")
    if got["live_sessions"]:  # no loop is running: no session may stay alive
        problems.append(f"{got['live_sessions']} aiohttp sessions alive at the end")
    if report["rss_growth_mb"] > max_growth_mb:
        problems.append(f"RSS grew {report['rss_growth_mb']} MB after warm-up")
    assert not problems, f"{what}: {'; '.join(problems)} ({report})"


def test_asyncio_run_per_invocation_does_not_leak_saver(
    s3_fresh: MotoServer, names: dict[str, str]
) -> None:
    conn = f"s3://{names['bucket']}/leak?table={names['table']}&endpoint_url={s3_fresh.url}"
    # durability="exit": 4 requests per invocation instead of 13, to keep 300 invocations
    # well under a minute; the leak is per event loop (per asyncio.run), not per request
    got, stderr = run_child("saver", conn, total=300, warmup=20, durability="exit")
    check_no_leak("saver, 300 x asyncio.run", got, stderr, max_growth_mb=20)


def test_asyncio_run_per_invocation_does_not_leak_store(s3_fresh: MotoServer) -> None:
    bucket = unique_names()["bucket"]
    conn = f"s3://{bucket}/leak?endpoint_url={s3_fresh.url}"

    async def setup() -> None:
        async with AsyncS3Store.from_url(conn) as store:
            await store.setup()

    asyncio.run(setup())
    got, stderr = run_child("store", conn, total=100, warmup=20)
    check_no_leak("store, 100 x asyncio.run", got, stderr, max_growth_mb=10)


# ------------------------------------------- connection reuse, through a relay
WARMUP = 3  # invocations before counting (the first one is the cold one)
COUNTED = 15


def new_connections(relay: TcpRelay, invoke: Callable[[int], None]) -> list[int]:
    """New TCP connections per invocation, for WARMUP + COUNTED invocations."""
    out = []
    for i in range(WARMUP + COUNTED):
        before = relay.accepted
        invoke(i)
        out.append(relay.accepted - before)
    return out


def test_asyncio_run_per_invocation_opens_new_connections_every_time(
    relay: TcpRelay, names: dict[str, str], baseline: list[aiohttp.ClientSession]
) -> None:
    """The README's former pattern: a new loop per invocation, so new clients and
    new connections each time (that is what a cold invocation costs, every time)."""
    saver = AsyncS3Saver(endpoint_url=relay.url, **names)
    graph = one_node_graph().compile(checkpointer=saver)

    def invoke(i: int) -> None:
        assert asyncio.run(graph.ainvoke({"n": i}, cfg(f"run-{i}")))["n"] == i + 1

    counts = new_connections(relay, invoke)
    print(f"asyncio.run per invocation: new connections {counts}")
    # A fresh loop starts from empty pools every time, so a warm invocation opens
    # connections like the cold one did: at least one S3 and one DynamoDB connection,
    # more where requests of one invocation overlap
    # (how many more varies from run to run: 5 or 6 for this graph on a 2-core machine)
    assert min(counts) >= 2, counts
    assert saver.clients.created == 2 * len(counts)  # one client pair per loop
    assert _drains(relay)  # each loop's connections were closed at its shutdown
    assert not open_sessions(baseline)


def test_module_level_runner_reuses_connections(
    relay: TcpRelay, names: dict[str, str], baseline: list[aiohttp.ClientSession]
) -> None:
    """The recommended Lambda pattern: one ``asyncio.Runner`` for the container."""
    saver = AsyncS3Saver(endpoint_url=relay.url, **names)
    graph = one_node_graph().compile(checkpointer=saver)
    with asyncio.Runner() as runner:

        def invoke(i: int) -> None:
            assert runner.run(graph.ainvoke({"n": i}, cfg(f"runner-{i}")))["n"] == i + 1

        counts = new_connections(relay, invoke)
        print(f"asyncio.Runner at module scope: new connections {counts}")
        assert counts[0] >= 2, counts  # the cold invocation opens the pools
        # No churn: every connection ever opened is still open, so every later request
        # reused one. A held object's PUT left pending when runner.run returned resumes
        # beside the next invocation's requests, so under load a warm invocation can
        # overlap a request or two more than the cold one did and the pool grows (3 in
        # CI once, beside the other venv's install): a bounded growth, where a saver that
        # did not reuse would open 2 per invocation (30 here).
        assert dropped_connections(relay) == 0, (
            relay.accepted,
            relay.idle_closes(),
            relay.other_closes(),
        )
        assert sum(counts[WARMUP:]) <= COUNTED // 3, counts
        assert saver.clients.created == 2
    # Runner.close() shuts the loop down: its clients close with it
    assert not open_sessions(baseline)
    assert _drains(relay)


def test_sync_saver_reuses_connections(
    relay: TcpRelay, names: dict[str, str], baseline: list[aiohttp.ClientSession]
) -> None:
    saver = S3Saver(endpoint_url=relay.url, **names)
    graph = one_node_graph().compile(checkpointer=saver)

    def invoke(i: int) -> None:
        assert graph.invoke({"n": i}, cfg(f"sync-{i}"))["n"] == i + 1

    counts = new_connections(relay, invoke)
    print(f"sync S3Saver: new connections {counts}")
    assert counts[0] >= 2, counts
    # No churn: the connections opened are kept, so later requests reuse them.
    # graph.invoke sends the saver's calls from LangGraph's worker threads, and a held
    # object's PUT goes on beside the next call's requests, so now and then a warm
    # invocation overlaps one request more than the cold one did and the pool grows by
    # one; a connection the pool grew to for such a burst may sit idle past aiohttp's
    # keep-alive on a loaded machine and close, which is not churn. How far the pool grows
    # in such bursts depends on the machine's load (3 seen, 4 once in CI beside the other
    # venv's install); a saver that did not reuse would open 2 per invocation (30 here).
    assert dropped_connections(relay) == 0, (
        relay.accepted,
        relay.idle_closes(),
        relay.other_closes(),
    )
    assert sum(counts[WARMUP:]) <= COUNTED // 3, counts
    assert saver.clients.created == 2
    saver.close()
    assert not open_sessions(baseline)
    assert _drains(relay)


def _drains(relay: TcpRelay, timeout: float = 5.0) -> bool:
    """The relay sees the client side of every connection closed, soon."""
    deadline = time.monotonic() + timeout
    while relay.open and time.monotonic() < deadline:
        time.sleep(0.02)
    return relay.open == 0


# --------------------------------------------------- closing on every loop
def _put_args(thread: str) -> tuple[Any, ...]:
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return config, empty_checkpoint(), {"source": "input", "step": -1}, {}


async def test_aclose_closes_clients_on_every_loop(
    names: dict[str, str],
    s3_fresh: MotoServer,
    baseline: list[aiohttp.ClientSession],
    caplog: pytest.LogCaptureFixture,
) -> None:
    saver = AsyncS3Saver(endpoint_url=s3_fresh.url, **names)
    # a sync method: runs on the saver's private background loop
    saver.put(*_put_args("sync-side"))
    assert saver.get_tuple(cfg("sync-side")) is not None
    # an async one: runs on this test's loop
    await saver.aput(*_put_args("async-side"))
    assert await saver.aget_tuple(cfg("async-side")) is not None
    assert saver.clients.created == 4  # S3 + DynamoDB, on two loops
    mine = open_sessions(baseline)
    assert len(mine) == 4, mine  # two per loop

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        await saver.aclose()
        mine = open_sessions(baseline)
        assert mine == [], f"{len(mine)} client session(s) still open after aclose()"
    assert UNCLOSED not in caplog.text

    # still usable afterwards (new clients), and closes again
    assert saver.get_tuple(cfg("sync-side")) is not None
    await saver.aclose()
    assert open_sessions(baseline) == []


def test_sync_close_closes_clients_on_every_loop(
    names: dict[str, str],
    s3_fresh: MotoServer,
    baseline: list[aiohttp.ClientSession],
    caplog: pytest.LogCaptureFixture,
) -> None:
    saver = S3Saver(endpoint_url=s3_fresh.url, **names)
    saver.put(*_put_args("sync-side"))  # the background loop
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        with asyncio.Runner() as runner:  # a loop of the caller's, idle when close() runs
            runner.run(saver.aput(*_put_args("async-side")))
            assert saver.clients.created == 4
            saver.close()
            # the background loop's clients are closed now; the idle loop's close is
            # queued for that loop's next run (never driven from another thread)
            assert len(open_sessions(baseline)) == 2
        mine = open_sessions(baseline)  # the runner closed: its queued close ran
        assert mine == [], f"{len(mine)} client session(s) still open after close()"
    assert UNCLOSED not in caplog.text


def test_factories_share_the_process_models_but_not_a_callers_session() -> None:
    """A second saver in a process must not load botocore's models again (~0.2 s of
    CPU each); a session passed in keeps its own loader."""
    from aiobotocore.session import get_session

    from langgraph_s3.aws.clients import ClientFactory

    first, second = ClientFactory().session, ClientFactory().session
    assert first is not second  # credentials and config stay per factory
    assert first.get_component("data_loader") is second.get_component("data_loader")
    mine = get_session()
    assert ClientFactory(session=mine).session is mine
    assert mine.get_component("data_loader") is not first.get_component("data_loader")


def test_a_plain_http_endpoint_loads_no_ca_bundle_per_loop(
    s3_fresh: MotoServer, names: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each event loop gets new clients; over https each loads the CA bundle, which
    over plain http (moto, a local endpoint) would be ~40 ms per client for nothing.
    An https endpoint still verifies."""
    import aiobotocore.httpsession as httpsession

    loaded: list[object] = []
    real = httpsession.get_cert_path

    def spy(verify: object) -> object:
        loaded.append(verify)
        return real(verify)

    monkeypatch.setattr(httpsession, "get_cert_path", spy)
    saver = AsyncS3Saver(endpoint_url=s3_fresh.url, **names)

    async def turn(i: int) -> None:
        await saver.aget_tuple(cfg(f"t{i}"))
        s3 = await saver.clients.client("s3")
        await s3.list_buckets()

    asyncio.run(saver.setup())
    for i in range(3):
        asyncio.run(turn(i))
    assert loaded == []

    secure = AsyncS3Saver(endpoint_url="https://127.0.0.1:1", **names, max_attempts=1)

    async def refused() -> None:
        with pytest.raises(EndpointUnreachableError, match=r"https://127\.0\.0\.1:1.*1 attempt\)"):
            await secure.aget_tuple(cfg("t"))
        await secure.aclose()

    asyncio.run(refused())
    assert loaded and all(v is not False for v in loaded)  # verified: the default bundle
    asyncio.run(saver.aclose())

    # An http endpoint in the environment that botocore is told to ignore: the client
    # talks https to AWS, so it still verifies (nothing is reachable here: it fails).
    loaded.clear()
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    aws = AsyncS3Saver(**names, max_attempts=1, connect_timeout=1)

    async def to_aws() -> None:
        with pytest.raises(S3PersistenceError):
            await aws.aget_tuple(cfg("t"))
        await aws.aclose()

    asyncio.run(to_aws())
    assert aws.clients.endpoint_for("s3") == "https://s3.us-east-1.amazonaws.com"  # errors say so
    assert loaded and all(v is not False for v in loaded)


_FIRST_CLIENT = """
import asyncio, gc, sys, threading
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.aws import clients

saver = AsyncS3Saver(endpoint_url=sys.argv[1], bucket=sys.argv[2], table=sys.argv[3])
loader = saver.clients.session.get_component("data_loader")
where = []
real = loader.file_loader.load_file

def spy(*a, **kw):  # a JSON file of the SDK's read and parsed (None: no such file)
    data = real(*a, **kw)
    if data is not None:
        where.append(threading.current_thread() is threading.main_thread())
    return data

loader.file_loader.load_file = spy
if sys.argv[4] == "preload":
    saver.preload()
    print("frozen", gc.get_freeze_count() > 10_000)

async def main():
    await saver.aget_tuple({"configurable": {"thread_id": "t"}})
    await saver.aclose()

asyncio.run(main())
print("loads", len(where), "on the loop thread", sum(where) if sys.argv[4] != "preload" else 0)
"""


@pytest.mark.parametrize("mode", ["lazy", "preload"])
def test_the_first_client_of_a_process_loads_the_sdk_off_the_event_loop(
    s3_fresh: MotoServer, names: dict[str, str], mode: str
) -> None:
    """The SDK's models (~1 MB of JSON, ~150 ms of CPU) load in a thread when a
    process's first request makes the clients, not on the caller's loop; ``preload()``
    loads them at once and freezes what it loaded out of later full collections."""
    asyncio.run(AsyncS3Saver(endpoint_url=s3_fresh.url, **names).setup())
    out = subprocess.run(
        [sys.executable, "-c", _FIRST_CLIENT, s3_fresh.url, names["bucket"], names["table"], mode],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if mode == "preload":
        assert out[:2] == ["frozen", "True"]
        out = out[2:]
    assert out[0] == "loads" and int(out[1]) >= 4  # the models of S3 and DynamoDB
    assert out[-1] == "0"  # none on the loop's thread
