"""The manifest's item schema: the attributes its items carry and how they are read off
DynamoDB's wire format into the format-free records of :mod:`langgraph_s3.core.records`.

Only ``manifest/`` writes items; everything above reads them through the roles, as
:class:`~langgraph_s3.core.records.Raw` and :class:`~langgraph_s3.core.records.Entry`.
The operator's tools that read items directly (the stream sweeper, ``doctor``) take
the attribute names from here. No request is made here.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from langgraph_s3.core.held import HeldWrite, InlineCopy
from langgraph_s3.core.meta import Meta, index_value, recorded
from langgraph_s3.core.records import Entry, PackRef, Raw
from langgraph_s3.manifest.conditions import Cond, eq

__all__ = [
    "BARE_ATTRIBUTE",
    "HELD_BYTES",
    "IDLE_ATTRIBUTE",
    "INLINE_PREFIX",
    "METADATA_ATTRIBUTE",
    "REMOVING",
    "REVIVABLE",
    "ROOT_SK",
    "STAGED_BY",
    "TTL_ATTRIBUTE",
    "WRITE_PREFIX",
    "deleting_threads",
    "entry_of",
    "held_writes",
    "index_attribute",
    "index_name",
    "inline_attribute",
    "inline_copies",
    "meta_attributes",
    "pack_attribute",
    "pack_of",
    "raw_of",
    "write_attribute",
    "write_held",
]

Item = dict[str, Any]

DEFAULT_TABLE = "langgraph-s3-manifest"
"""The manifest table a deployment's URL means when it names none."""
TTL_ATTRIBUTE = "expires_at"
"""The table's TTL attribute: a thread's root namespace item carries its expiry."""
IDLE_ATTRIBUTE = "idle_until"
"""A subgraph namespace's own expiry: not the TTL attribute, so DynamoDB never deletes a
namespace of a live thread; it counts only for a thread without a root namespace."""
ROOT_SK = "~"
"""``keys.encode("")``: the sort key of a thread's root namespace."""
REVIVABLE = "revivable"
"""On a tombstone of delete_thread: the deletion may yet fail and put the thread back
(``ManifestDeletions.revive``) while its lease holds."""
REMOVING = "removing"
"""The item's marks of removals in progress (``Entry.removing``)."""
STAGED_BY = "staged_by"
"""On a subgraph namespace's item an import published ahead of its root (a thread of
more namespaces than one transaction moves): the import's token, which the root's
life becomes when it is published too (``core.staging``)."""
BARE_ATTRIBUTE = "bare"
"""The latest checkpoint id when it was committed with no pending writes known: while
``bare == latest_id`` the latest has none, and a read of it lists no writes. A
``put_writes`` of that checkpoint removes it; any other change of the latest leaves it
naming an older id, which no longer counts."""
INLINE_PREFIX = "inline:"
"""An item's attribute ``inline:<checkpoint id>`` holds a committed checkpoint's
envelope (a map: ``t`` its key tail, ``b`` its bytes) until its S3 object is known to
be stored: the commit carries the checkpoint, and the object is written off the
critical path (``checkpoint/inline.py``)."""
WRITE_PREFIX = "hw:"
"""An item's attribute ``hw:<tail>`` holds a pending write object's body (binary), its
key being the namespace's prefix and ``tail`` (``w/<inverted id>x/<task>/<slot>``),
until the object is known to be stored: ``put_writes`` is one UpdateItem, and the
object is written off the caller's path (``checkpoint/held_writes.py``)."""
HELD_BYTES = "held_bytes"
"""The bytes of the copies an item holds (``core.held.held_size`` of each), kept by
every write that adds or removes one: a commit that carries a copy is conditioned on
it, so the item's bound holds whatever number of writers left copies (DynamoDB enforces
it, not each process's count)."""
METADATA_ATTRIBUTE = "md"
"""The root item's attribute holding the recorded metadata pairs (a JSON object, as a
string: ``core.meta.recorded``)."""


def index_attribute(key: str) -> str:
    """The root item's attribute an index of metadata ``key`` is keyed by."""
    return f"ix_{key}"


def index_name(key: str) -> str:
    """The global secondary index of metadata ``key``."""
    return f"meta_{key}"


def meta_attributes(metadata: Mapping[str, Any], deployment: str, keys: Sequence[str]) -> Meta:
    """(attributes to set, attributes to remove) on a root item whose latest
    checkpoint has ``metadata``: the recorded pairs, and each indexed key's value."""
    pairs = recorded(metadata, keys)
    sets = {METADATA_ATTRIBUTE: orjson.dumps(pairs).decode()} if pairs else {}
    removes = [] if pairs else [METADATA_ATTRIBUTE]
    for key in keys:
        if key in pairs:
            sets[index_attribute(key)] = index_value(deployment, pairs[key])
        else:
            removes.append(index_attribute(key))
    return sets, tuple(removes)


def inline_copies(item: Mapping[str, Any]) -> tuple[InlineCopy, ...]:
    """The envelopes an item holds, oldest first (a malformed one is skipped)."""
    out: list[InlineCopy] = []
    for name, value in item.items():
        if not name.startswith(INLINE_PREFIX):
            continue
        m = value.get("M") if isinstance(value, dict) else None
        tail, body = (m or {}).get("t", {}).get("S"), (m or {}).get("b", {}).get("B")
        if isinstance(tail, str) and isinstance(body, bytes | bytearray):
            out.append(InlineCopy(name[len(INLINE_PREFIX) :], tail, bytes(body)))
    return tuple(sorted(out))


WRITE_TAIL = re.compile(r"w/(?:[0-9a-f]{2})+x/[A-Za-z0-9_~-]+/(?:r|s[0-9]+)")
"""What a held write's key tail is (``NamespaceKeys.write``, after the namespace's prefix):
an attribute named otherwise (another program's, a console edit) is no held write."""


def held_writes(item: Mapping[str, Any]) -> tuple[HeldWrite, ...]:
    """The write objects an item holds, by key tail (a malformed one is skipped: its
    tail is no write key, or its value no bytes)."""
    out: list[HeldWrite] = []
    for name, value in item.items():
        if not name.startswith(WRITE_PREFIX) or not WRITE_TAIL.fullmatch(name[len(WRITE_PREFIX) :]):
            continue
        tail = name[len(WRITE_PREFIX) :]
        value = value if isinstance(value, dict) else {}
        m = value.get("M")
        if isinstance(m, dict):
            body, tag = m.get("b", {}).get("B"), m.get("d", {}).get("B")
            if isinstance(body, bytes | bytearray) and isinstance(tag, bytes | bytearray):
                out.append(HeldWrite(tail, bytes(body), bytes(tag)))
        elif isinstance(body := value.get("B"), bytes | bytearray):
            out.append(HeldWrite(tail, bytes(body), legacy=True))
    return tuple(sorted(out))


def write_attribute(write: HeldWrite) -> dict[str, Any]:
    """The item attribute value holding ``write``: its body and its hold's tag (bare
    bytes for a write an earlier build held)."""
    if write.legacy:
        return {"B": write.body}
    return {"M": {"d": {"B": write.tag}, "b": {"B": write.body}}}


def write_held(write: HeldWrite) -> Cond:
    """The item still holds this very hold of ``write``: its tag compared (16 bytes
    sent, not the body again; a write an earlier build held is compared whole)."""
    name = WRITE_PREFIX + write.tail
    if write.legacy:
        return eq(name, write_attribute(write))
    return eq(name + ".d", {"B": write.tag})


def inline_attribute(copy: InlineCopy) -> dict[str, Any]:
    """The item attribute value holding ``copy``."""
    return {"M": {"t": {"S": copy.tail}, "b": {"B": copy.body}}}


def pack_attribute(ref: PackRef) -> dict[str, Any]:
    """The root item's ``pack`` attribute naming ``ref``."""
    m: dict[str, Any] = {
        "key": {"S": ref.key},
        "size": {"N": str(ref.size)},
        "index": {"N": str(ref.index_length)},
        "count": {"N": str(ref.count)},
    }
    if ref.upto:
        m["upto"] = {"N": str(ref.upto)}
    if ref.bare:
        m["bare"] = {"BOOL": True}
    return {"M": m}


def pack_of(attr: Mapping[str, Any] | None) -> PackRef | None:
    """The pack a root item's ``pack`` attribute names (None when it has none)."""
    if not attr or "M" not in attr:
        return None
    m = attr["M"]
    return PackRef(
        m["key"]["S"],
        int(m["size"]["N"]),
        int(m["index"]["N"]),
        int(m["count"]["N"]),
        int(m.get("upto", {}).get("N", "0")),
        bool(m.get("bare", {}).get("BOOL", False)),
    )


def _text(item: Mapping[str, Any], name: str) -> str:
    value = item.get(name, {}).get("S", "")
    return value if isinstance(value, str) else ""


def _int(item: Mapping[str, Any], name: str) -> int:
    """A count (0 when absent). A number that is no integer raises ValueError: the
    item is not one the manifest wrote."""
    return int(item.get(name, {}).get("N", "0"))


def _count(item: Mapping[str, Any], name: str) -> int | None:
    """A count as the rules read it beside a life: None when absent, of another type or
    no integer (garbage counts nothing)."""
    try:
        value = item.get(name, {}).get("N")
        return int(value) if value is not None else None
    except (TypeError, ValueError, AttributeError):
        return None


def _number(item: Mapping[str, Any], name: str) -> float | None:
    """A number attribute (None when absent or of another type: a string a console edit
    wrote is no number, as DynamoDB's TTL reads it)."""
    value = item.get(name, {}).get("N")
    return float(value) if value is not None else None


def _lease(item: Mapping[str, Any]) -> float:
    try:
        return float(item.get("lease_until", {}).get("N", "0"))
    except (TypeError, ValueError, AttributeError):  # garbage holds nothing
        return 0.0


def entry_of(item: Mapping[str, Any]) -> Entry:
    """The entry an item with a latest checkpoint holds (expired or not).

    Raises:
        KeyError, TypeError, ValueError: an item langgraph-s3 did not write.
    """
    exp = item.get(TTL_ATTRIBUTE, item.get(IDLE_ATTRIBUTE, {})).get("N")
    return Entry(
        thread_id=item["thread_id"]["S"],
        checkpoint_ns=item["checkpoint_ns"]["S"],
        latest_id=item["latest_id"]["S"],
        latest_tail=item["latest_tail"]["S"],
        uses_delta=bool(item.get("uses_delta", {}).get("BOOL", False)),
        heads=frozenset(item.get("heads", {}).get("SS", ())),
        floor=item.get("floor", {}).get("S", ""),
        born=item.get("born", {}).get("S", ""),
        gone=frozenset(item.get("gone", {}).get("SS", ())),
        rev=_int(item, "rev"),
        created_at=_int(item, "created_at"),
        updated_at=_int(item, "updated_at"),
        expires_at=int(exp) if exp is not None else None,
        pack=pack_of(item.get("pack")),
        packings=_int(item, "packings"),
        spilled=str(item.get("spilled", {}).get("S", "")),
        life=str(item.get("life", {}).get("S", "")),
        removing=frozenset(item.get(REMOVING, {}).get("SS", ())),
        inline=inline_copies(item),
        writes=held_writes(item),
        bare=str(item.get(BARE_ATTRIBUTE, {}).get("S", "")),
        meta=tuple(
            sorted(
                (k, v["S"])
                for k, v in item.items()
                if (k == METADATA_ATTRIBUTE or k.startswith(index_attribute(""))) and "S" in v
            )
        ),
    )


def raw_of(item: Mapping[str, Any]) -> Raw:
    """An item as stored, live or not, as the rules read it (:class:`Raw`). The life's
    entry is read only when the item has a latest and is no tombstone; an item another
    writer left that cannot be read is kept ``garbled``: reading its life raises then."""
    tombstone = bool(item.get("deleted", {}).get("BOOL", False))
    latest: Entry | None = None
    garbled = False
    if not tombstone and "latest_id" in item:
        try:
            latest = entry_of(item)
        except (KeyError, TypeError, AttributeError, ValueError):
            garbled = True
    staged = item.get(STAGED_BY, {}).get("S")
    pack = latest.pack if latest is not None else None
    if garbled:  # its pack is read apart from the life that cannot be
        with contextlib.suppress(KeyError, TypeError, AttributeError, ValueError):
            pack = pack_of(item.get("pack"))
    deleted = item.get("deleted_at", {}).get("N", "")
    return Raw(
        rev=_count(item, "rev") or 0,
        tombstone=tombstone,
        lease_until=_lease(item),
        revivable=tombstone and bool(item.get(REVIVABLE, {}).get("BOOL", False)),
        removing=frozenset(item.get(REMOVING, {}).get("SS", ())),
        expires=_number(item, TTL_ATTRIBUTE),
        idle_until=_number(item, IDLE_ATTRIBUTE),
        deleted_at=str(deleted),
        life=_text(item, "life"),
        born=_text(item, "born"),
        created_at=_count(item, "created_at") or 0,
        updated_at=_count(item, "updated_at") or 0,
        staged_by=staged if isinstance(staged, str) else None,
        held_bytes=_count(item, HELD_BYTES),
        inline=latest.inline if latest is not None else inline_copies(item),
        writes=latest.writes if latest is not None else held_writes(item),
        pack=pack,
        packings=_count(item, "packings") or 0,
        latest=latest,
        garbled=garbled,
    )


def deleting_threads(items: Iterable[Mapping[str, Any]], now: float) -> set[str]:
    """The threads among ``items`` that a deletion in progress holds (its lease), one
    that may still fail and put them back."""
    out: set[str] = set()
    for item in items:
        with contextlib.suppress(TypeError, AttributeError, ValueError, KeyError):  # garbage
            thread = item.get("thread_id", {}).get("S")
            if thread and raw_of(item).deletion_held(now) > now:
                out.add(str(thread))
    return out
