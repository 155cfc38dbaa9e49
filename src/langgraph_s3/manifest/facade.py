"""The manifest: which checkpoints exist, per deployment, thread and namespace.

Design
------
**The manifest defines what exists.** A checkpoint belongs to a thread's
history only when it is ``latest`` or one of ``heads``, or an ancestor of one
(checkpoint keys carry their parent id), and is not older than ``floor``. An
object written by a writer that crashed before its manifest update is
invisible (no phantom step), and so is everything of a deleted or expired
life when the id is reused: the new life starts from a parentless checkpoint
and its own ``floor``.

**Writers.** The common put is one UpdateItem conditioned on ``latest_id`` being
the new checkpoint's parent (and older). Anything else (a fork, a concurrent
writer, a replay, a fresh namespace) reads the item and compare-and-swaps on
``rev`` (``retry.cas``). A put whose parent belongs to a deleted, expired or
pruned life is refused: its unchanged channel blobs may already be gone.

**Maintenance** conditions on ``rev``: prune raises ``floor`` before deleting,
delete_thread writes a tombstone before deleting. While the tombstone's lease
runs (the deletion is in progress), a new life on the same id waits, so the
deletion never removes its objects.

**Tenancy.** The deployment (bucket and prefix) is part of the key, so any
number of deployments share one table; the table is the only shared thing.

**One set of rules, any table.** The rules are written once, over the narrow
:class:`~langgraph_s3.manifest.table.TablePort` (get, query, scan, and writes conditioned
on the item, the conditions as data): :mod:`.dynamodb` renders them for DynamoDB, the
in-memory table of :mod:`langgraph_s3.testing.table` evaluates them.

**Roles, not floors.** :class:`Manifest` holds one :class:`~.items.Items` (the table,
the deployment, the clock, the keys and the conditional writes) and one object per
role over it, each role's methods in one module and each served to its callers by
one narrow port of :mod:`langgraph_s3.core.manifest_ports`: :mod:`.reads`,
:mod:`.commits` and :mod:`.held` (a writer's), :mod:`.upkeep` (maintenance's),
:mod:`.deletions`, :mod:`.staging` (an import's) and :mod:`.setup`.
:mod:`.decide` holds the pure decisions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langgraph_s3.aws.clients import ClientFactory
from langgraph_s3.core.clock import wall_clock, wall_clock_ns
from langgraph_s3.core.meta import Meta
from langgraph_s3.manifest.commits import Commits
from langgraph_s3.manifest.deletions import Deletions
from langgraph_s3.manifest.held import Held
from langgraph_s3.manifest.items import Items
from langgraph_s3.manifest.reads import Reads
from langgraph_s3.manifest.setup import Setup
from langgraph_s3.manifest.staging import Staging
from langgraph_s3.manifest.table import TablePort
from langgraph_s3.manifest.upkeep import Upkeep

__all__ = ["Manifest"]


class Manifest:
    """The table that says which checkpoints exist: one item per (thread, namespace).

    Item layout (the key names the deployment, so deployments share a table)::

        pk = {bucket}/{prefix}/{thread}   sk = {namespace}   (each part keys.encode'd: no "/")
        thread_id, checkpoint_ns       the raw ids, for listing
        latest_id, latest_tail         newest committed checkpoint and its key tail
        heads                          other committed branch tips (forks, writers that lost
                                       the race to latest); absent when there are none
        floor                          nothing older belongs to this life of the thread
        born                           the floor the life began at, until prune raises
                                       it: a root a concurrent first writer commits
                                       late (older than the floor) lowers the floor
        gone                           checkpoints maintenance removed above the floor: a
                                       writer still holding one may not continue it
        rev                            bumped by every change: the compare-and-swap token
        uses_delta                     the latest has DeltaChannel state to rebuild
        created_at, updated_at         epoch seconds
        expires_at                     optional TTL attribute (idle threads retire)
        deleted, deleted_at,           a tombstone left by delete_thread (or drop) and
        lease_until                    the lease of the deletion in progress

    plus one marker per deployment (``pk = {bucket}/{prefix}/``, ``sk = ~layout``)
    recording the key layout its entries use.

    **The manifest defines what exists**: a checkpoint object is part of a thread
    only when the item's tips (``latest_id``, ``heads``) lead to it, not below
    ``floor``. A put sends its checkpoint object beside the fast-path update, so
    the latest may name an object still in flight (or, after a crash between the
    two, never stored): readers then take the latest's parent (a tip too, see
    ``history.lineage_of`` and ``demoted``). Every other path writes objects
    first, so a crash leaves only invisible objects.

    Cost in requests (each one round trip unless said otherwise):

    * ``reads.latest``, ``reads.read``: 1 GetItem (strongly consistent).
    * ``reads.namespaces``: 1 Query per 1 MB page of the thread's namespaces.
    * ``reads.scan``: 1 Scan per 1 MB page of the whole table (maintenance only).
    * ``commits.advance``: 1 UpdateItem on the fast path (the parent is latest);
      otherwise + 1 GetItem and 1 conditional write per contended round.
    * ``upkeep.raise_floor``, ``.replace``, ``.merge``, ``.drop``:
      1 conditional write.
    * ``deletions.tombstone``: 1 Query page, then 1 UpdateItem per namespace (concurrent).
    * ``deletions.renew``, ``.release``: 1 UpdateItem per namespace (concurrent).

    Example::

        manifest = Manifest(
            ClientFactory(), "checkpoints",  # or any TablePort, and no name
            deployment=deployment_key("my-bucket", "prod"), ttl_seconds=None,
        )
        await manifest.commits.advance("t1", "", cid, tail, None)  # a new life: 1 UpdateItem
        entry = await manifest.reads.latest("t1", "")      # 1 GetItem
        assert entry is not None and entry.latest_id == cid

    Args: as :class:`~langgraph_s3.manifest.items.Items`.
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
        self.items = Items(
            table,
            name,
            deployment=deployment,
            ttl_seconds=ttl_seconds,
            page_size=page_size,
            clock=clock,
            stamp=stamp,
            max_conflicts=max_conflicts,
            index_metadata=index_metadata,
        )
        self.reads = Reads(self.items)
        self.commits = Commits(self.items, self.reads)
        self.held = Held(self.items, self.reads)
        self.upkeep = Upkeep(self.items)
        self.deletions = Deletions(self.items)
        self.staging = Staging(self.items, self.deletions)
        self.setup = Setup(self.items)

    @property
    def db(self) -> TablePort:
        """The table the items live in (every request is one of its calls)."""
        return self.items.db

    @property
    def clients(self) -> ClientFactory | None:
        """The ClientFactory the table was made with, if any."""
        return self.items.clients

    @property
    def table(self) -> str:
        """The table's name."""
        return self.items.table

    @property
    def deployment(self) -> str:
        """This deployment's partition key prefix."""
        return self.items.deployment

    @property
    def ttl_seconds(self) -> int | None:
        """Idle seconds before a thread expires (None: never)."""
        return self.items.ttl_seconds

    @property
    def index_metadata(self) -> tuple[str, ...]:
        """The metadata keys the root items carry an index value of."""
        return self.items.index_metadata

    @property
    def clock(self) -> Callable[[], float]:
        """Epoch seconds now, as every decision reads it (a test may set it)."""
        return self.items.clock

    @clock.setter
    def clock(self, clock: Callable[[], float]) -> None:
        self.items.clock = clock

    def now(self) -> float:
        """Epoch seconds by this manifest's clock (expiry, retention ages)."""
        return self.items.now()

    def key(self, thread_id: str, checkpoint_ns: str) -> dict[str, Any]:
        """The primary key of one (thread, namespace) item."""
        return self.items.key(thread_id, checkpoint_ns)

    def meta_change(self, checkpoint_ns: str, metadata: Mapping[str, Any] | None) -> Meta | None:
        """What a root commit with ``metadata`` sets and removes of the item's
        metadata attributes (None: a subgraph's, or no metadata given)."""
        return self.items.meta_change(checkpoint_ns, metadata)
