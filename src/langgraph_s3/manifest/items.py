"""What every role of the manifest shares: its table, deployment, clock, keys and the
conditional writes they all make (one object, held by each role)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from langgraph_s3.aws.clients import ClientFactory, Limits
from langgraph_s3.core.clock import wall_clock, wall_clock_ns
from langgraph_s3.core.keys import encode
from langgraph_s3.core.meta import Meta, index_keys
from langgraph_s3.core.records import Fields
from langgraph_s3.core.staging import staged
from langgraph_s3.errors import ConditionFailedError
from langgraph_s3.manifest.conditions import Absent, Cond, N, TxCheck, TxPut, TxUpdate, eq
from langgraph_s3.manifest.decide import RUNS_MARK, whole_item
from langgraph_s3.manifest.dynamodb import DynamoTable
from langgraph_s3.manifest.schema import meta_attributes
from langgraph_s3.manifest.stage_items import (
    STAGE_MARK,
)
from langgraph_s3.manifest.table import TablePort

ROOT_LIVE: Cond = Absent("deleted")
"""A subgraph namespace's birth: its thread's root item is no tombstone (or none)."""

logger = logging.getLogger("langgraph_s3.manifest")


class Items:
    """The manifest's items on one table: the keys, the clock and the conditional
    writes every role makes (see :class:`~langgraph_s3.manifest.Manifest`).

    Args:
        table: the table the items live in (a :class:`~langgraph_s3.manifest.table.TablePort`),
            or a ClientFactory, for the DynamoDB table named ``name``.
        name: the DynamoDB table's name, with a ClientFactory.
        deployment: this deployment's partition key prefix (``deployment_key``).
        ttl_seconds: idle seconds before a thread expires; None keeps threads forever.
        page_size: items per Query/Scan request of a DynamoDB table (``DynamoTable``).
        clock: epoch seconds now (expiry, leases, ``updated_at``); tests move it.
        stamp: a deletion's stamp (nanoseconds, unique); the wall clock's by default.
        max_conflicts: compare-and-swap rounds before a ConflictError; by default the
            ClientFactory's ``Limits.max_conflicts`` (read at each commit).
        index_metadata: metadata keys whose values the root items carry as the hash
            key of a global secondary index each (:mod:`langgraph_s3.core.meta`).
    """

    def __init__(
        self,
        table: TablePort | ClientFactory,
        name: str | None = None,
        *,
        deployment: str,
        ttl_seconds: int | None,
        page_size: int | None = None,
        clock: Callable[[], float] = wall_clock,
        stamp: Callable[[], int] = wall_clock_ns,
        max_conflicts: int | None = None,
        index_metadata: Sequence[str] = (),
    ) -> None:
        self.clients: ClientFactory | None = None
        if isinstance(table, ClientFactory):
            if name is None:
                raise TypeError("Manifest(clients, name, ...): name the DynamoDB table")
            self.clients = table
            table = DynamoTable(table, name, page_size=page_size)
        self.db: TablePort = table
        """Where the items are: every request the manifest makes is one of its calls."""
        self.table = table.name
        self.deployment = deployment
        self.ttl_seconds = ttl_seconds
        self.clock = clock
        self.stamp = stamp
        self.max_conflicts = max_conflicts
        self.index_metadata = index_keys(index_metadata)

    def meta_change(self, checkpoint_ns: str, metadata: Mapping[str, Any] | None) -> Meta | None:
        """What a commit of a root checkpoint with ``metadata`` sets and removes of
        the item's metadata attributes (None: a subgraph's, or no metadata given)."""
        if checkpoint_ns or metadata is None:
            return None
        return meta_attributes(metadata, self.deployment, self.index_metadata)

    def pk(self, thread_id: str) -> str:
        """The thread's partition key: its stage's while an import stages it here
        (``core.staging``)."""
        token = staged(self.deployment, thread_id)
        if token is not None:
            return f"{self.claim_pk(thread_id)}/{token}"
        return f"{self.deployment}{encode(thread_id, 'thread_id')}"

    def claim_pk(self, thread_id: str) -> str:
        """The partition of the thread's import claim (``core.staging``)."""
        return f"{self.deployment}{STAGE_MARK}{encode(thread_id, 'thread_id')}"

    def run_pk(self, run_token: str) -> str:
        """The partition of one run's index items (``note_run``)."""
        return f"{self.deployment}{RUNS_MARK}{run_token}"

    def thread_pages(self, thread_id: str) -> AsyncIterator[list[dict[str, Any]]]:
        """Every item of one thread (live or not, the marker aside), page by page."""
        return self.db.query(self.pk(thread_id))

    async def partition(self, pk: str) -> list[dict[str, Any]]:
        """Every item of one partition (a thread's, the marker aside), page by page."""
        return [i async for page in self.db.query(pk) for i in page]

    def key(self, thread_id: str, checkpoint_ns: str) -> dict[str, Any]:
        """The primary key of one (thread, namespace) item, as a tombstone lists it."""
        return {
            "pk": {"S": self.pk(thread_id)},
            "sk": {"S": encode(checkpoint_ns, "checkpoint_ns")},
        }

    def now(self) -> float:
        """Epoch seconds by this manifest's clock (expiry, retention ages)."""
        return self.clock()

    def conflict_rounds(self) -> int:
        """``Limits.max_conflicts``."""
        if self.max_conflicts is not None:
            return self.max_conflicts
        return (self.clients.limits if self.clients is not None else Limits()).max_conflicts

    @staticmethod
    async def applied(write: Awaitable[object]) -> bool:
        """Whether a conditional write went through (False: its condition failed)."""
        try:
            await write
            return True
        except ConditionFailedError:
            return False

    async def write_born(
        self, thread_id: str, write: TxUpdate | TxPut, root: Cond = ROOT_LIVE
    ) -> bool:
        """A subgraph namespace's item written if ``root`` holds of the thread's root
        item (by default: it is no tombstone). One TransactWriteItems (the write and a
        ConditionCheck): a namespace never begins under a deletion that may not find
        it. False when either condition failed."""
        check = TxCheck(self.key(thread_id, ""), root)
        return await self.applied(self.db.transact([write, check]))

    async def swap(
        self,
        thread_id: str,
        checkpoint_ns: str,
        new: Fields,
        *,
        rev: int | None,
        root: Cond | None = None,
    ) -> bool:
        """Write the whole item as ``new`` if it is still at ``rev`` (None: if there is
        no item) and, with ``root``, if that holds of the root item (:meth:`_born`).
        One PutItem (or TransactWriteItems); False when a condition failed."""
        item = whole_item(
            self.key(thread_id, checkpoint_ns),
            thread_id,
            checkpoint_ns,
            new,
            rev,
            int(self.now()),
            self.ttl_seconds,
        )
        when = Absent("pk") if rev is None else eq("rev", N(rev))
        if root is not None:
            return await self.write_born(thread_id, TxPut(item, when), root)
        return await self.applied(self.db.put(item, when=when))
