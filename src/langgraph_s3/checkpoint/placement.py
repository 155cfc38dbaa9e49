"""Where each channel value of a checkpoint lives: the pure half of ``put``.

:func:`place` decides, with no request, for every value a checkpoint holds: a pointer
to where its parent keeps an unchanged value, runs of a list (a blob only for the new
elements), inline in the checkpoint object, or a blob of its own. The writer then
stores what it returns. Serializing everything here, before the first request, is what
makes bad input write nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import ChannelVersions
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_s3.core import codec
from langgraph_s3.core.keys import NamespaceKeys
from langgraph_s3.core.runs import RawValue, Ref, Runs, Tip, elements, plan
from langgraph_s3.core.values import INLINE_MAX, Holders

__all__ = ["Placement", "place", "utf8_blob"]


@dataclass
class Placement:
    """Where each value of one checkpoint lives, and the blobs to store first."""

    present: tuple[str, ...]
    """The channels the checkpoint has a value for, in its versions' order."""
    inline: dict[str, codec.Typed] = field(default_factory=dict)
    """Small values, in the checkpoint object."""
    held: dict[str, str] = field(default_factory=dict)
    """Unchanged values: the tail of the checkpoint object that holds each inline."""
    runs: dict[str, Runs] = field(default_factory=dict)
    """Lists: their runs (earlier checkpoints' blobs, this one's new elements)."""
    raw: dict[str, str] = field(default_factory=dict)
    """Values in a blob of their own, by the type their bytes are (``codec.UTF8``...)."""
    digests: dict[str, bytes | None] = field(default_factory=dict)
    """Of the lists stored as runs: what the next checkpoint compares with."""
    blobs: list[tuple[str, bytes]] = field(default_factory=list)
    """(key, body) of the blobs to store before the checkpoint object."""


def utf8_blob(serde: SerializerProtocol, value: Any) -> bytes | None:
    """A string over ``INLINE_MAX`` as its UTF-8 bytes (one copy), when the serializer is
    LangGraph's own: its msgpack buffer grows by doubling, to ~1.7 times the value."""
    if type(value) is not str or len(value) <= INLINE_MAX:  # a str subclass keeps its type
        return None
    if type(serde) is not JsonPlusSerializer:  # a subclass may encrypt: never bypass it
        return None
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the serializer says what it says
        return None


def place(
    serde: SerializerProtocol,
    keys: NamespaceKeys,
    values: Mapping[str, Any],
    versions: Mapping[str, Any],
    new_versions: ChannelVersions,
    known: Holders | None,
) -> Placement:
    """Decide where every value of a checkpoint lives; no request is made.

    Args:
        serde: the saver's serializer.
        keys: the namespace's keys (blob keys are built from them).
        values: the checkpoint's channel values.
        versions: its channel versions.
        new_versions: the channels this step changed.
        known: where the parent keeps its values (``values.holders``), when this
            process knows it in the life it reads: an unchanged value points there.

    Cost: CPU only, one serialization of each changed value (a list's new elements).
    """
    out = Placement(tuple(ch for ch in versions if ch in values))
    for ch in out.present:
        was = known.get(ch) if known is not None else None
        if ch not in new_versions and was is not None and was[0] == versions[ch]:
            _point(out, ch, was[1])  # unchanged: where the parent keeps it
            continue
        # changed, or unchanged but where the parent keeps it is not known here
        _store(out, serde, keys, ch, values[ch], versions[ch], was)
    return out


def _point(out: Placement, ch: str, where: Any) -> None:
    if isinstance(where, Tip):
        out.runs[ch] = Runs(where.refs, where.count)
        out.digests[ch] = where.digest
    elif isinstance(where, RawValue):
        out.raw[ch] = where.kind
    elif where is not None:
        out.held[ch] = where


def _store(
    out: Placement,
    serde: SerializerProtocol,
    keys: NamespaceKeys,
    ch: str,
    value: Any,
    version: Any,
    was: tuple[Any, Any] | None,
) -> None:
    encs = elements(serde, value)
    if encs is not None:
        planned = plan(encs, was[1] if was is not None and isinstance(was[1], Tip) else None)
        r = planned.runs
        if r.own is not None and len(r.own) > INLINE_MAX:
            # keyed by the elements it holds: the same key is the same bytes
            bkey, bbody = codec.pack_run(
                keys.run_blob(ch, version, r.count - r.own_count, r.count), r.own
            )
            out.blobs.append((bkey, bbody))
            ref = Ref(bkey[len(keys.prefix) :], r.own_count, r.level)
            r = Runs((*r.refs, ref), r.count, None, r.level)
        out.runs[ch] = r
        out.digests[ch] = planned.digest
        return
    text = utf8_blob(serde, value)
    if text is not None:  # a large string: its UTF-8 bytes, no serializer buffer
        out.blobs.append((keys.blob(ch, version), text))
        out.raw[ch] = codec.UTF8
        return
    typed = serde.dumps_typed(value)
    if len(typed[1]) <= INLINE_MAX:
        out.inline[ch] = typed
    else:  # the serialized bytes as they are (a copy of 100 MB costs 100 MB)
        out.blobs.append((keys.blob(ch, version), typed[1]))
        out.raw[ch] = typed[0]
