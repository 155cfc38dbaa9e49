"""Benchmark: one 20-turn chat on every saver, on the same latency-injecting server.

The chat is an agent node and a tool node on ``add_messages`` state, with a
scripted model and messages of about 1 KB (words drawn from a fixed vocabulary,
so they compress like prose, not like repeated text). The agent calls a tool on
turns 2, 7, 12 and 17. Every saver runs it in this one process against one moto
server that sleeps 20 ms inside each S3 request and 6 ms inside each DynamoDB
request (``langgraph_s3.local.BENCH_LATENCY``) and logs every request, so:

* requests and KB uploaded per turn are what the server received;
* round trips per turn are the server's critical path: the longest chain of
  requests, each starting after the previous one ended;
* ms per turn is wall time (latency, loopback, moto and client CPU: relative);
* stored after 100 turns is what the bucket (and table) hold afterwards.

Peer savers run through thin adapters in ``bench/peers/`` when their package is
installed (each adapter says how to install it); a missing one is listed as
skipped. A second table follows langgraph-s3 over 20, 100 and 300 turns: bytes
uploaded and stored against the size of the final state.

    python bench/compare.py [--turns 20] [--stored-turns 100] [--growth 20 100 300]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import random
import statistics
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, MessagesState, StateGraph

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.local import (
    BENCH_LATENCY,
    Latency,
    MotoServer,
    ServedRequest,
    critical_path,
    moto_server,
    unique_names,
    use_dummy_credentials,
)

TOOL_TURNS = frozenset({2, 7, 12, 17})
"""1-based turns whose question makes the agent call the tool (every 20 turns)."""
MESSAGE_BYTES = 1000
_VOCABULARY = (
    "the of and to in is was that for it with as his on be at by had are but from or "
    "have an they which one you were all we her she there would their will when who him "
    "been has more if no out so said what up its about than into them can only other "
    "time new some could these two may first then do any like my now over such our man "
    "me even most made after also did many before must through back years where much "
    "your way well down should because each just those people how too little state good "
    "very make world still own see men work long get here between both life being under "
    "never day same another know while last might us great old year off come since "
    "against go came right used take three lighthouse harbour weather storm north coast "
    "river mountain city market bridge station letter garden window kitchen journey"
)
_WORDS = _VOCABULARY.split()


# ------------------------------------------------------------------------ the chat
def text(seed: int, size: int = MESSAGE_BYTES) -> str:
    """About ``size`` bytes of prose-like words, the same for the same seed."""
    rng = random.Random(seed)
    out: list[str] = []
    n = 0
    while n < size:
        w = rng.choice(_WORDS)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)


def chat() -> StateGraph[Any]:
    """Agent + tool on ``add_messages``, with a scripted model."""

    def agent(state: MessagesState) -> dict[str, Any]:
        msgs = state["messages"]
        last = msgs[-1]
        n = len(msgs)
        if isinstance(last, HumanMessage) and "[tool]" in str(last.content):
            call = {"name": "lookup", "args": {"q": str(last.content)[:40]}, "id": f"call{n}"}
            return {"messages": [AIMessage(content=text(n * 7 + 1, 200), tool_calls=[call])]}
        return {"messages": [AIMessage(content=text(n * 7 + 2))]}

    def tools(state: MessagesState) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
        n = len(state["messages"])
        return {"messages": [ToolMessage(content=text(n * 7 + 3), tool_call_id=call["id"])]}

    def route(state: MessagesState) -> str:
        return "tools" if getattr(state["messages"][-1], "tool_calls", None) else END

    b = StateGraph(MessagesState)
    b.add_node("agent", agent)
    b.add_node("tools", tools)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", route, ["tools", END])
    b.add_edge("tools", "agent")
    return b


def question(turn: int) -> dict[str, Any]:
    tag = " [tool]" if ((turn - 1) % 20) + 1 in TOOL_TURNS else ""
    return {"messages": [HumanMessage(content=text(turn * 7) + tag)]}


# ------------------------------------------------------------------- measurement
@dataclass
class Turn:
    tool: bool
    requests: int
    rounds: int
    ms: float
    uploaded: int


@dataclass
class Result:
    name: str
    turns: list[Turn] = field(default_factory=list)
    stored: int | None = None
    note: str = ""

    def mean(self, key: str, tool: bool | None = None) -> float:
        rows = [t for t in self.turns if tool is None or t.tool == tool]
        return statistics.mean(getattr(t, key) for t in rows) if rows else float("nan")


SaverFactory = Callable[[MotoServer, dict[str, str]], contextlib.AbstractAsyncContextManager[Any]]


@contextlib.asynccontextmanager
async def ours(server: MotoServer, names: dict[str, str]) -> AsyncIterator[Any]:
    async with AsyncS3Saver(endpoint_url=server.url, **names) as saver:  # type: ignore[arg-type]
        await saver.setup()
        yield saver


@contextlib.asynccontextmanager
async def in_memory(server: MotoServer, names: dict[str, str]) -> AsyncIterator[Any]:
    yield InMemorySaver()


async def run_chat(
    server: MotoServer, saver: Any, turns: int, durability: str, thread: str = "bench"
) -> list[Turn]:
    graph = chat().compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": thread}}
    out = []
    for i in range(1, turns + 1):
        with server.recording() as log:
            t0 = time.perf_counter()
            await graph.ainvoke(question(i), cfg, durability=durability)  # type: ignore[arg-type]
            ms = (time.perf_counter() - t0) * 1000
        out.append(_turn(((i - 1) % 20) + 1 in TOOL_TURNS, log, ms))
    return out


def _turn(tool: bool, log: Sequence[ServedRequest], ms: float) -> Turn:
    return Turn(tool, len(log), critical_path(log), ms, sum(r.received for r in log))


async def stored_bytes(server: MotoServer) -> int:
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
                total += sum(len(json.dumps(i)) for i in page["Items"])
    return total


def peers() -> list[tuple[str, SaverFactory | None, str]]:
    """The peer adapters of bench/peers/: (label, factory or None, why skipped)."""
    found = []
    folder = Path(__file__).parent / "peers"
    for path in sorted(folder.glob("*.py")):
        if path.name.startswith("_"):
            continue
        spec = importlib.util.spec_from_file_location(f"peers.{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except ImportError as exc:
            found.append((path.stem, None, f"not installed ({exc.name}): {module.__doc__}"))
            continue
        found.append((module.LABEL, module.make, ""))
    return found


async def one(
    server: MotoServer, label: str, factory: SaverFactory, turns: int, durability: str
) -> Result:
    server.reset()
    res = Result(label)
    with server.delayed(BENCH_LATENCY):
        async with factory(server, dict(unique_names())) as saver:
            res.turns = await run_chat(server, saver, turns, durability)
    return res


async def stored_after(server: MotoServer, factory: SaverFactory, turns: int) -> int:
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
    """Mean bytes uploaded by the 5 turns ending at turn ``at`` (runs merge on some)."""
    window = turns[max(at - 5, 0) : at]
    return statistics.mean(t.uploaded for t in window)


# --------------------------------------------------------------------------- main
def _row(r: Result) -> str:
    if not r.turns:
        return f"| {r.name} | - | - | - | - | - | - | {r.note} |"
    stored = f"{r.stored / 1e6:,.1f} MB" if r.stored is not None else "-"
    return (
        f"| {r.name} | {r.mean('requests', False):.1f} / {r.mean('requests', True):.1f} "
        f"| {r.mean('rounds', False):.1f} / {r.mean('rounds', True):.1f} "
        f"| {r.mean('ms'):,.0f} | {r.mean('uploaded') / 1000:,.1f} | {stored} | {r.note} |"
    )


async def main(turns: int, stored_turns: int, growth: Sequence[int]) -> None:
    use_dummy_credentials()
    import langgraph.version as lgv

    with moto_server(latency=Latency()) as server:
        rows: list[Result] = []
        for durability in ("async", "sync", "exit"):
            r = await one(server, f"langgraph-s3 ({durability})", ours, turns, durability)
            if durability == "async":
                r.stored = await stored_after(server, ours, stored_turns)
            rows.append(r)
        for label, factory, why in peers():
            if factory is None:
                rows.append(Result(label, note=f"skipped: {why}"))
                continue
            try:
                r = await one(server, label, factory, turns, "async")
                r.stored = await stored_after(server, factory, stored_turns)
            except Exception as exc:  # a peer's failure is reported, not fatal
                r = Result(label, note=f"failed: {type(exc).__name__}: {str(exc)[:120]}")
            rows.append(r)
        mem = await one(server, "InMemorySaver", in_memory, turns, "async")
        rows.append(mem)

        print(
            f"\n{turns}-turn chat (tool on turns {sorted(TOOL_TURNS)}), ~{MESSAGE_BYTES} B "
            f"messages; moto with {BENCH_LATENCY.s3 * 1000:g} ms per S3 and "
            f"{BENCH_LATENCY.dynamodb * 1000:g} ms per DynamoDB request; "
            f"langgraph {lgv.__version__}; {time.strftime('%Y-%m-%d')}\n"
        )
        print(
            "| saver | requests per turn (plain / tool) | round trips per turn (plain / tool) "
            f"| ms per turn | KB uploaded per turn | stored after {stored_turns} turns | |"
        )
        print("|---|---:|---:|---:|---:|---:|---|")
        for r in rows:
            print(_row(r))

        print("\nlanggraph-s3 (durability async): bytes against the conversation's length\n")
        print(
            "| turns | final state | uploaded | stored | stored ÷ final "
            "| KB uploaded at turn 10 / the last turn (mean of 5 turns around) |"
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
    args = ap.parse_args()
    asyncio.run(main(args.turns, args.stored_turns, args.growth))
