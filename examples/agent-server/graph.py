"""A small agent for LangGraph's Agent Server, persisted by langgraph-s3.

No model and no API key: the agent is scripted, so the example runs offline. It
shows each thing the server does with the checkpointer and the store:

- ``chat``: remembers the user's name in the long-term store (``/remember NAME``)
  and greets them by it in every thread; ``/approve`` asks a human first (an
  interrupt, resumed with ``Command(resume=...)``); ``/slow`` takes two seconds (a
  run to roll back or cancel);
- ``delta``: the same chat with its messages in a ``DeltaChannel``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.base import BaseStore
from langgraph.types import interrupt

from langgraph_s3.testing.graphs import delta_graph


async def agent(state: MessagesState, *, store: BaseStore) -> dict[str, Any]:
    last = state["messages"][-1]
    text = str(last.content) if isinstance(last, HumanMessage) else ""
    if text.startswith("/remember "):
        name = text.removeprefix("/remember ").strip()
        await store.aput(("users", "me"), "profile", {"name": name})
        return {"messages": [AIMessage(content=f"I will remember you as {name}.")]}
    if text.startswith("/approve"):
        answer = interrupt({"question": "approve this?", "request": text})
        return {"messages": [AIMessage(content=f"the human said {answer!r}")]}
    if text.startswith("/slow"):
        await asyncio.sleep(2)
    profile = await store.aget(("users", "me"), "profile")
    who = profile.value["name"] if profile else "stranger"
    return {"messages": [AIMessage(content=f"hello {who}, you said {text!r}")]}


builder = StateGraph(MessagesState)
builder.add_node("agent", agent)
builder.add_edge(START, "agent")
builder.add_edge("agent", END)
chat = builder.compile()

delta = delta_graph(snapshot_every=5).compile()
