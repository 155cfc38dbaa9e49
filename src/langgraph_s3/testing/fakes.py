"""In-memory stand-ins for tests and offline experiments.

:class:`MemoryObjectStore` and :class:`MemoryManifest` implement the same
interfaces as :class:`~langgraph_s3.aws.s3.ObjectStore` (S3) and
:class:`~langgraph_s3.manifest.Manifest` (DynamoDB)
(:mod:`langgraph_s3.core.ports`), with the same semantics, over dicts: a saver built
on them runs its whole logic with no network and no moto server, a few
milliseconds per call::

    saver = memory_saver()                       # an AsyncS3Saver on fresh fakes
    graph = builder.compile(checkpointer=saver)
    await graph.ainvoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t"}})
    saver.stats.by_operation                     # {"s3.PutObject": ..., "dynamodb.UpdateItem": ...}

or, explicitly::

    AsyncS3Saver(bucket="b", object_store=MemoryObjectStore("b"), manifest=MemoryManifest())

**Fidelity.** Every rule the AWS implementations leave to S3 or DynamoDB
(``If-None-Match``/``If-Match`` writes, a 404 on ``If-Match`` counting as a
failed condition, ascending listings with ``StartAfter`` and pages,
LastModified in whole seconds, the manifest's condition expressions) is
implemented in Python: the bucket in :mod:`.objects`; the table in :mod:`.table`,
which evaluates the conditions and changes the manifest's rules send as data
(:mod:`langgraph_s3.manifest.conditions`). :class:`MemoryManifest` is the real
:class:`~langgraph_s3.manifest.Manifest` on that table: its rules are not written
twice.
``tests/unit/test_contract_*.py`` run the same assertions on these and on the
real classes against moto.

**Requests** are counted like the real clients count them, per
``"service.Operation"`` in a :class:`~langgraph_s3.aws.stats.RequestStats`
(``memory_saver`` shares the saver's, so ``saver.stats`` works as on AWS):
a cache hit makes none, a listing one per page, a delete one per 1,000 keys.
Each request yields to the event loop before it is applied, so requests
issued together are in flight together and ``round_trips`` is the critical
path (the longest chain of requests, each sent after the one before it
answered), as on a network. ``bytes_sent`` counts object bodies only.

**State** lives in a :class:`MemoryBucket` / :class:`MemoryTable`: several
stores or manifests (a writer and a cold reader, two deployments on one
table) share one by passing it in. Their ``objects`` / ``items`` are plain
dicts a test may inspect or damage directly (no request is counted).

**Faults** (:mod:`.faults`). :class:`FaultyObjectStore` and :class:`FaultyTable` wrap any
object store and any table (the one under every role of a manifest) and,
deterministically for a seed, make chosen requests fail with the library's own
transient errors, either before anything is applied or after (the answer is lost),
the way SlateDB tests on a seeded failing store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langgraph_s3.aws.clients import Limits
from langgraph_s3.core.keys import Layout
from langgraph_s3.core.ports import ManifestPort, ObjectStorePort
from langgraph_s3.manifest.decide import deployment_key
from langgraph_s3.manifest.facade import Manifest
from langgraph_s3.manifest.objects import ObjectTable
from langgraph_s3.manifest.table import TablePort
from langgraph_s3.testing.faults import Faults, FaultyObjectStore
from langgraph_s3.testing.faulty_table import FaultyTable
from langgraph_s3.testing.memory_manifest import MemoryManifest
from langgraph_s3.testing.objects import MemoryBucket, MemoryObjectStore, StoredObject
from langgraph_s3.testing.requests import YIELDS
from langgraph_s3.testing.table import (
    DEFAULT_BUCKET,
    DEFAULT_TABLE,
    PAGE_ITEMS,
    MemoryTable,
    MemoryTableClient,
)

if TYPE_CHECKING:
    from langgraph_s3.aws.s3 import ObjectStore
    from langgraph_s3.checkpoint.saver import AsyncS3Saver
    from langgraph_s3.manifest import DynamoTable, Manifest

__all__ = [
    "PAGE_ITEMS",
    "YIELDS",
    "Faults",
    "FaultyObjectStore",
    "FaultyTable",
    "MemoryBucket",
    "MemoryManifest",
    "MemoryObjectStore",
    "MemoryTable",
    "MemoryTableClient",
    "StoredObject",
    "memory_saver",
]


# ------------------------------------------------------------------ a saver
def memory_saver(
    *,
    bucket: str | MemoryBucket = DEFAULT_BUCKET,
    table: str | MemoryTable = DEFAULT_TABLE,
    prefix: str = "",
    cache_bytes: int = 0,
    thread_ttl_days: float | None = None,
    manifest: str = "dynamodb",
    **kwargs: Any,
) -> AsyncS3Saver:
    """An :class:`~langgraph_s3.AsyncS3Saver` on a :class:`MemoryObjectStore` and a
    :class:`MemoryManifest`, which count their requests in ``saver.stats``.

    Pass the same MemoryBucket and MemoryTable to two calls for two savers on the
    same data (a writer and a cold reader). ``cache_bytes`` is 0 by default (every
    read a request); ``manifest="s3"`` keeps the manifest in the bucket (the table is
    then unused); other keyword arguments go to the saver (``serde``,
    ``concurrency``, ``max_conflicts``...). The saver makes no AWS request.
    """
    from langgraph_s3.checkpoint.saver import AsyncS3Saver

    name = bucket.name if isinstance(bucket, MemoryBucket) else bucket
    concurrency = int(kwargs.get("concurrency", 32))
    store = MemoryObjectStore(bucket, concurrency=concurrency, cache_bytes=cache_bytes)
    ttl = int(thread_ttl_days * 86400) if thread_ttl_days else None
    conflicts = int(kwargs.get("max_conflicts", Limits.max_conflicts))
    port: ManifestPort
    if manifest == "s3":
        deployment = deployment_key(name, prefix)
        objects = ObjectTable(store, Layout(prefix).manifest(), strip=deployment)
        port = Manifest(objects, deployment=deployment, ttl_seconds=ttl, max_conflicts=conflicts)
        where: dict[str, Any] = {}
    else:
        port = memory = MemoryManifest(
            table, deployment=deployment_key(name, prefix), ttl_seconds=ttl, max_conflicts=conflicts
        )
        where = {"table": memory.table}
    saver = AsyncS3Saver(
        bucket=name, prefix=prefix, object_store=store, manifest=port, **where, **kwargs
    )
    store.stats = saver.stats
    if isinstance(port, MemoryManifest):
        port.stats = saver.stats
    return saver


# mypy --strict proves that the AWS classes, the fakes and the wrappers all satisfy
# the ports: each assignment below is checked against the protocol.
if TYPE_CHECKING:

    def _satisfy_ports(
        s3: ObjectStore,
        dynamodb: Manifest,
        objects: MemoryObjectStore,
        manifest: MemoryManifest,
        faulty_objects: FaultyObjectStore,
        dynamodb_table: DynamoTable,
        memory_table: MemoryTableClient,
        faulty_table: FaultyTable,
    ) -> None:
        stores: list[ObjectStorePort] = [s3, objects, faulty_objects]
        manifests: list[ManifestPort] = [dynamodb, manifest]
        tables: list[TablePort] = [dynamodb_table, memory_table, faulty_table]
        del stores, manifests, tables
