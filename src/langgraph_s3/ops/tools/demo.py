"""The demo: a scripted agent persisted on S3, resumed, browsed and forked.

No LLM: the agent (:func:`build_agent`) answers from a script and calls a "weather"
tool when asked, so every run is the same and needs no network beyond S3 and DynamoDB.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import MessagesState, StateGraph
from langgraph.types import StateSnapshot

from langgraph_s3.checkpoint.saver import AsyncS3Saver
from langgraph_s3.testing.graphs import tool_loop

T = TypeVar("T")
SCRIPT = [
    "Hi! I'm planning a trip to Oslo.",
    "What's the weather there?",
    "Great, what should I pack?",
    "And a museum tip?",
    "Thanks, that's all.",
]
FORK_MESSAGE = "Actually, make it Bergen instead."


CITIES = ("Bergen", "Oslo")
REPLIES = [  # (a word in the user's message, the scripted answer), first match wins
    (
        "bergen",
        "Bergen it is: the fjords start at the city's edge. Ask me about the weather there.",
    ),
    ("trip", "Oslo is a fine pick. Ask me about the weather there, what to pack, or what to see."),
    ("pack", "Light layers, good shoes and a rain jacket: the weather turns fast on the coast."),
    ("museum", "The Munch Museum, by the harbour: give it a morning."),
    ("thanks", "Have a great trip!"),
]
OTHERWISE = "I'm the demo's scripted agent (no LLM): ask me about the weather, packing or museums."


def build_agent() -> StateGraph[Any]:
    """The demo's agent: scripted answers (no LLM, no key), and a ``weather`` tool it
    calls when asked about the weather, for the city the conversation last named
    (:func:`~langgraph_s3.testing.graphs.tool_loop`, as ``chat_graph``), with replies that
    read as a conversation."""

    def city(state: MessagesState) -> str:
        for m in reversed(state["messages"]):
            for name in CITIES:
                if name in str(m.content):
                    return name
        return "Oslo"

    def agent(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        if isinstance(last, ToolMessage):
            return {"messages": [AIMessage(content=f"It's {last.content}: a good day to walk.")]}
        text = str(last.content).lower()
        if "weather" in text:
            call = {"name": "weather", "args": {"city": city(state)}, "id": f"c{len(text)}"}
            return {"messages": [AIMessage(content="", tool_calls=[call])]}
        reply = next((said for word, said in REPLIES if word in text), OTHERWISE)
        return {"messages": [AIMessage(content=reply)]}

    def tools(state: MessagesState) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
        answer = f"sunny and 21C in {call['args']['city']}"
        return {"messages": [ToolMessage(content=answer, tool_call_id=call["id"])]}

    return tool_loop(agent, tools)


class Phases:
    """Requests, round trips and bytes per phase, from the savers' own counters."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int, int, int, float]] = []

    async def run(self, name: str, saver: AsyncS3Saver, job: Callable[[], Awaitable[T]]) -> T:
        label = f"demo:{name}"
        t0 = time.perf_counter()
        with saver.stats.label(label):
            out = await job()
        ms = (time.perf_counter() - t0) * 1000
        c = saver.stats.labels.pop(label, None)
        self.rows.append(
            (name, c.requests if c else 0, c.round_trips if c else 0, c.bytes_sent if c else 0, ms)
        )
        return out

    def table(self) -> str:
        lines = [f"{'phase':<34}{'requests':>9}{'round trips':>13}{'bytes sent':>12}{'ms':>9}"]
        for name, req, rt, nbytes, ms in self.rows:
            lines.append(f"{name:<34}{req:>9}{rt:>13}{nbytes:>12,}{ms:>9.0f}")
        return "\n".join(lines)


def _said(msg: AnyMessage, width: int | None = None) -> str:
    """A message as the conversation views show it (``ops.conversation``): its role,
    its whole text and the tools it calls; cut at a word to ``width`` when given."""
    from langgraph_s3.ops.conversation import headline, message
    from langgraph_s3.ops.views import plain

    return headline(message(plain(msg)), width or 10**9)


NEXT = """
what to try next:
  .venv/bin/moto_server -p 5000 &
  .venv/bin/langgraph-s3 demo --endpoint-url http://127.0.0.1:5000
      the demo on a moto server that stays: `threads`, `history`, `view` then browse it
      (this run's embedded server ended with it)
  .venv/bin/langgraph-s3 setup --url "s3://YOUR-BUCKET/agents?table=agents" --dry-run
      what your AWS account needs (drop --dry-run to create it; or the terraform module)
  .venv/bin/langgraph-s3 lambda build path/to/graph.py:graph -r requirements.txt
      your own agent as a Lambda zip; `lambda terraform` then writes its deployment
  .venv/bin/langgraph-s3 --help
      threads, history, show latest, diff latest~2 latest, view (HTML), prune, export...
"""


def history_table(snapshots: list[StateSnapshot]) -> str:
    """Newest first: checkpoint id, step, source, what changed since its parent."""
    lines = [f"{'checkpoint id':<38}{'step':>5}  {'source':<7} what changed"]
    for i, snap in enumerate(snapshots):
        older = snapshots[i + 1] if i + 1 < len(snapshots) else None
        before = len(older.values.get("messages", [])) if older else 0
        msgs = snap.values.get("messages", [])
        added = msgs[before:] if len(msgs) >= before else msgs
        change = "; ".join(_said(m) for m in added) or (
            f"next: {', '.join(snap.next)}" if snap.next else "-"
        )
        md = snap.metadata or {}
        cid = snap.config["configurable"]["checkpoint_id"]
        if len(change) > 70:  # one line per checkpoint: cut at a word
            change = change[:69].rsplit(" ", 1)[0] + "…"
        lines.append(f"{cid:<38}{md.get('step', ''):>5}  {md.get('source', ''):<7} +{change}")
    return "\n".join(lines)


async def run_demo(
    make_saver: Callable[[], AsyncS3Saver], thread_id: str, out: Any, browse: str = ""
) -> None:
    """The demo's phases on ``make_saver``'s deployment, told to ``out``; it ends with
    ``browse`` (the commands that browse what it wrote, where they still can) or
    :data:`NEXT`."""
    phases = Phases()
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    say = out.write

    async def chat(graph: Any, saver: AsyncS3Saver, turn: int, text: str) -> None:
        async def invoke() -> Any:
            return await graph.ainvoke({"messages": [("user", text)]}, config)

        result = await phases.run(f"turn {turn}", saver, invoke)
        say(f"user> {text}\nagent> {_said(result['messages'][-1])}\n")

    first = make_saver()
    await phases.run("setup (bucket + table)", first, first.setup)
    graph: Any = build_agent().compile(checkpointer=first)
    for i, text in enumerate(SCRIPT[:3], 1):
        await chat(graph, first, i, text)
    await first.aclose()
    say("\n-- the saver is dropped (a Lambda ends); a new one resumes the thread --\n\n")

    second = make_saver()
    graph = build_agent().compile(checkpointer=second)

    async def read_latest() -> Any:
        return await graph.aget_state(config)

    state = await phases.run("resume: read latest state", second, read_latest)
    say(f"resumed with {len(state.values['messages'])} messages\n")
    for i, text in enumerate(SCRIPT[3:], 4):
        await chat(graph, second, i, text)

    async def read_history() -> list[StateSnapshot]:
        return [s async for s in graph.aget_state_history(config)]

    snaps = await phases.run("history (all checkpoints)", second, read_history)
    say(f"\nhistory of thread {thread_id!r} ({len(snaps)} checkpoints, newest first)\n")
    say(history_table(snaps) + "\n")

    # fork: go back to the end of turn 1 and take the conversation elsewhere
    turn1 = next(s for s in reversed(snaps) if s.metadata and s.metadata.get("step") == 1)

    async def fork() -> Any:
        update = {"messages": [("user", FORK_MESSAGE)]}
        return await graph.aupdate_state(turn1.config, update, as_node="tools")

    forked = await phases.run("fork from turn 1", second, fork)

    async def resume_fork() -> Any:
        return await graph.ainvoke(None, forked)

    result = await phases.run("continue the fork", second, resume_fork)
    say(f"\nforked from checkpoint {turn1.config['configurable']['checkpoint_id']} (step 1)\n")
    say(f"user> {FORK_MESSAGE}\nagent> {_said(result['messages'][-1])}\n")
    latest = await graph.aget_state(config)
    say(
        f"the thread now follows the fork: {len(latest.values['messages'])} messages "
        f"(the original branch had {len(snaps[0].values['messages'])}, still in history)\n"
    )
    await second.aclose()
    say("\ncost per phase (every HTTP request to S3 and DynamoDB, retries included)\n")
    say(phases.table() + "\n")
    say(browse or NEXT)
