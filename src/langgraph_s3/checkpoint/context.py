"""What the saver's parts (reading, writing, delta, maintenance) share.

The parts are small views built per call around one :class:`SaverContext` and the
saver's serializer: a copy made by ``with_allowlist`` has its own serializer but
shares the clients, the object cache and the delta memo with the original.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cachetools import LRUCache
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import DeltaChannelHistory

from langgraph_s3.aws.clients import Limits
from langgraph_s3.checkpoint.inline import HeldCopies
from langgraph_s3.checkpoint.logs import LogState
from langgraph_s3.core.clock import wall_clock
from langgraph_s3.core.keys import Layout, NamespaceKeys
from langgraph_s3.core.ports import ManifestPort, ObjectStorePort
from langgraph_s3.core.values import Holders
from langgraph_s3.errors import InvalidIdError
from langgraph_s3.runtime.thread_seals import ThreadSeals

LISTED_SECONDS = 30.0
"""A bound on how long one walk's listing may serve it (a walk takes milliseconds)."""
LISTED_SIZE = 8
DELTA_MEMO_SIZE = 64
HOLDERS_SIZE = 4096
LOGS_SIZE = 1024


@dataclass(frozen=True, slots=True)
class SaverContext:
    """The saver's I/O (object store, manifest), key layout and limits."""

    objects: ObjectStorePort
    manifest: ManifestPort
    layout: Layout
    limits: Limits
    clock: Callable[[], float] = wall_clock
    """Epoch seconds now, for what maintenance compares with checkpoint ids' times
    (a put in flight, a pack's age, a copy's wait on a lease)."""
    delta_memo: LRUCache[tuple[str, str], dict[str, DeltaChannelHistory]] = field(
        default_factory=lambda: LRUCache(maxsize=DELTA_MEMO_SIZE)
    )
    """Histories ``aget_tuple`` walked for LangGraph's next call (see delta.py)."""
    holders: LRUCache[tuple[str, str], Holders] = field(
        default_factory=lambda: LRUCache(maxsize=HOLDERS_SIZE)
    )
    """(namespace prefix, checkpoint id) -> where its values are held, for the next put
    (values.py): filled by every put and every checkpoint read."""
    logs: LRUCache[tuple[str, str], LogState] = field(
        default_factory=lambda: LRUCache(maxsize=LOGS_SIZE)
    )
    """(namespace prefix, checkpoint id) -> its DeltaChannel logs and writes, for its
    children's logs (logs.py): filled by puts, writes and reads of delta threads."""
    carry: LRUCache[tuple[str, str], dict[str, tuple[str, bytes]]] = field(
        default_factory=lambda: LRUCache(maxsize=LOGS_SIZE)
    )
    """(namespace prefix, checkpoint id) -> its write objects this process stored or read
    (key relative to the namespace -> ETag, uncompressed body), for its children to
    carry (``CheckpointEnvelope.carried``)."""
    delta_channels: LRUCache[str, frozenset[str]] = field(
        default_factory=lambda: LRUCache(maxsize=LOGS_SIZE)
    )
    """Namespace prefix -> its delta channels, as its newest put or read saw them."""
    lives: LRUCache[str, str] = field(default_factory=lambda: LRUCache(maxsize=HOLDERS_SIZE))
    """Namespace prefix -> the life (``Entry.life``, "" for an item an earlier version
    wrote) its newest read or put saw: a put commits only in it, and builds on the
    holders above only while it is known (as many as those)."""

    sighted: LRUCache[str, tuple[float, float]] = field(
        default_factory=lambda: LRUCache(maxsize=HOLDERS_SIZE)
    )
    """Namespace prefix -> when (the loop's clock, and the wall clock) a read or put
    last saw its life (``lives``), or this process forgot what it knew of it: a
    ``put_writes`` within ``WRITE_LICENSE`` of it asks the item nothing."""

    runs: LRUCache[tuple[str, str], bool] = field(
        default_factory=lambda: LRUCache(maxsize=HOLDERS_SIZE)
    )
    """(thread id, run token) pairs the run index already names (written by this
    process): a run's first put in a thread writes its index item, the others do not."""

    seals: ThreadSeals | None = None
    """Which threads are sealed, for a deployment with subjects (``runtime/thread_seals``):
    a put claims its thread's subject first; the object store and the manifest's table
    seal and open with it."""

    held: HeldCopies = field(default_factory=HeldCopies)
    """Checkpoints the manifest holds until their objects are stored, and pending
    writes, as this process knows them (``inline.py``)."""

    listed: LRUCache[tuple[int, str], WalkListing] = field(
        default_factory=lambda: LRUCache(maxsize=LISTED_SIZE)
    )
    """(walk, namespace prefix) -> what one listing from its top found, for the rest of
    that walk of LangGraph's (``WalkListing``)."""

    def enter_life(self, prefix: str, life: str) -> None:
        """Record the life (``Entry.life``) a namespace was read or written in. A new
        one drops what this process knew of the namespace's checkpoints: an import's
        replace reuses their ids, not where they keep their values."""
        if self.lives.get(prefix, life) != life:
            self.forget(prefix)
        self.lives[prefix] = life
        self.sighted[prefix] = (asyncio.get_running_loop().time(), time.time())

    def forget(self, thread_prefix: str) -> None:
        """Drop what this process knows of a thread's checkpoints (its objects were
        deleted, or replaced by a copy): a later put must not build on it."""
        for cache in (self.delta_memo, self.holders, self.logs, self.carry):
            for k in [k for k in cache if k[0].startswith(thread_prefix)]:
                cache.pop(k, None)
        self.held.forget(thread_prefix)  # a new life reuses ids: its copies are not ours
        for p in [p for p in self.delta_channels if p.startswith(thread_prefix)]:
            self.delta_channels.pop(p, None)
        for p in [p for p in self.sighted if p.startswith(thread_prefix)]:
            # a put_writes of a checkpoint made before now asks the item first
            self.sighted[p] = (-math.inf, time.time())
        for walk in [w for w in self.listed if w[1].startswith(thread_prefix)]:
            self.listed.pop(walk, None)
        cached = self.objects.cache
        if cached is not None:  # an import's replace writes the same keys anew
            cached.evict_prefix(thread_prefix)


@dataclass
class WalkListing:
    """A namespace's older checkpoints as one listing from its top found them, for one
    run of LangGraph's generic DeltaChannel walk: their keys and write keys.

    Why: LangGraph's Agent Server wraps the saver in an adapter that does not forward
    ``aget_delta_channel_history``, so LangGraph's generic walk
    (``BaseCheckpointSaver.aget_delta_channel_history``) reads the ancestors one
    ``aget_tuple`` by id at a time, each of which would list the namespace from its
    top again. The saver recognizes that walk (``walk_scope``); one listing then
    serves the whole of it, a snapshot of the history as it was when the walk began,
    and nothing else: every other read goes to the manifest and lists as before.
    """

    entry: Any
    """The manifest entry the listing was checked against (its lineage)."""
    checkpoints: dict[str, Any]
    """Checkpoint id -> its ``CheckpointKey``."""
    writes: dict[str, list[str]]
    """Inverted checkpoint id -> its write keys (complete for ids listed whole)."""
    whole_after: str | None
    """Writes are complete for inverted ids below this one (None: all of them)."""
    etags: dict[str, str]
    at: float = field(default_factory=time.monotonic)

    def find(self, cid: str, inv: str) -> tuple[Any, list[str]] | None:
        """The checkpoint's key and write keys, when the listing covered them."""
        if time.monotonic() - self.at > LISTED_SECONDS:
            return None
        ck = self.checkpoints.get(cid)
        if ck is None or (self.whole_after is not None and inv >= self.whole_after):
            return None
        return ck, self.writes.get(inv, [])


@dataclass(frozen=True, slots=True)
class Address:
    """The (thread, namespace, checkpoint id) a LangGraph config names."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str | None

    @classmethod
    def of(cls, config: RunnableConfig) -> Address:
        conf = config.get("configurable") or {}
        thread = conf.get("thread_id")
        if thread is None:
            raise InvalidIdError(
                "config['configurable']['thread_id'] is required: pass "
                "{'configurable': {'thread_id': ...}} when you invoke the graph"
            )
        ns = conf.get("checkpoint_ns") or ""
        cid = conf.get("checkpoint_id") or None
        return cls(str(thread), str(ns), str(cid) if cid is not None else None)

    def keys(self, layout: Layout) -> NamespaceKeys:
        return layout.namespace(self.thread_id, self.checkpoint_ns)


def config_of(keys: NamespaceKeys, checkpoint_id: str) -> RunnableConfig:
    """The LangGraph config of one checkpoint."""
    return {
        "configurable": {
            "thread_id": keys.thread_id,
            "checkpoint_ns": keys.checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
    }
