"""Scripted, LLM-free sample graphs, and helpers to compare savers side by side.

Real LangGraph graphs whose "model" answers from a script, so every run is the
same and needs no network beyond S3 and DynamoDB. One copy serves the
``langgraph-s3 demo`` command, the Lambda example, the benchmarks and the
project's tests; use them to check your own deployment (bucket, table, IAM
policy, Lambda) before your agent runs on it, for instance by running a graph on
your saver and on ``InMemorySaver`` and comparing the two histories with
:func:`history`.

Needs ``langgraph`` (the ``demo`` or ``lambda`` extra); ``import langgraph_s3``
does not import this module.
"""

from __future__ import annotations

import inspect
import operator
import re
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Interrupt, Send, StateSnapshot, interrupt

__all__ = [
    "CHAT_TURNS",
    "IGNORED_METADATA",
    "ApprovalState",
    "FanState",
    "NestState",
    "WorkerState",
    "ahistory",
    "approval_graph",
    "chat_graph",
    "delta_graph",
    "fanout_graph",
    "history",
    "nested_graph",
    "norm",
    "norm_snapshot",
    "tool_loop",
]


# ---------------------------------------------------------------------- graphs
def _quoted(text: str, width: int = 60) -> str:
    """What the scripted model quotes of a message: whole up to ``width``, else cut at
    a word with an ellipsis (mid-word only for a word longer than ``width``)."""
    if len(text) <= width:
        return text
    cut = text[:width]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + "…"


def chat_graph(*, async_nodes: bool = False) -> StateGraph[Any]:
    """A scripted agent: replies, and "calls" a weather tool when asked about the weather.

    A human message containing "weather" makes the agent call the ``weather``
    tool, whose result it then answers; any other message gets a scripted reply.
    ``async_nodes``: the same nodes as coroutines. LangGraph runs a sync node of an
    async run on a worker thread, so a turn's requests start in an order that varies
    from run to run; with async nodes there is one order, and on the in-memory fakes
    exact round trips to assert.

    Returns:
        The uncompiled graph (``agent`` and ``tools`` nodes on ``MessagesState``).
    """
    if async_nodes:

        async def agent_async(state: MessagesState) -> dict[str, Any]:
            return _agent(state)

        async def tools_async(state: MessagesState) -> dict[str, Any]:
            return _tools(state)

        return tool_loop(agent_async, tools_async)
    return tool_loop(_agent, _tools)


def _agent(state: MessagesState) -> dict[str, Any]:
    last = state["messages"][-1]
    n = len(state["messages"])
    if isinstance(last, HumanMessage) and "weather" in str(last.content):
        return {
            "messages": [
                AIMessage(
                    content="",
                    tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": f"c{n}"}],
                )
            ]
        }
    return {"messages": [AIMessage(content=f"reply #{n} to {_quoted(str(last.content))!r}")]}


def _tools(state: MessagesState) -> dict[str, Any]:
    call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
    return {"messages": [ToolMessage(content="sunny, 21C", tool_call_id=call["id"])]}


def tool_loop(agent: Any, tools: Any) -> StateGraph[Any]:
    """``agent`` and ``tools`` on ``MessagesState``: a reply that calls a tool goes to
    ``tools``, whose answer goes back to ``agent``; a reply without a call ends the run.
    The shape of the scripted agents here, the demo's and the benches' (each node a
    function of the state returning its update; coroutines route with a coroutine)."""

    def route(state: MessagesState) -> str:
        return "tools" if getattr(state["messages"][-1], "tool_calls", None) else END

    async def route_async(state: MessagesState) -> str:
        return route(state)

    b = StateGraph(MessagesState)
    b.add_node("agent", agent)
    b.add_node("tools", tools)
    b.add_edge(START, "agent")
    router = route_async if inspect.iscoroutinefunction(agent) else route
    b.add_conditional_edges("agent", router, ["tools", END])
    b.add_edge("tools", "agent")
    return b


#: Five user turns for :func:`chat_graph`; the second one calls the weather tool.
CHAT_TURNS = ["hello there", "what is the weather in Oslo?", "thanks!", "one more", "bye"]


class ApprovalState(TypedDict):
    """State of :func:`approval_graph`."""

    request: str
    decision: str
    log: Annotated[list[str], operator.add]


def approval_graph() -> StateGraph[Any]:
    """Human in the loop: draft, then ``review`` interrupts for a decision, then publish.

    Returns:
        The uncompiled graph; resume it with ``Command(resume=<decision>)``.
    """

    def draft(state: ApprovalState) -> dict[str, Any]:
        return {"log": [f"drafted {state['request']}"]}

    def review(state: ApprovalState) -> dict[str, Any]:
        answer = interrupt({"question": f"approve {state['request']}?"})
        return {"decision": answer, "log": [f"reviewed: {answer}"]}

    def publish(state: ApprovalState) -> dict[str, Any]:
        return {"log": [f"published ({state['decision']})"]}

    b = StateGraph(ApprovalState)
    b.add_node("draft", draft)
    b.add_node("review", review)
    b.add_node("publish", publish)
    b.add_edge(START, "draft")
    b.add_edge("draft", "review")
    b.add_edge("review", "publish")
    b.add_edge("publish", END)
    return b


class NestState(TypedDict):
    """State of :func:`nested_graph` and its subgraphs."""

    trail: Annotated[list[str], operator.add]


def nested_graph() -> StateGraph[Any]:
    """Nested namespaces: outer -> middle subgraph -> inner subgraph that interrupts.

    Returns:
        The uncompiled outer graph; resume it with ``Command(resume=<answer>)``.
    """

    def inner_ask(state: NestState) -> dict[str, Any]:
        answer = interrupt("inner needs input")
        return {"trail": [f"inner got {answer}"]}

    inner = StateGraph(NestState)
    inner.add_node("ask", inner_ask)
    inner.add_edge(START, "ask")
    inner.add_edge("ask", END)

    middle = StateGraph(NestState)
    middle.add_node("before", lambda s: {"trail": ["middle before"]})
    middle.add_node("inner", inner.compile())
    middle.add_node("after", lambda s: {"trail": ["middle after"]})
    middle.add_edge(START, "before")
    middle.add_edge("before", "inner")
    middle.add_edge("inner", "after")
    middle.add_edge("after", END)

    outer = StateGraph(NestState)
    outer.add_node("start", lambda s: {"trail": ["outer start"]})
    outer.add_node("middle", middle.compile())
    outer.add_node("end", lambda s: {"trail": ["outer end"]})
    outer.add_edge(START, "start")
    outer.add_edge("start", "middle")
    outer.add_edge("middle", "end")
    outer.add_edge("end", END)
    return outer


class FanState(TypedDict):
    """State of :func:`fanout_graph`."""

    items: list[int]
    results: Annotated[list[int], operator.add]


class WorkerState(TypedDict):
    """What each ``Send`` of :func:`fanout_graph` gives its worker."""

    item: int


def fanout_graph() -> StateGraph[Any]:
    """Map-reduce: ``plan`` sends each of ``items`` to a ``work`` task, which squares it.

    Returns:
        The uncompiled graph; ``results`` collects the squares.
    """

    def plan(state: FanState) -> dict[str, Any]:
        return {}

    def fan(state: FanState) -> list[Send]:
        return [Send("work", {"item": i}) for i in state["items"]]

    def work(state: WorkerState) -> dict[str, Any]:
        return {"results": [state["item"] ** 2]}

    b = StateGraph(FanState)
    b.add_node("plan", plan)
    b.add_node("work", work)
    b.add_edge(START, "plan")
    b.add_conditional_edges("plan", fan, ["work"])
    b.add_edge("work", END)
    return b


def _fold_messages(state: list[Any], writes: Sequence[Any]) -> list[Any]:
    for w in writes:
        state = cast(list[Any], add_messages(state, w))
    return state


def delta_graph(snapshot_every: int = 4) -> StateGraph[Any]:
    """Messages in a ``DeltaChannel``: only every Nth update stores a full snapshot.

    Args:
        snapshot_every: the channel's ``snapshot_frequency``.

    Returns:
        The uncompiled graph: one ``agent`` node that answers each message.
    """
    channel: DeltaChannel[Any] = DeltaChannel(_fold_messages, snapshot_frequency=snapshot_every)
    DeltaState = TypedDict(  # noqa: UP013 - built per call
        "DeltaState", {"messages": Annotated[list[BaseMessage], channel]}
    )

    def agent(state: Any) -> dict[str, Any]:
        last = state["messages"][-1]
        return {"messages": [AIMessage(content=f"#{len(state['messages'])}: {last.content}")]}

    b = StateGraph(DeltaState)
    b.add_node("agent", agent)
    b.add_edge(START, "agent")
    b.add_edge("agent", END)
    return b


# ------------------------------------------------------ comparing savers
def norm(value: Any) -> Any:
    """Drop what legitimately differs between runs: message ids and timestamps.

    Args:
        value: a state value, or any nesting of dicts, lists and messages.

    Returns:
        The same structure with messages as ``(type, content, tool names)`` and
        interrupts as ``("interrupt", value)``.
    """
    if isinstance(value, BaseMessage):
        return (value.type, value.content, [tc["name"] for tc in getattr(value, "tool_calls", [])])
    if isinstance(value, Interrupt):
        return ("interrupt", norm(value.value))
    if isinstance(value, dict):
        return {k: norm(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [norm(v) for v in value]
    return value


def _ns(ns: str) -> str:
    """Namespaces embed task ids, which derive from checkpoint ids."""
    return re.sub(r":[^|]+", ":*", ns)


#: Metadata keys that differ between two runs of the same graph.
IGNORED_METADATA = {"run_id", "thread_id", "checkpoint_id", "checkpoint_ns"}


def norm_snapshot(s: StateSnapshot) -> dict[str, Any]:
    """A state snapshot without ids, so two savers' snapshots compare equal.

    Args:
        s: a snapshot from ``get_state`` or ``get_state_history``.

    Returns:
        Its values, next nodes, metadata, tasks, namespace and whether it has a parent.
    """
    md: dict[str, Any] = dict(s.metadata or {})
    return {
        "values": norm(s.values),
        "next": tuple(s.next),
        "metadata": {
            k: (sorted(_ns(p) for p in v) if k == "parents" else norm(v))
            for k, v in md.items()
            if k not in IGNORED_METADATA
        },
        "tasks": [
            (t.name, norm([i.value for i in t.interrupts]), t.error is not None) for t in s.tasks
        ],
        "has_parent": s.parent_config is not None,
        "ns": _ns(s.config["configurable"].get("checkpoint_ns", "")),
    }


def history(graph: Any, config: dict[str, Any]) -> list[dict[str, Any]]:
    """A compiled graph's state history, newest first, normalized with :func:`norm_snapshot`.

    Args:
        graph: a graph compiled with a checkpointer.
        config: the thread's config.

    Returns:
        One normalized snapshot per checkpoint.
    """
    return [norm_snapshot(s) for s in graph.get_state_history(config)]


async def ahistory(graph: Any, config: dict[str, Any]) -> list[dict[str, Any]]:
    """Async :func:`history`.

    Args:
        graph: a graph compiled with a checkpointer.
        config: the thread's config.

    Returns:
        One normalized snapshot per checkpoint.
    """
    return [norm_snapshot(s) async for s in graph.aget_state_history(config)]
