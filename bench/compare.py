"""Benchmark: one 20-turn chat on every saver, on the same latency-injecting server.

The chat is an agent node and a tool node on ``add_messages`` state, with a
scripted model and messages of about 1 KB (words drawn from a fixed vocabulary,
so they compress like prose, not like repeated text). The agent calls a tool on
turns 2, 7, 12 and 17. Every saver runs it against one moto server in a process of
its own (``moto_child``: moto's CPU is not the client's, and its slow handlers do not
reorder what the client sends) that sleeps ten times AWS-like latencies inside each
request (``AWS_LATENCY``: S3 PUT 25 ms, GET 15 ms, LIST 20 ms, DynamoDB 5 ms; at 10x,
what orders the requests is the network, as on AWS, not the client's or the server's
CPU) and logs every request, so:

* requests and KB uploaded per turn are what the server received;
* round trips per turn are the server's critical path: the longest chain of
  requests, each starting after the previous one ended;
* modeled ms per turn is that path with each request weighed by its AWS-like
  latency at 1x (``weighted_path``): what a turn waits on AWS, by the order the
  requests really went out in (the mean of the plain and the tool turns, and the
  best of each); and how many S3 requests are on it. A request that ended after
  the turn returned is left out of the path (the turn cannot have waited on it)
  and counted in its own column. langgraph-s3's background work (the PUTs of held
  checkpoints and writes) is tagged by the client (``tag_background``) and held a
  second more by the server (``MEASURED``): one the turn did not wait on then ends
  after the turn returned, whatever the turn's length, and one it waited on (a
  process's first put) is on the path and in the turn's time. After each turn the
  bench waits for that work to end, as a user's pause would, outside the turn's time;
* ms per turn, measured, is wall time at the 10x latencies (relative only);
* client CPU per turn is the CPU time of the bench's process (moto runs in its own),
  or of the peer's own process, over the turns after the first (a cold start), the
  background work a turn left included; and, in a line of its own, the median of 5
  interleaved pairs of runs of langgraph-s3 and the DynamoDB saver without injected
  latency, and of their ratios;
* stored after 100 turns is what the bucket (and table) hold afterwards.

Peer savers run through thin adapters in ``bench/peers/`` when their package is
installed (each adapter says how to install it); a missing one is listed as
skipped. Postgres (langgraph-checkpoint-postgres) runs on a local PostgreSQL the
bench starts itself (Debian's ``postgresql`` package: ``initdb``/``pg_ctl``, as the
``postgres`` user when run as root), behind a relay that adds 1 ms each way, as an
RDS instance in the same zone; its round trips are the relay's exchanges (the
client's bytes up to the server's answer), each weighed 2 ms in the modeled path, and
its bytes are what the client sent; without PostgreSQL it is listed as skipped.

A second table follows langgraph-s3 over 20, 100 and 300 turns: bytes
uploaded and stored against the size of the final state.

    python bench/compare.py [--turns 20] [--stored-turns 100] [--growth 20 100 300]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from chat import MESSAGE_BYTES, TOOL_TURNS, chat, question
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing.moto import (
    AWS_LATENCY,
    Latency,
    ServedRequest,
    background_ended,
    critical_path,
    free_port,
    tag_background,
    unique_names,
    use_dummy_credentials,
    weighted_path,
)
from langgraph_s3.testing.moto_child import ChildMoto, moto_child
from langgraph_s3.testing.relay import TcpRelay

SLOWER = 10
"""The injected latencies are AWS's times this; the chain found is weighed at 1x."""
MEASURED = dataclasses.replace(AWS_LATENCY, background=0.1).scaled(SLOWER)
"""What the server injects: 10x AWS-like latencies, and a second more for the requests
of background work (``tag_background``): one the turn did not wait on then ends after
the turn returned, off its path; one it waited on is on the path and in its time."""


# ------------------------------------------------------------------- measurement
@dataclass
class Turn:
    tool: bool
    requests: int
    rounds: int
    ms: float
    uploaded: int
    modeled: float = 0.0
    """Milliseconds of the critical path weighted by AWS_LATENCY (per operation)."""
    s3_on_path: int = 0
    """S3 requests on that path."""
    after: int = 0
    """Requests that ended after the turn returned (not waited on: off the path)."""
    cpu: float = 0.0
    """Milliseconds of the client's CPU."""


@dataclass
class Result:
    name: str
    turns: list[Turn] = field(default_factory=list)
    stored: int | None = None
    note: str = ""

    def mean(self, key: str, tool: bool | None = None) -> float:
        rows = [t for t in self.turns if tool is None or t.tool == tool]
        return statistics.mean(getattr(t, key) for t in rows) if rows else float("nan")

    def warm(self, key: str) -> float:
        """The mean of ``key`` over the turns after the first (a cold start: clients
        made, models loaded)."""
        rows = self.turns[1:] or self.turns
        return statistics.mean(getattr(t, key) for t in rows) if rows else float("nan")

    def best(self, key: str, tool: bool | None = None) -> float:
        """The least of ``key`` over the turns (the first turn aside: a cold start)."""
        rows = [t for t in self.turns[1:] if tool is None or t.tool == tool]
        return min(getattr(t, key) for t in rows) if rows else float("nan")


SaverFactory = Callable[[ChildMoto, dict[str, str]], contextlib.AbstractAsyncContextManager[Any]]


@contextlib.asynccontextmanager
async def ours(server: ChildMoto, names: dict[str, str]) -> AsyncIterator[Any]:
    async with AsyncS3Saver(endpoint_url=server.url, **names) as saver:  # type: ignore[arg-type]
        tag_background(saver.clients)
        await saver.setup()
        yield saver


@contextlib.asynccontextmanager
async def in_memory(server: ChildMoto, names: dict[str, str]) -> AsyncIterator[Any]:
    yield InMemorySaver()


async def run_chat(
    server: ChildMoto, saver: Any, turns: int, durability: str, thread: str = "bench"
) -> list[Turn]:
    graph = chat().compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": thread}}
    out = []
    for i in range(1, turns + 1):
        with server.recording() as log:
            t0, c0 = time.perf_counter(), time.process_time()
            await graph.ainvoke(question(i), cfg, durability=durability)  # type: ignore[arg-type]
            t1 = time.perf_counter()
            await background_ended()  # a user's pause: the turn's requests, not its time
            cpu = (time.process_time() - c0) * 1000  # its background work's CPU included
        out.append(_turn(((i - 1) % 20) + 1 in TOOL_TURNS, log, t0, t1, cpu))
    return out


def _weight(r: ServedRequest) -> float:
    """A request's modeled milliseconds: AWS-like by operation; a database exchange is
    the relay's round trip."""
    if r.service == "postgres":
        return 2 * PG_DELAY * 1000
    return AWS_LATENCY.of_request(r.service, r.operation) * 1000


def _turn(tool: bool, log: Sequence[ServedRequest], t0: float, t1: float, cpu: float) -> Turn:
    """One turn from the server's log of it; ``t0``/``t1``: when the call began and
    returned (``perf_counter``, the machine's monotonic clock: the server's too)."""
    waited = [r for r in log if r.end <= t1]
    modeled, chain = weighted_path(waited, _weight)
    s3 = sum(1 for r in chain if r.service == "s3")
    return Turn(
        tool,
        len(log),
        critical_path(waited),
        (t1 - t0) * 1000,
        sum(r.received for r in log),
        modeled,
        s3,
        len(log) - len(waited),
        cpu,
    )


async def stored_bytes(server: ChildMoto) -> int:
    """Bytes of every object in every bucket, plus every item of every table (as the
    JSON of its attributes: DynamoDB bills about that)."""
    from aiobotocore.session import get_session

    total = 0
    session = get_session()
    async with session.create_client("s3", endpoint_url=server.url) as s3:
        for b in (await s3.list_buckets())["Buckets"]:
            pages = s3.get_paginator("list_objects_v2").paginate(Bucket=b["Name"])
            async for page in pages:
                total += sum(o["Size"] for o in page.get("Contents", []))
    async with session.create_client("dynamodb", endpoint_url=server.url) as ddb:
        for t in (await ddb.list_tables())["TableNames"]:
            async for page in ddb.get_paginator("scan").paginate(TableName=t):
                total += sum(len(json.dumps(i, default=_b64len)) for i in page["Items"])
    return total


def _b64len(value: Any) -> str:
    """A binary attribute in an item's JSON: as long as DynamoDB counts it (its bytes)."""
    return "x" * len(value) if isinstance(value, bytes) else str(value)


BENCH = Path(__file__).parent
PEERS = [
    # (label, adapter in bench/peers/, venv made by bench/peers/setup.sh)
    ("langgraph-checkpoint-aws 1.2.6 (DynamoDBSaver)", "aws", "a"),
    ("langgraph-checkpoint-objectstorage 0.1.15", "objectstorage", "a"),
    ("langgraph-checkpoint-tigris 0.1.0", "tigris", "b"),
    ("langgraph-checkpoint-s3 0.1.3 (with an adapter)", "s3", "b"),
    ("langgraph-checkpoint-postgres 3.2.0 (PostgreSQL, 1 ms each way)", "postgres", "a"),
]
PG_DELAY = 0.001
"""Seconds the relay adds each way in front of PostgreSQL."""


@dataclass
class Postgres:
    """A PostgreSQL server the bench started, and the delaying relay in front of it."""

    dsn: str
    relay: TcpRelay


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return str(versions[-1]) if versions else None


@contextlib.contextmanager
def postgres() -> Iterator[Postgres | str]:
    """A fresh PostgreSQL cluster in a temporary directory on a free port, with a relay
    adding :data:`PG_DELAY` each way; or the reason there is none."""
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        yield "skipped: no PostgreSQL (apt install postgresql)"
        return
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: run as the package's user
        as_user = ["runuser", "-u", "postgres", "--"]
    with tempfile.TemporaryDirectory(prefix="lgs3-pg-") as tmp:
        data = Path(tmp) / "data"
        if as_user:
            shutil.chown(tmp, "postgres")
        port = free_port()
        run = functools.partial(subprocess.run, check=True, capture_output=True)
        run([*as_user, initdb, "-D", str(data), "-A", "trust", "-U", "bench"])
        opts = f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1"
        run([*as_user, pg_ctl, "-D", str(data), "-l", f"{tmp}/log", "-w", "-o", opts, "start"])
        try:
            with TcpRelay(
                ("127.0.0.1", port), keep_alive=False, delay=PG_DELAY, service="postgres"
            ) as relay:
                yield Postgres(f"postgresql://bench@127.0.0.1:{relay.port}/postgres", relay)
        finally:
            run([*as_user, pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"])


class Peer:
    """A peer saver running the chat in a child process of its own venv (their pins
    conflict with ours and with each other), against our server."""

    def __init__(
        self, server: ChildMoto, adapter: str, venv: str, env: dict[str, str] | None = None
    ) -> None:
        python = BENCH / f".venv-peers-{venv}" / "bin" / "python"
        names = unique_names()
        env = {
            **os.environ,
            "AWS_ENDPOINT_URL": "",
            "PYTHONDONTWRITEBYTECODE": "1",
            **(env or {}),
        }
        self.proc = subprocess.Popen(
            [
                str(python),
                str(BENCH / "peers" / "child.py"),
                adapter,
                server.url,
                names["bucket"],
                names["table"],
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self._expect("ready")

    def _expect(self, word: str) -> list[str]:
        """The child's next line, which must start with ``word``; the rest of it."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        if line[:1] != [word]:
            self.proc.kill()
            raise RuntimeError(f"peer child said {line!r} (exit {self.proc.wait()})")
        return line[1:]

    async def turn(self, n: int) -> float:
        """Run turn ``n``; the milliseconds of the child's CPU it took."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"turn {n}\n")
        self.proc.stdin.flush()
        return float((await asyncio.to_thread(self._expect, "ok"))[0])

    async def stored(self) -> int | None:
        """What the peer's saver stores, as its adapter measures it (None: it cannot)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("stored\n")
        self.proc.stdin.flush()
        size = int((await asyncio.to_thread(self._expect, "stored"))[0])
        return None if size < 0 else size

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
        self.proc.wait(30)


async def run_peer(
    server: ChildMoto, adapter: str, venv: str, turns: int, pg: Postgres | None = None
) -> tuple[list[Turn], int | None]:
    """The peer's turns, and what it stores afterwards by its own measure (None: ask
    the moto server). With ``pg``, a turn's requests are the relay's exchanges."""
    peer = Peer(server, adapter, venv, {"LGS3_BENCH_POSTGRES": pg.dsn} if pg else None)
    out = []
    try:
        for i in range(1, turns + 1):
            if pg is not None:
                pg.relay.reset()
            with server.recording() as log:
                t0 = time.perf_counter()
                cpu = await peer.turn(i)
                t1 = time.perf_counter()
            if pg is not None:
                log = pg.relay.exchanges()
            out.append(_turn(((i - 1) % 20) + 1 in TOOL_TURNS, log, t0, t1, cpu))
        stored = await peer.stored()
    finally:
        peer.close()
    return out, stored


async def one(
    server: ChildMoto, label: str, factory: SaverFactory, turns: int, durability: str
) -> Result:
    server.reset()
    res = Result(label)
    with server.delayed(MEASURED):
        async with factory(server, dict(unique_names())) as saver:
            res.turns = await run_chat(server, saver, turns, durability)
    return res


CPU_PAIRS = 5
"""Interleaved runs of langgraph-s3 and the DynamoDB saver whose CPU ratio is reported
(the median: one pair's ratio moves by a third from run to run on a shared machine)."""


async def cpu_pairs(server: ChildMoto, pairs: int, turns: int) -> list[tuple[float, float]]:
    """``pairs`` times: the chat on langgraph-s3, then on the DynamoDB saver (its own
    process), each on a fresh bucket and table without injected latency; each one's
    client CPU per turn over the turns after the first. [] when the peer's venv is
    missing."""
    label, adapter, venv = PEERS[0]
    if not (BENCH / f".venv-peers-{venv}").exists():
        return []
    out = []
    for _ in range(pairs):
        server.reset()
        async with ours(server, dict(unique_names())) as saver:
            mine = Result("ours", await run_chat(server, saver, turns, "async"))
        server.reset()
        theirs = Result(label, (await run_peer(server, adapter, venv, turns))[0])
        out.append((mine.warm("cpu"), theirs.warm("cpu")))
    return out


async def stored_after(server: ChildMoto, factory: SaverFactory, turns: int) -> int:
    server.reset()
    with server.delayed(None):  # bytes do not depend on latency
        async with factory(server, dict(unique_names())) as saver:
            await run_chat(server, saver, turns, "async")
    return await stored_bytes(server)


async def final_state_bytes(turns: int) -> int:
    """The serialized size of the chat's state after ``turns`` turns (JsonPlus)."""
    mem = InMemorySaver()
    graph = chat().compile(checkpointer=mem)
    cfg = {"configurable": {"thread_id": "size"}}
    for i in range(1, turns + 1):
        await graph.ainvoke(question(i), cfg)
    state = await graph.aget_state(cfg)
    return len(JsonPlusSerializer().dumps_typed(state.values)[1])


def _around(turns: Sequence[Turn], at: int) -> float:
    """Mean bytes uploaded by the plain turns among the 10 ending at turn ``at`` (runs
    merge on some; the issue's bound is over plain turns 91-100)."""
    window = [t for t in turns[max(at - 10, 0) : at] if not t.tool]
    return statistics.mean(t.uploaded for t in window)


# --------------------------------------------------------------------------- main
def _row(r: Result) -> str:
    if not r.turns:
        return f"| {r.name} | - | - | - | - | - | - | - | - | - | - | {r.note} |"
    stored = f"{r.stored / 1e6:,.1f} MB" if r.stored is not None else "-"
    return (
        f"| {r.name} | {r.mean('requests', False):.1f} / {r.mean('requests', True):.1f} "
        f"| {r.mean('rounds', False):.1f} / {r.mean('rounds', True):.1f} "
        f"| {r.mean('modeled', False):,.0f} / {r.mean('modeled', True):,.0f} "
        f"| {r.best('modeled', False):,.0f} / {r.best('modeled', True):,.0f} "
        f"| {r.mean('s3_on_path', False):.1f} / {r.mean('s3_on_path', True):.1f} "
        f"| {r.mean('after'):.1f} | {r.mean('ms'):,.0f} | {r.warm('cpu'):,.1f} "
        f"| {r.mean('uploaded') / 1000:,.1f} "
        f"| {stored} | {r.note} |"
    )


async def main(
    turns: int, stored_turns: int, growth: Sequence[int], only: str | None = None
) -> None:
    use_dummy_credentials()
    import langgraph.version as lgv

    with moto_child(latency=Latency()) as server:
        rows: list[Result] = []
        mine = only is None or only in "langgraph-s3"
        for durability in ("async", "sync", "exit") if mine else ():
            r = await one(server, f"langgraph-s3 ({durability})", ours, turns, durability)
            if durability == "async":
                r.stored = await stored_after(server, ours, stored_turns)
            rows.append(r)
        with postgres() as pg:
            for label, adapter, venv in PEERS:
                if only is not None and only not in adapter:
                    continue
                if not (BENCH / f".venv-peers-{venv}").exists():
                    rows.append(Result(label, note="skipped: run bench/peers/setup.sh first"))
                    continue
                if adapter == "postgres" and isinstance(pg, str):
                    rows.append(Result(label, note=pg))
                    continue
                db = pg if adapter == "postgres" and not isinstance(pg, str) else None
                try:
                    r = Result(label)
                    server.reset()
                    with server.delayed(MEASURED):
                        r.turns, _ = await run_peer(server, adapter, venv, turns, db)
                    server.reset()
                    _, r.stored = await run_peer(server, adapter, venv, stored_turns, db)
                    if r.stored is None:
                        r.stored = await stored_bytes(server)
                except Exception as exc:  # a peer's failure is reported, not fatal
                    r = Result(label, note=f"failed: {type(exc).__name__}: {str(exc)[:120]}")
                rows.append(r)
        mem = await one(server, "InMemorySaver", in_memory, turns, "async")
        rows.append(mem)
        pairs = await cpu_pairs(server, CPU_PAIRS, turns) if mine and only is None else []

        lat = AWS_LATENCY
        print(
            f"\n{turns}-turn chat (tool on turns {sorted(TOOL_TURNS)}), ~{MESSAGE_BYTES} B "
            f"messages; moto in its own process with {SLOWER}x AWS-like latencies injected "
            f"per request, the chain weighed at 1x (S3 PUT "
            f"{lat.s3_put or lat.s3:.3f} s, GET {lat.s3_get or lat.s3:.3f} s, LIST "
            f"{lat.s3_list or lat.s3:.3f} s, DynamoDB {lat.dynamodb:.3f} s); "
            f"langgraph {lgv.__version__}; {time.strftime('%Y-%m-%d')}\n"
        )
        print(
            "| saver | requests per turn (plain / tool) | round trips per turn (plain / tool) "
            "| ms on the critical path, modeled (plain / tool) | best of the turns "
            "| S3 requests on it | requests ending after the turn returned "
            f"| ms per turn, measured ({SLOWER}x) | client CPU ms per turn "
            "| KB uploaded per turn "
            f"| stored after {stored_turns} "
            "turns | |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for r in rows:
            print(_row(r))

        if pairs:
            ratios = [o / p for o, p in pairs]
            print(
                f"\nclient CPU per turn, {len(pairs)} interleaved pairs ({turns}-turn chats, "
                "async durability, the turns after the first): langgraph-s3 "
                f"{statistics.median(o for o, _ in pairs):.1f} ms, DynamoDB saver "
                f"{statistics.median(p for _, p in pairs):.1f} ms; ratio median "
                f"{statistics.median(ratios):.2f}x (pairs {min(ratios):.2f}-{max(ratios):.2f}x)"
            )
        print("\nlanggraph-s3 (durability async): bytes against the conversation's length\n")
        print(
            "| turns | final state | uploaded | stored | stored ÷ final "
            "| KB uploaded per plain turn, turns 1-10 / the last 10 |"
        )
        print("|---:|---:|---:|---:|---:|---:|")
        for n in growth:
            server.reset()
            async with ours(server, dict(unique_names())) as saver:
                ts = await run_chat(server, saver, n, "async", thread="growth")
            stored = await stored_bytes(server)
            final = await final_state_bytes(n)
            up = sum(t.uploaded for t in ts)
            print(
                f"| {n} | {final / 1e3:,.0f} KB | {up / 1e6:,.2f} MB | {stored / 1e6:,.2f} MB "
                f"| {stored / final:.2f}x | {_around(ts, 10) / 1e3:.1f} / "
                f"{_around(ts, n) / 1e3:.1f} |"
            )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--stored-turns", type=int, default=100)
    ap.add_argument("--growth", type=int, nargs="*", default=[20, 100, 300])
    ap.add_argument(
        "--only", help="run only langgraph-s3 or the peer whose adapter name contains this"
    )
    sys.path.insert(0, str(BENCH))
    args = ap.parse_args()
    asyncio.run(main(args.turns, args.stored_turns, args.growth, args.only))
