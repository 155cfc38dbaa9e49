"""What changed between two checkpoints, as a person reads a conversation: messages
added, removed and edited (role, text, tool calls), other state channels as a
structural diff of their values, and LangGraph's own channels (``branch:*``,
``__start__``...) set apart. Pure functions over :func:`~.views.plain` values, shared
by the command line's ``history``, ``show`` and ``diff`` (no I/O).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ROLES = {
    "human": "user",
    "ai": "assistant",
    "tool": "tool",
    "system": "system",
    "function": "function",
    "chat": "chat",
    "remove": "remove",
    "AIMessageChunk": "assistant",
    "HumanMessageChunk": "user",
    "ToolMessageChunk": "tool",
    "SystemMessageChunk": "system",
    "FunctionMessageChunk": "function",
    "ChatMessageChunk": "chat",
}
"""LangChain message types (``plain`` keeps the message's own ``type`` field) -> roles."""
MAX_ENTRIES = 50
"""Structural differences listed per channel at most (the rest are counted)."""


def internal(channel: str) -> bool:
    """A channel LangGraph keeps for itself: edges (``branch:to:agent``), triggers
    (``__start__``, ``__pregel_*``) and the like, not the graph's state."""
    return channel.startswith(("branch:", "__", "join:", "start:", "split:"))


def is_message(value: Any) -> bool:
    if not isinstance(value, Mapping) or "content" not in value:
        return False
    kind = value.get("type")
    return isinstance(kind, str) and kind in ROLES


def is_conversation(value: Any) -> bool:
    """A list of messages (an empty list counts: a conversation not begun)."""
    return isinstance(value, list) and all(is_message(v) for v in value)


def message(m: Mapping[str, Any]) -> dict[str, Any]:
    """A message as it is read: role, text, tool calls (name and arguments), id."""
    content = m.get("content")
    if isinstance(content, list):  # content blocks: their text, other kinds named
        parts = []
        for block in content:
            if isinstance(block, Mapping):
                text_part = block.get("text")
                parts.append(
                    str(text_part) if text_part is not None else f"[{block.get('type', 'block')}]"
                )
            else:
                parts.append(str(block))
        text = "\n".join(parts)
    else:
        text = "" if content is None else str(content)
    out: dict[str, Any] = {"role": ROLES.get(str(m.get("type")), str(m.get("type"))), "text": text}
    calls = [
        {"name": c.get("name"), "args": c.get("args")}
        for c in m.get("tool_calls") or []
        if isinstance(c, Mapping)
    ]
    if calls:
        out["tool_calls"] = calls
    for field in ("name", "tool_call_id", "id"):
        if m.get(field):
            out[field] = m[field]
    return out


def _same_message(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return message(a) == message(b)


def messages_changed(before: list[Any], after: list[Any]) -> dict[str, list[Any]]:
    """Added, removed and edited messages: matched by id where they have one, else
    by position."""
    keyed = all(m.get("id") for m in [*before, *after])
    if keyed:
        old = {m["id"]: m for m in before}
        new = {m["id"]: m for m in after}
        added = [message(m) for m in after if m["id"] not in old]
        removed = [message(m) for m in before if m["id"] not in new]
        pairs = [(old[i], new[i]) for i in new if i in old]
    else:
        n = min(len(before), len(after))
        added = [message(m) for m in after[n:]]
        removed = [message(m) for m in before[n:]]
        pairs = list(zip(before[:n], after[:n], strict=True))
    edited = [
        {"before": message(a), "after": message(b)} for a, b in pairs if not _same_message(a, b)
    ]
    return {"added": added, "removed": removed, "edited": edited}


def conversation_changes(
    before: dict[str, Any], after: dict[str, Any], plain: Any
) -> dict[str, dict[str, list[Any]]]:
    """Per channel holding a conversation (raw channel values, as a checkpoint holds
    them), the messages added, removed and edited from ``before`` to ``after``, as
    :func:`messages_changed` gives them; ``plain`` makes a value JSON-able. Messages are
    paired by id and compared as objects first, so only what changed is converted: a
    long chat costs what each step added, not its length."""
    out: dict[str, dict[str, list[Any]]] = {}
    for ch, value in after.items():
        old = before.get(ch)
        if not isinstance(value, list) or old is value or value == old:
            continue
        old = old if isinstance(old, list) else []
        ids = [getattr(m, "id", None) for m in (*old, *value)]
        if not value or not all(isinstance(i, str) and i for i in ids):
            continue  # no conversation, or messages without ids: left to the value diff
        mine = {m.id: m for m in old}
        theirs = {m.id: m for m in value}
        fresh = [m for m in value if m.id not in mine]
        gone = [m for m in old if m.id not in theirs]
        changed = [(mine[m.id], m) for m in value if m.id in mine and mine[m.id] != m]
        views = [plain(m) for m in (*fresh, *gone, *(x for pair in changed for x in pair))]
        if not all(is_message(v) for v in views):
            continue
        out[ch] = messages_changed(
            [plain(m) for m in gone] + [plain(a) for a, _ in changed],
            [plain(m) for m in fresh] + [plain(b) for _, b in changed],
        )
    return out


def structural(before: Any, after: Any, path: str = "") -> list[dict[str, Any]]:
    """The leaves that differ: ``{"path", "before", "after"}`` (a missing side is None;
    a list that grew lists its new items)."""
    if before == after:
        return []
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        out: list[dict[str, Any]] = []
        for k in sorted(set(before) | set(after), key=str):
            out += structural(before.get(k), after.get(k), f"{path}.{k}" if path else str(k))
        return out
    if isinstance(before, list) and isinstance(after, list):
        out = []
        for i in range(max(len(before), len(after))):
            b = before[i] if i < len(before) else None
            a = after[i] if i < len(after) else None
            out += structural(b, a, f"{path}[{i}]")
        return out
    return [{"path": path or "(value)", "before": before, "after": after}]


def changes(
    before: Mapping[str, Any] | None, after: Mapping[str, Any], *, all_channels: bool = False
) -> dict[str, Any]:
    """From one checkpoint's plain values to another's: per channel, messages changed
    (a conversation) or the structural differences; LangGraph's own channels are
    only named in ``internal`` unless ``all_channels``."""
    before = before or {}
    out: dict[str, Any] = {"messages": {}, "channels": {}, "internal": []}
    for ch in sorted(set(before) | set(after)):
        x, y = before.get(ch), after.get(ch)
        if x == y:
            continue
        if internal(ch) and not all_channels:
            out["internal"].append(ch)
            continue
        if isinstance(y, list) and is_conversation(y) and (x is None or is_conversation(x)):
            out["messages"][ch] = messages_changed(x or [], y)
            continue
        diffs = structural(x, y)
        out["channels"][ch] = {
            "changes": diffs[:MAX_ENTRIES],
            "more": max(0, len(diffs) - MAX_ENTRIES),
        }
    return out


def changed_names(changed: list[str], *, all_channels: bool = False) -> list[str]:
    """A history line's changed channels, LangGraph's own left out unless asked."""
    return [c for c in changed if all_channels or not internal(c)]


def headline(m: Mapping[str, Any], width: int = 72) -> str:
    """One line for a message: ``role: text`` (tool calls named), cut at a word."""
    text = " ".join(str(m.get("text", "")).split())
    calls = m.get("tool_calls") or []
    if calls:
        named = ", ".join(f"{c.get('name')}({_args(c.get('args'))})" for c in calls)
        text = f"{text} → {named}" if text else f"→ {named}"
    line = f"{m.get('role')}: {text}"
    if len(line) <= width:
        return line
    cut = line[: width - 1]
    head = f"{m.get('role')}: "
    if line[width - 1] != " " and " " in cut[len(head) :]:  # inside a word: it goes
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip() + "…"


def asks(interrupts: Any, width: int = 120) -> list[str]:
    """What the interrupts of a pending write ask, one line each: the value's text (a
    string, or a mapping's one text field such as ``question``), else the value as
    compact JSON; LangGraph's interrupt id left out (it is for ``Command(resume=...)``
    maps, not for reading)."""
    import orjson

    items = interrupts if isinstance(interrupts, list) else [interrupts]
    out = []
    for item in items:
        if isinstance(item, list):
            out += asks(item, width)
            continue
        value = item.get("value", item) if isinstance(item, Mapping) else item
        if isinstance(value, Mapping):
            texts = [v for v in value.values() if isinstance(v, str)]
            if len(value) == 1 and texts:
                value = texts[0]
        text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
        text = " ".join(text.split())
        out.append(text if len(text) <= width else text[: width - 1].rstrip() + "…")
    return out


def _args(args: Any) -> str:
    if isinstance(args, Mapping):
        return ", ".join(f"{k}={v!r}" for k, v in args.items())
    return "" if args is None else repr(args)
