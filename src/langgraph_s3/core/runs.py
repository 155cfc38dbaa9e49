"""Append-only lists stored as runs: bytes per step that do not grow with the list.

An ``add_messages`` channel (or any list that grows by appending) is stored as
*runs*: each run holds the msgpack encodings of some consecutive elements, and
the value is their concatenation. A put whose list extends its parent's stores
only the new elements, as one run inline in its own checkpoint object, and
names the older runs by the objects that hold them (``Runs.refs``): one GET
each, all in the same round trip, cached in process.

The number of runs stays small by merging, as a log-structured merge tree
does: when :data:`FANOUT` runs of one level end the list, the newest put writes
them (with its own elements) as one run of the next level. A list of ``n``
elements then has at most ``(FANOUT - 1)`` runs per level and ``log_FANOUT(n)``
levels, and each element is copied once per level it climbs.

A list that did not just grow (an element replaced or removed, a list the put
cannot compare with its parent's) is stored whole, as one run that never merges.

This relies on msgpack's arrays being the concatenation of their elements'
encodings, which holds for LangGraph's ``JsonPlusSerializer``: runs are used only
with it, and only when every element serializes as ``msgpack`` (an encrypting or
pickling serializer stores its values whole, as before). Pure, no I/O.
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from dataclasses import dataclass
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde import jsonplus
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_s3.core.keys import checkpoint_tail, parse_checkpoint_tail
from langgraph_s3.errors import InvalidIdError

FANOUT = 8
"""Runs of one level that merge into one run of the next."""
WHOLE = 255
"""The level of a run that holds a whole list: it never merges."""
MSGPACK = "msgpack"


@dataclass(frozen=True, slots=True)
class Ref:
    """One run of a list, stored in another object."""

    key: str
    """The holder, relative to the namespace prefix: ``c/<tail>`` or ``b/<ch>/<version>``."""
    count: int
    level: int


@dataclass(frozen=True, slots=True)
class Runs:
    """How a checkpoint stores one list channel (its envelope's ``runs[channel]``)."""

    refs: tuple[Ref, ...]
    """The older runs, oldest first."""
    count: int
    """Elements in the whole list."""
    own: bytes | None = None
    """This checkpoint's own run (the newest), when it is inline."""
    level: int = 0

    @property
    def own_count(self) -> int:
        return self.count - sum(r.count for r in self.refs)

    def dump(self) -> dict[str, Any]:
        raw: dict[str, Any] = {
            "refs": [[pack_key(r.key), r.count, r.level] for r in self.refs],
            "n": self.count,
            "level": self.level,
        }
        if self.own is not None:
            raw["own"] = self.own
        return raw

    @classmethod
    def load(cls, raw: dict[str, Any]) -> Runs:
        return cls(
            tuple(Ref(unpack_key(k), int(c), int(lv)) for k, c, lv in raw["refs"]),
            int(raw["n"]),
            raw.get("own"),
            int(raw.get("level", 0)),
        )


@dataclass(frozen=True, slots=True)
class Tip:
    """What a put continuing a checkpoint needs about one of its lists."""

    refs: tuple[Ref, ...]
    """Every run of the list, its own included, oldest first."""
    count: int
    digest: bytes
    """blake2b of the concatenated encodings: the next put checks its prefix by it."""


@dataclass(frozen=True, slots=True)
class RawValue:
    """A value stored as a blob of its serialized bytes alone, of this type."""

    kind: str


Where = str | Tip | RawValue | None
"""Where a checkpoint keeps a channel's value: the tail of the checkpoint holding it
inline, the runs of a list, a raw blob, or None for a blob that starts with its type."""


@dataclass(frozen=True, slots=True)
class Seed:
    """Where the value a DeltaChannel log (logs.py) starts from is held, at its version."""

    version: Any
    where: Where

    def dump(self) -> dict[str, Any]:
        raw: dict[str, Any] = {"v": self.version}
        where = self.where
        if isinstance(where, str):
            raw["at"] = pack_key(f"c/{where}")
        elif isinstance(where, RawValue):
            raw["raw"] = where.kind
        elif isinstance(where, Tip):
            raw["refs"] = [[pack_key(r.key), r.count, r.level] for r in where.refs]
            raw["n"] = where.count
        return raw

    @classmethod
    def load(cls, raw: dict[str, Any]) -> Seed:
        where: Where = None
        if "at" in raw:
            where = unpack_key(raw["at"])[2:]
        elif "raw" in raw:
            where = RawValue(str(raw["raw"]))
        elif "refs" in raw:
            refs = tuple(Ref(unpack_key(k), int(c), int(lv)) for k, c, lv in raw["refs"])
            where = Tip(refs, int(raw["n"]), b"")
        return cls(raw["v"], where)


@dataclass(frozen=True, slots=True)
class Log:
    """One delta channel's history at a checkpoint (its envelope's ``logs[channel]``)."""

    seed: Seed | None
    """None: no ancestor snapshots the channel (the history starts at the root)."""
    runs: Runs
    """The writes since the seed, oldest first."""

    def dump(self) -> dict[str, Any]:
        raw = self.runs.dump()
        if self.seed is not None:
            raw["seed"] = self.seed.dump()
        return raw

    @classmethod
    def load(cls, raw: dict[str, Any]) -> Log:
        seed = raw.get("seed")
        return cls(Seed.load(seed) if seed is not None else None, Runs.load(raw))

    def tip(self, tail: str) -> tuple[Seed | None, Tip]:
        """What a put continuing this log needs: its seed and every run, its own too."""
        refs = self.runs.refs
        if self.runs.own is not None:
            refs = (*refs, Ref(f"c/{tail}", self.runs.own_count, self.runs.level))
        return self.seed, Tip(refs, self.runs.count, b"")


@dataclass(frozen=True, slots=True)
class Planned:
    """A put's decision for one list channel."""

    runs: Runs
    digest: bytes


def _uuid16(value: str) -> bytes | None:
    try:
        u = uuid.UUID(value)
    except ValueError:
        return None
    return u.bytes if str(u) == value else None


def pack_key(key: str) -> Any:
    """A holder's key in few bytes: a checkpoint key whose id, parent and run are uuids
    (LangGraph's) as their 16 bytes each (a ref is read with every checkpoint that
    names it: it was ~190 bytes as text); anything else verbatim. Each put packs the
    keys of all its list's older runs again: the packings are kept (a few thousand)."""
    packed = _packed(key)
    return list(packed) if isinstance(packed, tuple) else packed


@functools.lru_cache(maxsize=4096)
def _packed(key: str) -> Any:
    if not key.startswith("c/"):
        return key
    try:
        ck = parse_checkpoint_tail(key, key[2:])
    except InvalidIdError:
        return key
    cid = _uuid16(ck.checkpoint_id)
    parent = _uuid16(ck.parent_id) if ck.parent_id is not None else b""
    run = _uuid16(ck.run_token) if ck.run_token else b""
    if cid is None or parent is None or run is None:
        return key
    return (cid, parent, run)


def unpack_key(packed: Any) -> str:
    if isinstance(packed, str):
        return packed
    cid, parent, run = (str(uuid.UUID(bytes=b)) if b else None for b in packed)
    assert cid is not None
    return "c/" + checkpoint_tail(cid, parent, run)


_ENCODE = getattr(jsonplus, "_msgpack_enc", None)
"""The msgpack encoder ``JsonPlusSerializer.dumps_typed`` calls (None in a LangGraph
without it: then ``dumps_typed`` itself, element by element)."""


def elements(serde: SerializerProtocol, value: Any) -> list[bytes] | None:
    """The msgpack encodings of a list's elements, or None when it cannot be runs.

    Each element is encoded as ``serde.dumps_typed`` encodes it; for LangGraph's own
    ``JsonPlusSerializer`` (its ``dumps_typed`` not overridden) by the msgpack encoder
    that method calls, without its per-call dispatch: a put encodes every message of a
    chat's list, so that dispatch was a tenth of a put's CPU at a few hundred messages."""
    if not isinstance(value, list) or not value or not isinstance(serde, JsonPlusSerializer):
        return None
    own = type(serde).dumps_typed is JsonPlusSerializer.dumps_typed
    encode = _ENCODE if own else None
    out: list[bytes] = []
    if encode is not None:
        for item in value:
            if item is None or isinstance(item, bytes | bytearray):
                return None  # dumps_typed's "null", "bytes", "bytearray": not msgpack
            try:
                out.append(encode(item))
            except ormsgpack.MsgpackEncodeError:
                return None  # dumps_typed's pickle fallback or its error: the whole way
        return out
    for item in value:
        kind, data = serde.dumps_typed(item)
        if kind != MSGPACK:
            return None
        out.append(data)
    return out


def plan(encs: list[bytes], parent: Tip | None) -> Planned:
    """The runs a put stores for a list whose elements encode as ``encs``.

    The digest is of the elements' encodings one after another (hashed joined: the
    same digest as one update per element, at a fraction of the calls)."""
    extends = False
    if parent is not None and 0 < parent.count <= len(encs):
        h = _fed(hashlib.blake2b(digest_size=16), encs, 0, parent.count)
        extends = h.digest() == parent.digest
    if not extends:
        whole = b"".join(encs)
        digest = hashlib.blake2b(whole, digest_size=16).digest()
        return Planned(Runs((), len(encs), whole, WHOLE), digest)
    assert parent is not None
    _fed(h, encs, parent.count, len(encs))
    absorbed, level = absorb(parent.refs)
    refs = parent.refs[: len(parent.refs) - absorbed]
    own = len(encs) - sum(r.count for r in refs)
    data = b"".join(encs[len(encs) - own :]) if own else None
    return Planned(Runs(refs, len(encs), data, level), h.digest())


_FEED = 256 * 1024
"""Bytes joined before each hash update: one update per element costs a call each (a
list of a few hundred small messages), one for the whole prefix a copy of it."""


def _fed(h: Any, encs: list[bytes], start: int, end: int) -> Any:
    """``h`` updated with ``encs[start:end]`` one after another, in joined batches."""
    batch: list[bytes] = []
    size = 0
    for e in encs[start:end]:
        batch.append(e)
        size += len(e)
        if size >= _FEED:
            h.update(b"".join(batch))
            batch.clear()
            size = 0
    if batch:
        h.update(b"".join(batch))
    return h


def absorb(refs: tuple[Ref, ...], fanout: int = FANOUT) -> tuple[int, int]:
    """How many of the newest runs the next run merges with its own elements, and
    its level: ``fanout - 1`` runs of one level ending the list climb one level
    (with the new run, ``fanout`` of them), and so on up."""
    n, level = 0, 0
    while True:
        end = len(refs) - n
        group = refs[max(end - (fanout - 1), 0) : end]
        if len(group) < fanout - 1 or any(r.level != level for r in group):
            return n, level
        n += fanout - 1
        level += 1


END = b"langgraph-s3/end"
"""The last element of every array a reader builds from runs: msgpack decoders ignore
bytes after a complete value, so a run holding more elements than its count says
would otherwise pass unseen. The sentinel must be decoded exactly where it belongs."""
_END = b"\xc4" + bytes((len(END),)) + END


def closed_array(count: int, parts: list[bytes]) -> bytes:
    """``array`` of the parts and the :data:`END` sentinel (``count`` + 1 elements)."""
    return array(count + 1, [*parts, _END])


def check_closed(items: Any, count: int) -> list[Any]:
    """The elements of a decoded ``closed_array``; ValueError unless there were exactly
    ``count`` before the sentinel."""
    if not isinstance(items, list) or len(items) != count + 1 or items[-1] != END:
        raise ValueError(f"the runs do not hold exactly the {count} elements they name")
    del items[-1]
    return items


def array(count: int, parts: list[bytes]) -> bytes:
    """A msgpack array of ``count`` elements whose encodings are ``parts`` joined."""
    if count < 16:
        head = bytes((0x90 | count,))
    elif count < 1 << 16:
        head = b"\xdc" + count.to_bytes(2, "big")
    else:
        head = b"\xdd" + count.to_bytes(4, "big")
    return b"".join([head, *parts])
