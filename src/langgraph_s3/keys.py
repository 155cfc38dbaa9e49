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

from .errors import InvalidIdError

logger = logging.getLogger(__name__)

MAX_COMPONENT = 120
"""Longest encoded component kept readable; longer ones are hashed."""
MAX_CHECKPOINT_ID_BYTES = 64
"""Checkpoint ids are uuid6 strings (36 bytes); this bounds key length."""
MAX_PREFIX_BYTES = 200
MAX_ID_BYTES = 16 * 1024
"""Longest id (thread, namespace, task, run, label): the manifest keeps thread ids and
namespaces verbatim, and a DynamoDB item holds at most 400 KB. Checked before any
request, so an id that cannot be stored never leaves a half-written checkpoint."""

_warned: set[str] = set()
"""Foreign keys already reported (bounded)."""
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_ESCAPE = tuple(chr(b) if b in _SAFE else f"~{b:02x}" for b in range(256))
_HEX = frozenset("0123456789abcdef")


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
    return "".join([f"{255 - b:02x}" for b in _checkpoint_id_bytes(checkpoint_id)])


def uninvert_id(inverted: str) -> str:
    return bytes(255 - int(inverted[i : i + 2], 16) for i in range(0, len(inverted), 2)).decode()


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


def _is_inverted(hexed: str) -> bool:
    return (
        bool(hexed)
        and len(hexed) % 2 == 0
        and len(hexed) <= 2 * MAX_CHECKPOINT_ID_BYTES
        and set(hexed) <= _HEX
    )


class Layout:
    """Builds every key under one bucket prefix."""

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

    def namespace(self, thread_id: str, checkpoint_ns: str) -> str:
        return f"{self.thread(thread_id)}ns/{encode(checkpoint_ns, 'checkpoint_ns')}/"

    def checkpoints(self, ns_prefix: str) -> str:
        return f"{ns_prefix}c/"

    def writes(self, ns_prefix: str) -> str:
        return f"{ns_prefix}w/"

    def blobs(self, ns_prefix: str) -> str:
        return f"{ns_prefix}b/"

    # -- objects ----------------------------------------------------------
    def checkpoint(
        self, ns_prefix: str, checkpoint_id: str, parent_id: str | None, run_id: str | None
    ) -> str:
        return f"{ns_prefix}c/{checkpoint_tail(checkpoint_id, parent_id, run_id)}"

    def checkpoint_id_prefix(self, ns_prefix: str, checkpoint_id: str) -> str:
        """Prefix shared by the key(s) of one checkpoint id."""
        return f"{ns_prefix}c/{invert_id(checkpoint_id)}x"

    def older_than(self, ns_prefix: str, checkpoint_id: str) -> str:
        """StartAfter value that skips ``checkpoint_id`` and everything newer."""
        return f"{ns_prefix}c/{invert_id(checkpoint_id)}y"

    def writes_of(self, ns_prefix: str, checkpoint_id: str) -> str:
        return f"{ns_prefix}w/{invert_id(checkpoint_id)}x/"

    def writes_older_than(self, ns_prefix: str, checkpoint_id: str) -> str:
        return f"{ns_prefix}w/{invert_id(checkpoint_id)}y"

    def write(self, ns_prefix: str, checkpoint_id: str, task_id: str, slot: str) -> str:
        return f"{self.writes_of(ns_prefix, checkpoint_id)}{encode(task_id, 'task_id')}/{slot}"

    def blob(self, ns_prefix: str, channel: str, version: str | int | float) -> str:
        return f"{ns_prefix}b/{encode(channel, 'channel')}/{version_token(version)}"

    # -- parsing ----------------------------------------------------------
    def parse_checkpoint(self, ns_prefix: str, key: str) -> CheckpointKey:
        return parse_checkpoint_tail(key, key[len(ns_prefix) + 2 :])

    def listed_checkpoints(self, ns_prefix: str, keys: Iterable[str]) -> list[CheckpointKey]:
        """The checkpoint keys of a listing; anything else found there (a console folder
        marker, a stray upload) is skipped with a warning, never served nor fatal."""
        out: list[CheckpointKey] = []
        for key in keys:
            try:
                out.append(self.parse_checkpoint(ns_prefix, key))
            except InvalidIdError:
                if key not in _warned:  # once per key and process, not per read
                    if len(_warned) >= 4096:
                        _warned.clear()
                    _warned.add(key)
                    logger.warning("ignoring %r: not a checkpoint key written by langgraph-s3", key)
        return out

    def checkpoint_of_write(self, ns_prefix: str, key: str) -> str:
        """The inverted checkpoint id a write key belongs to."""
        return key[len(ns_prefix) + 2 :].partition("x")[0]

    # -- the store ------------------------------------------------------------
    def store_namespace(self, labels: tuple[str, ...]) -> str:
        """Prefix of every item in ``labels`` and below: whole labels only."""
        return f"{self.root}store/i/" + "".join(f"{encode(x, 'namespace label')}/" for x in labels)

    def store_item(self, labels: tuple[str, ...], key: str) -> str:
        return f"{self.store_namespace(labels)}.{encode(key, 'key')}"

    def store_segments(self, labels: tuple[str, ...]) -> str:
        return f"{self.root}store/s/" + "".join(f"{encode(x, 'namespace label')}/" for x in labels)

    def store_segment(self, labels: tuple[str, ...]) -> str:
        return f"{self.store_segments(labels)}.seg"

    def parse_store_key(self, key: str, kind: str = "i") -> tuple[tuple[str, ...], str] | None:
        """(namespace, item key) of an item or segment key; None if a part was hashed."""
        parts = key[len(f"{self.root}store/{kind}/") :].split("/")
        *labels, last = parts
        if not last.startswith(".") or any(p.startswith("~~") for p in parts):
            return None
        return tuple(decode(x) for x in labels), decode(last[1:]) if kind == "i" else ""
