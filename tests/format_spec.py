"""What the format fixtures hold and how their reading is compared: shared by
``test_formats.py`` and the generator that wrote them (``fixtures/formats/make.py``)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing.graphs import ahistory, chat_graph, delta_graph, nested_graph, norm

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
NAMES = {"bucket": "lgs3-fixture", "prefix": "v1", "table": "lgs3-fixture"}
THREADS = ("chat", "nested", "nested-done", "delta", "packed")


def graph_for(thread: str) -> Any:
    if thread.startswith("nested"):
        return nested_graph()
    if thread == "delta":
        return delta_graph(snapshot_every=3)
    return chat_graph()


def plain(value: Any) -> Any:
    """JSON's view of a normalized value (tuples become lists)."""
    return json.loads(json.dumps(norm(value), sort_keys=True, default=repr))


async def expected_of(saver: AsyncS3Saver, thread: str) -> dict[str, Any]:
    """Every checkpoint as the saver answers it, and the graph's history and state."""
    config: Any = {"configurable": {"thread_id": thread}}
    rows = []
    async for t in saver.alist(config):
        conf = t.config["configurable"]
        rows.append(
            {
                "ns": conf["checkpoint_ns"],
                "id": conf["checkpoint_id"],
                "parent": (t.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
                "checkpoint": plain(t.checkpoint),
                "metadata": plain(t.metadata),
                "writes": sorted(plain(list(w)) for w in t.pending_writes or ()),
            }
        )
    rows.sort(key=lambda r: (r["ns"], r["id"]))
    graph = graph_for(thread).compile(checkpointer=saver)
    state = await graph.aget_state(config, subgraphs=True)
    return {
        "checkpoints": rows,
        "history": plain(await ahistory(graph, config)),
        "state": plain([state.values, list(state.next)]),
    }


def versions_in(checkpoint: dict[str, Any]) -> list[str]:
    seen = [v for node in checkpoint.get("versions_seen", {}).values() for v in node.values()]
    return [*checkpoint.get("channel_versions", {}).values(), *seen]


VERSION = re.compile(r"^0*(\d+)(\.[0-9a-f.]+)$")


def unpadded(value: Any) -> Any:
    """Every channel version with its counter's zero padding removed."""
    if isinstance(value, dict):
        return {k: unpadded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unpadded(v) for v in value]
    if isinstance(value, str) and (m := VERSION.match(value)) and len(value) > 20:
        return m.group(1) + m.group(2)
    return value
