"""What the command line shows of a checkpoint: pure functions over ``CheckpointTuple``s.

No I/O here: the CLI reads through the saver's public API and renders these.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import asdict, is_dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langgraph.checkpoint.base import CheckpointTuple

INTERRUPT = "__interrupt__"
ERROR = "__error__"


def plain(value: Any, *, depth: int = 0) -> Any:
    """A JSON-able view of a state value: messages as their fields, dataclasses and
    pydantic models as dicts, bytes as base64, anything else as its repr."""
    if depth > 50:
        return text(repr(value))
    if value is None or isinstance(value, (bool, float)):
        return value
    if isinstance(value, int):  # JSON holds 64 bits: a bigger one as its digits
        return value if -(2**63) <= value < 2**64 else str(value)
    if isinstance(value, str):
        return text(value)
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode()}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {text(str(k)): plain(v, depth=depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v, depth=depth + 1) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # langchain messages, pydantic models
        try:
            fields = dump()
        except Exception:
            return text(repr(value))
        return {"type": type(value).__name__, **plain(fields, depth=depth + 1)}
    if is_dataclass(value) and not isinstance(value, type):
        return {"type": type(value).__name__, **plain(asdict(value), depth=depth + 1)}
    return text(repr(value))


def text(value: str) -> str:
    """A string JSON can carry: a lone surrogate (invalid UTF-8) written as its escape."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def checkpoint_id(tup: CheckpointTuple) -> str:
    return str(tup.config["configurable"]["checkpoint_id"])


def parent_id(tup: CheckpointTuple) -> str | None:
    parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    return str(parent) if parent is not None else None


def changed_channels(tup: CheckpointTuple, parent: CheckpointTuple | None) -> list[str]:
    """Channels whose version moved since the parent (all of them at the root)."""
    mine = tup.checkpoint.get("channel_versions") or {}
    before = (parent.checkpoint.get("channel_versions") or {}) if parent is not None else {}
    return sorted(ch for ch, v in mine.items() if before.get(ch) != v)


def nodes_run(tup: CheckpointTuple, parent: CheckpointTuple | None) -> list[str]:
    """The nodes that ran in the step that made this checkpoint: those whose
    ``versions_seen`` moved (LangGraph records what a node saw when it runs)."""
    mine = tup.checkpoint.get("versions_seen") or {}
    before = (parent.checkpoint.get("versions_seen") or {}) if parent is not None else {}
    return sorted(n for n, seen in mine.items() if before.get(n) != seen and n != INTERRUPT)


def summary(tup: CheckpointTuple, parent: CheckpointTuple | None) -> dict[str, Any]:
    """One line of a history: ids, step, source, the nodes that ran, what changed,
    and the pending writes' interrupts and errors."""
    md = tup.metadata or {}
    writes = tup.pending_writes or []
    return {
        "checkpoint_id": checkpoint_id(tup),
        "parent_id": parent_id(tup),
        "checkpoint_ns": str(tup.config["configurable"].get("checkpoint_ns", "")),
        "step": md.get("step"),
        "source": md.get("source"),
        "nodes": nodes_run(tup, parent),
        "changed": changed_channels(tup, parent),
        "pending_writes": len(writes),
        "interrupts": [plain(v) for _, ch, v in writes if ch == INTERRUPT],
        "errors": [plain(v) for _, ch, v in writes if ch == ERROR],
        "ts": tup.checkpoint.get("ts"),
    }


def state(tup: CheckpointTuple) -> dict[str, Any]:
    """A checkpoint whole: its values, metadata, pending writes (task, channel, value)."""
    return {
        **summary(tup, None),
        "values": plain(tup.checkpoint.get("channel_values") or {}),
        "metadata": plain(tup.metadata or {}),
        "writes": [
            {"task_id": t, "channel": ch, "value": plain(v)}
            for t, ch, v in tup.pending_writes or []
        ],
    }


def diff(a: CheckpointTuple | None, b: CheckpointTuple) -> dict[str, Any]:
    """What differs from ``a`` to ``b``: per channel, the value before and after."""
    before = (a.checkpoint.get("channel_values") or {}) if a is not None else {}
    after = b.checkpoint.get("channel_values") or {}
    out: dict[str, Any] = {}
    for ch in sorted(set(before) | set(after)):
        x, y = plain(before.get(ch)), plain(after.get(ch))
        if x != y:
            out[ch] = {"before": x, "after": y}
    return out


def new_messages(tup: CheckpointTuple, parent: CheckpointTuple | None) -> list[dict[str, Any]]:
    """The messages this checkpoint's conversations hold that its parent's did not
    (``conversation.message`` views): by id where every message has one
    (``conversation.conversation_changes``: only the new ones are converted), else what
    follows the parent's list. Lists of anything but messages give nothing."""
    from langgraph_s3.ops.conversation import conversation_changes, is_message, message

    mine = tup.checkpoint.get("channel_values") or {}
    before = (parent.checkpoint.get("channel_values") or {}) if parent is not None else {}
    by_id = conversation_changes(before, mine, plain)
    out: list[dict[str, Any]] = []
    for ch, value in mine.items():
        if ch in by_id:
            out.extend(by_id[ch]["added"])
            continue
        old = before.get(ch)
        old = old if isinstance(old, list) else []
        if not isinstance(value, list) or all(getattr(m, "id", None) for m in (*old, *value)):
            continue  # no list, or ids all round: no conversation by id means none here
        shown = [plain(m) for m in value[len(old) :]]
        if all(is_message(m) for m in shown):
            out.extend(message(m) for m in shown)
    return out
