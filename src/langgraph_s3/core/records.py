"""The value types the ports speak in, and the pure rules on them.

What a manifest entry, a stored item, a deletion, a listed key, a pack reference and
a bucket's lifecycle are (:mod:`langgraph_s3.core.ports` names them in its protocols, the
AWS and in-memory implementations build them), and the time rules on an item (leases,
removal marks, a put still in flight). No wire format: the manifest's schema
(``manifest/schema.py``) reads its items into these. No request is made here.
"""

from __future__ import annotations

import math
import secrets
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from langgraph_s3.core.held import HeldWrite, InlineCopy

GRACE_SECONDS = 3600
"""A subgraph namespace last written this long before its root namespace's life began
belongs to an earlier, expired life (clocks of writers may differ by this much)."""
DELETE_LEASE_SECONDS = 120
"""How long a new life on a deleted id waits for a deletion in progress."""

Handle = dict[str, Any]
"""An item's key or the item itself, as the manifest hands it out to be handed back
(``Deletion.keys``, ``Deletion.before``): opaque to every caller."""


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """A bucket's lifecycle configuration, as one PutBucketLifecycleConfiguration
    writes it: its rules and the setting beside them."""

    rules: list[dict[str, Any]] = field(default_factory=list)
    minimum_object_size: str | None = None
    """``TransitionDefaultMinimumObjectSize`` (None: the bucket never set it; S3 then
    skips transitions of objects under 128 KB)."""


@dataclass(frozen=True, slots=True)
class Listed:
    """One key of a listing, with what maintenance needs to know about it."""

    key: str
    etag: str = ""
    modified: float = 0.0
    """LastModified, epoch seconds (S3 lists it to the second or millisecond)."""
    size: int = 0
    """Bytes stored."""


# what a deployment's marker says: its entries use this key layout (its version), the run
# index holds every run, every thread's item records its latest metadata
MIGRATED, RUNS_INDEXED, METADATA_RECORDED = "migrated", "runs_indexed", "metadata_recorded"
INDEXED, INDEXED_KEYS = "indexed:", "indexed_keys"  # + a key: its values are on older items


@dataclass(frozen=True, slots=True)
class PackRef:
    """Where a thread's pack is, as its manifest entry records it."""

    key: str
    size: int
    index_length: int
    count: int
    upto: int = 0
    """The thread's last write (``updated_at``) the pack holds (0: an older pack)."""
    bare: bool = False
    """The root's latest had no pending writes when packed (one since is outside it)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One live (thread, namespace) of the manifest."""

    thread_id: str
    checkpoint_ns: str
    latest_id: str
    latest_tail: str
    uses_delta: bool = False
    """The latest checkpoint has DeltaChannel state to rebuild from history."""
    heads: frozenset[str] = field(default_factory=frozenset)
    floor: str = ""
    born: str = ""
    """The floor this life began at, while no prune has raised it ("" once one has):
    a root committed late by a concurrent first writer may still lower it."""
    gone: frozenset[str] = field(default_factory=frozenset)
    rev: int = 0
    created_at: int = 0
    updated_at: int = 0
    expires_at: int | None = None
    pack: PackRef | None = None
    """The thread's archive pack (its root namespace item names it, for every namespace)."""
    life: str = ""
    """A token each life of the (thread, namespace) gets when it begins ("" on items an
    earlier version wrote): a writer whose parent it read in one life commits on the
    fast path only in that life (an import's replace reuses the ids of the old one)."""
    packings: int = 0
    """How many times the thread was packed or unpacked (the root item counts): a copy
    that saw the same pack twice can tell that it was unpacked and packed between."""
    spilled: str = ""
    """The spill generation whose tip markers (``NamespaceKeys.tips``) hold the heads
    moved out of the item ("" when none were)."""
    spilled_heads: frozenset[str] = field(default_factory=frozenset)
    """Those heads, once a reader listed them (``history.with_spilled``)."""
    removing: frozenset[str] = field(default_factory=frozenset)
    """Marks (``removal_mark``) of maintenance deleting objects it listed in this life
    (prune, rollback, pack): a new life over a tombstone of it waits for them."""
    inline: tuple[InlineCopy, ...] = ()
    """Committed checkpoints whose envelopes the item holds (``inline:<id>``
    attributes): their objects may not be stored yet; a reader takes them from here."""
    writes: tuple[HeldWrite, ...] = ()
    """Pending writes whose objects the item holds (``hw:<tail>`` attributes), by key
    tail: their objects may not be stored yet; a reader lays them over the listing."""
    bare: str = ""
    """``BARE_ATTRIBUTE``: when it is ``latest_id``, the latest has no pending writes
    beyond those the item holds (``writes``)."""
    meta: tuple[tuple[str, str], ...] = ()
    """The root item's metadata attributes (``md``, ``ix_<key>``: ``manifest.schema``), as
    stored: a whole-item write keeps them."""

    @property
    def latest_bare(self) -> bool:
        """Whether the latest has no pending writes as far as the manifest says: a read
        lists none and counts none (a ``put_writes`` whose objects landed but whose word
        to the manifest did not, its writer dead, was never acknowledged)."""
        return bool(self.bare) and self.bare == self.latest_id

    @property
    def tips(self) -> set[str]:
        """Checkpoints whose ancestry is the thread's history (spilled heads only once
        listed: see ``history.with_spilled``)."""
        return {self.latest_id, *self.heads, *self.spilled_heads}


@dataclass(frozen=True, slots=True)
class Raw:
    """An item as stored, live or not (a tombstone, an expired life), as the manifest's
    schema (``manifest/schema.py``) reads it: what the rules decide on, in no wire
    format."""

    rev: int = 0
    """The compare-and-swap token (0 when absent)."""
    tombstone: bool = False
    """Whether delete_thread or drop retired this item."""
    lease_until: float = 0.0
    """Until when (epoch seconds) a deletion in progress holds the item."""
    revivable: bool = False
    """A tombstone a deletion in progress made, one that may still fail and put the
    thread back (delete_thread's; a sweep's never does)."""
    removing: frozenset[str] = frozenset()
    """Marks of removals in progress (``removal_mark``), of this life or the one a
    tombstone ended."""
    expires: float | None = None
    """The thread TTL's expiry (epoch seconds; None: none, or one DynamoDB cannot read)."""
    idle_until: float | None = None
    """A subgraph namespace's own expiry (written under a thread TTL)."""
    deleted_at: str = ""
    """A tombstone's stamp (nanoseconds, as written; "" when none)."""
    life: str = ""
    """``Entry.life`` of the life it holds or last held."""
    born: str = ""
    """``Entry.born``."""
    created_at: int = 0
    updated_at: int = 0
    staged_by: str | None = None
    """An import's token on a namespace it published ahead of its root."""
    held_bytes: int | None = None
    """The count of held copies' bytes the item keeps (None: it keeps none)."""
    inline: tuple[InlineCopy, ...] = ()
    """The checkpoints' envelopes it holds, oldest first."""
    writes: tuple[HeldWrite, ...] = ()
    """The pending writes it holds, by key tail."""
    pack: PackRef | None = None
    """The pack a root item with a life names (read apart from the life: a thread whose
    life cannot be read still names its pack)."""
    packings: int = 0
    """``Entry.packings``, as a root item with a life counts them."""
    latest: Entry | None = None
    """The life it holds (expired or not); None for a tombstone or an item without one."""
    garbled: bool = False
    """It holds a latest that cannot be read (an item another writer left)."""

    def deletion_held(self, now: float) -> float:
        """Until when a deletion in progress that may still put the thread back (a
        revivable tombstone within its lease) holds it; 0 when none does."""
        return held(self.lease_until, now) if self.revivable else 0.0

    def held_until(self, now: float) -> float:
        """Until when a new life over this tombstone waits: the deletion's lease, or
        the marks of removals begun in the life it ended (their late deletes would hit
        the objects a new life writes under the same keys: an import's replace).
        A time past any lease's reach (a hand edit, garbage) holds nothing."""
        return max([held(self.lease_until, now), marks_until(self.removing, now)])

    def expired(self, now: float) -> bool:
        """Whether its TTL passed (DynamoDB removes expired items lazily)."""
        return self.expires is not None and self.expires <= now

    @property
    def committed(self) -> bool:
        """Whether it holds a life (a latest checkpoint), expired or not."""
        return not self.tombstone and (self.latest is not None or self.garbled)

    def entry(self) -> Entry:
        """The life it holds, expired or not.

        Raises:
            ValueError: it holds none, or one that cannot be read.
        """
        if self.latest is None:
            raise ValueError("the item holds no readable latest checkpoint")
        return self.latest

    def live(self, now: float) -> Entry | None:
        """The entry, or None for a tombstone, an expired item or one without a latest.

        Raises:
            ValueError: it holds a latest that cannot be read.
        """
        if not self.committed or self.expired(now):
            return None
        return self.entry()


class Deletion(NamedTuple):
    """A delete_thread in progress, as :meth:`Manifest.tombstone` started it."""

    stamp: int
    """``deleted_at`` of its tombstones (nanoseconds): renew and release condition on it."""
    keys: list[Handle]
    """The item keys it tombstoned."""
    before: dict[str, Handle] = {}
    """Sort key -> the item as it was just before its tombstone (none: there was none),
    for :meth:`Manifest.revive` when the deletion fails before removing anything."""
    held: tuple[tuple[str, str], ...] = ()
    """(namespace, key tail) of every checkpoint its items held (their envelopes left
    with the tombstones): a PUT of one may still be on its way, so the deletion leaves
    an erasure marker under each key instead of nothing."""


def bound_live(sub: Raw, root: Raw | None, now: float) -> bool:
    """Whether a live subgraph namespace item belongs to a live thread.

    Under a thread TTL (the item has ``idle_until``) the thread's life is its root
    namespace's: an expired root takes every namespace with it, and a namespace
    last written before the root's current life began is a leftover of an expired
    life. Without a root (a thread of subgraph namespaces only, or a root that
    DynamoDB's TTL already removed) the namespace's own idle time decides.
    """
    staged = sub.staged_by
    if staged is not None and (root is None or root.life != staged):
        return False  # an import's namespace, published only with its root (not yet)
    idle = sub.idle_until
    if idle is None:
        return True  # written without a thread TTL
    if root is None or not root.committed:
        return idle > now
    if root.expired(now):
        return False
    born, updated = root.created_at, sub.updated_at
    # an earlier life's namespace was last written a whole TTL (its own) before this
    # life could begin; clocks differ by far less than half of it
    grace = min(GRACE_SECONDS, max(idle - updated, 0) / 2)
    return updated >= born - grace


@dataclass(frozen=True, slots=True)
class ThreadInfo:
    """One live thread as the manifest knows it (no S3 read)."""

    thread_id: str
    namespaces: tuple[str, ...]
    """Its live checkpoint namespaces, root (``""``) first."""
    latest_id: str | None
    """The root namespace's latest checkpoint (None: it has none)."""
    created_at: datetime
    updated_at: datetime
    """When a checkpoint was last committed to any of its namespaces."""
    expires_at: datetime | None
    """When its thread TTL runs out, unless written (or read, when asked) again."""
    cursor: str
    """Pass as ``after=`` to list the threads after this one."""
    packed: bool = False
    """Its pack holds every checkpoint up to its last write (an idle pass of
    :meth:`~langgraph_s3.AsyncS3Saver.apack` leaves it alone)."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """The latest root checkpoint's metadata pairs the manifest records (scalars:
    see :func:`~langgraph_s3.core.meta.recorded`), what ``metadata=`` filters on."""


class Expiry(NamedTuple):
    """A thread whose TTL passed, as :meth:`CommitRounds.expired` found it."""

    thread_id: str
    rev: int | None
    """Its root item's ``rev`` (None: there is no root item): the sweep's condition."""
    late: Late | None = None
    """Set for a deletion's late pass instead (its record): the writes a frozen
    writer's PUTs brought back after the deletion listed the thread go too."""
    stage: str | None = None
    """Set for an import's stage (``core.staging``) that may have died: its token."""


class Late(NamedTuple):
    """A deletion's late-pass record (``ManifestPort.note_late``)."""

    due: int
    """When (epoch seconds) the pass is due."""
    upto: str
    """An upper bound of the ended life's checkpoint ids (the newest the deletion saw,
    or the deletion's own time as a uuid6, the larger): a later life's are newer,
    but for those an import brought back, which its history holds."""


@dataclass(slots=True)
class Fields:
    """The changeable part of an entry, as a compare-and-swap writes it."""

    latest_id: str
    latest_tail: str
    floor: str
    uses_delta: bool
    created_at: int
    """0: now (a new life)."""
    heads: set[str]
    gone: set[str] = field(default_factory=set)
    born: str = ""
    """Entry.born: the floor a life began at, kept until a prune raises the floor."""
    pack: PackRef | None = None
    """The thread's pack (kept on the root namespace's item only)."""
    spilled: str = ""
    """Entry.spilled: the spill generation of the heads not in ``heads``."""
    packings: int = 0
    """Entry.packings, kept (the root namespace's item only)."""
    life: str = ""
    """Entry.life: kept by a change of the life, new for a new one (``new_life()``)."""
    removing: frozenset[str] = frozenset()
    """Entry.removing: kept while the life goes on."""
    inline: tuple[InlineCopy, ...] = ()
    """Entry.inline: envelopes held until their objects are stored, kept while the life
    goes on (a new life drops them: they were its predecessor's)."""
    writes: tuple[HeldWrite, ...] = ()
    """Entry.writes: held writes, kept as the held envelopes are."""
    meta: tuple[tuple[str, str], ...] = ()
    """Entry.meta: the metadata attributes the item keeps (the root namespace's)."""


DELETING = ("removal", "pack")
"""The kinds of marks whose holders delete objects they listed uncommitted: a head
commit waits for them (an unpacking's, which only writes, it does not)."""


def removal_mark(now: float, kind: str = "removal") -> str:
    """A mark (``Entry.removing``): until when its holder may delete or write objects
    of the life it began in, its kind and a token of its own. Kinds: ``removal`` (a
    prune's, a rollback's), ``pack`` (a packing's, which an unpacking waits for),
    ``unpack`` (an unpacking's, whose writes precede its commit). A new life over the
    item waits for every kind. A holder deletes nothing once its mark ran out
    (``DELETE_LEASE_SECONDS`` from ``now``): by then a new life may have begun."""
    return f"{int(now) + DELETE_LEASE_SECONDS}:{kind}-{secrets.token_hex(6)}"


def mark_token(mark: str) -> str:
    """A mark's own token (``removal_mark``): a packing names its pack with it."""
    return mark.rsplit("-", 1)[-1]


def mark_until(mark: str) -> float:
    """The epoch seconds a removal's mark holds the item until (0 for a malformed one)."""
    try:
        until = float(mark.split(":", 1)[0])
    except ValueError:
        return 0.0
    return until if math.isfinite(until) else 0.0


def held(until: float, now: float) -> float:
    """``until``, or 0 when it lies further ahead than any lease or mark can (twice
    ``DELETE_LEASE_SECONDS``: clocks disagree by far less): garbage holds nothing."""
    return until if until <= now + 2 * DELETE_LEASE_SECONDS else 0.0


def marks_until(
    marks: Iterable[str], now: float, *, kinds: tuple[str, ...] = (), but: str | None = None
) -> float:
    """Until when ``marks`` (of ``kinds``, ``removal_mark``'s; any when empty; not
    ``but``) hold an item, by :func:`held`; 0 when none does."""
    return max(
        (
            held(mark_until(m), now)
            for m in marks
            if m != but and (not kinds or any(f":{kind}-" in m for kind in kinds))
        ),
        default=0.0,
    )


SIGNED_REQUEST_SECONDS = 900.0
"""How long after it was signed a request can still be applied: S3 refuses one that
arrives more than 15 minutes from its signing time (RequestTimeTooSkewed). A process
frozen with a request queued (a Lambda frozen right after it answered) may send it when
it thaws, past its own deadline (a frozen process's clock stops with it): this, not the
deadline, bounds when a PUT of a removed conversation can still land."""

IN_FLIGHT_SECONDS = 120.0
"""How long a committed latest whose object is not listed counts as a put in flight
(a request's own deadline is 25 s by default, 5 attempts at most within it); older,
its writer died between its two requests and it never lands."""


def may_land(checkpoint_id: str, now: float) -> bool:
    """Whether a checkpoint not listed may be a put still in flight: made less than
    ``IN_FLIGHT_SECONDS`` before ``now`` (older, or not a uuid6: it never lands)."""
    made = uuid6_time(checkpoint_id)
    return made is not None and now - made < IN_FLIGHT_SECONDS


def uuid6_upto(seconds: float) -> str:
    """The largest uuid6 id made at ``seconds`` (epoch): every id made by then sorts
    at or below it (ids compare as strings, time first)."""
    ticks = int(seconds * 1e7) + 0x01B21DD213814000
    value = ((ticks >> 12) << 80) | (0x6 << 76) | ((ticks & 0xFFF) << 64) | (0b10 << 62)
    return str(uuid.UUID(int=value | ((1 << 62) - 1)))


def uuid6_time(checkpoint_id: str) -> float | None:
    """The epoch seconds inside a uuid6 checkpoint id (None for another kind of id)."""
    try:
        u = uuid.UUID(checkpoint_id)
    except ValueError:
        return None
    if u.version != 6:
        return None
    ticks = ((u.int >> 80) << 12) | ((u.int >> 64) & 0x0FFF)
    return (ticks - 0x01B21DD213814000) / 1e7
