"""Loading checkpoints: stored objects to ``CheckpointTuple``s, and the bookkeeping
that tells a read its thread was repacked or replaced under it (read again)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_s3.checkpoint import logs
from langgraph_s3.checkpoint.context import SaverContext, config_of
from langgraph_s3.checkpoint.history import (
    fetch_values,
    fetch_writes,
    replayed,
    stored_writes,
    values_of,
)
from langgraph_s3.checkpoint.overlay import HeldOverlay
from langgraph_s3.checkpoint.packs import packed_view
from langgraph_s3.core import codec
from langgraph_s3.core.keys import CheckpointKey, NamespaceKeys, invert_id
from langgraph_s3.core.records import Entry, PackRef
from langgraph_s3.core.tasks import bounded_map, gather_all
from langgraph_s3.core.values import decode_value, holders, typed_value, value_keys
from langgraph_s3.errors import CorruptObjectError

OFF_LOOP = 1024 * 1024
"""Bytes of objects whose values one read decodes in a thread rather than on the
caller's event loop (a MiB of messages is ~10-50 ms of CPU)."""
FILTER_BATCH = 50
UNLIMITED_BATCH = 100
READ_ATTEMPTS = 6
"""Reads of a namespace before a read gives up on a thread its packing keeps moving
(each pack, repack or unpack between a read's manifest and its listing costs one)."""
STALE_REREADS = 3
"""Times a listing that predates its manifest read is paired with a new manifest read
before it is listed again after the entry it has (a writer going on, side by side)."""
LATEST_WRITES_PAGE = 10
"""Keys in the first writes page a read of the latest asks for, beside the manifest."""

Writes = dict[str, list[str]]
"""Inverted checkpoint id -> the keys of its write objects."""


class MissingObjects(Exception):
    """Objects of a checkpoint in the history are gone: a concurrent delete or
    prune explains it, or the history is damaged (see ``Reader.confirm_missing``)."""

    def __init__(self, keys: list[str], checkpoint_id: str, rev: int) -> None:
        super().__init__(", ".join(keys))
        self.keys, self.checkpoint_id, self.rev = keys, checkpoint_id, rev


class PackChanged(Exception):
    """The manifest names another pack than the one this read listed with: read again."""


class Stale(Exception):
    """The listing went out before the manifest read it was paired with, and misses
    what was committed in between: list again, after ``entry`` (``pin``: with it, at
    once, as a listing after a manifest read is whole)."""

    def __init__(self, entry: Entry, *, pin: bool = False) -> None:
        super().__init__()
        self.entry = entry
        self.pin = pin


class Loader:
    """Turns stored objects into ``CheckpointTuple``s (one per call: see context.py)."""

    def __init__(self, ctx: SaverContext, serde: SerializerProtocol) -> None:
        self.ctx, self.serde = ctx, serde
        self.objects, self.manifest = HeldOverlay(ctx.objects), ctx.manifest
        """S3 with the checkpoints the manifest items this call read hold laid over it."""
        self.envs: dict[str, codec.CheckpointEnvelope] = {}
        """Holder envelopes this call decoded (``values.typed_value``)."""
        self.etags: dict[str, str] = {}
        """Write key -> its listed ETag, for this call's listings (``fetch_writes``)."""
        self.used: dict[str, PackRef | None] = {}
        """Thread prefix -> the pack this call's current read attempt goes through."""
        self.packings: dict[str, int] = {}
        """Thread prefix -> ``Entry.packings`` as the current read attempt first saw it:
        a pack and an unpack between two of its reads leave the pack as it was, not
        the count (what it listed meanwhile may be short)."""
        self.lives: dict[str, str] = {}
        """Namespace prefix -> the life the current read attempt first saw."""
        self.careful: set[str] = set()
        """Thread prefixes whose next read by id reads the manifest before listing:
        a miss on a thread ever packed is confirmed by a read that brackets its
        listing between two manifest reads."""

    def begin(self, keys: NamespaceKeys) -> None:
        """A read attempt starts: remember the pack its listings and GETs go through."""
        prefix = self.ctx.layout.thread(keys.thread_id)
        self.used[prefix] = pack_in_use(self.ctx, keys)
        self.packings.pop(prefix, None)
        self.lives.pop(keys.prefix, None)
        self.objects.drop(keys.prefix)  # an earlier attempt's copies may be another life's

    def noted(self, keys: NamespaceKeys, entry: Entry) -> bool:
        """Record the thread's pack; True when it is not the one this read used (then
        what it listed or read may be short: it must read again)."""
        prefix = self.ctx.layout.thread(keys.thread_id)
        used = self.used.get(prefix, pack_in_use(self.ctx, keys))
        noted(self.ctx, keys, entry)
        self.objects.hold(keys, entry)
        self.ctx.enter_life(keys.prefix, entry.life)
        self.lives.setdefault(keys.prefix, entry.life)
        first = self.packings.setdefault(prefix, entry.packings)
        return entry.pack != used or entry.packings != first

    async def replaced(self, keys: NamespaceKeys) -> bool:
        """After a read found objects that do not fit together: whether the namespace
        began a new life (an import's replace reuses its ids, not its bytes), was
        deleted or was packed meanwhile (1 GetItem, on that failure only); if not, the
        objects are damaged."""
        read = self.lives.get(keys.prefix)
        entry = await self.manifest.reads.latest(keys.thread_id, keys.checkpoint_ns)
        if entry is None:
            return read is not None  # deleted meanwhile
        return self.noted(keys, entry) or (read is not None and entry.life != read)

    async def repacked(self, keys: NamespaceKeys, gone: str | None = None) -> bool:
        """After a read found less than its entry promised (or pack ``gone`` missing):
        whether the thread's pack changed meanwhile (packed, repacked, unpacked, or
        the thread deleted with its pack), recorded for the next read."""
        entry = await self.manifest.reads.latest(keys.thread_id, keys.checkpoint_ns)
        if entry is None:
            return gone is not None  # deleted meanwhile, pack and all: read again
        changed = self.noted(keys, entry)
        if gone is not None:  # the manifest still naming the missing pack is damage
            return entry.pack is None or entry.pack.key != gone
        return changed

    async def confirm_missing(self, keys: NamespaceKeys, missing: MissingObjects) -> None:
        """An object the history refers to is gone. A delete or prune that ran meanwhile
        explains it (the caller reads again); otherwise it is corruption, named."""
        entry = await self.manifest.reads.latest(keys.thread_id, keys.checkpoint_ns)
        if entry is not None and self.noted(keys, entry):
            raise PackChanged  # packed meanwhile: read again, with the pack
        if entry is not None and entry.rev == missing.rev:
            raise CorruptObjectError(
                ", ".join(missing.keys),
                f"missing: checkpoint {missing.checkpoint_id} of thread {keys.thread_id!r} "
                "refers to it",
            )

    async def _list_writes(self, keys: NamespaceKeys, cks: Sequence[CheckpointKey]) -> Writes:
        listed = await bounded_map(
            lambda c: self.objects.list_all(keys.writes_of(c.checkpoint_id)), cks
        )
        self.etags.update((w.key, w.etag) for ws in listed for w in ws if w.etag)
        return {
            invert_id(c.checkpoint_id): [w.key for w in ws]
            for c, ws in zip(cks, listed, strict=True)
        }

    async def load(
        self,
        keys: NamespaceKeys,
        entry: Entry,
        cks: Sequence[CheckpointKey],
        writes: Writes,
        *,
        histories: bool = False,
    ) -> list[CheckpointTuple]:
        """Checkpoints whose write keys are known: their envelopes, then the objects
        holding their other values beside the write objects no child carries: 2 round
        trips."""
        envelopes = await self.objects.get_many([ck.key for ck in cks], cache=True)
        return await self.materialize(keys, entry, cks, envelopes, writes, histories=histories)

    async def materialize(
        self,
        keys: NamespaceKeys,
        entry: Entry,
        cks: Sequence[CheckpointKey],
        envelopes: Sequence[bytes | None],
        writes: Writes,
        write_bodies: dict[str, bytes | None] | None = None,
        *,
        histories: bool = False,
    ) -> list[CheckpointTuple]:
        """Checkpoints whose envelopes are read: the values they do not hold inline
        (holders, runs and blobs, beside the write bodies unless given) in one round
        trip. A checkpoint or value that is gone raises ``MissingObjects``: the
        history refers to it. With ``histories``, the DeltaChannel histories their
        logs give (logs.py) come in the same round trip, kept for LangGraph's next
        call (``aget_delta_channel_history``, which then costs no request)."""
        decoded = [self._decode(ck, body, entry) for ck, body in zip(cks, envelopes, strict=True)]
        places = [
            value_keys(keys, ck.key, env, cp["channel_versions"])
            for ck, (env, cp) in zip(cks, decoded, strict=True)
        ]
        replays: list[tuple[int, list[str]]] = []
        lkeys: list[str] = []
        for i, (ck, (env, cp)) in enumerate(zip(cks, decoded, strict=True)):
            if histories and env.logs:
                with codec.reading(ck.key):
                    md = self.serde.loads_typed(env.metadata)
                channels = replayed(md, env, cp["channel_versions"])
                needed = logs.needed(keys, env, channels)
                if needed is not None:
                    replays.append((i, channels))
                    lkeys += needed
        own = {ck.key for ck in cks}
        vkeys = list(
            dict.fromkeys(
                [k for p in places for ks in p.values() for k in ks if k not in own]
                + [k for k in lkeys if k not in own]
            )
        )
        carried: dict[str, bytes] = {}
        if write_bodies is None:
            carried = self._carried(keys, [env for env, _ in decoded], _flat(cks, writes))
        wkeys = [k for k in _flat(cks, writes) if k not in carried] if write_bodies is None else []
        seen: dict[str, str] = {}  # write key -> the ETag of the version read
        bodies, fetched = await gather_all(
            fetch_values(self.objects, keys, vkeys),
            fetch_writes(self.objects, wkeys, self.objects.listed_etags(self.etags), seen),
        )
        for ck, body in zip(cks, envelopes, strict=True):
            bodies[ck.key] = body
        if write_bodies is None:
            write_bodies = {**carried, **dict(zip(wkeys, fetched, strict=True))}
        typed, values = await self._values(keys, entry, cks, decoded, places, bodies)
        out = [  # decodes every write body: a corrupt one is named here
            self._tuple(keys, ck, env, cp, t, v, writes, write_bodies)
            for ck, (env, cp), t, v in zip(cks, decoded, typed, values, strict=True)
        ]
        if histories:  # a put continuing one of them carries its writes, as read
            for ck in cks:
                into = self.ctx.carry.setdefault((keys.prefix, ck.checkpoint_id), {})
                for k in writes.get(invert_id(ck.checkpoint_id), []):
                    body, etag = write_bodies.get(k), seen.get(k)
                    if body is not None and etag:
                        codec.keep_carried(into, k[len(keys.prefix) :], etag, body)
        for i, channels in replays:
            ck, env = cks[i], decoded[i][0]
            gone = sorted(
                k for ch in channels for k in logs.run_keys(keys, env, ch) if bodies[k] is None
            )
            if gone:
                raise MissingObjects(gone, ck.checkpoint_id, entry.rev)
            hist = logs.histories(self.serde, keys, ck.key, env, channels, bodies, self.envs)
            self.ctx.delta_memo[(keys.prefix, ck.checkpoint_id)] = hist
        return out

    def _carried(
        self, keys: NamespaceKeys, envs: Sequence[codec.CheckpointEnvelope], wanted: list[str]
    ) -> dict[str, bytes]:
        """The wanted write objects a child among ``envs`` carries in the very version
        the listing shows (same key, same ETag): they need no request."""
        copies = {keys.prefix + k: (e, b) for env in envs for k, e, b in env.carried}
        out: dict[str, bytes] = {}
        for k in wanted:
            copy = copies.get(k)
            if copy is not None and k not in self.objects.writes and self.etags.get(k) == copy[0]:
                out[k] = copy[1]
        return out

    def _decode(
        self, ck: CheckpointKey, body: bytes | None, entry: Entry
    ) -> tuple[codec.CheckpointEnvelope, dict[str, Any]]:
        if body is None:
            raise MissingObjects([ck.key], ck.checkpoint_id, entry.rev)
        with codec.reading(ck.key):
            env = codec.load_checkpoint(body)
            return env, self.serde.loads_typed(env.checkpoint)

    def _typed(
        self,
        keys: NamespaceKeys,
        entry: Entry,
        ck: CheckpointKey,
        env: codec.CheckpointEnvelope,
        place: dict[str, list[str]],
        bodies: dict[str, bytes | None],
    ) -> dict[str, tuple[str, codec.Typed, bytes | None]]:
        """Each channel's serialized value at ``ck`` (the key it is read from, the
        typed bytes, the digest of its runs). ``MissingObjects`` when a holder is gone."""
        gone = sorted({k for ks in place.values() for k in ks if bodies[k] is None})
        if gone:
            raise MissingObjects(gone, ck.checkpoint_id, entry.rev)
        present = cast(dict[str, bytes], bodies)
        out: dict[str, tuple[str, codec.Typed, bytes | None]] = {}
        for ch, where in place.items():
            typed, digest = typed_value(keys, ck.key, env, ch, where, present, self.envs)
            out[ch] = (where[-1], typed, digest)
        return out

    async def _values(
        self,
        keys: NamespaceKeys,
        entry: Entry,
        cks: Sequence[CheckpointKey],
        decoded: Sequence[tuple[codec.CheckpointEnvelope, dict[str, Any]]],
        places: Sequence[dict[str, list[str]]],
        bodies: dict[str, bytes | None],
    ) -> tuple[list[dict[str, tuple[str, codec.Typed, bytes | None]]], list[dict[str, Any]]]:
        """Each checkpoint's serialized values and the values: in a thread when the
        bodies they come from are :data:`OFF_LOOP` bytes or more (the digests,
        decompression and Python-level deserializing of a large history run beside the
        caller's event loop; a single C call, such as unpacking one large msgpack
        array, still holds the GIL). Only this read's objects are touched meanwhile."""
        serde = self.serde

        def work() -> tuple[
            list[dict[str, tuple[str, codec.Typed, bytes | None]]], list[dict[str, Any]]
        ]:
            typed = [
                self._typed(keys, entry, ck, env, place, bodies)
                for ck, (env, _), place in zip(cks, decoded, places, strict=True)
            ]
            values = [
                {
                    ch: decode_value(serde, key, ch, t, env.runs.get(ch))
                    for ch, (key, t, _) in tv.items()
                }
                for tv, (env, _) in zip(typed, decoded, strict=True)
            ]
            return typed, values

        size = sum(len(b) for b in bodies.values() if b is not None)
        return await asyncio.to_thread(work) if size >= OFF_LOOP else work()

    def _tuple(
        self,
        keys: NamespaceKeys,
        ck: CheckpointKey,
        env: codec.CheckpointEnvelope,
        cp: dict[str, Any],
        typed: dict[str, tuple[str, codec.Typed, bytes | None]],
        values: dict[str, Any],
        writes: Writes,
        write_bodies: dict[str, bytes | None],
    ) -> CheckpointTuple:
        serde = self.serde
        digests = {ch: digest for ch, (_, _, digest) in typed.items()}
        held = self.ctx.holders[(keys.prefix, ck.checkpoint_id)] = holders(
            keys, ck.key, env, cp["channel_versions"], digests
        )
        own = writes.get(invert_id(ck.checkpoint_id), [])
        stored = stored_writes([(k, write_bodies[k]) for k in own])
        pending = values_of(serde, stored)
        with codec.reading(ck.key):
            metadata = cast(CheckpointMetadata, serde.loads_typed(env.metadata))
        delta = logs.delta_channels(metadata, values)
        if delta:  # what a put continuing it needs for its DeltaChannel logs (logs.py)
            self.ctx.delta_channels[keys.prefix] = delta
            at = (keys.prefix, ck.checkpoint_id)
            log = self.ctx.logs[at] = logs.adopt(self.ctx.logs.get(at), delta)
            for _, w in stored:
                log.record(w.task_id, w.task_path, [(w.idx, w.channel, w.value)], stored=True)
            log.fill(keys.tail(ck.key), env, logs.seeds_of(held))
        return CheckpointTuple(
            config=config_of(keys, ck.checkpoint_id),
            checkpoint=cast(Checkpoint, {**cp, "channel_values": values}),
            metadata=metadata,
            parent_config=config_of(keys, ck.parent_id) if ck.parent_id else None,
            pending_writes=pending,
        )


def pack_in_use(ctx: SaverContext, keys: NamespaceKeys) -> PackRef | None:
    """The pack the object store serves the thread's keys from now (None: none)."""
    objects = packed_view(ctx.objects)
    if objects is None:
        return None
    return objects.pack_of(ctx.layout.thread(keys.thread_id))


def noted(ctx: SaverContext, keys: NamespaceKeys, entry: Entry) -> bool:
    """Tell the object store which pack the manifest names for the thread; True when
    that differs from what it knew (a read made without it must be made again)."""
    objects = packed_view(ctx.objects)
    if objects is None:
        return False
    return objects.note(ctx.layout.thread(keys.thread_id), entry.pack)


def _flat(cks: Sequence[CheckpointKey], writes: Writes) -> list[str]:
    return [k for c in cks for k in writes.get(invert_id(c.checkpoint_id), [])]
