"""The manifest's pure decisions: how a commit lands on an item, what an item says.

No request is made here: :class:`~langgraph_s3.manifest.Manifest` reads items through
its table, decides with these, and writes what they return as conditions and changes
(:mod:`langgraph_s3.manifest.conditions`). Unit tests call them directly.
"""

from __future__ import annotations

import base64
import logging
import secrets
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import orjson

from langgraph_s3.core.held import (
    HELD_BUDGET,
    InlineCommit,
    InlineCopy,
    held_size,
    write_size,
)
from langgraph_s3.core.keys import Layout, decode, encode, invert_id, parse_checkpoint_tail
from langgraph_s3.core.meta import loads
from langgraph_s3.core.records import (
    Entry,
    Expiry,
    Fields,
    Late,
    Raw,
    ThreadInfo,
    mark_until,
    uuid6_time,
)
from langgraph_s3.errors import CheckpointConflictError, InvalidIdError, InvalidRequestError
from langgraph_s3.manifest.conditions import (
    SS,
    Absent,
    Compare,
    Cond,
    Exists,
    N,
    Not,
    S,
    Typed,
    all_of,
    any_of,
    eq,
)
from langgraph_s3.manifest.schema import (
    BARE_ATTRIBUTE,
    HELD_BYTES,
    IDLE_ATTRIBUTE,
    INLINE_PREFIX,
    METADATA_ATTRIBUTE,
    REMOVING,
    ROOT_SK,
    TTL_ATTRIBUTE,
    WRITE_PREFIX,
    inline_attribute,
    pack_attribute,
    raw_of,
    write_attribute,
    write_held,
)
from langgraph_s3.manifest.stage_items import STAGE_MARK, STAGE_SK, claim_of

logger = logging.getLogger("langgraph_s3.manifest")

META_SK = "~layout"
"""Sort key of the per-deployment marker (keys.encode never yields ``~l``)."""
RUNS_MARK = "~runs/"
"""After the deployment key, the partition of one run's index items (``keys.encode``
never yields ``~r``: no thread's partition key starts so)."""
LATE_MARK = "~late/"
"""After the deployment key, the partition of one thread's late-pass record (see
``Deletions.note_late``; ``keys.encode`` never yields ``~l``)."""
LATE_SK = "~late"
LATE_DUE = "late_due"
"""On a late-pass record: when (epoch seconds) the pass is due."""
LATE_UPTO = "late_upto"
"""On a late-pass record: ``Late.upto``."""
LAYOUT_VERSION = 2
TOMBSTONE_SECONDS = 7 * 86400
"""How long a deleted thread's tombstone refuses writers that still hold its ids."""
LEASE_POLL_SECONDS = 0.25
"""How often a new life waiting on a deletion's lease reads the item again."""
GONE_SECONDS = 3600
GONE_LIMIT = 100
RETIRED = ("latest_id", "latest_tail", "heads", "spilled", "uses_delta", IDLE_ATTRIBUTE, "pack")
"""What a tombstone removes from an item: everything that made it a life."""
RETIP_RUNS = 16
"""Rolled-back runs a rollback's commit names in its condition (more: a CAS on rev)."""
HEADS_INLINE = 64
"""Heads an item holds before a writer's next contended commit spills the older half
to tip markers: with the two a commit adds, an item never holds more than 66 heads
(about 2.5 KB), whatever the thread's forks (each fork is still in the history)."""


def deployment_key(bucket: str, prefix: str) -> str:
    """The part of every partition key that names the deployment.

    Args:
        bucket: the deployment's bucket.
        prefix: its key prefix; surrounding slashes do not matter.

    Returns:
        ``{bucket}/{prefix}/``, each part ``keys.encode``'d (so neither holds a ``/``).
    """
    return f"{encode(bucket, 'bucket')}/{encode(prefix.strip('/'), 'prefix')}/"


def deployment_of(pk: str) -> tuple[str, str] | None:
    """(bucket, prefix) a thread's partition key names: :func:`deployment_key`'s inverse.

    Returns None for a key of another shape (the layout marker, another program's);
    raises InvalidIdError or ValueError for parts that are no ``keys.encode`` output.
    """
    parts = pk.split("/")
    if len(parts) != 3:
        return None
    return decode(parts[0]), decode(parts[1])


Group = list[dict[str, Any]]
"""One thread's items, as a Scan or Query returns them together."""


def expiry_attribute(checkpoint_ns: str) -> str:
    """Where a write under a thread TTL records the expiry: the root namespace's item
    carries the table's TTL attribute; a subgraph namespace's, its own idle time."""
    return IDLE_ATTRIBUTE if checkpoint_ns else TTL_ATTRIBUTE


def _when(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def cursor_of(item: dict[str, Any]) -> str:
    key = orjson.dumps([item["pk"]["S"], item["sk"]["S"]])
    return base64.urlsafe_b64encode(key).decode().rstrip("=")


def uncursor(cursor: str) -> dict[str, Any]:
    try:
        pk, sk = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        return {"pk": {"S": str(pk)}, "sk": {"S": str(sk)}}
    except (ValueError, TypeError) as exc:
        raise InvalidRequestError(
            f"after={cursor[:60]!r} is not a cursor list_threads gave: pass a "
            "ThreadInfo.cursor, or nothing to start from the beginning"
        ) from exc


def thread_info(entries: list[Entry], group: Group) -> ThreadInfo | None:
    """A thread's summary from its live entries (None when it has none)."""
    if not entries:
        return None
    entries = sorted(entries, key=lambda e: e.checkpoint_ns)
    root = entries[0] if not entries[0].checkpoint_ns else None
    if root is not None:
        expires = root.expires_at
    else:
        idles = [e.expires_at for e in entries]
        expires = None if None in idles else max(i for i in idles if i is not None)
    updated = max(e.updated_at for e in entries)
    return ThreadInfo(
        thread_id=entries[0].thread_id,
        namespaces=tuple(e.checkpoint_ns for e in entries),
        latest_id=root.latest_id if root is not None else None,
        created_at=_when(min(e.created_at for e in entries)),
        updated_at=_when(updated),
        expires_at=_when(expires) if expires is not None else None,
        cursor=cursor_of(group[-1]),
        packed=packed(root, updated) if root is not None else False,
        metadata=loads(dict(root.meta).get(METADATA_ATTRIBUTE)) if root is not None else {},
    )


def packed(root: Entry, updated: int) -> bool:
    """Whether the root's pack holds the thread as it is: made after its last write
    (a write in the pack's own second counts as after), no pending write since on a
    latest that had none, and no packing's mark left on the item."""
    pack = root.pack
    if pack is None or pack.upto != updated:
        return False
    if any(":pack-" in m for m in root.removing):
        return False  # a packing under way, or one that died after its switch: its
        # loose objects may still be beside the pack (the next idle pass packs again)
    made = Layout.pack_made(pack.key)
    if made is None or updated >= int(made):
        return False
    return root.latest_bare or not pack.bare


def expiry_of(group: Group, now: float) -> Expiry | None:
    """The thread of ``group`` when its TTL passed, or a deletion of it died before its
    end, and its objects await a sweep (or ``group`` is a late-pass record now due:
    ``Expiry.late``); None for a thread whose items another program
    wrote in a shape this library does not read (a warning says which: the sweep goes
    on with the other threads)."""
    try:
        return _expiry_of(group, now)
    except (KeyError, TypeError, AttributeError, ValueError):
        logger.warning(
            "skipping a thread of the manifest that langgraph-s3 did not write: key %r",
            group[0].get("pk") if group else None,
        )
        return None


def _expiry_of(group: Group, now: float) -> Expiry | None:
    if len(group) == 1 and group[0].get("sk", {}).get("S") == LATE_SK:
        late = Late(int(group[0][LATE_DUE]["N"]), group[0][LATE_UPTO]["S"])
        return Expiry(group[0]["thread_id"]["S"], None, late) if late.due <= now else None
    pk = group[0]["pk"]["S"]
    if STAGE_MARK in pk:
        claim = claim_of(next((i for i in group if i["sk"]["S"] == STAGE_SK), None))
        if claim is not None:  # the claim: its import's stage goes once it ran out
            return (
                None
                if claim.until > now
                else Expiry(group[0]["thread_id"]["S"], None, stage=claim.token)
            )
        # an import's items: they go unless the claim is still theirs (unstage reads it)
        return Expiry(group[0]["thread_id"]["S"], None, stage=pk.rsplit("/", 1)[1])
    root = next((raw_of(i) for i in group if i["sk"]["S"] == ROOT_SK), None)
    named = next((i["thread_id"]["S"] for i in group if "thread_id" in i), None)
    if named is None:
        return None
    if root is not None and root.committed:
        return Expiry(named, root.rev) if root.expired(now) else None
    if root is not None and root.tombstone and 0 < root.lease_until <= now:
        # a deletion (or a sweep) that died before its end: its lease ran out, never
        # released; the thread reads as deleted, what its life left is swept now
        return Expiry(named, root.rev)
    subs = [r for r in (raw_of(i) for i in group if i["sk"]["S"] != ROOT_SK) if r.committed]
    idles = [r.idle_until for r in subs]
    if subs and None not in idles and max(i for i in idles if i is not None) <= now:
        return Expiry(named, root.rev if root is not None else None)
    return None


def new_life() -> str:
    """A new life's token (``Entry.life``)."""
    return secrets.token_hex(8)


def whole_item(
    key: dict[str, Any],
    thread_id: str,
    checkpoint_ns: str,
    new: Fields,
    rev: int | None,
    now: int,
    ttl_seconds: int | None,
) -> dict[str, Any]:
    """The item ``_swap`` writes: ``new`` at revision ``rev + 1`` (``gone`` trimmed)."""
    item: dict[str, Any] = {
        **key,
        "thread_id": {"S": thread_id},
        "checkpoint_ns": {"S": checkpoint_ns},
        "latest_id": {"S": new.latest_id},
        "latest_tail": {"S": new.latest_tail},
        "floor": {"S": new.floor},
        "uses_delta": {"BOOL": new.uses_delta},
        "created_at": {"N": str(new.created_at or now)},
        "updated_at": {"N": str(now)},
        "rev": {"N": str((rev or 0) + 1)},
    }
    if new.heads:
        item["heads"] = {"SS": sorted(new.heads)}
    if new.born:
        item["born"] = {"S": new.born}
    gone = trim_gone(new.gone, new.floor, now)
    if gone:
        item["gone"] = {"SS": sorted(gone)}
    if ttl_seconds:
        item[expiry_attribute(checkpoint_ns)] = {"N": str(now + ttl_seconds)}
    if new.pack is not None and not checkpoint_ns:
        item["pack"] = pack_attribute(new.pack)
    if new.spilled:
        item["spilled"] = {"S": new.spilled}
    if new.packings and not checkpoint_ns:
        item["packings"] = {"N": str(new.packings)}
    if new.life:
        item["life"] = {"S": new.life}
    held = 0
    for copy in new.inline:  # what a whole-item write keeps of the life's held copies
        if copy.checkpoint_id >= new.floor and copy.checkpoint_id not in new.gone:
            item[INLINE_PREFIX + copy.checkpoint_id] = inline_attribute(copy)
            held += held_size(copy)
    for write in new.writes:  # and of its held writes
        item[WRITE_PREFIX + write.tail] = write_attribute(write)
        held += write_size(write)
    item[HELD_BYTES] = {"N": str(held)}  # counted exactly: the write is a compare-and-swap
    if not checkpoint_ns:
        item.update((name, {"S": text}) for name, text in new.meta)
    marks = sorted(m for m in new.removing if mark_until(m) > now)  # spent ones go
    if marks:
        item[REMOVING] = {"SS": marks}
    return item


def as_read(entry: Entry, now: int) -> Cond:
    """The condition that the item is still ``entry``'s life as maintenance read it:
    the same life, floor, heads, spilled heads and gone, not deleted or expired, a
    latest no older (a writer's commits since only continue the latest), and, for a
    root namespace, no packing or unpacking since (a listing after one misses what
    moved into the pack: a rollback's tips from it would drop a packed fork)."""
    parts: list[Cond | None] = [
        eq("floor", S(entry.floor)),
        Compare("latest_id", ">=", S(entry.latest_id)),
        Absent("deleted"),
        not_expired(now),
        # an import's replace may leave floor and heads as they were
        eq("life", S(entry.life)) if entry.life else Absent("life"),
        eq("spilled", S(entry.spilled)) if entry.spilled else Absent("spilled"),
    ]
    for name, seen in (("heads", entry.heads), ("gone", entry.gone)):
        parts.append(eq(name, SS(seen)) if seen else Absent(name))
    if not entry.checkpoint_ns:  # not packed or unpacked since: its listing is whole
        parts.append(eq("packings", N(entry.packings)) if entry.packings else Absent("packings"))
    cond = all_of(*parts)
    assert cond is not None
    return cond


def not_expired(now: int) -> Cond:
    """The item's TTL has not passed. An item without one never expires, nor does one
    whose TTL is not a number (another program's, a console edit): DynamoDB's TTL skips
    it, readers take it as live, and so does every write (which then sets a number, or
    removes it); the type is tested first (a comparison of a string with a number is
    refused by some emulators)."""
    return any_of(
        Absent(TTL_ATTRIBUTE),
        Not(Typed(TTL_ATTRIBUTE, "N")),
        Compare(TTL_ATTRIBUTE, ">", N(now)),
    )


def marked(mark: str | None) -> dict[str, Any]:
    """The ADD of a removal's mark (none without one)."""
    return {REMOVING: SS([mark])} if mark else {}


def untimed(checkpoint_ns: str, ttl_seconds: int | None) -> tuple[str, ...]:
    """The REMOVE of the TTL attribute an older version wrote on a subgraph
    namespace's item (DynamoDB would delete the namespace of a live thread)."""
    return (TTL_ATTRIBUTE,) if checkpoint_ns and ttl_seconds else ()


def expiring(checkpoint_ns: str, now: int, ttl_seconds: int | None) -> dict[str, Any]:
    """The SET of a write's expiry under a thread TTL (none without one)."""
    return {expiry_attribute(checkpoint_ns): N(now + ttl_seconds)} if ttl_seconds else {}


def trim_gone(gone: Iterable[str], floor: str, now: float) -> set[str]:
    """``gone`` only has to outlive a writer still in flight on a removed checkpoint:
    keep ids above the floor from the last hour, at most the newest GONE_LIMIT, so
    the entry stays small (a rollback after every run would grow it forever)."""
    kept = sorted(
        (g for g in gone if g >= floor and (uuid6_time(g) or now) > now - GONE_SECONDS),
        reverse=True,
    )
    return set(kept[:GONE_LIMIT])


def demoted(entry: Entry) -> list[str]:
    """What joins ``heads`` when a new latest replaces ``entry``'s: the old latest and
    its parent, which stands in for it while its object is not there (see advance)."""
    out = {entry.latest_id}
    try:
        parent = parse_checkpoint_tail("", entry.latest_tail).parent_id
    except InvalidIdError:  # not a key this library wrote: nothing to stand in
        parent = None
    if parent is not None and parent >= entry.floor:
        out.add(parent)
    return sorted(out)


def _lowerable(entry: Entry, cid: str) -> bool:
    """Whether root ``cid`` may bring the floor down to it: no prune, deletion or
    copy raised or set the floor (it is still the one the life was born with), and
    ``cid`` was made within the hour before the floor's own root (two first writers
    of one thread, not a writer stalled across an expiry)."""
    if not entry.born or entry.floor != entry.born:
        return False
    born, made = uuid6_time(entry.floor), uuid6_time(cid)
    return born is not None and made is not None and born - made < GONE_SECONDS


def decide(
    raw: Raw | None, cid: str, tail: str, parent: str | None, uses_delta: bool, now: float
) -> Fields | Entry | None:
    """How to commit ``cid`` (parent ``parent``) on top of ``raw``: a new life's
    fields, the live entry to add a tip to, or None when it is already committed."""
    if raw is None or not raw.committed or raw.expired(now):
        if parent is not None and raw is not None:
            what = "deleted" if raw.tombstone else "expired (thread_ttl_days)"
            raise CheckpointConflictError(
                f"checkpoint {cid} continues checkpoint {parent}, but its thread was {what} "
                "while this run was writing: the checkpoint was discarded; start the "
                "conversation again"
            )
        # the first commit starts the life: nothing older is part of it (a parent it
        # names may belong to a life that was deleted or expired, item and all)
        # Only a life begun over nothing may have its floor lowered later: over a
        # tombstone or an expired item, runs of the old life may still be in flight
        # and a deletion may have removed objects below the floor.
        lowerable = parent is None and raw is None
        return Fields(
            cid, tail, cid, uses_delta, 0, set(), born=cid if lowerable else "", life=new_life()
        )
    entry = raw.entry()
    if cid == entry.latest_id or cid in entry.heads:
        return None
    if parent is None and cid < entry.floor and _lowerable(entry, cid):
        # Two writers started the thread at once and the other's root, newer than
        # ours, committed first: ours is part of this life too, so the floor comes
        # down to it (no prune has raised the floor, so nothing below it was removed).
        return Fields(
            entry.latest_id,
            entry.latest_tail,
            cid,
            entry.uses_delta,
            entry.created_at,
            {*entry.heads, cid},
            set(entry.gone),
            born=cid,
            pack=entry.pack,
            spilled=entry.spilled,
            packings=entry.packings,
            life=entry.life,
            removing=entry.removing,
            inline=entry.inline,
            writes=entry.writes,
            meta=entry.meta,
        )
    if parent is not None and (parent < entry.floor or parent in entry.gone):
        raise CheckpointConflictError(
            f"checkpoint {cid} continues checkpoint {parent}, which prune or delete_for_runs "
            "removed while this run was writing: the checkpoint was discarded"
        )
    if cid in entry.gone:
        raise CheckpointConflictError(
            f"checkpoint {cid} was removed by prune or delete_for_runs while this run was "
            "writing it (its object was listed and deleted): the checkpoint was discarded"
        )
    if cid < entry.floor:
        raise CheckpointConflictError(
            f"checkpoint {cid} is older than the thread's history, which starts at "
            f"{entry.floor} (a prune, a deletion or a copy came between): the checkpoint "
            "was discarded; start the run again"
        )
    return entry


def carried_change(
    inline: InlineCommit, checkpoint_id: str, tail: str, *, counted: bool
) -> tuple[dict[str, Any], list[str], Cond | None, int]:
    """What a fast commit with ``inline`` sets, removes, is conditioned on, and adds to
    :data:`HELD_BYTES`: its copy joins only with room under :data:`HELD_BUDGET`
    (``counted``: the item exists and must have a count; a new item starts one), each
    dropped copy must still be there so the count goes down by exactly what leaves;
    :data:`BARE_ATTRIBUTE` says whether the checkpoint has pending writes."""
    sets: dict[str, Any] = {}
    conds: list[Cond | None] = []
    held = 0
    if inline.body is not None:
        copy = InlineCopy(checkpoint_id, tail, inline.body)
        sets[INLINE_PREFIX + checkpoint_id] = inline_attribute(copy)
        held = held_size(copy)
    if inline.bare:
        sets[BARE_ATTRIBUTE] = {"S": checkpoint_id}
    removes = [] if inline.bare else [BARE_ATTRIBUTE]
    if counted:
        conds.append(Compare(HELD_BYTES, "<=", N(HELD_BUDGET - held)))
    drop = [c for c in inline.drop if c.checkpoint_id != checkpoint_id]
    conds += [Exists(INLINE_PREFIX + c.checkpoint_id) for c in drop]
    held -= sum(held_size(c) for c in drop)
    removes += [INLINE_PREFIX + c.checkpoint_id for c in drop]
    # only writes of checkpoints older than this one, each as stored (a newer one stays)
    mine = invert_id(checkpoint_id)
    wdrop = [w for w in inline.drop_writes if w.inverted > mine]
    conds += [write_held(w) for w in wdrop]
    held -= sum(write_size(w) for w in wdrop)
    removes += [WRITE_PREFIX + w.tail for w in wdrop]
    return sets, removes, all_of(*conds), held
