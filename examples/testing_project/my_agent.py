"""A tiny agent graph: it answers every user message with an echo."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph


def build_my_agent() -> StateGraph[Any]:
    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"echo: {state['messages'][-1].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder
