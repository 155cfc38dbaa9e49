"""Real LangGraph graphs (no LLM) and a normalizer to compare savers side by side."""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Interrupt, Send, StateSnapshot, interrupt


# ----------------------------------------------------------------- normalizing
def norm(value: Any) -> Any:
    """Drop what legitimately differs between runs: ids and timestamps."""
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


IGNORED_METADATA = {"run_id", "thread_id", "checkpoint_id", "checkpoint_ns"}


def norm_snapshot(s: StateSnapshot) -> dict[str, Any]:
    md = dict(s.metadata or {})
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
    return [norm_snapshot(s) for s in graph.get_state_history(config)]


async def ahistory(graph: Any, config: dict[str, Any]) -> list[dict[str, Any]]:
    return [norm_snapshot(s) async for s in graph.aget_state_history(config)]


# ---------------------------------------------------------------------- graphs
def chat_graph() -> StateGraph[Any]:
    """A scripted agent: replies, sometimes 'calls a tool' and reads its result."""

    def agent(state: MessagesState) -> dict[str, Any]:
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
        return {"messages": [AIMessage(content=f"reply #{n} to {str(last.content)[:30]!r}")]}

    def tools(state: MessagesState) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
        from langchain_core.messages import ToolMessage

        return {"messages": [ToolMessage(content="sunny, 21C", tool_call_id=call["id"])]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if getattr(last, "tool_calls", None) else END

    b = StateGraph(MessagesState)
    b.add_node("agent", agent)
    b.add_node("tools", tools)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", route, ["tools", END])
    b.add_edge("tools", "agent")
    return b


CHAT_TURNS = ["hello there", "what is the weather in Oslo?", "thanks!", "one more", "bye"]


class ApprovalState(TypedDict):
    request: str
    decision: str
    log: Annotated[list[str], operator.add]


def approval_graph() -> StateGraph[Any]:
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
    trail: Annotated[list[str], operator.add]


def nested_graph() -> StateGraph[Any]:
    """outer -> middle subgraph -> inner subgraph that interrupts."""

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
    items: list[int]
    results: Annotated[list[int], operator.add]


class WorkerState(TypedDict):
    item: int


def fanout_graph() -> StateGraph[Any]:
    def plan(state: FanState) -> dict[str, Any]:
        return {}

    def fan(state: FanState) -> list[Send]:
        return [Send("work", {"item": i}) for i in state["items"]]

    def work(state: WorkerState) -> dict[str, Any]:
        return {"results": [state["item"] ** 2]}

    b = StateGraph(FanState)
    b.add_node("plan", plan)
    b.add_node("work", work)  # type: ignore[arg-type]
    b.add_edge(START, "plan")
    b.add_conditional_edges("plan", fan, ["work"])
    b.add_edge("work", END)
    return b


def _fold_messages(state: list[Any], writes: Sequence[Any]) -> list[Any]:
    for w in writes:
        state = add_messages(state, w)
    return state


def delta_graph(snapshot_every: int = 4) -> StateGraph[Any]:
    """Messages in a DeltaChannel: only every Nth update stores a snapshot."""
    channel = DeltaChannel(_fold_messages, snapshot_frequency=snapshot_every)
    DeltaState = TypedDict(  # type: ignore[misc]  # noqa: UP013 - built per call
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
