"""``langgraph-s3 view``: one thread's history as one self-contained HTML file.

The file must open from an archive years from now, so it holds everything: the data
as inline JSON, the page's CSS and script inline, no font, no CDN, and a content
security policy that forbids any network request. The layout (row and lane of each
checkpoint, which edges are forks) is computed here, in Python, where it is tested;
the page's script only draws it and answers clicks and searches.

The page grows with what changed, not with checkpoints times state: each distinct
channel value is stored once (by content hash), and a list that extends its parent
checkpoint's list is stored as that parent's value plus the new items, as a chat's
messages do at every step. A ``DeltaChannel`` (values kept as writes between
snapshots) is rebuilt from the thread's own checkpoints and writes, with no extra
request: the snapshot, then the writes of each step since, appended in order (the
viewer does not run the graph's reducer, and says so).
"""

from __future__ import annotations

import copy
import hashlib
import html
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import orjson
from langgraph.checkpoint.base import CheckpointTuple

from langgraph_s3.ops.tools.layout import lanes, order
from langgraph_s3.ops.views import (
    ERROR,
    INTERRUPT,
    changed_channels,
    checkpoint_id,
    nodes_run,
    parent_id,
    plain,
)

FORMAT = 1
"""The version of the data block inside the page (``<script id="thread-data">``)."""

DELTA_COUNTERS = "counters_since_delta_snapshot"
"""LangGraph's metadata key naming the DeltaChannels written since their snapshot."""


def _ns_of(tup: CheckpointTuple) -> str:
    return str(tup.config["configurable"].get("checkpoint_ns", ""))


class _Values:
    """Distinct values by content, each made JSON-able once; a list that extends an
    earlier one (its parent checkpoint's) is stored as that one plus its new items,
    and only those are converted: a chat's page costs what each turn added."""

    def __init__(self) -> None:
        self.blobs: dict[str, Any] = {}
        self.extends: dict[str, tuple[str, list[Any]]] = {}
        self._raw: dict[str, list[Any]] = {}  # the list each key was made from
        self._seen: dict[tuple[str, str, str], str] = {}
        self._objects: dict[int, tuple[Any, str]] = {}  # a write shown at many checkpoints

    def key(
        self,
        value: Any,
        *,
        memo: tuple[str, str, str] | None = None,
        base: str | None = None,
        fresh: bool = False,
    ) -> str:
        """``fresh``: a value made for this checkpoint (a fold), which a reducer may
        have changed in place since an earlier one: never found by identity."""
        if memo is not None and memo in self._seen:
            return self._seen[memo]
        known = self._objects.get(id(value)) if memo is None and not fresh else None
        if known is not None and known[0] is value:
            return known[1]
        digest = self._extension(value, base) or self._whole(value)
        if isinstance(value, list):
            self._raw.setdefault(digest, value)
        if memo is not None:
            self._seen[memo] = digest
        elif not fresh:
            self._objects[id(value)] = (value, digest)  # held: its id is not reused
        return digest

    def _whole(self, value: Any) -> str:
        shown = plain(value)
        digest = _digest(b"=", orjson.dumps(shown, option=orjson.OPT_SORT_KEYS))
        self.blobs.setdefault(digest, shown)
        return digest

    def _extension(self, value: Any, base: str | None) -> str | None:
        """The key of ``value`` as ``base``'s list plus new items, if it is one."""
        before = self._raw.get(base) if base is not None else None
        if before is None or not isinstance(value, list) or len(value) <= len(before):
            return None
        try:
            if not all(map(_same, value, before)):
                return None
        except Exception:  # an item that cannot be compared (arrays)
            return None
        tail = plain(value[len(before) :])
        digest = _digest(base.encode(), orjson.dumps(tail, option=orjson.OPT_SORT_KEYS))  # type: ignore[union-attr]
        self.extends.setdefault(digest, (base, tail))  # type: ignore[arg-type]
        return digest


_BUILTIN = (str, int, float, bytes, bool, type(None), dict, list, tuple)


def _same(x: Any, y: Any) -> bool:
    """The same item for the page: of one type (``1 == True == 1.0`` in Python, not
    on the page), compared by ``==`` for built-in values and pydantic models
    (messages: fast, field by field), and by what the page shows for any other
    object, whose ``__eq__`` may be looser than its fields. (Inside a dict or a
    model, ``==`` still takes ``1`` for ``True``: rare enough to keep this fast.)"""
    if x is y:
        return True
    if type(x) is not type(y):
        return False
    if isinstance(x, _BUILTIN) or hasattr(x, "__pydantic_fields__"):
        return bool(x == y)
    return bool(plain(x) == plain(y))


def _digest(*parts: bytes) -> str:
    h = hashlib.blake2b(digest_size=10)
    for part in parts:
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()


def _delta_channels(tuples: Iterable[CheckpointTuple]) -> set[str]:
    out: set[str] = set()
    for t in tuples:
        counters = (t.metadata or {}).get(DELTA_COUNTERS)
        if isinstance(counters, dict):
            out.update(str(ch) for ch in counters)
        for ch, v in (t.checkpoint.get("channel_values") or {}).items():
            if type(v).__name__ == "_DeltaSnapshot":
                out.add(ch)
    return out


def _namespace_order(groups: dict[str, list[CheckpointTuple]]) -> list[str]:
    """Root first, then each subgraph right after its caller, callees in call order."""
    first = {ns: min(checkpoint_id(t) for t in ts) for ns, ts in groups.items()}
    under: dict[str, list[str]] = {}
    orphans: list[str] = []
    for ns in groups:
        if not ns:
            continue
        caller = ns.rsplit("|", 1)[0] if "|" in ns else ""
        (under.setdefault(caller, []) if caller in groups else orphans).append(ns)
    out: list[str] = []

    def visit(ns: str) -> None:
        out.append(ns)
        for sub in sorted(under.get(ns, []), key=first.__getitem__):
            visit(sub)

    if "" in groups:
        visit("")
    for ns in sorted(orphans, key=lambda n: (n.count("|"), first[n])):
        visit(ns)
    return out


def delta_reducers(graph: Any) -> dict[str, dict[str, Any]]:
    """The DeltaChannels of a graph and of its subgraphs, by namespace path (the node
    names of a checkpoint namespace joined by ``|``; ``""`` for the graph itself):
    what folds their writes exactly as a run does."""
    from langgraph.channels.delta import DeltaChannel
    from langgraph.pregel import Pregel

    compiled = graph if isinstance(graph, Pregel) else graph.compile()
    found = {"": compiled}
    found.update(dict(compiled.get_subgraphs(recurse=True)))
    return {
        path: {ch: c for ch, c in sub.channels.items() if isinstance(c, DeltaChannel)}
        for path, sub in found.items()
    }


def _path(ns: str) -> str:
    return "|".join(part.split(":", 1)[0] for part in ns.split("|")) if ns else ""


def model(
    thread_id: str,
    tuples: Iterable[CheckpointTuple],
    *,
    source: str | None = None,
    graph: Any | None = None,
) -> dict[str, Any]:
    """What the page shows, as JSON-able data: namespaces (root first, each subgraph
    after its caller), their checkpoints with row and lane, the edges between them
    (forks marked), and the distinct values the checkpoints refer to.

    ``graph`` (the graph that wrote the thread, compiled or not) lets DeltaChannel
    values be folded by their own reducers; without it, their writes are appended."""
    reducers = delta_reducers(graph) if graph is not None else {}
    groups: dict[str, list[CheckpointTuple]] = {}
    for tup in tuples:
        groups.setdefault(_ns_of(tup), []).append(tup)
    home = {checkpoint_id(t): ns for ns, ts in groups.items() for t in ts}
    values = _Values()
    out_groups = [
        _namespace(ns, groups[ns], home, values, reducers.get(_path(ns), {}))
        for ns in _namespace_order(groups)
    ]
    return {
        "format": FORMAT,
        "thread_id": thread_id,
        "source": source,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "namespaces": out_groups,
        "values": values.blobs,
        "extends": values.extends,
    }


def _namespace(
    ns: str,
    tups: list[CheckpointTuple],
    home: dict[str, str],
    values: _Values,
    reducers: dict[str, Any],
) -> dict[str, Any]:
    """One namespace's drawing: its checkpoints as rows in lanes, and their edges."""
    by_id = {checkpoint_id(t): t for t in tups}
    parents = {cid: parent_id(t) for cid, t in by_id.items()}
    ids, cut = order(by_id, parents)
    kept = {cid: (None if cid in cut else p) for cid, p in parents.items()}
    lane = lanes(ids, kept)
    deltas = _delta_channels(by_id.values())
    refs: dict[str, dict[str, str]] = {}  # checkpoint -> channel -> value key
    delta_of: dict[str, dict[str, dict[str, Any]]] = {}
    nodes, edges = [], []
    widths = [0] * len(ids)  # the lanes drawn across each row: its label goes after
    row_of = {cid: i for i, cid in enumerate(ids)}
    for row, cid in enumerate(ids):
        tup, pid = by_id[cid], kept[cid]
        parent = by_id.get(pid) if pid is not None else None
        if parent is not None and pid is not None:
            edges.append({"from": pid, "to": cid, "fork": lane[pid] != lane[cid]})
            for r in range(row_of[pid], row + 1):
                widths[r] = max(widths[r], lane[cid], lane[pid])
        widths[row] = max(widths[row], lane[cid])
        refs[cid] = _channels(ns, tup, refs.get(pid or "", {}), deltas, values)
        delta_of[cid] = _deltas(tup, by_id.get(pid or ""), delta_of.get(pid or "", {}), deltas)
        base = refs.get(pid or "", {})
        shown = _shown(delta_of[cid], reducers, refs[cid], base, values)
        node = _node(tup, parent, pid, values)
        node.update(id=cid, ns=ns, row=row, lane=lane[cid], channels=refs[cid], delta=shown)
        raw = parents[cid]
        if cid in cut and raw is not None:
            node["parent_loop"] = raw  # a loop, cut here to draw the rest
        elif raw is not None and parent is None and home.get(raw, ns) != ns:
            node["parent_ns"] = home[raw]  # outside this namespace: linked, not pruned
        node["parent_missing"] = (
            raw is not None and parent is None and cid not in cut and "parent_ns" not in node
        )
        nodes.append(node)
    for node in nodes:
        node["width"] = widths[node["row"]] + 1
    return {
        "ns": ns,
        "lanes": max(lane.values(), default=0) + 1,
        "called_from": _called_from(ns, tups),
        "nodes": nodes,
        "edges": edges,
    }


def _shown(
    deltas: dict[str, dict[str, Any]],
    reducers: dict[str, Any],
    refs: dict[str, str],
    base: dict[str, str],
    values: _Values,
) -> dict[str, Any]:
    """A checkpoint's DeltaChannel values as the page shows them: folded by the graph's
    reducer into ``refs`` (from the parent's ``base``), or its writes, appended."""
    shown: dict[str, Any] = {}
    for ch, d in sorted(deltas.items()):
        reducer = reducers.get(ch)
        if reducer is None:  # appended by the page, which says so
            shown[ch] = _delta_refs(d, values)
            continue
        refs[ch] = values.key(_fold(reducer, ch, d), base=base.get(ch), fresh=True)
        shown[ch] = {"at": d["at"], "count": len(d["writes"]), "folded": True}
    return shown


def _called_from(ns: str, tups: list[CheckpointTuple]) -> dict[str, str] | None:
    """The caller's checkpoint of a subgraph namespace, from its checkpoints' metadata."""
    if not ns:
        return None
    caller_ns = ns.rsplit("|", 1)[0] if "|" in ns else ""
    for t in tups:
        caller = ((t.metadata or {}).get("parents") or {}).get(caller_ns)
        if caller is not None:
            return {"ns": caller_ns, "checkpoint_id": str(caller)}
    return None


def _channels(
    ns: str,
    tup: CheckpointTuple,
    parent_refs: dict[str, str],
    deltas: set[str],
    values: _Values,
) -> dict[str, str]:
    """The value key of each channel stored whole at this checkpoint (a DeltaChannel's
    snapshot unwrapped)."""
    ckpt = tup.checkpoint
    versions = ckpt.get("channel_versions") or {}
    out: dict[str, str] = {}
    for ch, v in sorted((ckpt.get("channel_values") or {}).items()):
        ch = str(ch)
        if ch in deltas:
            continue  # rebuilt by _deltas
        version = versions.get(ch)
        memo = (ns, ch, str(version)) if version is not None else None
        out[ch] = values.key(v, memo=memo, base=parent_refs.get(ch))
    return out


def _deltas(
    tup: CheckpointTuple,
    parent: CheckpointTuple | None,
    parent_delta: dict[str, dict[str, Any]],
    deltas: set[str],
) -> dict[str, dict[str, Any]]:
    """Each DeltaChannel at this checkpoint: its snapshot (where it was last stored
    whole) and the writes applied since, oldest first: the parent's state of the
    channel plus the writes stored at the parent (they made this step)."""
    stored = tup.checkpoint.get("channel_values") or {}
    out: dict[str, dict[str, Any]] = {}
    for ch in deltas:
        if ch in stored:
            v = stored[ch]
            seed = getattr(v, "value", v) if type(v).__name__ == "_DeltaSnapshot" else v
            out[ch] = {"seed": seed, "at": checkpoint_id(tup), "writes": []}
            continue
        before = parent_delta.get(ch)
        applied = [v for _, c, v in (parent.pending_writes or []) if c == ch] if parent else []
        if before is None and not applied:
            if ch in (tup.checkpoint.get("channel_versions") or {}):
                out[ch] = {"seed": None, "at": None, "writes": []}
            continue
        base = before or {"seed": None, "at": None, "writes": []}
        out[ch] = {"seed": base["seed"], "at": base["at"], "writes": [*base["writes"], *applied]}
    return out


def _delta_refs(d: dict[str, Any], values: _Values) -> dict[str, Any]:
    return {
        "seed": values.key(d["seed"]) if d["seed"] is not None else None,
        "at": d["at"],
        "count": len(d["writes"]),
        "writes": [values.key(w) for w in d["writes"]],
        "folded": False,
    }


def _fold(reducer: Any, ch: str, d: dict[str, Any]) -> Any:
    """The channel's value as a run rebuilds it: the snapshot, then the writes."""
    # a copy, as DeltaChannel.copy makes: a reducer may change its list in place
    channel = reducer.from_checkpoint(copy.copy(d["seed"]))
    channel.key = ch
    channel.replay_writes([("", ch, w) for w in d["writes"]])
    return channel.get() if channel.is_available() else None


def _node(
    tup: CheckpointTuple, parent: CheckpointTuple | None, pid: str | None, values: _Values
) -> dict[str, Any]:
    from langgraph_s3.ops.conversation import asks, conversation_changes, headline

    md = tup.metadata or {}
    writes = tup.pending_writes or []
    before = (parent.checkpoint.get("channel_values") or {}) if parent is not None else {}
    said = conversation_changes(before, tup.checkpoint.get("channel_values") or {}, plain)
    added = [m for ch in said.values() for m in ch["added"]]
    interrupts = [plain(v) for _, ch, v in writes if ch == INTERRUPT]
    return {
        "said": said,
        # the row's own line, as `history` prints it: the new messages, what it asks
        "lines": [headline(m, 90) for m in added[:2]]
        + ([f"(+{len(added) - 2} messages)"] if len(added) > 2 else []),
        "asks": asks(interrupts, 120),
        "parent_id": pid,
        "step": md.get("step"),
        "source": md.get("source"),
        "ts": tup.checkpoint.get("ts"),
        "nodes": nodes_run(tup, parent),
        "changed": changed_channels(tup, parent),
        "metadata": plain({k: v for k, v in md.items() if k not in ("step", "source")}),
        "writes": [
            {"task_id": str(t), "channel": str(ch), "value": plain(v)}
            for t, ch, v in writes
            if ch not in (INTERRUPT, ERROR)
        ],
        "interrupts": interrupts,
        "errors": [plain(v) for _, ch, v in writes if ch == ERROR],
    }


def forks(data: dict[str, Any]) -> int:
    """The fork edges of a model: children past the first of each checkpoint."""
    return sum(1 for g in data["namespaces"] for e in g["edges"] if e["fork"])


def render(data: dict[str, Any]) -> str:
    """The page: the template with the data inline. ``<`` is escaped inside the JSON
    (``\\u003c``), so no value can close the script element or open a comment."""
    template = resources.files("langgraph_s3").joinpath("viewer.html").read_text("utf-8")
    try:
        blob = orjson.dumps(data, default=str)
    except TypeError:  # an id or name JSON cannot carry as it is (a lone surrogate)
        blob = orjson.dumps(plain(data), default=str)
    text = blob.decode().replace("<", "\\u003c")
    title = html.escape(f"langgraph-s3 · thread {plain(data['thread_id'])}", quote=True)
    fill = {"TITLE": title, "DATA": text}
    # one pass over the template: a value holding a marker is never filled in again
    return re.sub(r"%%(TITLE|DATA)%%", lambda m: fill[m.group(1)], template)
