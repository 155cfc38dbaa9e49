"""Builders of object stores and manifests of either kind, real (on moto) or in memory,
for the contract tests: the same assertions run on both."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from langgraph.checkpoint.base.id import uuid6

from langgraph_s3.aws.clients import ClientFactory
from langgraph_s3.aws.kms import KmsKeyVault
from langgraph_s3.aws.s3 import ObjectStore
from langgraph_s3.aws.stats import RequestStats
from langgraph_s3.core.ports import KeyVaultPort, ManifestPort, ObjectStorePort
from langgraph_s3.core.records import Raw
from langgraph_s3.manifest import DynamoTable, Manifest, deployment_key
from langgraph_s3.manifest.objects import ObjectTable
from langgraph_s3.manifest.table import TablePort
from langgraph_s3.testing import Names, unique_names
from langgraph_s3.testing.fakes import (
    MemoryBucket,
    MemoryManifest,
    MemoryObjectStore,
    MemoryTable,
    MemoryTableClient,
    memory_saver,
)
from langgraph_s3.testing.memory_vault import MemoryKeyVault

KINDS = ("memory", "moto")
TABLE_KINDS = (*KINDS, "objects-memory", "objects-moto")
"""The manifest's tables: DynamoDB's (in memory, on moto) and the object manifest's
(``manifest="s3"``: over the memory store, over moto's S3)."""


@functools.cache
def session() -> Any:
    """One botocore session for every client: its service models load once."""
    from aiobotocore.session import get_session

    return get_session()


def stats_of(x: ObjectStorePort | ManifestPort) -> RequestStats:
    """Where ``x`` counts its requests."""
    if isinstance(x, (MemoryObjectStore, MemoryManifest)):
        return x.stats
    if isinstance(x, Manifest) and isinstance(x.items.db, ObjectTable):
        return stats_of(x.items.db.store)
    assert isinstance(x, (ObjectStore, Manifest)) and x.clients is not None
    return x.clients.stats


def on_objects(m: ManifestPort) -> bool:
    """Whether ``m`` keeps its manifest in the bucket (``manifest="s3"``)."""
    return isinstance(m, Manifest) and isinstance(m.items.db, ObjectTable)


def expect(m: ManifestPort, dynamodb: dict[str, int], objects: dict[str, int]) -> dict[str, int]:
    """The requests a manifest call makes, as its table is DynamoDB's or objects'."""
    return objects if on_objects(m) else dynamodb


def counts(x: ObjectStorePort | ManifestPort) -> dict[str, int]:
    """Requests per operation since the last ``reset(x)``."""
    return dict(stats_of(x).by_operation)


def reset(*xs: ObjectStorePort | ManifestPort) -> None:
    for x in xs:
        stats_of(x).reset()


def small_checkpoint(cid: str | None = None) -> Any:
    """A checkpoint of one small inline value (``v``): its id's first 8 characters."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6

    c = empty_checkpoint()
    c["id"] = cid or str(uuid6())
    c["channel_values"] = {"v": c["id"][:8]}
    c["channel_versions"] = {"v": 1}
    return c


def checkpoint_ids(n: int) -> list[str]:
    """``n`` uuid6 checkpoint ids, ascending (made now: ``trim_gone`` keeps them)."""
    return sorted(str(uuid6()) for _ in range(n))


def plain(raw: Raw | None) -> Raw | None:
    """An item as read with its time-dependent values zeroed (its life token by
    ``"<life>"`` when it has one: that there is one matters, not which)."""
    if raw is None:
        return None
    life = "<life>" if raw.life else ""
    latest = raw.latest
    if latest is not None:
        latest = replace(
            latest,
            created_at=0,
            updated_at=0,
            expires_at=None,
            life="<life>" if latest.life else "",
        )
    return replace(
        raw,
        created_at=0,
        updated_at=0,
        expires=None,
        deleted_at="",
        lease_until=0.0,
        life=life,
        latest=latest,
    )


class Backend:
    """Stores and manifests of one kind; every one made is closed by :meth:`aclose`."""

    def __init__(self, kind: str, url: str | None, names: Names | None = None) -> None:
        self.kind = kind.removeprefix("objects-")
        self.objects = kind.startswith("objects-")
        """The manifest lives in the bucket (``manifest="s3"``), not in a table."""
        self.url = url
        names = names or unique_names()
        self.bucket, self.table = names["bucket"], names["table"]
        self.memory_bucket = MemoryBucket(self.bucket, exists=self.objects)
        self._tables: dict[str, ObjectTable] = {}
        self.memory_table = MemoryTable(self.table, exists=False)
        self._clients: list[ClientFactory] = []

    def _factory(self) -> ClientFactory:
        clients = ClientFactory(endpoint_url=self.url, session=session())
        self._clients.append(clients)
        return clients

    def store(self, *, cache_bytes: int = 0) -> ObjectStorePort:
        """A new store on this backend's bucket (created or not yet, as it is)."""
        if self.kind == "memory":
            return MemoryObjectStore(self.memory_bucket, concurrency=8, cache_bytes=cache_bytes)
        return ObjectStore(self._factory(), self.bucket, concurrency=8, cache_bytes=cache_bytes)

    def manifest(self, *, prefix: str = "", ttl_seconds: int | None = None) -> ManifestPort:
        """A new manifest of one deployment (``prefix``) on this backend's table."""
        deployment = deployment_key(self.bucket, prefix)
        if self.objects:
            return Manifest(
                self.object_table(prefix), deployment=deployment, ttl_seconds=ttl_seconds
            )
        if self.kind == "memory":
            return MemoryManifest(self.memory_table, deployment=deployment, ttl_seconds=ttl_seconds)
        return Manifest(self._factory(), self.table, deployment=deployment, ttl_seconds=ttl_seconds)

    def table_client(self) -> TablePort:
        """A new client of this backend's table (created or not yet, as it is)."""
        if self.objects:
            return ObjectTable(self.store(), "manifest/")
        if self.kind == "memory":
            return MemoryTableClient(self.memory_table)
        return DynamoTable(self._factory(), self.table)

    def object_table(self, prefix: str = "") -> ObjectTable:
        """A new object manifest of deployment ``prefix`` in this backend's bucket."""
        root = f"{prefix.strip('/')}/manifest/" if prefix.strip("/") else "manifest/"
        table = ObjectTable(self.store(), root, strip=deployment_key(self.bucket, prefix))
        self._tables[table.strip] = table
        return table

    async def put_raw_item(self, item: dict[str, Any]) -> None:
        """Write an item as another program would (no condition, not counted); in an
        object manifest, only where a deployment's manifest holds its key (no other
        item can be in one)."""
        if self.objects:
            pk = item["pk"]["S"]
            for strip in sorted(self._tables, key=len, reverse=True):
                if pk.startswith(strip):
                    prefix, root = self._tables[strip].strip, self._tables[strip].root
                    await ObjectTable(self.store(), root, strip=prefix).put(item)
                    return
            return
        if self.kind == "memory":
            self.memory_table.items[(item["pk"]["S"], item["sk"]["S"])] = item
            return
        clients = self._factory()
        dynamodb = await clients.client("dynamodb")
        await dynamodb.put_item(TableName=self.table, Item=item)

    async def vault(self) -> tuple[KeyVaultPort, Callable[[], Awaitable[None]]]:
        """A key vault on a new key, and how to disable that key (as an operator would:
        the vault's own calls are refused after it)."""
        if self.kind == "memory":
            memory = MemoryKeyVault()

            async def disable_memory() -> None:
                memory.disable()

            return memory, disable_memory
        clients = self._factory()
        kms = await clients.client("kms")
        key_id = (await kms.create_key(Description="subjects"))["KeyMetadata"]["KeyId"]

        async def disable() -> None:
            await kms.disable_key(KeyId=key_id)

        return KmsKeyVault(clients, key_id), disable

    async def aclose(self) -> None:
        for clients in self._clients:
            await clients.aclose()


class HeldStep:
    """A one-node chat graph whose node runs until the test lets it end (a task that
    outlasts its license, a deletion or a copy): ``started`` is set when it runs,
    ``go`` ends it with ``reply``."""

    def __init__(self, reply: str = "done") -> None:
        self.started, self.go, self.reply = asyncio.Event(), asyncio.Event(), reply

    def graph(self, saver: Any) -> Any:
        from langgraph.graph import MessagesState, StateGraph

        async def step(state: Any) -> dict[str, Any]:
            self.started.set()
            await self.go.wait()
            return {"messages": [("ai", self.reply)]}

        builder = StateGraph(MessagesState)
        builder.add_node("agent", step)
        builder.set_entry_point("agent")
        return builder.compile(checkpointer=saver)


class FrozenWrites:
    """A writer's write PUTs held back (sent, not landed: a frozen Lambda) until
    ``gate`` is set; ``sent`` is set once one is held. ``keys`` names every write PUT it
    sent, held or not: one of its tasks may send another as it thaws (when it does
    depends on how the loop ran the others, which is no part of the test)."""

    def __init__(self, saver: Any) -> None:
        self.real, self.gate, self.sent = saver.objects.put, asyncio.Event(), asyncio.Event()
        self.keys: list[str] = []
        saver.objects.put = self.put

    async def put(self, key: str, body: bytes, **kw: Any) -> Any:
        if "/w/" in key:
            self.keys.append(key)
        if "/w/" in key and not self.gate.is_set():
            self.sent.set()
            await self.gate.wait()
        return await self.real(key, body, **kw)


async def frozen_turn(
    bucket: MemoryBucket, table: MemoryTable, text: str, config: Any, first: str = "hello"
) -> tuple[Any, Any, FrozenWrites, asyncio.Future[Any]]:
    """A writer's thread of one turn (``first``), then a second turn whose writes are
    sent and held back (``FrozenWrites``): (writer, its chat graph, the frozen PUTs, the
    turn)."""
    from langgraph_s3.testing.graphs import chat_graph

    writer = memory_saver(bucket=bucket, table=table)
    graph = chat_graph().compile(checkpointer=writer)
    await graph.ainvoke({"messages": [("user", first)]}, config)
    frozen = FrozenWrites(writer)
    turn = asyncio.ensure_future(graph.ainvoke({"messages": [("user", text)]}, config))
    await frozen.sent.wait()
    return writer, graph, frozen, turn
