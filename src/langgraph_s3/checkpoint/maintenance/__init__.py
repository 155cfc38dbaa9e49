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
(what ``setup()`` fills in for older threads), over :mod:`.base`.
"""

from langgraph_s3.checkpoint.maintenance.base import (
    LEASE_POLL,
    LEASE_POLL_MAX,
    MARK_MARGIN_SECONDS,
    ORPHAN_PACK_SECONDS,
    MaintenanceBase,
)
from langgraph_s3.checkpoint.maintenance.copying import Copying
from langgraph_s3.checkpoint.maintenance.indexing import Indexing
from langgraph_s3.checkpoint.maintenance.pruning import Keep, Pruning
from langgraph_s3.checkpoint.maintenance.rollback import Rollback

__all__ = [
    "LEASE_POLL",
    "LEASE_POLL_MAX",
    "MARK_MARGIN_SECONDS",
    "ORPHAN_PACK_SECONDS",
    "Keep",
    "Maintenance",
    "MaintenanceBase",
]


class Maintenance(Copying, Rollback, Pruning, Indexing):
    """Whole-thread operations (one per call: see context.py); the deletion's come with
    :class:`Copying` (a copy that gives up removes what it wrote as a sweep would)."""
