"""Export and import of threads, and migration between any two checkpoint savers.

The export format (``langgraph-checkpoint-export``, version 1) is JSON Lines
(UTF-8, one object per line; a path ending in ``.gz`` is gzip-compressed):

1. a header: ``{"format": "langgraph-checkpoint-export", "version": 1,
   "created_at": ISO-8601, "producer": "langgraph-s3 <version>"}``;
2. per thread, a ``{"kind": "thread", "thread_id", "checkpoints": n, "writes": m}``
   record, then its ``n`` checkpoint records and ``m`` write records, each
   checkpoint's writes right after it; namespaces root first, then by name;
   checkpoints oldest first, so a parent always comes before its children:

   * ``{"kind": "checkpoint", "thread_id", "checkpoint_ns", "checkpoint_id",
     "parent_checkpoint_id": id | null, "checkpoint": V, "metadata": V}``
   * ``{"kind": "write", "thread_id", "checkpoint_ns", "checkpoint_id",
     "task_id", "index", "channel", "value": V}`` (``index``: its position
     among the task's writes on that checkpoint)

   where ``V`` is ``{"type": <the serializer's type tag>, "data": base64}``:
   the bytes a LangGraph serializer (``dumps_typed``) made, not a re-encoding;
3. a trailer: ``{"kind": "end", "threads", "checkpoints", "writes"}``.

A reader refuses a newer version (:class:`~langgraph_s3.errors.NewerFormatError`)
and imports a thread only once all its records were read and checked, every value
decoded included: a truncated or damaged file imports the whole threads before the
damage, never half a thread (:class:`~langgraph_s3.errors.CorruptExportError`
names the line, the thread and the threads imported).

Any ``BaseCheckpointSaver`` is a source or a target (InMemorySaver, SqliteSaver,
PostgresSaver, this library's): its async methods are used, or its sync ones
on a worker thread when it has no async ones (``SqliteSaver``).
"""

from langgraph_s3.checkpoint.transfer.common import FORMAT, VERSION, Target
from langgraph_s3.checkpoint.transfer.exporting import aexport_threads
from langgraph_s3.checkpoint.transfer.importing import (
    ImportPlan,
    aimport_threads,
    amigrate,
    aplan_import,
)

__all__ = [
    "FORMAT",
    "VERSION",
    "ImportPlan",
    "Target",
    "aexport_threads",
    "aimport_threads",
    "amigrate",
    "aplan_import",
]
