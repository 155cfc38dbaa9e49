"""Envelopes: the bytes of checkpoint, write and blob objects. Pure, no I/O.

The serializer's ``(type, bytes)`` pairs are stored exactly as
``serde.dumps_typed`` returned them; the envelope around them is msgpack.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import ormsgpack
import zstandard
from cachetools import LRUCache

from langgraph_s3.core import zdict
from langgraph_s3.core.runs import Log, Runs
from langgraph_s3.errors import (
    ConfigurationError,
    CorruptObjectError,
    InvalidRequestError,
    NewerFormatError,
)

COMPRESS_MIN = 1024
"""Checkpoint and writes objects at least this large are zstd-compressed when that
saves a tenth or more (prose, message structure and ids compress about 2-3x)."""
COMPRESS_MAX = 8 * 1024 * 1024
"""Larger objects are stored as they are, and no object inflates beyond this: a
crafted frame (zeros compress ~30,000:1) cannot make a reader allocate gigabytes."""
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
"""A zstd frame's first bytes; a msgpack map never starts with 0x28."""
DICT_MARK = 0xC1
"""First byte of an object compressed with one of our dictionaries (zdict.py), then the
dictionary's version, then the zstd frame: 0xc1 is the one byte msgpack never uses."""
DICT_VERSION = 1
_DICTS = {1: zstandard.ZstdCompressionDict(zdict.V1, dict_type=zstandard.DICT_TYPE_RAWCONTENT)}
ENVELOPE_VERSION = 1
"""Writes envelopes; checkpoint envelopes of this version keep every value in a blob."""
CHECKPOINT_VERSION = 2
"""Checkpoint envelopes that may hold values (``inline``) and point at holders (``held``)."""
Typed = tuple[str, bytes]
CARRY_MAX = 64 * 1024
"""Write objects up to this size are carried by their checkpoint's children
(``CheckpointEnvelope.carried``); a larger one is fetched by a history read."""


class _Newer(Exception):
    """(found version, newest known): an object a newer release wrote."""


class _Sealed(Exception):
    """A subject's sealed body, read by a saver that declares no subjects."""


SEALED_MARK = b"\xc1\x0fLGS3"
"""A sealed body's first bytes (``core/sealing.py``'s MAGIC without its version)."""


def dump_blob(typed: Typed) -> bytes:
    """A channel value: one length-prefixed type tag, then the serialized bytes."""
    tag = typed[0].encode("utf-8")
    if len(tag) > 255:
        raise InvalidRequestError(
            f"serializer type tag {typed[0][:40]!r}... is over 255 bytes: use a serializer "
            "with shorter type names"
        )
    return bytes((len(tag),)) + tag + typed[1]


ZSTD_SUFFIX = ".zst"
"""Ends the key of a run blob stored compressed (runs.py, logs.py)."""


def pack_run(key: str, run: bytes) -> tuple[str, bytes]:
    """A large run's blob: zstd-compressed when that saves a tenth or more and it is at
    most :data:`COMPRESS_MAX` (a merged run of prose compresses about 3.5x), its key
    then ending in ``.zst``; otherwise its bytes as they are (no copy)."""
    if len(run) > COMPRESS_MAX:
        return key, run
    small = zstandard.ZstdCompressor(level=3).compress(run)
    if len(small) * 10 > len(run) * 9:
        return key, run
    return key + ZSTD_SUFFIX, small


def unpack_run(key: str, body: bytes) -> bytes:
    """A run blob's bytes (``pack_run``), named in the error when they are not."""
    if not key.endswith(ZSTD_SUFFIX):
        return body
    with reading(key):
        return _inflate(body)


UTF8 = "langgraph-s3/utf8"
"""The raw kind of a large string stored as its UTF-8 bytes (``placement.utf8_blob``)."""


def raw_typed(kind: str, body: bytes) -> Typed:
    """A raw blob's bytes as the serializer wants them: a value that *is* bytes gets its
    own type back (the body may be a bytearray read without a copy)."""
    if kind == "bytes" and not isinstance(body, bytes):
        return kind, bytes(body)
    return kind, body


def load_blob(body: bytes) -> Typed:
    n = body[0]
    return body[1 : 1 + n].decode("utf-8"), bytes(body[1 + n :])


@dataclass(frozen=True, slots=True)
class CheckpointEnvelope:
    checkpoint: Typed
    """The checkpoint without ``channel_values``."""
    metadata: Typed
    present: tuple[str, ...]
    """Channels that had a value at this checkpoint: only their values are read."""
    written: tuple[str, ...]
    """Channels whose new values this checkpoint's put stored (inline or as blobs)."""
    inline: dict[str, Typed] = field(default_factory=dict)
    """Values stored in this object itself (small ones): no request of their own."""
    held: dict[str, str] = field(default_factory=dict)
    """Channel -> key tail of the (older) checkpoint object whose ``inline`` holds its
    value at this checkpoint's version. A present channel in neither is a blob."""
    runs: dict[str, Runs] = field(default_factory=dict)
    """Lists stored as runs (runs.py): the older runs by holder, this put's inline."""
    raw: dict[str, str] = field(default_factory=dict)
    """Channel -> the type of its value, stored as a blob of the serialized bytes alone
    (no copy joins a tag to a large value on put, none slices it off on get). A blob
    of a channel not named here starts with its type tag (``dump_blob``)."""
    carried: tuple[tuple[str, str, bytes], ...] = ()
    """The parent's write objects as this put's process knew them: (key relative to the
    namespace, ETag, uncompressed writes envelope). A history read uses a copy only when
    the listing shows that key with that ETag (reading.py), and reads the rest."""
    logs: dict[str, Log] = field(default_factory=dict)
    """DeltaChannel -> its seed and the writes since (logs.py), for the channels this
    checkpoint does not snapshot. An envelope without (older) is read by walking."""


def _carried(raw: Any) -> tuple[tuple[str, str, bytes], ...]:
    out = []
    for item in raw:
        if not (
            isinstance(item, list)
            and len(item) == 3
            and isinstance(item[0], str)
            and isinstance(item[1], str)
            and isinstance(item[2], bytes)
            and len(item[2]) <= CARRY_MAX
        ):
            raise ValueError("a carried write is not [key, etag, bytes] of at most 64 KiB")
        out.append((item[0], item[1], item[2]))
    return tuple(out)


def dump_checkpoint(env: CheckpointEnvelope) -> bytes:
    raw: dict[str, Any] = {
        "v": CHECKPOINT_VERSION,
        "checkpoint": [env.checkpoint[0], env.checkpoint[1]],
        "metadata": [env.metadata[0], env.metadata[1]],
        "present": list(env.present),
        "written": list(env.written),
    }
    if env.inline:
        raw["inline"] = {ch: [t[0], t[1]] for ch, t in env.inline.items()}
    if env.held:
        raw["held"] = env.held
    if env.runs:
        raw["runs"] = {ch: r.dump() for ch, r in env.runs.items()}
    if env.raw:
        raw["raw"] = env.raw
    if env.logs:
        raw["logs"] = {ch: log.dump() for ch, log in env.logs.items()}
    if env.carried:
        raw["carried"] = [[k, e, b] for k, e, b in env.carried]
    return _pack(raw)


def _pack(raw: dict[str, Any]) -> bytes:
    body = ormsgpack.packb(raw)
    if not COMPRESS_MIN <= len(body) <= COMPRESS_MAX:
        return body
    frame = zstandard.ZstdCompressor(level=3, dict_data=_DICTS[DICT_VERSION]).compress(body)
    if (len(frame) + 2) * 10 > len(body) * 9:
        return body
    return bytes((DICT_MARK, DICT_VERSION)) + frame


def unpack_body(body: bytes) -> Any:
    """A stored object's bytes as the msgpack value they hold, inflated first (by its
    dictionary, or plain zstd); a ValueError (the caller names the object) on damage,
    a frame over ``COMPRESS_MAX`` or a later release's dictionary."""
    if body[:4] == ZSTD_MAGIC:  # plain zstd (objects written before the dictionaries)
        body = _inflate(body)
    elif body[:1] == bytes((DICT_MARK,)):
        if bytes(body[: len(SEALED_MARK)]) == SEALED_MARK:
            raise _Sealed
        version = body[1] if len(body) > 1 else -1
        if version not in _DICTS:
            if DICT_VERSION < version < 16:  # a later release's (damage is rarely this)
                raise _Newer(f"dictionary {version}", f"dictionary {DICT_VERSION}")
            raise ValueError(f"unknown compression dictionary {version}")
        body = _inflate(memoryview(body)[2:], _DICTS[version])
    return ormsgpack.unpackb(body)


def _inflate(body: bytes | memoryview, dictionary: Any = None) -> bytes:
    size = zstandard.frame_content_size(body)
    if not 0 <= size <= COMPRESS_MAX:
        raise ValueError(f"a zstd frame of {size} bytes (at most {COMPRESS_MAX} are written)")
    z = zstandard.ZstdDecompressor(dict_data=dictionary)
    out: bytes = z.decompress(body, max_output_size=COMPRESS_MAX)
    return out


MEMO_MAX = 16 * 1024
"""Envelope bodies up to this size are decoded once per process while they stay in
:data:`_MEMO` (a read of a chat's latest decodes the envelopes of the checkpoints
holding its older runs: the same ones at every warm read)."""
MEMO_BYTES = 4 * 1024 * 1024
"""Bytes of bodies whose envelopes :data:`_MEMO` keeps (a chat's envelope is ~1-4 KB)."""
_MEMO: LRUCache[bytes, tuple[CheckpointEnvelope, int]] = LRUCache(
    maxsize=MEMO_BYTES, getsizeof=lambda entry: entry[1]
)
_MEMO_LOCK = threading.Lock()


def load_checkpoint(body: bytes) -> CheckpointEnvelope:
    """The envelope ``body`` holds. Bodies up to :data:`MEMO_MAX` bytes are remembered
    by their bytes (a pure function of them): callers share the envelope returned and
    never change it (its values are frozen or treated as read-only)."""
    if len(body) > MEMO_MAX:
        return _load_checkpoint(body)
    key = body if type(body) is bytes else bytes(body)
    with _MEMO_LOCK:
        hit = _MEMO.get(key)
    if hit is not None:
        return hit[0]
    env = _load_checkpoint(key)
    with _MEMO_LOCK:
        _MEMO[key] = (env, max(1, len(key)))
    return env


def _load_checkpoint(body: bytes) -> CheckpointEnvelope:
    raw: dict[str, Any] = unpack_body(body)
    version = raw.get("v")
    if version not in (ENVELOPE_VERSION, CHECKPOINT_VERSION):
        if isinstance(version, int) and version > CHECKPOINT_VERSION:
            raise _Newer(version, CHECKPOINT_VERSION)  # named by reading()
        raise ValueError(f"unknown checkpoint envelope version {version!r}")  # named by reading()
    cp, md = raw["checkpoint"], raw["metadata"]
    return CheckpointEnvelope(
        checkpoint=(cp[0], cp[1]),
        metadata=(md[0], md[1]),
        present=tuple(raw["present"]),
        written=tuple(raw["written"]),
        inline={ch: (t[0], t[1]) for ch, t in (raw.get("inline") or {}).items()},
        held=dict(raw.get("held") or {}),
        runs={ch: Runs.load(r) for ch, r in (raw.get("runs") or {}).items()},
        raw=dict(raw.get("raw") or {}),
        logs={ch: Log.load(lg) for ch, lg in (raw.get("logs") or {}).items()},
        carried=_carried(raw.get("carried") or ()),
    )


@dataclass(frozen=True, slots=True)
class StoredWrite:
    task_id: str
    task_path: str
    idx: int
    channel: str
    value: Typed


def dump_writes(task_id: str, task_path: str, writes: list[tuple[int, str, Typed]]) -> bytes:
    return _pack(
        {
            "v": ENVELOPE_VERSION,
            "task_id": task_id,
            "task_path": task_path,
            "writes": [[idx, ch, t[0], t[1]] for idx, ch, t in writes],
        }
    )


def plain(body: bytes) -> bytes:
    """An object's msgpack bytes, decompressed if they were compressed (``_pack``)."""
    if body[:4] == ZSTD_MAGIC:
        return _inflate(body)
    if body[:1] == bytes((DICT_MARK,)) and len(body) > 1 and body[1] in _DICTS:
        return _inflate(memoryview(body)[2:], _DICTS[body[1]])
    return body


def keep_carried(into: dict[str, tuple[str, bytes]], key: str, etag: str, body: bytes) -> None:
    """Keep a write object (``body``, whose ETag is ``etag``) for a child to carry, when it
    is at most :data:`CARRY_MAX` both as stored and uncompressed."""
    if len(body) > CARRY_MAX:
        return
    raw = plain(body)
    if len(raw) <= CARRY_MAX:
        into[key] = (etag, bytes(raw))


def load_writes(body: bytes) -> list[StoredWrite]:
    raw: dict[str, Any] = unpack_body(body)
    if raw.get("v") != ENVELOPE_VERSION:
        version = raw.get("v")
        if isinstance(version, int) and version > ENVELOPE_VERSION:
            raise _Newer(version, ENVELOPE_VERSION)  # named by reading()
        raise ValueError(f"unknown writes envelope version {version!r}")  # named by reading()
    task_id, task_path = raw["task_id"], raw["task_path"]
    return [StoredWrite(task_id, task_path, w[0], w[1], (w[2], w[3])) for w in raw["writes"]]


@contextmanager
def reading(key: str) -> Iterator[None]:
    """Decode inside: bytes that cannot be decoded raise a CorruptObjectError naming ``key``."""
    try:
        yield
    except CorruptObjectError:
        raise
    except _Newer as exc:
        raise NewerFormatError(key, exc.args[0], exc.args[1]) from None
    except _Sealed:
        raise ConfigurationError(
            f"object {key!r} is sealed for a subject: open the saver with the deployment's "
            "subjects= and kms_key= (as its agents do) to read it"
        ) from None
    except Exception as exc:
        raise CorruptObjectError(key, f"{type(exc).__name__}: {exc}"[:300]) from exc
