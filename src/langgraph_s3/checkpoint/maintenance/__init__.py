"""Maintenance beside live writers: delete_thread, delete_for_runs, prune, copy_thread,
packing.

Each one commits through the manifest first, conditioned on what it read (a
compare-and-swap on the entry's ``rev``, via ``retry.cas``): a writer that
committed meanwhile makes it read again, and objects are only removed once the
manifest no longer leads to them. Costs grow with the thread (one listing of
its keys, then batched deletes/copies); none of them reads checkpoint bodies
beyond what DeltaChannel seed chains and blob references need.

One module per operation: :mod:`.deletion` (delete_thread, the TTL sweep),
:mod:`.rollback` (delete_for_runs), :mod:`.pruning` (prune), :mod:`.packing`
(pack_thread, unpack_thread), :mod:`.copying` (copy_thread), :mod:`.indexing`
(what ``setup()`` fills in for older threads): one object per operation, each over
the :class:`~.base.Shared` context of one call (the manifest as maintenance reads
it, the objects, the listing compare-and-swap, the marks of a removal).
"""

from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_s3.checkpoint.context import SaverContext
from langgraph_s3.checkpoint.maintenance.base import (
    LEASE_POLL,
    LEASE_POLL_MAX,
    MARK_MARGIN_SECONDS,
    ORPHAN_PACK_SECONDS,
    Shared,
)
from langgraph_s3.checkpoint.maintenance.copying import Copying
from langgraph_s3.checkpoint.maintenance.deletion import ThreadDeletion
from langgraph_s3.checkpoint.maintenance.indexing import Indexing
from langgraph_s3.checkpoint.maintenance.packing import Packing
from langgraph_s3.checkpoint.maintenance.pruning import Keep, Pruning
from langgraph_s3.checkpoint.maintenance.rollback import Rollback

__all__ = [
    "LEASE_POLL",
    "LEASE_POLL_MAX",
    "MARK_MARGIN_SECONDS",
    "ORPHAN_PACK_SECONDS",
    "Keep",
    "Maintenance",
    "Shared",
]


class Maintenance:
    """Whole-thread operations (one per call: see context.py): one object per
    operation over one :class:`Shared` context; their public calls are this one's.

    Args:
        ctx: the saver's context.
        serde: its serializer.
    """

    def __init__(self, ctx: SaverContext, serde: SerializerProtocol) -> None:
        self.shared = Shared(ctx, serde)
        self.raw, self.objects, self.settling = self.shared.raw, ctx.objects, self.shared.settling
        self.deletion = ThreadDeletion(self.shared)
        self.packing = Packing(self.shared)
        self.pruning = Pruning(self.shared, self.packing)
        self.rollback = Rollback(self.shared, self.packing)
        self.copying = Copying(self.shared, self.deletion)
        self.indexing = Indexing(self.shared)
        d, p = self.deletion, self.packing
        self.migrate, self.delete_thread, self.sweep_thread = (
            d.migrate,
            d.delete_thread,
            d.sweep_thread,
        )
        self.late_pass, self.drop_stage, self.sweep = d.late_pass, d.drop_stage, d.sweep
        self.sweep_removed = d.sweep_removed
        self.pack_thread, self.unpack_thread = p.pack_thread, p.unpack_thread
        self.rule, self.prune_thread = self.pruning.rule, self.pruning.prune_thread
        self.prune_plan, self.delete_for_runs = (
            self.pruning.prune_plan,
            self.rollback.delete_for_runs,
        )
        self.copy_thread = self.copying.copy_thread
        self.index_runs, self.record_metadata = (
            self.indexing.index_runs,
            self.indexing.record_metadata,
        )
