"""The benchmark's chat: an agent and a tool on ``add_messages``, a scripted model.

Messages are about 1 KB of words drawn from a fixed vocabulary (seeded, so every run
and every saver sees the same bytes), which compress like prose, not like repeated
text. The agent calls the tool on turns 2, 7, 12 and 17 of every 20. Imported by
``compare.py`` and by the peer savers' child processes (``peers/child.py``), so it
needs only LangGraph.
"""

from __future__ import annotations

import random
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import MessagesState, StateGraph

from langgraph_s3.testing.graphs import tool_loop

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

    return tool_loop(agent, tools)


def question(turn: int) -> dict[str, Any]:
    tag = " [tool]" if ((turn - 1) % 20) + 1 in TOOL_TURNS else ""
    return {"messages": [HumanMessage(content=text(turn * 7) + tag)]}
