"""Key layout: pure functions that turn ids into S3 keys and back. No I/O.

Every id is encoded *injectively* into characters S3 treats as safe:
``[A-Za-z0-9_-]`` stand for themselves, every other UTF-8 byte becomes ``~hh``,
the empty string becomes ``~`` and a component whose encoding is longer than
:data:`MAX_COMPONENT` becomes ``~~`` plus its SHA-256. No encoding contains
``/`` or ``.``, so ``"a/b"`` can never meet ``"a"`` + ``"b"``, ``".."`` never
leaves its thread, and the prefix of thread ``"a"`` is not a prefix of ``"ab"``.

A checkpoint key holds everything needed to walk history without reading
objects::

    {root}threads/{thread}/ns/{ns}/c/{inv(id)}x{parent}.{run}

``inv(id)`` is the id's bytes inverted (``255 - b``) in hex, terminated by
``x`` (greater than every hex digit), so an ascending ``ListObjectsV2`` page
is newest-first and a ``StartAfter`` of ``inv(id) + "y"`` means "strictly
older than id".
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from langgraph_s3.errors import InvalidIdError

logger = logging.getLogger(__name__)

MAX_COMPONENT = 120
"""Longest encoded component kept readable; longer ones are hashed."""
MAX_CHECKPOINT_ID_BYTES = 64
"""Checkpoint ids are uuid6 strings (36 bytes); this bounds key length."""
MAX_PREFIX_BYTES = 200
MAX_ID_BYTES = 16 * 1024
MAX_KEY_BYTES = 1024
"""S3's limit on a whole object key (UTF-8 bytes): longer is a 400 KeyTooLongError."""
"""Longest id (thread, namespace, task, run, label): the manifest keeps thread ids and
namespaces verbatim, and a DynamoDB item holds at most 400 KB. Checked before any
request, so an id that cannot be stored never leaves a half-written checkpoint."""

_warned: set[str] = set()
"""Foreign keys already reported (bounded)."""
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_ESCAPE = tuple(chr(b) if b in _SAFE else f"~{b:02x}" for b in range(256))
_HEX = frozenset("0123456789abcdef")
_INVERT = bytes(255 - b for b in range(256))


def id_list(ids: Iterable[str], what: str) -> list[str]:
    """A bulk call's ids as a list, refusing one string or bytes (``apack("t1")``
    would otherwise act on ``"t"`` and ``"1"``) and anything not iterable.

    Raises:
        InvalidIdError: ``ids`` is a single string, bytes, or not a collection.
    """
    if isinstance(ids, (str, bytes, bytearray)):
        raise InvalidIdError(
            f"{what} is one string ({str(ids)[:60]!r}), not a list of ids: pass [{str(ids)[:60]!r}]"
        )
    try:
        return [str(i) for i in ids]
    except TypeError as exc:
        raise InvalidIdError(
            f"{what} must be a list of ids, got {type(ids).__name__}: pass a list of strings"
        ) from exc


def _utf8(value: str, what: str) -> bytes:
    if not isinstance(value, str):
        raise InvalidIdError(f"{what} must be a str, got {type(value).__name__}: {value!r}")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidIdError(
            f"{what} {value!r} is not valid unicode (lone surrogate): {exc}"
        ) from None


def _escape(raw: bytes) -> str:
    return "".join([_ESCAPE[b] for b in raw])


def encode(value: str, what: str = "id") -> str:
    """Encode one id as a key component (injective, S3-safe, bounded length)."""
    raw = _utf8(value, what)
    if not raw:
        return "~"
    if len(raw) > MAX_ID_BYTES:
        raise InvalidIdError(
            f"{what} {value[:40]!r}... is {len(raw):,} bytes of UTF-8; at most {MAX_ID_BYTES:,} "
            "are supported: use a shorter id (a hash of it, for example)"
        )
    out = _escape(raw)
    if len(out) > MAX_COMPONENT:
        return "~~" + hashlib.sha256(raw).hexdigest()
    return out


def decode(component: str) -> str:
    """Invert :func:`encode` for components that were not hashed."""
    if component == "~":
        return ""
    if component.startswith("~~"):
        raise InvalidIdError(f"hashed key component {component!r} cannot be decoded")
    out = bytearray()
    i = 0
    while i < len(component):
        ch = component[i]
        if ch == "~":
            out.append(int(component[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(ord(ch))
            i += 1
    return out.decode("utf-8")


def _checkpoint_id_bytes(checkpoint_id: str) -> bytes:
    raw = _utf8(checkpoint_id, "checkpoint_id")
    if not raw:
        raise InvalidIdError("checkpoint_id must not be empty")
    if len(raw) > MAX_CHECKPOINT_ID_BYTES:
        raise InvalidIdError(
            f"checkpoint_id {checkpoint_id[:80]!r}... is {len(raw)} bytes; at most "
            f"{MAX_CHECKPOINT_ID_BYTES} are supported (LangGraph uses 36-byte uuid6 ids)"
        )
    return raw


def invert_id(checkpoint_id: str) -> str:
    """Hex of the inverted bytes: ascending key order is descending id order."""
    return _checkpoint_id_bytes(checkpoint_id).translate(_INVERT).hex()


def uninvert_id(inverted: str) -> str:
    return bytes.fromhex(inverted).translate(_INVERT).decode()


def version_token(version: str | int | float) -> str:
    """Type-tagged channel version: int 5 and str "5" must not share a blob."""
    if isinstance(version, bool):
        raise InvalidIdError(f"channel version must be str, int or float, got {version!r}")
    if isinstance(version, int):
        tag = "i"
    elif isinstance(version, float):
        tag = "f"
    elif isinstance(version, str):
        tag = "s"
    else:
        raise InvalidIdError(
            f"channel version must be str, int or float, got {type(version).__name__}"
        )
    return encode(f"{tag}{version}", "channel version")


@dataclass(frozen=True, slots=True)
class CheckpointKey:
    """What a checkpoint key says about its checkpoint, parsed without a GET."""

    key: str
    checkpoint_id: str
    parent_id: str | None
    run_token: str
    """Encoded run id ("" when the checkpoint has none); compare with encode()."""


def checkpoint_tail(checkpoint_id: str, parent_id: str | None, run_id: str | None) -> str:
    parent = "" if not parent_id else invert_id(parent_id)
    run = "" if run_id is None else encode(run_id, "run_id")
    return f"{invert_id(checkpoint_id)}x{parent}.{run}"


def parse_checkpoint_tail(key: str, tail: str) -> CheckpointKey:
    inv, x, rest = tail.partition("x")
    parent, dot, run = rest.partition(".")
    try:
        if not (x and dot) or not _is_inverted(inv) or (parent and not _is_inverted(parent)):
            raise ValueError("bad shape")
        return CheckpointKey(
            key=key,
            checkpoint_id=uninvert_id(inv),
            parent_id=uninvert_id(parent) if parent else None,
            run_token=run,
        )
    except ValueError:  # UnicodeDecodeError included
        raise InvalidIdError(f"{key!r} is not a checkpoint key written by langgraph-s3") from None


WRITE_SLOT_REGULAR = "r"
"""The slot of a task's regular writes (first-write-wins, merged by CAS)."""


def special_write_slot(idx: int) -> str:
    """The slot of a special write (ERROR, INTERRUPT...: WRITES_IDX_MAP's negative idx)."""
    return f"s{-idx}"


@dataclass(frozen=True, slots=True)
class NamespaceKeys:
    """Builds and parses every key of one (thread, checkpoint namespace).

    Layout under ``prefix`` (``<root>threads/<thread>/ns/<ns>/``)::

        c/<inv(id)>x<inv(parent)>.<run>      checkpoint envelope (newest lists first)
        w/<inv(id)>x/<task>/r                 a task's regular writes
        w/<inv(id)>x/<task>/s<n>              a special write (error, interrupt...)
        b/<channel>/<version>                 a large channel value, content-addressed
        h/<inv(id)>x<inv(parent)>.<run>      a removed checkpoint that still holds values

    ``inv`` inverts the id's bytes so that ascending listings are newest first;
    the ``x``/``y`` separators make "this id" and "older than this id" prefixes.
    No caller builds or slices these keys by hand.
    """

    thread_id: str
    checkpoint_ns: str
    prefix: str

    # -- prefixes ---------------------------------------------------------
    @property
    def checkpoints(self) -> str:
        return f"{self.prefix}c/"

    @property
    def writes(self) -> str:
        return f"{self.prefix}w/"

    @property
    def blobs(self) -> str:
        return f"{self.prefix}b/"

    @property
    def moved(self) -> str:
        """Where delete_for_runs keeps a removed checkpoint whose object still holds
        values of kept ones: out of the listing, so out of the history."""
        return f"{self.prefix}h/"

    def moved_copy(self, key: str) -> str:
        """The ``h/`` key of checkpoint key ``key`` (its ``c/`` key)."""
        return self.moved + key[len(self.checkpoints) :]

    def tips(self, spill: str) -> str:
        """Where branch heads spilled out of the manifest item are marked (one empty
        object each), for the spill generation the item names: markers of another
        generation (a pruned, rolled-back or deleted life's) are never read."""
        return f"{self.prefix}t/{encode(spill, 'spill')}/"

    def tip_marker(self, spill: str, checkpoint_id: str) -> str:
        """The marker of one spilled head (newest first in a listing)."""
        return f"{self.tips(spill)}{invert_id(checkpoint_id)}"

    def tip_of(self, spill: str, key: str) -> str | None:
        """The head a marker key names (None: not a marker this layout wrote)."""
        try:
            return uninvert_id(key[len(self.tips(spill)) :])
        except (ValueError, UnicodeDecodeError):
            return None

    def checkpoint_id_prefix(self, checkpoint_id: str) -> str:
        """Prefix shared by the key(s) of one checkpoint id."""
        return f"{self.prefix}c/{invert_id(checkpoint_id)}x"

    def older_than(self, checkpoint_id: str) -> str:
        """StartAfter value that skips ``checkpoint_id`` and everything newer."""
        return f"{self.prefix}c/{invert_id(checkpoint_id)}y"

    def from_id(self, checkpoint_id: str) -> str:
        """StartAfter value that lists ``checkpoint_id`` and everything older."""
        return f"{self.prefix}c/{invert_id(checkpoint_id)}"

    def writes_of(self, checkpoint_id: str) -> str:
        return f"{self.prefix}w/{invert_id(checkpoint_id)}x/"

    def writes_from(self, checkpoint_id: str) -> str:
        """StartAfter value that lists the writes of ``checkpoint_id`` and older ones."""
        return f"{self.prefix}w/{invert_id(checkpoint_id)}"

    def writes_older_than(self, checkpoint_id: str) -> str:
        return f"{self.prefix}w/{invert_id(checkpoint_id)}y"

    # -- objects ----------------------------------------------------------
    def checkpoint(self, checkpoint_id: str, parent_id: str | None, run_id: str | None) -> str:
        return self.checkpoint_at(checkpoint_tail(checkpoint_id, parent_id, run_id))

    def checkpoint_at(self, tail: str) -> str:
        """The checkpoint key whose tail (what the manifest stores) is ``tail``."""
        return f"{self.prefix}c/{tail}"

    def held_key(self, tail: str) -> str:
        """The object key of a tail an item holds or a deletion records: a held
        write's (``w/...``, after the namespace's prefix) or a checkpoint's (after
        ``c/``: ``checkpoint_at``)."""
        return f"{self.prefix}{tail}" if tail.startswith("w/") else self.checkpoint_at(tail)

    def write_tail(self, key: str) -> str:
        """A write key after the namespace's prefix (``held_key``'s inverse)."""
        return key[len(self.prefix) :]

    def tail(self, key: str) -> str:
        """The part of a checkpoint key the manifest stores (``checkpoint_at``'s inverse)."""
        return key[len(self.checkpoints) :]

    def regular_write(self, checkpoint_id: str, task_id: str) -> str:
        return self.write(checkpoint_id, task_id, WRITE_SLOT_REGULAR)

    def special_write(self, checkpoint_id: str, task_id: str, idx: int) -> str:
        return self.write(checkpoint_id, task_id, special_write_slot(idx))

    def write(self, checkpoint_id: str, task_id: str, slot: str) -> str:
        return f"{self.writes_of(checkpoint_id)}{encode(task_id, 'task_id')}/{slot}"

    def blob(self, channel: str, version: str | int | float) -> str:
        return f"{self.prefix}b/{encode(channel, 'channel')}/{version_token(version)}"

    def run_blob(self, channel: str, version: str | int | float, start: int, end: int) -> str:
        """A large run of a list (runs.py): elements ``start`` to ``end`` of the value at
        ``version``. Never the whole value's key: a put that stores the list whole at the
        same version (its parent's runs unknown to it) writes other bytes."""
        return f"{self.blob(channel, version)}.{start}-{end}"

    def log_blob(self, channel: str, version: str | int | float, start: int, end: int) -> str:
        """A large run of a DeltaChannel log (logs.py): writes ``start`` to ``end`` of the
        log of ``channel`` at ``version`` (a log grows only with its channel's version)."""
        return f"{self.blob(channel, version)}.log.{start}-{end}"

    # -- parsing ----------------------------------------------------------
    def parse_checkpoint(self, key: str) -> CheckpointKey:
        return parse_checkpoint_tail(key, self.tail(key))

    def listed_checkpoints(self, keys: Iterable[str]) -> list[CheckpointKey]:
        """The checkpoint keys of a listing; anything else found there (a console folder
        marker, a stray upload) is skipped with a warning, never served nor fatal."""
        out: list[CheckpointKey] = []
        for key in keys:
            try:
                out.append(self.parse_checkpoint(key))
            except InvalidIdError:
                if key not in _warned:  # once per key and process, not per read
                    if len(_warned) >= 4096:
                        _warned.clear()
                    _warned.add(key)
                    logger.warning("ignoring %r: not a checkpoint key written by langgraph-s3", key)
        return out

    def checkpoint_of_write(self, key: str) -> str:
        """The inverted checkpoint id a write key belongs to."""
        return key[len(self.writes) :].partition("x")[0]


def _is_inverted(hexed: str) -> bool:
    return (
        bool(hexed)
        and len(hexed) % 2 == 0
        and len(hexed) <= 2 * MAX_CHECKPOINT_ID_BYTES
        and set(hexed) <= _HEX
    )


def thread_prefix_in(threads: str, key: str) -> str | None:
    """The thread prefix of ``key`` under the threads prefix ``threads`` (None: none)."""
    if not key.startswith(threads):
        return None
    cut = key.find("/", len(threads))
    return None if cut < 0 else key[: cut + 1]


class Layout:
    """Builds every key under one bucket prefix: threads (through
    :class:`NamespaceKeys`) and the store's items and segments."""

    __slots__ = ("root",)

    def __init__(self, prefix: str = "") -> None:
        prefix = prefix.strip("/")
        if len(prefix.encode("utf-8")) > MAX_PREFIX_BYTES:
            raise InvalidIdError(f"prefix is longer than {MAX_PREFIX_BYTES} bytes")
        if any(part in ("", ".", "..") for part in prefix.split("/")) and prefix:
            raise InvalidIdError(f"prefix {prefix!r} has an empty, '.' or '..' segment")
        self.root = f"{prefix}/" if prefix else ""

    # -- prefixes ---------------------------------------------------------
    def threads(self) -> str:
        return f"{self.root}threads/"

    def thread(self, thread_id: str) -> str:
        return f"{self.root}threads/{encode(thread_id, 'thread_id')}/"

    def rehome(self, key: str, source_thread: str, target_thread: str) -> str:
        """The key a copy of ``key`` (under ``source_thread``) gets under ``target_thread``."""
        source = self.thread(source_thread)
        if not key.startswith(source):
            raise InvalidIdError(f"{key!r} is not a key of thread {source_thread!r}")
        return self.thread(target_thread) + key[len(source) :]

    def manifest(self) -> str:
        """Where the deployment's manifest lives with ``manifest="s3"`` (no table)."""
        return f"{self.root}manifest/"

    def subjects_secret(self) -> str:
        """The write-once copy of the deployment's subjects' token secret (wrapped): the
        manifest's item restored from it if that is ever lost, since every subject's
        token depends on the secret."""
        return f"{self.root}subjects/secret"

    def packs(self, thread_id: str) -> str:
        """Where a thread's archive packs are (outside its own prefix: the lifecycle
        rule that moves packs to colder classes names this prefix)."""
        return f"{self.root}packs/{encode(thread_id, 'thread_id')}/"

    def pack(self, thread_id: str, made: float, token: str) -> str:
        """A new pack's key: ``<ms>-<token>.pack`` under the thread's packs (the time
        first, so a thread's packs list oldest first)."""
        return f"{self.packs(thread_id)}{int(made * 1000):013d}-{token}.pack"

    @staticmethod
    def pack_made(key: str) -> float | None:
        """When a pack was made, from its key (:meth:`pack`); None for another key."""
        try:
            return int(key.rsplit("/", 1)[1].split("-", 1)[0]) / 1000
        except (IndexError, ValueError):
            return None

    def thread_of_pack(self, key: str) -> str | None:
        """The thread prefix (``threads/<thread>/``) a pack key belongs to."""
        packs = f"{self.root}packs/"
        segment = key[len(packs) :].split("/", 1)[0] if key.startswith(packs) else ""
        return f"{self.threads()}{segment}/" if segment else None

    def thread_prefix_of(self, key: str) -> str | None:
        """The thread prefix (``threads/<thread>/``) of any key under a thread."""
        return thread_prefix_in(self.threads(), key)

    @staticmethod
    def kind_in_thread(thread_prefix: str, key: str) -> tuple[str, str] | None:
        """(encoded namespace, kind: ``c`` checkpoint, ``w`` write, ``b`` blob, ``t`` tip
        marker, ...) of a key under a thread prefix; None for a key outside namespaces."""
        parts = key[len(thread_prefix) :].split("/")
        if len(parts) > 3 and parts[0] == "ns":
            return parts[1], parts[2]
        return None

    @staticmethod
    def namespace_prefix_of(thread_prefix: str, key: str) -> str | None:
        """The namespace prefix (``…/ns/<namespace>/``) a key under a thread is in; None
        for a key outside the namespaces (the bare ``…/ns/`` for one cut short)."""
        rest = key[len(thread_prefix) :]
        if not rest.startswith("ns/"):
            return None
        cut = rest.find("/", 3)
        return key[: len(thread_prefix) + (cut + 1 if cut >= 0 else 3)]

    def checkpoint_id_of(self, thread_id: str, key: str) -> str | None:
        """The checkpoint a key of the thread belongs to (a checkpoint or one of its
        writes); None for blobs and anything else."""
        parts = key[len(self.thread(thread_id)) :].split("/")
        if len(parts) < 4 or parts[0] != "ns" or parts[2] not in ("c", "w"):
            return None
        inverted = parts[3].split("x", 1)[0]
        try:
            return uninvert_id(inverted)
        except ValueError:
            return None

    def namespace(self, thread_id: str, checkpoint_ns: str) -> NamespaceKeys:
        """The keys of one (thread, namespace): checkpoints, writes, blobs."""
        prefix = f"{self.thread(thread_id)}ns/{encode(checkpoint_ns, 'checkpoint_ns')}/"
        return NamespaceKeys(thread_id, checkpoint_ns, prefix)

    # -- the store ------------------------------------------------------------
    def store_namespace(self, labels: tuple[str, ...]) -> str:
        """Prefix of every item in ``labels`` and below: whole labels only."""
        return f"{self.root}store/i/" + "".join(f"{encode(x, 'namespace label')}/" for x in labels)

    def store_item(self, labels: tuple[str, ...], key: str) -> str:
        """The object key of one store item.

        Each label and the key are bounded (:data:`MAX_COMPONENT`, hashed beyond), but
        not their number: a deep namespace could pass S3's limit, so it is refused here,
        before any request.

        Raises:
            InvalidIdError: the whole key would be over :data:`MAX_KEY_BYTES`.
        """
        out = f"{self.store_namespace(labels)}.{encode(key, 'key')}"
        # the namespace's segment (written by a search or a bulk batch) too
        size = max(len(out.encode("utf-8")), len(self.store_segment(labels).encode("utf-8")))
        if size > MAX_KEY_BYTES:
            raise InvalidIdError(
                f"the store item {key[:40]!r} in a namespace of {len(labels)} labels "
                f"({sum(len(x) for x in labels):,} characters) needs an S3 key of {size:,} "
                f"bytes; S3 allows {MAX_KEY_BYTES:,}: use fewer or shorter namespace "
                "labels, or a shorter key"
            )
        return out

    def store_segments(self, labels: tuple[str, ...]) -> str:
        return f"{self.root}store/s/" + "".join(f"{encode(x, 'namespace label')}/" for x in labels)

    def store_segment(self, labels: tuple[str, ...]) -> str:
        return f"{self.store_segments(labels)}.seg"


ERASURE_MARKER = b"\x00langgraph-s3 erased\x00"
"""What a deletion leaves under a checkpoint key a late PUT could still reach: no
content, and no envelope (those begin otherwise and are longer)."""


def erasure_marker(thread_prefix: str, key: str, size: int) -> bool:
    """Whether a listed object is an erasure marker: its size, under a checkpoint key
    or a write key (a deletion marks the writes an item held); a damaged object of
    another size is still named corrupt when read, and no writes object is this small."""
    found = Layout.kind_in_thread(thread_prefix, key) if size == len(ERASURE_MARKER) else None
    return found is not None and found[1] in ("c", "w")
