"""Plain helpers shared by the test modules: ``from helpers import cfg``.

Importable from every test folder: pytest puts the folder of ``tests/conftest.py``
(this one) on ``sys.path`` when it loads that conftest (the default, rootdir-less
``prepend`` import mode), as it does for ``faults``. Fixtures live in conftest.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, cast

import orjson
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.core.keys import encode, erasure_marker
from langgraph_s3.core.records import Listed
from langgraph_s3.manifest import Manifest
from langgraph_s3.testing.graphs import CHAT_TURNS, ahistory, chat_graph, nested_graph
from langgraph_s3.testing.relay import TcpRelay

Scenario = Callable[[Any], Awaitable[Any]]


def cfg(thread: str = "t", cid: str | None = None, *, ns: str | None = "") -> dict[str, Any]:
    """The run config of ``thread`` (and of its checkpoint ``cid`` when given).

    ``ns``: the checkpoint namespace, the root one by default; ``None`` leaves it out,
    so that ``alist`` lists every namespace of the thread.
    """
    conf: dict[str, Any] = {"thread_id": thread}
    if ns is not None:
        conf["checkpoint_ns"] = ns
    if cid:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


async def value_holders(saver: Any, thread: str, channel: str, ns: str = "") -> list[str]:
    """The keys of the objects (other than the latest checkpoint's own) that hold the
    latest value of ``channel``: older checkpoints holding its runs, or its blob."""
    from langgraph_s3.core import codec
    from langgraph_s3.core.values import value_keys

    entry = await saver.manifest.reads.latest(thread, ns)
    nsp = saver.layout.namespace(thread, ns)
    key = nsp.checkpoint_at(entry.latest_tail)
    env = codec.load_checkpoint(await saver.objects.get(key))
    versions = saver.serde.loads_typed(env.checkpoint)["channel_versions"]
    return [k for k in value_keys(nsp, key, env, versions)[channel] if k != key]


async def side_by_side(scenario: Scenario, saver: Any) -> Any:
    """Run ``scenario`` on InMemorySaver, then on ``saver``: the results must be equal."""
    from langgraph.checkpoint.memory import InMemorySaver

    expected = await scenario(InMemorySaver())
    actual = await scenario(saver)
    assert actual == expected
    return actual


@contextlib.contextmanager
def moto_process(code: str | None = None, **env: str) -> Iterator[str]:
    """A moto server in a process of its own, with extra environment (IAM enforcement,
    managed policies): its URL, for the block's duration. ``code``: a Python script
    run instead of ``moto.server`` (moto's server with calls of its own added)."""
    from langgraph_s3.testing import free_port

    port = free_port()
    start = ["-m", "moto.server"] if code is None else ["-c", code]
    proc = subprocess.Popen(
        [sys.executable, *start, "-H", "127.0.0.1", "-p", str(port)],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


# ------------------------------------------------- the command line, as a subprocess
KEEPALIVE_S = 12.0  # aiobotocore's pool closes a connection idle this long


def dropped_connections(relay: TcpRelay) -> int:
    """Connections the client closed other than by its pool's keep-alive expiry: 0 for
    clients kept between invocations. A connection a pool grew to for a burst of requests
    may sit idle past the expiry on a slow machine and close then; that is the pool
    working, and it shows here as 0, where a connection closed after use counts 1."""
    gone = relay.accepted - relay.open  # open first: a close is logged before it is counted
    expired = sum(1 for idle in relay.idle_closes() if idle >= KEEPALIVE_S - 0.5)
    return gone - expired


IN_BUCKET = ("s3", "seaweed", "ministack")
"""The ``manifest_kind`` values whose manifest is in the bucket (``manifest="s3"``): on
moto, SeaweedFS and ministack (``conftest.endpoint``)."""


def names_of(kind: str) -> dict[str, str]:
    """New names for a deployment whose manifest is ``kind``'s: a bucket and a table
    (``dynamodb``), or a bucket alone holding its manifest (``s3`` on moto, ``seaweed``
    and ``ministack`` on theirs: ``conftest.endpoint``)."""
    from langgraph_s3.testing import unique_names

    names = unique_names()
    if kind in IN_BUCKET:
        return {"bucket": names["bucket"], "manifest": "s3"}
    return dict(names)


def same_deployment(saver: Any) -> dict[str, Any]:
    """Keywords of another saver on ``saver``'s deployment: its bucket, prefix and
    manifest (a table's name, or ``manifest="s3"``)."""
    t = saver.target
    where = {"manifest": "s3"} if t.manifest == "s3" else {"table": t.table}
    return {"bucket": t.bucket, "prefix": t.prefix, **where}


def url_of(names: dict[str, str]) -> str:
    """The deployment's URL: its table, or ``manifest=s3`` (its manifest in the bucket)."""
    where = "manifest=s3" if names.get("manifest") == "s3" else f"table={names['table']}"
    return f"s3://{names['bucket']}/{names.get('prefix', '')}?{where}"


def run(
    server: Any, url: str | None, *args: str, stdin: bytes | None = None, cwd: Any = None
) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "AWS_ENDPOINT_URL": server.url}
    env.pop("LANGGRAPH_S3_URL", None)
    if url is not None:
        env["LANGGRAPH_S3_URL"] = url
    return subprocess.run(
        [sys.executable, "-m", "langgraph_s3.cli", *args],
        env=env,
        input=stdin,
        capture_output=True,
        timeout=120,
        cwd=cwd,
    )


def answer(proc: subprocess.CompletedProcess[bytes]) -> Any:
    assert proc.returncode == 0, proc.stderr.decode()
    return orjson.loads(proc.stdout)


async def build(saver: Any) -> None:
    """The operator's threads: "chat" (a tool call, then a fork by update_state and a
    run from it) and "nest" (a subgraph in a subgraph, waiting on an interrupt)."""
    from langgraph_s3.testing.graphs import CHAT_TURNS, chat_graph, nested_graph

    chat = chat_graph().compile(checkpointer=saver)
    for text in CHAT_TURNS[:2]:
        await chat.ainvoke({"messages": [("user", text)]}, cfg("chat"))
    history = [s async for s in chat.aget_state_history(cfg("chat"))]
    fork = await chat.aupdate_state(history[2].config, {"messages": [("user", "a fork")]})
    await chat.ainvoke(None, fork)
    await nested_graph().compile(checkpointer=saver).ainvoke({"trail": []}, cfg("nest", ns=None))


DAY = 86400.0


class Clock:
    """The manifest's clock, moved by hand."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, days: float) -> None:
        self.now += days * DAY


def clocked(saver: AsyncS3Saver) -> Clock:
    clock = Clock()
    cast(Manifest, saver.manifest).clock = clock
    return clock


async def chat(saver: Any, thread: str, *texts: str) -> None:
    graph = chat_graph().compile(checkpointer=saver)
    for text in texts:
        await graph.ainvoke({"messages": [("user", text)]}, cfg(thread))


async def nest(saver: Any, thread: str) -> None:
    graph = nested_graph().compile(checkpointer=saver)
    await graph.ainvoke({"trail": []}, cfg(thread, ns=None))
    await graph.ainvoke(Command(resume="yes"), cfg(thread, ns=None))


async def left_of(saver: AsyncS3Saver, thread: str) -> list[Listed]:
    """The objects under a thread but a deletion's erasure markers (which hold nothing)."""
    prefix = saver.layout.thread(thread)
    listed = await saver.raw_objects.list_all(prefix)
    return [o for o in listed if not erasure_marker(prefix, o.key, o.size)]


async def keys_of(saver: AsyncS3Saver, thread: str) -> list[str]:
    return [o.key for o in await saver.objects.list_all(saver.layout.thread(thread))]


async def build_threads(saver: Any) -> None:
    """Three threads: a chat with a fork, a nested graph waiting on an interrupt,
    and a nested graph resumed to its end."""
    chat = chat_graph().compile(checkpointer=saver)
    for text in CHAT_TURNS[:3]:
        await chat.ainvoke({"messages": [("user", text)]}, cfg("chat"))
    history = [s async for s in chat.aget_state_history(cfg("chat"))]
    fork = await chat.aupdate_state(history[4].config, {"messages": [("user", "a fork")]})
    await chat.ainvoke(None, fork)
    nested = nested_graph().compile(checkpointer=saver)
    await nested.ainvoke({"trail": []}, cfg("waiting", ns=None))
    await nested.ainvoke({"trail": []}, cfg("done", ns=None))
    await nested.ainvoke(Command(resume="yes"), cfg("done", ns=None))


THREADS = ("chat", "waiting", "done")


def _v(version: Any) -> tuple[int, str]:
    counter, _, rest = str(version).partition(".")
    return int(counter), rest


async def dump(saver: BaseCheckpointSaver[Any], thread: str) -> list[tuple[Any, ...]]:
    """Every checkpoint of a thread as the saver answers it: ids, parents, the
    checkpoint and metadata, and the pending writes, in a fixed order."""
    config: Any = {"configurable": {"thread_id": thread}}
    try:
        tuples = [t async for t in saver.alist(config)]
    except NotImplementedError:
        tuples = list(saver.list(config))
    out = []
    for t in tuples:
        conf = t.config["configurable"]
        parent = (t.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        ck = dict(t.checkpoint)
        values = {k: v for k, v in ck.pop("channel_values").items()}
        # savers pad a version's counter differently (an import rewrites it in the
        # target's form): compare the counter's value and the rest
        ck["channel_versions"] = {c: _v(v) for c, v in ck["channel_versions"].items()}
        ck["versions_seen"] = {
            n: {c: _v(v) for c, v in seen.items()} for n, seen in ck["versions_seen"].items()
        }
        out.append(
            (
                conf["checkpoint_ns"],
                conf["checkpoint_id"],
                parent,
                ck,
                values,
                {k: v for k, v in t.metadata.items()},
                sorted((w[0], w[1], repr(w[2])) for w in t.pending_writes or ()),
            )
        )
    return sorted(out, key=lambda x: (x[0], x[1]))


async def graph_views(saver: Any, thread: str) -> tuple[Any, Any]:
    graph = (chat_graph() if thread == "chat" else nested_graph()).compile(checkpointer=saver)
    state = await graph.aget_state(cfg(thread, ns=None), subgraphs=True)
    return await ahistory(graph, cfg(thread, ns=None)), (state.values, state.next)


async def ttl_removes(saver: AsyncS3Saver, thread: str) -> None:
    """What DynamoDB's TTL does to an expired item: it deletes it."""
    ddb = await saver.clients.client("dynamodb")
    await ddb.delete_item(
        TableName=saver.target.table,
        Key={"pk": {"S": saver.manifest.deployment + encode(thread)}, "sk": {"S": encode("")}},
    )


def saver_on(server: Any, names: dict[str, str] | None = None, **kw: Any) -> AsyncS3Saver:
    """A saver on the moto ``server``: on ``names`` (``unique_names()``'s; new ones when
    None), other keywords passed on."""
    from langgraph_s3.testing import unique_names

    return AsyncS3Saver(endpoint_url=server.url, **(names or unique_names()), **kw)


async def agent_user(saver: AsyncS3Saver, statements: list[dict[str, Any]]) -> dict[str, str]:
    """On a moto server that enforces IAM after its first requests
    (``moto_process(INITIAL_NO_AUTH_ACTION_COUNT=...)``): an IAM user with ``statements``
    as its policy, and the environment of a process acting as it (the access key; the
    requests moto serves unchecked are used up first)."""
    import json

    iam = await saver.clients.client("iam")
    await iam.create_user(UserName="agent")
    policy = {"Version": "2012-10-17", "Statement": statements}
    await iam.put_user_policy(
        UserName="agent", PolicyName="agent", PolicyDocument=json.dumps(policy)
    )
    key = (await iam.create_access_key(UserName="agent"))["AccessKey"]
    s3 = await saver.clients.client("s3")
    for _ in range(200):
        try:
            await s3.list_buckets()
        except Exception:
            break
    else:
        raise AssertionError("moto never began to check IAM")
    return {
        "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
    }


async def thread_items(saver: Any, thread: str) -> list[dict[str, Any]]:
    """Every manifest item of ``thread`` as stored (1 consistent Query)."""
    ddb = await saver.clients.client("dynamodb")
    found = await ddb.query(
        TableName=saver.target.table,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": saver.manifest.deployment + encode(thread)}},
        ConsistentRead=True,
    )
    return list(found["Items"])


async def until_stored(saver: Any, args: tuple[Any, ...]) -> None:
    """Wait until the object of the checkpoint ``manifest.commits.advance(*args)``
    commits is stored (its PUT goes out beside, or after, the commit)."""
    key = saver.layout.namespace(args[0], args[1]).checkpoint_at(args[3])
    while await saver.raw_objects.get(key) is None:
        await asyncio.sleep(0.005)


async def advance_rewriting(
    manifest: Any, *at: Any, rewrite: Callable[[], Awaitable[None]], how: Any = None
) -> Any:
    """``manifest.commits.advance(*at)`` whose writer stores its objects again when
    asked (a ``rewrite`` need: after a deletion), as the saver's writer does."""
    from langgraph_s3.core.commit import How, Need

    how = how or How(meets=frozenset({"rewrite"}))
    out = await manifest.commits.advance(*at, how)
    while isinstance(out, Need):
        assert out.kind == "rewrite", out
        await rewrite()
        how = how.after(out)
        out = await manifest.commits.advance(*at, how)
    return out
