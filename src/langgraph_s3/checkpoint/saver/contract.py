"""LangGraph's ``BaseCheckpointSaver`` contract on the one async core."""

from __future__ import annotations

import asyncio
import random
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Mapping,
    Sequence,
)
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
)

from langgraph_s3.checkpoint.context import Address
from langgraph_s3.checkpoint.delta import DeltaReader
from langgraph_s3.checkpoint.pending import PendingWriter
from langgraph_s3.checkpoint.reading import Reader, matches
from langgraph_s3.checkpoint.writing import Writer
from langgraph_s3.core.keys import NamespaceKeys
from langgraph_s3.core.records import Entry
from langgraph_s3.core.tasks import gather_all
from langgraph_s3.errors import InvalidIdError
from langgraph_s3.runtime.operations import operation, operation_iter

if TYPE_CHECKING:
    pass

from langgraph_s3.checkpoint.saver.wiring import (
    LEGACY_VERSION_WIDTH,
    VERSION_WIDTH,
    Namespaces,
    SaverWiring,
    _one,
    _refuse_inverted_versions,
    walk_scope,
)


class Contract(SaverWiring):
    """LangGraph's checkpoint saver contract, async: get, list, put, put_writes,
    versions, DeltaChannel history."""

    @operation
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint the config names (its ``checkpoint_id``), or the latest one.

        Args:
            config: ``{"configurable": {"thread_id", "checkpoint_ns"?, "checkpoint_id"?}}``.

        Returns:
            The checkpoint with its pending writes, or None when the thread (or that
            checkpoint) has none in its history.

        Cost: latest: 3 requests + one per older object holding a value and per
        write, in 3 round trips (1 when they are cached). A
        DeltaChannel thread's history is walked beside it: 4 round trips when a seed
        is near (snapshot every 7 steps), one more per further 32 ancestors' objects
        (6 at turn 20 with the default snapshot every 100). By id: 3 round trips for a
        tip, one more for an older checkpoint (found in a listing from the top).
        """
        at = Address.of(config)
        walk = walk_scope(self._ctx)  # every read: a walk's first one starts it afresh
        read = self._reader().get_tuple(
            at.keys(self.layout),
            at.checkpoint_id,
            walk=walk if at.checkpoint_id is not None else None,
        )
        if not self._refreshing():
            return await read
        tup: CheckpointTuple | None
        tup, _ = await gather_all(read, self.manifest.commits.touch(at.thread_id))
        return tup

    def _refreshing(self) -> bool:
        return self.refresh_on_read and bool(self.manifest.ttl_seconds)

    @operation_iter
    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints newest first: of one namespace, of a thread, or of every thread.

        Args:
            config: the thread (and namespace) to list; None lists every thread of
                the deployment (a manifest Scan).
            filter: metadata keys and the values they must have.
            before: only checkpoints older than this config's checkpoint.
            limit: at most this many.

        Cost: per namespace, the manifest GetItem beside one checkpoint LIST page and
        one writes LIST page, then envelope and write GETs, then the older objects
        holding their values: 3 round trips per chunk of up to ``limit`` (100
        unlimited, 50 with a filter, whose envelopes are read first).
        """
        if limit is not None and limit <= 0:
            return
        before_id = get_checkpoint_id(before) if before else None
        only_id: str | None = None
        touched: asyncio.Future[bool] | None = None
        if config is not None:
            at = Address.of(config)
            if self._refreshing():
                touched = asyncio.ensure_future(self.manifest.commits.touch(at.thread_id))
            only_id = at.checkpoint_id
            conf = config.get("configurable") or {}
            if conf.get("checkpoint_ns") is not None:
                targets: Namespaces = _one(at.thread_id, str(conf["checkpoint_ns"]))
            else:
                targets = self._thread_namespaces(at.thread_id, early_root=only_id is None)
        else:
            targets = self._all_namespaces()
        try:
            async with aclosing(self._list(targets, only_id, before_id, filter, limit)) as tuples:
                async for tup in tuples:
                    yield tup
        finally:
            if touched is not None:
                await touched

    async def _list(
        self,
        targets: Namespaces,
        only_id: str | None,
        before_id: str | None,
        filter: dict[str, Any] | None,
        limit: int | None,
    ) -> AsyncGenerator[CheckpointTuple, None]:
        reader = self._reader()
        remaining = limit
        async with aclosing(targets):  # its Query is cancelled when we stop early
            async for thread, ns, entry in targets:
                keys = self.layout.namespace(thread, ns)
                if only_id is not None:
                    listing: AsyncIterator[CheckpointTuple] = self._one(
                        reader, keys, only_id, before_id, filter
                    )
                else:
                    listing = reader.list_namespace(
                        keys, entry, before_id=before_id, filter=filter, limit=remaining
                    )
                async for tup in listing:
                    yield tup
                    if remaining is not None:
                        remaining -= 1
                        if remaining <= 0:
                            return

    async def _one(
        self,
        reader: Reader,
        keys: NamespaceKeys,
        cid: str,
        before_id: str | None,
        filter: dict[str, Any] | None,
    ) -> AsyncIterator[CheckpointTuple]:
        if before_id is not None and cid >= before_id:
            return
        tup = await reader.get_tuple(keys, cid)
        if tup is not None and matches(tup.metadata, filter):
            yield tup

    async def _thread_namespaces(self, thread: str, *, early_root: bool = False) -> Namespaces:
        """The thread's namespaces, root first, from one manifest Query.

        ``early_root``: the root namespace is handed out before the Query answers,
        with its entry still on its way, so that its first listing pages go out
        beside the Query (a round trip saved: most threads have only the root).
        """
        query = asyncio.ensure_future(self.manifest.reads.namespaces(thread))
        try:
            if early_root:

                async def root() -> Entry | None:
                    entries = await asyncio.shield(query)
                    return next((e for e in entries if not e.checkpoint_ns), None)

                yield thread, "", root()
            for e in sorted(await query, key=lambda e: e.checkpoint_ns):
                if e.checkpoint_ns or not early_root:
                    yield thread, e.checkpoint_ns, e
        finally:
            query.cancel()  # a consumer that stopped early: the Query may still run

    async def _all_namespaces(self) -> Namespaces:
        entries: list[Entry] = []
        async for page in self.manifest.reads.scan():
            entries.extend(page)
        for e in sorted(entries, key=lambda e: (e.thread_id, e.checkpoint_ns)):
            yield e.thread_id, e.checkpoint_ns, e

    @operation
    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint and make it the thread's latest (or a new branch head).

        Only channels in ``new_versions`` are uploaded: an unchanged channel's blob is
        already stored under its (channel, version) key.

        Returns:
            The config of the stored checkpoint.

        Raises:
            CheckpointConflictError: its parent was deleted, pruned or rolled back
                while the run was writing (nothing is committed).

        Cost: one PUT (the checkpoint with its small changed values) beside one
        conditional UpdateItem: 1 round trip, no reads; a value over 256 KiB is a
        blob PUT before them (2 round trips).
        """
        at = Address.of(config)
        _refuse_inverted_versions(at.thread_id, checkpoint)
        keys = at.keys(self.layout)
        writer = Writer(self._ctx, self.serde)
        await writer.put(keys, at.checkpoint_id, config, checkpoint, metadata, new_versions)
        return {
            "configurable": {
                "thread_id": at.thread_id,
                "checkpoint_ns": at.checkpoint_ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    @operation
    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes against the config's checkpoint.

        Regular writes are first-write-wins per index (a replay changes nothing);
        special writes (errors, interrupts) are last-write-wins.

        Cost: one PUT per task plus one per special write, together: 1 round trip
        (a second writer of the same task adds a GET and a conditional PUT).
        """
        at = Address.of(config)
        if at.checkpoint_id is None:
            raise InvalidIdError("put_writes needs config['configurable']['checkpoint_id']")
        writer = PendingWriter(self._ctx, self.serde)
        await writer.put_writes(
            at.keys(self.layout), at.checkpoint_id, list(writes), task_id, task_path
        )

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Zero-padded counter plus a random fraction: sortable and never reused.

        The random part matters here: blobs are addressed by (channel, version),
        so a fork must never produce a version an earlier branch already used.

        The counter is padded as LangGraph's own savers and its Agent Server's
        adapter pad it (32 digits), since LangGraph compares versions as strings and
        a thread may be continued by either. A thread begun with this library's
        former 12 digits keeps them (the width of ``current``): its versions stay
        comparable among themselves.
        """
        width = VERSION_WIDTH
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            counter = str(current).split(".")[0]
            current_v = int(counter)
            if counter.isdigit() and len(counter) < VERSION_WIDTH:
                width = max(len(counter), LEGACY_VERSION_WIDTH)
        return f"{current_v + 1:0{width}}.{random.getrandbits(48):012x}"

    @operation
    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Rebuild DeltaChannel state: each channel's seed and the writes since.

        Cost: none when ``aget_tuple`` of the latest checkpoint just walked the chain
        (it does for DeltaChannel threads); otherwise the manifest beside one
        checkpoint and one writes page, then the ancestors' envelopes and writes
        together (as deep as the snapshot distance says), then the seed blobs.
        """
        at = Address.of(config)
        delta = DeltaReader(self._ctx, self.serde)
        return await delta.history(at.keys(self.layout), at.checkpoint_id, channels)
