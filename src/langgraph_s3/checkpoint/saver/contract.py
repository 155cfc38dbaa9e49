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
    get_checkpoint_metadata,
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
    Wiring,
    _one,
    _refuse_inverted_versions,
    walk_scope,
)


class Contract:
    """LangGraph's checkpoint saver contract, async: get, list, put, put_writes,
    versions, DeltaChannel history."""

    def __init__(self, w: Wiring) -> None:
        self.w = w
        self.clients = w.clients

    @property
    def concurrency(self) -> int:
        """Requests in flight per call (the saver's, read at each call)."""
        return self.w.concurrency

    @operation
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """``AsyncS3Saver.aget_tuple``."""
        at = Address.of(config)
        walk = walk_scope(self.w.ctx)  # every read: a walk's first one starts it afresh
        read = self.w.reader().get_tuple(
            at.keys(self.w.layout),
            at.checkpoint_id,
            walk=walk if at.checkpoint_id is not None else None,
        )
        if not self._refreshing():
            return await read
        tup: CheckpointTuple | None
        tup, _ = await gather_all(read, self.w.manifest.commits.touch(at.thread_id))
        return tup

    def _refreshing(self) -> bool:
        return self.w.refresh_on_read and bool(self.w.manifest.ttl_seconds)

    @operation_iter
    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """``AsyncS3Saver.alist``."""
        if limit is not None and limit <= 0:
            return
        before_id = get_checkpoint_id(before) if before else None
        only_id: str | None = None
        touched: asyncio.Future[bool] | None = None
        if config is not None:
            at = Address.of(config)
            if self._refreshing():
                touched = asyncio.ensure_future(self.w.manifest.commits.touch(at.thread_id))
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
        reader = self.w.reader()
        remaining = limit
        async with aclosing(targets):  # its Query is cancelled when we stop early
            async for thread, ns, entry in targets:
                keys = self.w.layout.namespace(thread, ns)
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
        query = asyncio.ensure_future(self.w.manifest.reads.namespaces(thread))
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
        async for page in self.w.manifest.reads.scan():
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
        """``AsyncS3Saver.aput``."""
        at = Address.of(config)
        _refuse_inverted_versions(at.thread_id, checkpoint)
        keys = at.keys(self.w.layout)
        writer = Writer(self.w.ctx, self.w.serde)
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
        """``AsyncS3Saver.aput_writes``."""
        at = Address.of(config)
        if at.checkpoint_id is None:
            raise InvalidIdError("put_writes needs config['configurable']['checkpoint_id']")
        if self.w.seals is not None:  # the thread's subject (its config names it too)
            await self.w.seals.claim(at.thread_id, get_checkpoint_metadata(config, {}))
        writer = PendingWriter(self.w.ctx, self.w.serde)
        await writer.put_writes(
            at.keys(self.w.layout), at.checkpoint_id, list(writes), task_id, task_path
        )

    def get_next_version(self, current: str | None, channel: None) -> str:
        """``AsyncS3Saver.get_next_version``."""
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
        """``AsyncS3Saver.aget_delta_channel_history``."""
        at = Address.of(config)
        delta = DeltaReader(self.w.ctx, self.w.serde)
        return await delta.history(at.keys(self.w.layout), at.checkpoint_id, channels)
