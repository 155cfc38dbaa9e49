"""Envelopes: the bytes of checkpoint, write and blob objects. Pure, no I/O.

The serializer's ``(type, bytes)`` pairs are stored exactly as
``serde.dumps_typed`` returned them; the envelope around them is msgpack.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import ormsgpack

from .errors import CorruptObjectError, InvalidRequestError

ENVELOPE_VERSION = 1
Typed = tuple[str, bytes]


def dump_blob(typed: Typed) -> bytes:
    """A channel value: one length-prefixed type tag, then the serialized bytes."""
    tag = typed[0].encode("utf-8")
    if len(tag) > 255:
        raise InvalidRequestError(
            f"serializer type tag {typed[0][:40]!r}... is over 255 bytes: use a serializer "
            "with shorter type names"
        )
    return bytes((len(tag),)) + tag + typed[1]


def load_blob(body: bytes) -> Typed:
    n = body[0]
    return body[1 : 1 + n].decode("utf-8"), bytes(body[1 + n :])


@dataclass(frozen=True, slots=True)
class CheckpointEnvelope:
    checkpoint: Typed
    """The checkpoint without ``channel_values``."""
    metadata: Typed
    present: tuple[str, ...]
    """Channels that had a value at this checkpoint: only their blobs are read."""
    written: tuple[str, ...]
    """Channels whose blobs this checkpoint's put uploaded (completeness check)."""


def dump_checkpoint(env: CheckpointEnvelope) -> bytes:
    return ormsgpack.packb(
        {
            "v": ENVELOPE_VERSION,
            "checkpoint": [env.checkpoint[0], env.checkpoint[1]],
            "metadata": [env.metadata[0], env.metadata[1]],
            "present": list(env.present),
            "written": list(env.written),
        }
    )


def load_checkpoint(body: bytes) -> CheckpointEnvelope:
    raw: dict[str, Any] = ormsgpack.unpackb(body)
    if raw.get("v") != ENVELOPE_VERSION:
        raise ValueError(
            f"unknown checkpoint envelope version {raw.get('v')!r}"
        )  # named by reading()
    cp, md = raw["checkpoint"], raw["metadata"]
    return CheckpointEnvelope(
        checkpoint=(cp[0], cp[1]),
        metadata=(md[0], md[1]),
        present=tuple(raw["present"]),
        written=tuple(raw["written"]),
    )


@dataclass(frozen=True, slots=True)
class StoredWrite:
    task_id: str
    task_path: str
    idx: int
    channel: str
    value: Typed


def dump_writes(task_id: str, task_path: str, writes: list[tuple[int, str, Typed]]) -> bytes:
    return ormsgpack.packb(
        {
            "v": ENVELOPE_VERSION,
            "task_id": task_id,
            "task_path": task_path,
            "writes": [[idx, ch, t[0], t[1]] for idx, ch, t in writes],
        }
    )


def load_writes(body: bytes) -> list[StoredWrite]:
    raw: dict[str, Any] = ormsgpack.unpackb(body)
    if raw.get("v") != ENVELOPE_VERSION:
        raise ValueError(f"unknown writes envelope version {raw.get('v')!r}")  # named by reading()
    task_id, task_path = raw["task_id"], raw["task_path"]
    return [StoredWrite(task_id, task_path, w[0], w[1], (w[2], w[3])) for w in raw["writes"]]


@contextmanager
def reading(key: str) -> Iterator[None]:
    """Decode inside: bytes that cannot be decoded raise a CorruptObjectError naming ``key``."""
    try:
        yield
    except CorruptObjectError:
        raise
    except Exception as exc:
        raise CorruptObjectError(key, f"{type(exc).__name__}: {exc}"[:300]) from exc
