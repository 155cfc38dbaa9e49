"""The :class:`~langgraph_s3.manifest.Manifest` on the in-memory table: the manifest's
rules, unchanged, over :class:`~langgraph_s3.testing.table.MemoryTableClient`."""

from __future__ import annotations

from langgraph_s3.aws.clients import Limits
from langgraph_s3.aws.stats import RequestStats
from langgraph_s3.manifest.decide import deployment_key
from langgraph_s3.manifest.facade import Manifest
from langgraph_s3.testing.faults import Faults
from langgraph_s3.testing.faulty_table import FaultyTable
from langgraph_s3.testing.requests import YIELDS
from langgraph_s3.testing.table import (
    DEFAULT_BUCKET,
    DEFAULT_TABLE,
    PAGE_ITEMS,
    MemoryTable,
    MemoryTableClient,
)

__all__ = ["MemoryManifest"]


class MemoryManifest(Manifest):
    """The :class:`~langgraph_s3.manifest.Manifest` on a :class:`MemoryTableClient`.

    Args:
        table: the table's name (a new, existing table), or a shared MemoryTable.
        deployment: this deployment's partition key prefix
            (``manifest.deployment_key(bucket, prefix)``; by default that of
            bucket ``"memory"`` without a prefix).
        ttl_seconds: idle seconds before a thread expires; None keeps threads forever.
        stats: where requests are counted (a new RequestStats by default).
        max_conflicts: compare-and-swap rounds before a ConflictError.
        page_items: items per Query or Scan page.
        yields: event-loop turns each request lasts (see ``testing.requests.YIELDS``).
        client: the table client to use instead of a new MemoryTableClient (one that
            gates requests); ``stats``, ``page_items`` and ``yields`` are its.
        faults: a seeded plan of faults (:class:`~langgraph_s3.testing.faults.Faults`)
            the manifest's requests meet, through a
            :class:`~langgraph_s3.testing.faulty_table.FaultyTable` over the client.
    """

    def __init__(
        self,
        table: str | MemoryTable = DEFAULT_TABLE,
        *,
        deployment: str | None = None,
        ttl_seconds: int | None = None,
        stats: RequestStats | None = None,
        max_conflicts: int = Limits.max_conflicts,
        page_items: int = PAGE_ITEMS,
        yields: int = YIELDS,
        client: MemoryTableClient | None = None,
        faults: Faults | None = None,
    ) -> None:
        data = table if isinstance(table, MemoryTable) else MemoryTable(table)
        self.client = client or MemoryTableClient(
            data, stats=stats, page_items=page_items, yields=yields
        )
        super().__init__(
            self.client if faults is None else FaultyTable(self.client, faults=faults),
            deployment=deployment if deployment is not None else deployment_key(DEFAULT_BUCKET, ""),
            ttl_seconds=ttl_seconds,
            clock=lambda: self.data.clock(),
            stamp=lambda: self.data.stamp(),
            max_conflicts=max_conflicts,
        )

    @property
    def data(self) -> MemoryTable:
        """The table's state (a test may inspect or change its items)."""
        return self.client.data

    @property
    def stats(self) -> RequestStats:
        """Where this manifest's requests are counted."""
        return self.client.stats

    @stats.setter
    def stats(self, stats: RequestStats) -> None:
        self.client.stats = stats
