"""The manifest's narrow ports: one per role, each serving the callers it names.

A manifest (:class:`~langgraph_s3.manifest.Manifest` on DynamoDB or the memory table)
is one object per role over one table: :class:`ManifestPort` is what holds them, and
a caller takes the role it uses (``ctx.manifest.commits.advance``), so a new manifest
write touches its role and its protocol, nothing else. Each method's contract is
here; the roles' modules in :mod:`langgraph_s3.manifest` document how each is kept
and what it costs in requests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, Protocol

from langgraph_s3.core.commit import PLAIN, How, Need
from langgraph_s3.core.held import HeldWrite, InlineCopy
from langgraph_s3.core.meta import Meta, Scalar
from langgraph_s3.core.records import (
    Deletion,
    Entry,
    Expiry,
    Fields,
    Late,
    PackRef,
    Raw,
    ThreadInfo,
)
from langgraph_s3.core.shards import Shard
from langgraph_s3.core.staging import StagingPort

__all__ = [
    "ManifestCommits",
    "ManifestDeletions",
    "ManifestHeld",
    "ManifestPort",
    "ManifestReads",
    "ManifestSetup",
    "ManifestUpkeep",
    "StagingPort",
]


class ManifestReads(Protocol):
    """Strongly consistent reads of a thread's items and the deployment's listings:
    every reader's, writer's and maintenance operation's."""

    async def read(self, thread_id: str, checkpoint_ns: str) -> Raw | None:
        """The item as stored (live, a tombstone or expired), for a later compare-and-swap;
        None when there is none. One strongly consistent read."""

    async def latest(self, thread_id: str, checkpoint_ns: str) -> Entry | None:
        """The live entry of one (thread, namespace); None for a thread that does not
        exist, was deleted or expired. A subgraph namespace is read with its root: it
        lives and dies with it, and with a deletion of the thread in progress."""

    async def namespaces(self, thread_id: str) -> list[Entry]:
        """Every live namespace of one thread, in namespace (sort key) order."""

    async def thread(self, thread_id: str) -> ThreadInfo | None:
        """One live thread's summary, as :meth:`threads` lists it (None: no live
        namespace). The same Query as :meth:`namespaces`."""

    async def pack_of(self, encoded_thread: str) -> PackRef | None:
        """The pack of a thread named by its key segment (``keys.encode``'d id); None
        when it has none (or is gone)."""

    def scan(
        self, *, deleting: set[str] | None = None, shard: Shard | None = None
    ) -> AsyncIterator[list[Entry]]:
        """Every live entry of this deployment (of ``shard``), a page at a time, a
        thread's together; ``deleting`` gets the threads a revivable deletion holds (it
        may yet put them back). For maintenance: it reads the whole table (segment)."""

    def threads(
        self, after: str | None = None, *, shard: Shard | None = None
    ) -> AsyncIterator[list[ThreadInfo]]:
        """Every live thread of this deployment (of ``shard``), a page at a time, in
        table order; ``after``: a :attr:`ThreadInfo.cursor` of this deployment
        (another's is an ``InvalidRequestError``)."""

    def matching(
        self,
        want: Mapping[str, Scalar],
        *,
        shard: Shard | None = None,
        after: str | None = None,
    ) -> AsyncIterator[list[ThreadInfo]]:
        """The live threads whose latest root checkpoint's recorded metadata holds
        every pair of ``want`` (through an index when one of its keys has one)."""

    def expired(self, *, shard: Shard | None = None) -> AsyncIterator[list[Expiry]]:
        """This deployment's threads (of ``shard``) whose TTL passed and objects await a
        sweep (the root item may be gone already), a page at a time."""

    async def run_entries(self, threads: list[str], deleting: set[str]) -> list[Entry]:
        """The live entries of these threads; ``deleting`` as :meth:`scan`'s."""

    async def run_threads(self, run_tokens: Sequence[str]) -> list[str]:
        """The threads the run index names for these runs."""


class ManifestCommits(Protocol):
    """A writer's commits: the latest moves to a stored checkpoint, a run is indexed, a
    read refreshes the TTL."""

    async def advance(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        tail: str,
        parent_id: str | None,
        how: How = PLAIN,
    ) -> str | Need | None:
        """Commit a stored checkpoint: the latest moves forward to it, or it joins the
        heads (a fork). The fast path is one conditional write; anything else reads and
        compare-and-swaps. A parent of a deleted, expired or pruned life is refused with
        ``CheckpointConflictError``.

        The manifest never calls its writer back. Where a contended commit needs the
        writer's objects touched first, and ``how.meets`` says the writer does that, it
        answers with the :class:`~langgraph_s3.core.commit.Need`; the writer meets it
        and calls again with ``how.after(need)``:

        * ``stored``: the fast path failed; the contended path starts once the
          checkpoint's object is stored (until then, and for good if its writer
          crashes, the latest may name an object not there, and readers take the
          latest's parent instead).
        * ``clear``: the item holds no room for another copy (or no count of them):
          its copies are stored and taken out (``settle``), once per commit.
        * ``sweep``: a new life over an expired one: the old life's objects are swept
          but this checkpoint's (then ``rewrite`` follows, as after a deletion).
        * ``ensure``: before a contended commit onto a live entry, once in each life
          it joins: its objects are made sure of, stored again if a deletion took them.
        * ``spill``: the entry holds ``HEADS_INLINE`` heads or more: tip markers of its
          older heads are stored under a generation; the next call drops them.
        * ``rewrite``: a deletion of the namespace ended: its objects are stored again
          before the new life begins (committed only if no deletion began since).

        A need the writer does not meet is skipped (nothing stored, swept or spilled).

        Args:
            thread_id: the thread.
            checkpoint_ns: the namespace.
            checkpoint_id: the checkpoint to commit (its objects are stored, or being
                stored: see ``stored``).
            tail: its object key below the namespace's checkpoints prefix.
            parent_id: the checkpoint it continues; None for the first of a life.
            how: the rest (``How``): DeltaChannel state, the life the parent was read
                in (it commits only in that life: an import's replace, or a deletion
                and a new conversation, reuse the thread's ids), what the fast path
                carries (``InlineCommit``: with its ``body`` the item holds the
                checkpoint's envelope and the put is durable once that UpdateItem
                answers), its metadata (a root latest records its pairs), the needs the
                writer meets and what it did so far.

        Returns:
            The life the checkpoint was committed in ("" on an item an earlier version
            wrote; None when not known: a parent whose life the caller did not pass),
            or what the writer must do first.

        Raises:
            CheckpointConflictError: ``parent_id`` belongs to a deleted, expired,
                replaced or pruned life (the checkpoint is discarded).
            ConflictError: the entry kept changing for ``Limits.max_conflicts`` rounds.
        """

    async def note_run(self, thread_id: str, run_token: str) -> None:
        """Name the thread in the run index under the run (``keys.encode``'d id)."""

    async def touch(self, thread_id: str) -> bool:
        """Refresh a live thread's TTL; False when there is no TTL or no live root."""


class ManifestHeld(Protocol):
    """What a commit leaves in the item for its readers: held checkpoint copies until
    their objects are stored, and whether the latest has pending writes."""

    async def written(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> bool:
        """A checkpoint gained pending writes: the item no longer calls it a bare latest
        (``Entry.bare``); False when it did not (no change)."""

    async def hold(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[tuple[HeldWrite, HeldWrite | None]],
        *,
        life: str,
    ) -> bool:
        """Hold pending write objects in the item, each ``(new, old)`` in place of
        ``old`` (None: none), while the item is ``life``'s, live and with room; False
        when a condition failed."""

    async def settle(
        self,
        thread_id: str,
        checkpoint_ns: str,
        copies: Iterable[InlineCopy],
        *,
        life: str | None = None,
        writes: Iterable[HeldWrite] = (),
        unbare: bool = False,
    ) -> None:
        """Held envelopes (``Entry.inline``) and writes (``Entry.writes``, each as
        named) whose objects are now stored leave the item (only while it is in
        ``life``, when given), its held-bytes count going down by exactly what left;
        ``unbare``: the latest is no longer called bare."""

    async def recount(self, thread_id: str, checkpoint_ns: str, raw: Raw) -> bool:
        """Set the item's held-bytes count to what ``raw``'s copies count, if the item
        is still as read; False when it changed."""


class ManifestUpkeep(Protocol):
    """Maintenance's conditional writes outside a writer's commit: copy, packing, prune,
    rollback and the removals' marks."""

    async def merge(self, thread_id: str, source: Entry, target: Raw | None) -> bool:
        """copy_thread's commit: the target gains the source's tips, if it is still as
        ``target`` was read; False when it changed (a deletion begun meanwhile)."""

    async def seal_born(self, thread_id: str, born: str) -> bool:
        """Fix a life's beginning: no root older than ``born`` may join it afterwards.
        False when ``born`` is not the life's beginning any more."""

    async def set_pack(
        self,
        thread_id: str,
        new: PackRef | None,
        old: PackRef | None,
        *,
        mark: str | None = None,
        life: str | None = None,
    ) -> bool:
        """Packing's commit: the thread's pack becomes ``new`` if it is still ``old`` (and
        the life ``life``, when given), under the removal ``mark``; False when the thread
        changed meanwhile (deleted, a new life, repacked)."""

    async def raise_floor(
        self, entry: Entry, floor: str, removed: Iterable[str], *, mark: str | None = None
    ) -> bool:
        """Prune's commit: the thread starts at ``floor``, ``removed`` are gone, under the
        removal ``mark``; False when the entry changed in a way prune must see."""

    async def retip(
        self, entry: Entry, new: Fields, runs: Iterable[str], *, mark: str | None = None
    ) -> bool:
        """delete_for_runs' commit: the entry's tips become ``new``'s, conditioned on no
        commit of another run meanwhile (``runs``: the rolled-back ones); False when one
        came."""

    async def replace(self, entry: Entry, new: Fields) -> bool:
        """Compare-and-swap one entry as read (its ``rev``); False when it changed."""

    async def drop(self, entry: Entry, *, mark: str | None = None) -> bool:
        """Retire an entry as read (its last checkpoint was deleted), under the removal
        ``mark``; False when it changed since it was read."""

    async def mark(self, entry: Entry, mark: str) -> bool:
        """Put ``mark`` on the entry's item while its life and pack are the entry's
        (False when not): an unpacking's, before the writes that precede its commit."""

    async def unmark(self, thread_id: str, checkpoint_ns: str, mark: str) -> None:
        """A removal's deletes are done: its mark (``raise_floor``, ``retip``, ``drop``,
        ``set_pack``) leaves the item, and a new life over it need not wait for it."""

    async def record_meta(self, thread_id: str, latest_id: str, metadata: Any) -> bool:
        """Record a thread's latest root metadata, if ``latest_id`` is still the latest."""


class ManifestDeletions(Protocol):
    """A deletion's hold on a thread: tombstones under a lease, renewed, released or
    revived, and the late passes it leaves."""

    async def tombstone(self, thread_id: str, *, revivable: bool = True) -> Deletion:
        """delete_thread's first step: every namespace becomes a tombstone (revivable,
        unless not ``revivable``) under a lease; readers see the thread gone before any
        object goes."""

    async def tombstone_expired(self, expiry: Expiry) -> Deletion | None:
        """The TTL sweep's first step: :meth:`tombstone` (never revived), if the thread
        is still the expired one; None when the root item changed since."""

    async def renew(self, keys: list[dict[str, Any]], stamp: int) -> bool:
        """Extend a deletion's lease; False when a tombstone was replaced meanwhile (the
        lease ran out and a new life began): the deletion must not go on."""

    async def release(self, keys: list[dict[str, Any]], stamp: int) -> None:
        """delete_thread's last step: the lease ends, new lives may start."""

    async def note_late(self, thread_id: str, late: Late) -> None:
        """Record a deletion's late pass (due at ``late.due``, epoch seconds): the
        sweeps find it then (``expired``); a later deletion's moves it later."""

    async def late_done(self, thread_id: str, due: int) -> None:
        """The late pass of ``due`` is over: its record goes (unless moved later)."""

    async def revive(self, deletion: Deletion) -> None:
        """Undo a deletion that failed before removing any object: each tombstone still
        its own and within its lease goes back to the item it replaced, the root last."""


class ManifestSetup(Protocol):
    """``setup()``'s and the CLI's: the table, the deployment's marker, metadata
    indexes, and the entries an older key layout wrote."""

    async def exists(self) -> bool:
        """Whether the table exists."""

    async def create(self) -> None:
        """Create the table (or find it made), wait until it is active, enable its TTL."""

    async def marker_says(self) -> frozenset[str]:
        """The flags the deployment's marker holds (``records.RUNS_INDEXED``...)."""

    async def marker_add(self, name: str) -> None:
        """Write ``name`` into the deployment's marker."""

    async def missing_indexes(self) -> list[str]:
        """The declared metadata keys (``index_metadata``) whose index is missing."""

    async def create_index(self, key: str) -> None:
        """Add the index of one declared metadata key and wait until it answers."""

    async def migrated(self) -> bool:
        """Whether this deployment's marker says its entries use this key layout."""

    def legacy_entries(self) -> AsyncIterator[Entry]:
        """Entries langgraph-s3 0.1 wrote (keyed without the deployment), to adopt."""

    async def adopt(self, legacy: Entry) -> None:
        """Give a 0.1 entry this deployment's key (its whole history stays visible); an
        entry there already stands."""

    async def mark_migrated(self, also: Iterable[str] = ()) -> None:
        """Write this deployment's layout marker (this key layout), with flags ``also``."""


class ManifestPort(Protocol):
    """Which checkpoints exist: one entry per (thread, namespace) of one deployment,
    served by role. Nothing but the roles and what they all share."""

    @property
    def table(self) -> str:
        """The table's name."""

    @property
    def deployment(self) -> str:
        """This deployment's partition key prefix (``manifest.deployment_key``)."""

    @property
    def ttl_seconds(self) -> int | None:
        """Idle seconds before a thread expires; None: never."""

    def now(self) -> float:
        """Epoch seconds by the manifest's clock."""

    def meta_change(self, checkpoint_ns: str, metadata: Mapping[str, Any] | None) -> Meta | None:
        """What a root commit with ``metadata`` sets and removes of the item's
        metadata attributes (None: a subgraph's, or no metadata given)."""

    @property
    def reads(self) -> ManifestReads:
        """Reads and listings."""

    @property
    def commits(self) -> ManifestCommits:
        """A writer's commits."""

    @property
    def held(self) -> ManifestHeld:
        """What a commit holds for its readers."""

    @property
    def upkeep(self) -> ManifestUpkeep:
        """Maintenance's writes."""

    @property
    def deletions(self) -> ManifestDeletions:
        """A deletion's hold on a thread."""

    @property
    def staging(self) -> StagingPort:
        """An import's stage."""

    @property
    def setup(self) -> ManifestSetup:
        """The table, the marker, indexes and migration."""
