"""The demo: a scripted agent persisted on S3, resumed, browsed and forked.

No LLM: the agent (:func:`langgraph_s3.graphs.chat_graph`) answers from a
script, calls a "weather" tool when asked, so every run is the same and needs no
network beyond S3 and DynamoDB.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from langchain_core.messages import AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import StateSnapshot

from langgraph_s3.checkpoint.saver import AsyncS3Saver
from langgraph_s3.testing.graphs import chat_graph

T = TypeVar("T")
SCRIPT = [
    "Hi! I'm planning a trip to Oslo.",
    "What's the weather there?",
    "Great, what should I pack?",
    "And a museum tip?",
    "Thanks, that's all.",
]
FORK_MESSAGE = "Actually, make it Bergen instead."


# the demo's agent is the package's scripted chat graph; the old name stays importable
build_agent = chat_graph


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
  .venv/bin/langgraph-s3 setup --url "s3://YOUR-BUCKET/agents?table=agents" --dry-run
      what your AWS account needs (drop --dry-run to create it; or the terraform module)
  .venv/bin/langgraph-s3 lambda build path/to/graph.py:graph -r requirements.txt
      your own agent as a Lambda zip, for terraform/examples/lambda
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


async def run_demo(make_saver: Callable[[], AsyncS3Saver], thread_id: str, out: Any) -> None:
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
    graph: Any = chat_graph().compile(checkpointer=first)
    for i, text in enumerate(SCRIPT[:3], 1):
        await chat(graph, first, i, text)
    await first.aclose()
    say("\n-- the saver is dropped (a Lambda ends); a new one resumes the thread --\n\n")

    second = make_saver()
    graph = chat_graph().compile(checkpointer=second)

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
    say(NEXT)
