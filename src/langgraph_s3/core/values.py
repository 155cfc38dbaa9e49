"""Where a checkpoint's channel values live, and how to read them back. Pure, no I/O.

A value is stored once, by the put whose checkpoint changed its channel:

* **inline**, in that checkpoint's own object, when it is small (at most
  :data:`INLINE_MAX` serialized bytes): the put is then one object, so one
  request, and a read of that checkpoint needs no request for the value;
* as **runs** (runs.py) when it is a list that grows by appending: the put
  stores only the new elements, and names the objects holding the older ones;
* as a **blob** ``b/<channel>/<version>`` otherwise, and for every value of an
  envelope written before inline values existed (envelope version 1).

A later checkpoint whose channel did not change points at the object that holds
the value (its envelope's ``held``; for runs, the same list of runs), so an
unchanged channel is never stored twice. Every holder is one GET, cached in
process like every immutable object.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_s3.core import codec
from langgraph_s3.core.keys import NamespaceKeys
from langgraph_s3.core.runs import (
    MSGPACK,
    RawValue,
    Ref,
    Runs,
    Tip,
    Where,
    check_closed,
    closed_array,
)
from langgraph_s3.errors import CorruptObjectError

INLINE_MAX = 256 * 1024
"""Largest serialized value (or run) kept inline; a larger one is a blob written
before the checkpoint (so the put takes a round trip more)."""


Holders = dict[str, tuple[Any, Where]]
"""channel -> (its version, where the value is): what the next put points at."""


def value_keys(
    keys: NamespaceKeys, ck_key: str, env: codec.CheckpointEnvelope, versions: Mapping[str, Any]
) -> dict[str, list[str]]:
    """channel -> the keys of the objects holding its value (``ck_key`` for its own)."""
    out: dict[str, list[str]] = {}
    for ch in env.present:
        runs = env.runs.get(ch)
        if runs is not None:
            out[ch] = [keys.prefix + r.key for r in runs.refs]
            if runs.own is not None:
                out[ch].append(ck_key)
        elif ch in env.inline:
            out[ch] = [ck_key]
        elif ch in env.held:
            out[ch] = [keys.checkpoint_at(env.held[ch])]
        else:
            out[ch] = [keys.blob(ch, versions[ch])]
    return out


def typed_value(
    keys: NamespaceKeys,
    ck_key: str,
    env: codec.CheckpointEnvelope,
    ch: str,
    where: list[str],
    bodies: Mapping[str, bytes],
    envs: dict[str, codec.CheckpointEnvelope] | None = None,
) -> tuple[codec.Typed, bytes | None]:
    """The serialized value of ``ch`` at checkpoint ``ck_key`` (envelope ``env``), from
    the bodies of the objects ``where`` names; for runs, also the digest a put
    continuing this list checks its prefix by. CorruptObjectError when a holder
    does not hold what the envelope says. ``envs``: holders already decoded by the
    caller's earlier calls (the checkpoints of one listing share most of theirs)."""
    memo = {} if envs is None else envs
    runs = env.runs.get(ch)
    if runs is None:
        key = where[0]
        if key == ck_key:
            return env.inline[ch], None
        if ch in env.raw:
            return codec.raw_typed(env.raw[ch], bodies[key]), None
        return _held_value(keys, ch, key, bodies[key], memo), None
    parts = [_run_at(keys, ch, k, bodies[k], memo) for k in where[: len(runs.refs)]]
    if runs.own is not None:
        parts.append(runs.own)
    h = hashlib.blake2b(digest_size=16)
    for p in parts:
        h.update(p)
    return (MSGPACK, closed_array(runs.count, parts)), h.digest()


def _holder(
    key: str, body: bytes, memo: dict[str, codec.CheckpointEnvelope]
) -> codec.CheckpointEnvelope:
    env = memo.get(key)
    if env is None:
        env = memo[key] = codec.load_checkpoint(body)
    return env


def _held_value(
    keys: NamespaceKeys,
    ch: str,
    key: str,
    body: bytes,
    memo: dict[str, codec.CheckpointEnvelope],
) -> codec.Typed:
    with codec.reading(key):
        if key.startswith(keys.blobs):
            return codec.load_blob(body)
        typed = _holder(key, body, memo).inline.get(ch)
    if typed is None:
        raise CorruptObjectError(key, f"holds no value of channel {ch!r}, yet one refers to it")
    return typed


def _run_at(
    keys: NamespaceKeys,
    ch: str,
    key: str,
    body: bytes,
    memo: dict[str, codec.CheckpointEnvelope],
) -> bytes:
    with codec.reading(key):
        if key.startswith(keys.blobs):
            return codec.unpack_run(key, body)  # a large run: its bytes alone
        runs = _holder(key, body, memo).runs.get(ch)
    if runs is None or runs.own is None:
        raise CorruptObjectError(key, f"holds no run of channel {ch!r}, yet one refers to it")
    return runs.own


def decode_value(
    serde: SerializerProtocol, key: str, ch: str, typed: codec.Typed, runs: Runs | None
) -> Any:
    """The value; for runs (read as a ``closed_array``), checked to hold exactly the
    elements they name."""
    with codec.reading(key):
        if typed[0] == codec.UTF8:  # a large string (placement.utf8_blob): no copy first
            return typed[1].decode("utf-8")
        value = serde.loads_typed(typed)
    if runs is not None:
        try:
            return check_closed(value, runs.count)
        except ValueError:
            raise CorruptObjectError(
                key, f"the runs of channel {ch!r} do not make the {runs.count} elements it names"
            ) from None
    return value


def holders(
    keys: NamespaceKeys,
    ck_key: str,
    env: codec.CheckpointEnvelope,
    versions: Mapping[str, Any],
    digests: Mapping[str, bytes | None],
) -> Holders:
    """What a put continuing this checkpoint needs to point at its unchanged values
    (``digests``: of the lists stored as runs, from reading or writing them)."""
    tail = keys.tail(ck_key)
    out: Holders = {}
    for ch in env.present:
        runs = env.runs.get(ch)
        digest = digests.get(ch)
        if runs is not None:
            if digest is None:
                continue  # not read: the next put stores the list whole
            refs = runs.refs
            if runs.own is not None:
                refs = (*refs, Ref(f"c/{tail}", runs.own_count, runs.level))
            out[ch] = (versions[ch], Tip(refs, runs.count, digest))
        elif ch in env.inline:
            out[ch] = (versions[ch], tail)
        elif ch in env.held:
            out[ch] = (versions[ch], env.held[ch])
        elif ch in env.raw:
            out[ch] = (versions[ch], RawValue(env.raw[ch]))
        else:
            out[ch] = (versions[ch], None)
    return out
