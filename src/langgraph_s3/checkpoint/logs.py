"""DeltaChannel logs: each checkpoint carries the writes since its delta seeds.

LangGraph rebuilds a ``DeltaChannel`` from its seed (the value at the nearest
ancestor that stored one) and every write since (``get_delta_channel_history``).
Found by walking the ancestors, that is one GET per ancestor's write object:
hundreds, late in a conversation. Instead the put of each checkpoint stores, for
every delta channel the checkpoint does not snapshot, its *log*: where the seed's
value is held, and the writes since as runs (runs.py) of ``[task_id, type,
bytes]`` elements. A put appends its parent's writes to its parent's log: only
those are new, the older runs are named by the objects holding them, and runs
merge two by two (a binary counter), so a log of ``n`` writes is at most
``log2(n)`` runs. A cold read of any checkpoint's history is then its envelope,
then its runs and its seed together.

A put continues its parent's log only when this process knows that log and the
parent's writes: it stored or read the parent (``LogState``), and the writes
made since went through it. Otherwise the checkpoint has no log, and reads walk
the ancestors as before until a snapshot starts a log afresh. A log holds its
parent's writes as they were when the checkpoint was stored: the writes that
made it. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import ormsgpack
from langgraph.checkpoint.base import DeltaChannelHistory, PendingWrite
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from langgraph_s3.core import codec
from langgraph_s3.core.keys import NamespaceKeys
from langgraph_s3.core.runs import (
    RawValue,
    Ref,
    Runs,
    Seed,
    Tip,
    absorb,
    check_closed,
    closed_array,
)
from langgraph_s3.core.values import Holders, decode_value, typed_value, value_keys
from langgraph_s3.errors import CorruptObjectError

LOG_FANOUT = 2
"""Runs of one level that merge: two, so a log of n writes is at most log2(n) runs
(each write is copied once per level it climbs: log2(n) times in all)."""


@dataclass(slots=True)
class LogState:
    """What a put continuing one checkpoint needs for its children's logs.

    Made by the checkpoint's put (before its first request) or read; a task's writes
    may come first (LangGraph saves them while the previous checkpoint's put is
    still running): they make it with the namespace's known delta channels, or none.
    """

    delta: frozenset[str]
    """The delta channels whose writes to the checkpoint are all recorded here."""
    seeds: dict[str, Seed] = field(default_factory=dict)
    """Delta channels the checkpoint holds a value of: a child's log starts there."""
    tips: dict[str, tuple[Seed | None, Tip]] = field(default_factory=dict)
    """Delta channels with a log at the checkpoint: a child's log continues it."""
    writes: dict[tuple[str, int], tuple[str, str, codec.Typed]] = field(default_factory=dict)
    """(task_id, idx) -> (task_path, channel, value): its writes to delta channels."""

    def record(
        self,
        task_id: str,
        task_path: str,
        writes: Iterable[tuple[int, str, Any]],
        *,
        stored: bool = False,
    ) -> None:
        """Writes made against the checkpoint: first write wins per index, unless
        ``stored`` (what the store holds wins over what this process sent)."""
        for idx, ch, typed in writes:
            if ch in self.delta:
                if stored:
                    self.writes[(task_id, idx)] = (task_path, ch, typed)
                else:
                    self.writes.setdefault((task_id, idx), (task_path, ch, typed))

    def fill(
        self,
        tail: str,
        env: codec.CheckpointEnvelope,
        seeds: Mapping[str, Seed],
    ) -> None:
        """The checkpoint is stored (or read): its children's logs may continue it."""
        self.seeds = {ch: s for ch, s in seeds.items() if ch in self.delta}
        self.tips = {ch: log.tip(tail) for ch, log in env.logs.items() if ch in self.delta}

    def elements(self, ch: str) -> list[bytes]:
        """The checkpoint's writes to ``ch`` as log elements, in pending-write order."""
        mine = sorted(
            ((path, tid, idx), typed)
            for (tid, idx), (path, c, typed) in self.writes.items()
            if c == ch
        )
        return [ormsgpack.packb([order[1], t[0], t[1]]) for order, t in mine]


def delta_channels(md: Mapping[str, Any] | None, values: Mapping[str, Any]) -> frozenset[str]:
    """A checkpoint's delta channels: those its metadata counts updates of since their
    snapshots, and those it holds a snapshot of (a snapshot resets their count)."""
    counted = ((md or {}).get("counters_since_delta_snapshot") or {}).keys()
    snapped = (ch for ch, v in values.items() if isinstance(v, _DeltaSnapshot))
    return frozenset([*counted, *snapped])


def adopt(existing: LogState | None, delta: frozenset[str]) -> LogState:
    """The state of a checkpoint being stored or read with these delta channels: writes
    recorded before (under a smaller set, or none) keep only what they covered."""
    if existing is None:
        return LogState(delta)
    existing.delta = existing.delta & delta
    return existing


@dataclass(frozen=True, slots=True)
class Continued:
    """A child's log, planned: the parent's seed and runs, and the new elements."""

    seed: Seed | None
    parent: Tip | None
    new: list[bytes]

    def absorbed(self) -> tuple[Ref, ...]:
        """The parent's runs the child's own run merges (their bytes are needed)."""
        if self.parent is None or not self.new:
            return ()
        n, _ = absorb(self.parent.refs, LOG_FANOUT)
        return self.parent.refs[len(self.parent.refs) - n :]

    def runs(self, merged: Sequence[bytes]) -> Runs:
        """The child's runs; ``merged``: the bytes of :meth:`absorbed`, in order."""
        if self.parent is None:
            return Runs((), len(self.new), b"".join(self.new) if self.new else None, 0)
        if not self.new:  # nothing written: the parent's log, pointed at
            return Runs(self.parent.refs, self.parent.count)
        n, level = absorb(self.parent.refs, LOG_FANOUT)
        kept = self.parent.refs[: len(self.parent.refs) - n]
        return Runs(kept, self.parent.count + len(self.new), b"".join([*merged, *self.new]), level)


def continued(state: LogState | None, ch: str) -> Continued | None:
    """How a child of the checkpoint ``state`` describes continues ``ch``'s log; None
    when this process cannot know it (the child then has no log)."""
    if state is None or ch not in state.delta:
        return None
    if ch in state.seeds:
        return Continued(state.seeds[ch], None, state.elements(ch))
    if ch in state.tips:
        seed, tip = state.tips[ch]
        return Continued(seed, tip, state.elements(ch))
    return None


def logged_channels(md: Mapping[str, Any] | None, present: Iterable[str]) -> list[str]:
    """The delta channels a checkpoint with this metadata needs a log for."""
    counters = (md or {}).get("counters_since_delta_snapshot") or {}
    have = set(present)
    return [ch for ch in counters if ch not in have]


def seed_envelope(seed: Seed, ch: str) -> codec.CheckpointEnvelope:
    """An envelope holding nothing but the seed's value, as the checkpoint holding it
    would: ``values.value_keys`` and ``values.typed_value`` then read it."""
    where = seed.where
    return codec.CheckpointEnvelope(
        checkpoint=("", b""),
        metadata=("", b""),
        present=(ch,),
        written=(),
        held={ch: where} if isinstance(where, str) else {},
        runs={ch: Runs(where.refs, where.count)} if isinstance(where, Tip) else {},
        raw={ch: where.kind} if isinstance(where, RawValue) else {},
    )


def seeds_of(held: Holders) -> dict[str, Seed]:
    """Where a checkpoint holds each of its values, as seeds of its children's logs."""
    return {ch: Seed(version, where) for ch, (version, where) in held.items()}


def run_keys(keys: NamespaceKeys, env: codec.CheckpointEnvelope, ch: str) -> list[str]:
    """The objects holding one log's older runs and its seed's value."""
    log = env.logs[ch]
    out = [keys.prefix + r.key for r in log.runs.refs]
    if log.seed is not None:
        senv = seed_envelope(log.seed, ch)
        out += value_keys(keys, "", senv, {ch: log.seed.version})[ch]
    return out


def needed(
    keys: NamespaceKeys, env: codec.CheckpointEnvelope, channels: Sequence[str]
) -> list[str] | None:
    """The objects the histories of ``channels`` need; None when one has no log."""
    if not channels or any(ch not in env.logs for ch in channels):
        return None
    return [k for ch in channels for k in run_keys(keys, env, ch)]


def referenced(keys: NamespaceKeys, env: codec.CheckpointEnvelope) -> list[str]:
    """Every object the checkpoint's logs refer to (kept by maintenance)."""
    return [k for ch in env.logs for k in run_keys(keys, env, ch)]


def own_run(keys: NamespaceKeys, ch: str, key: str, body: bytes) -> bytes:
    """The bytes of one run of ``ch``'s log held by the object ``key``."""
    with codec.reading(key):
        if key.startswith(keys.blobs):
            return codec.unpack_run(key, body)  # a large run: its bytes alone
        log = codec.load_checkpoint(body).logs.get(ch)
    if log is None or log.runs.own is None:
        raise CorruptObjectError(key, f"holds no log run of channel {ch!r}, yet one refers to it")
    return log.runs.own


def histories(
    serde: SerializerProtocol,
    keys: NamespaceKeys,
    ck_key: str,
    env: codec.CheckpointEnvelope,
    channels: Sequence[str],
    bodies: Mapping[str, bytes | None],
    envs: dict[str, codec.CheckpointEnvelope],
) -> dict[str, DeltaChannelHistory]:
    """Per-channel seed and writes (oldest first), from the objects ``needed`` named."""
    gone = sorted(k for ch in channels for k in run_keys(keys, env, ch) if bodies.get(k) is None)
    if gone:
        raise CorruptObjectError(", ".join(gone), f"missing: the log of {ck_key!r} refers to it")
    present = cast(Mapping[str, bytes], bodies)
    out: dict[str, DeltaChannelHistory] = {}
    for ch in channels:
        log = env.logs[ch]
        held = [keys.prefix + r.key for r in log.runs.refs]
        parts = [own_run(keys, ch, k, present[k]) for k in held]
        if log.runs.own is not None:
            parts.append(log.runs.own)
        with codec.reading(ck_key):
            items = check_closed(
                ormsgpack.unpackb(closed_array(log.runs.count, parts)), log.runs.count
            )
            writes: list[PendingWrite] = [
                (str(tid), ch, serde.loads_typed((str(kind), data))) for tid, kind, data in items
            ]
        entry: DeltaChannelHistory = {"writes": writes}
        if log.seed is not None:
            senv = seed_envelope(log.seed, ch)
            where = value_keys(keys, "", senv, {ch: log.seed.version})[ch]
            typed, _ = typed_value(keys, "", senv, ch, where, present, envs)
            entry["seed"] = decode_value(serde, where[-1], ch, typed, senv.runs.get(ch))
        out[ch] = entry
    return out
