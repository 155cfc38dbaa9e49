"""``langgraph-s3 view``: one thread's history as one self-contained HTML file.

The file must open from an archive years from now, so it holds everything: the data
as inline JSON, the page's CSS and script inline, no font, no CDN, and a content
security policy that forbids any network request. The layout (which lane each
checkpoint sits on, which edges are forks) is computed here, in Python, where it is
tested; the page's script only draws it and answers clicks and searches.

Channel values are stored once per distinct value (a content hash), as the saver
stores its blobs, so a long chat's file grows with what changed, not with the
number of checkpoints times the size of the state.
"""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import orjson
from langgraph.checkpoint.base import CheckpointTuple

from .views import ERROR, INTERRUPT, changed_channels, checkpoint_id, nodes_run, parent_id, plain

FORMAT = 1
"""The version of the data block inside the page (``<script id="thread-data">``)."""


@dataclass
class _Group:
    """One checkpoint namespace: its checkpoints oldest first, each on a lane."""

    ns: str
    tuples: list[CheckpointTuple] = field(default_factory=list)


def _ns_of(tup: CheckpointTuple) -> str:
    return str(tup.config["configurable"].get("checkpoint_ns", ""))


def lanes(ids: Sequence[str], parents: dict[str, str | None]) -> dict[str, int]:
    """The lane of each checkpoint, ``ids`` oldest first.

    Lane 0 is the line that ends at the newest checkpoint: what the thread continues
    from. Every other leaf, newest first, climbs to the first checkpoint already
    placed; the checkpoints it passes form a branch on the lowest lane free over the
    rows the branch spans (from its fork point down to its leaf). A checkpoint thus
    has at most one child on its own lane, and every other child starts a fork.
    """
    row = {cid: i for i, cid in enumerate(ids)}
    children: dict[str, list[str]] = {}
    for cid in ids:
        p = parents.get(cid)
        if p is not None and p in row:
            children.setdefault(p, []).append(cid)
    leaves = [cid for cid in ids if cid not in children]
    lane: dict[str, int] = {}
    busy: dict[int, list[tuple[int, int]]] = {}
    for leaf in sorted(leaves, key=lambda c: row[c], reverse=True):
        chain = []
        at: str | None = leaf
        while at is not None and at in row and at not in lane:
            chain.append(at)
            at = parents.get(at)
        top = row[at] if at is not None and at in lane else row[chain[-1]]
        span = (top, row[leaf])
        n = 0
        while any(a <= span[1] and span[0] <= b for a, b in busy.get(n, [])):
            n += 1
        busy.setdefault(n, []).append(span)
        for cid in chain:
            lane[cid] = n
    return lane


class _Values:
    """Distinct channel values, keyed by content, each made JSON-able once."""

    def __init__(self) -> None:
        self.blobs: dict[str, Any] = {}
        self._seen: dict[tuple[str, str, str], str] = {}

    def key(self, ns: str, channel: str, version: Any, value: Any) -> str:
        memo = (ns, channel, str(version)) if version is not None else None
        if memo is not None and memo in self._seen:
            return self._seen[memo]
        shown = plain(value)
        digest = hashlib.blake2b(
            orjson.dumps(shown, default=str, option=orjson.OPT_SORT_KEYS), digest_size=10
        ).hexdigest()
        self.blobs.setdefault(digest, shown)
        if memo is not None:
            self._seen[memo] = digest
        return digest


def model(
    thread_id: str, tuples: Iterable[CheckpointTuple], *, source: str | None = None
) -> dict[str, Any]:
    """What the page shows, as JSON-able data: namespaces (root first, each subgraph
    after its caller), their checkpoints with lane and row, the edges between them
    (forks marked), and the distinct channel values the checkpoints refer to."""
    groups: dict[str, _Group] = {}
    for tup in tuples:
        groups.setdefault(_ns_of(tup), _Group(_ns_of(tup))).tuples.append(tup)
    values = _Values()
    out_groups: list[dict[str, Any]] = []
    for ns in sorted(groups, key=lambda n: (n != "", n.split("|"))):
        group = groups[ns]
        group.tuples.sort(key=checkpoint_id)
        by_id = {checkpoint_id(t): t for t in group.tuples}
        ids = list(by_id)
        parents = {cid: parent_id(t) for cid, t in by_id.items()}
        lane = lanes(ids, parents)
        nodes, edges = [], []
        for row, cid in enumerate(ids):
            tup = by_id[cid]
            pid = parents[cid]
            parent = by_id.get(pid) if pid else None
            if parent is not None and pid is not None:
                edges.append({"from": pid, "to": cid, "fork": lane[pid] != lane[cid]})
            nodes.append(_node(ns, tup, parent, pid, row, lane[cid], values))
        called_from = None
        if ns:
            caller_ns = ns.rsplit("|", 1)[0] if "|" in ns else ""
            caller = ((group.tuples[0].metadata or {}).get("parents") or {}).get(caller_ns)
            if caller is not None:
                called_from = {"ns": caller_ns, "checkpoint_id": str(caller)}
        out_groups.append(
            {
                "ns": ns,
                "lanes": max(lane.values(), default=0) + 1,
                "called_from": called_from,
                "nodes": nodes,
                "edges": edges,
            }
        )
    return {
        "format": FORMAT,
        "thread_id": thread_id,
        "source": source,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "namespaces": out_groups,
        "values": values.blobs,
    }


def _node(
    ns: str,
    tup: CheckpointTuple,
    parent: CheckpointTuple | None,
    pid: str | None,
    row: int,
    lane: int,
    values: _Values,
) -> dict[str, Any]:
    ckpt = tup.checkpoint
    versions = ckpt.get("channel_versions") or {}
    md = tup.metadata or {}
    writes = tup.pending_writes or []
    return {
        "id": checkpoint_id(tup),
        "ns": ns,
        "parent_id": pid,
        "parent_missing": pid is not None and parent is None,
        "row": row,
        "lane": lane,
        "step": md.get("step"),
        "source": md.get("source"),
        "ts": ckpt.get("ts"),
        "nodes": nodes_run(tup, parent),
        "changed": changed_channels(tup, parent),
        "channels": {
            str(ch): values.key(ns, str(ch), versions.get(ch), v)
            for ch, v in sorted((ckpt.get("channel_values") or {}).items())
        },
        "metadata": plain({k: v for k, v in md.items() if k not in ("step", "source")}),
        "writes": [
            {"task_id": str(t), "channel": str(ch), "value": plain(v)}
            for t, ch, v in writes
            if ch not in (INTERRUPT, ERROR)
        ],
        "interrupts": [plain(v) for _, ch, v in writes if ch == INTERRUPT],
        "errors": [plain(v) for _, ch, v in writes if ch == ERROR],
    }


def forks(data: dict[str, Any]) -> int:
    """The fork edges of a model: children past the first of each checkpoint."""
    return sum(1 for g in data["namespaces"] for e in g["edges"] if e["fork"])


def render(data: dict[str, Any]) -> str:
    """The page: the template with the data inline. ``<`` is escaped inside the JSON
    (``\\u003c``), so no value can close the script element or open a comment."""
    template = resources.files("langgraph_s3").joinpath("viewer.html").read_text("utf-8")
    blob = orjson.dumps(data, default=str).decode().replace("<", "\\u003c")
    title = f"langgraph-s3 · thread {data['thread_id']}"
    fill = {"TITLE": html.escape(title, quote=True), "DATA": blob}
    # one pass over the template: a value holding a marker is never filled in again
    return re.sub(r"%%(TITLE|DATA)%%", lambda m: fill[m.group(1)], template)
