"""The saver's read path: ``get_tuple`` (latest, by id) and ``list``.

Costs (round trips = the longest chain of requests, each sent after the one
before it answered):

* latest: manifest GetItem beside the newest writes LIST; the checkpoint GET;
  the older objects holding its other values beside the write GETs: 3 round
  trips, whatever the history length (1 when the objects are cached). A latest
  whose object has not landed (a put in flight) is stood in for by its parent.
* by id: GetItem beside the id's LIST and its writes LIST; then as above. A tip
  needs nothing more; an older id is first found in a listing from the top.
* ``list(limit=k)``: the manifest beside one checkpoint page and one writes
  page, then the envelopes and write bodies, then the objects holding older values.

Every read follows the manifest's lineage (``history.Lineage``): what it does
not reach (a phantom of a crashed writer, a deleted life) is not history.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any, cast

from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_s3.checkpoint import logs
from langgraph_s3.checkpoint.context import SaverContext, WalkListing, config_of
from langgraph_s3.checkpoint.history import (
    Lineage,
    WritesCursor,
    fetch_values,
    fetch_writes,
    lineage_of,
    next_page,
    replayed,
    stored_writes,
    values_of,
    with_spilled,
)
from langgraph_s3.checkpoint.packs import PackedObjects, PackGoneError
from langgraph_s3.core import codec
from langgraph_s3.core.keys import CheckpointKey, NamespaceKeys, invert_id
from langgraph_s3.core.records import Entry, PackRef, may_land
from langgraph_s3.core.records import Listed as Listing
from langgraph_s3.core.tasks import bounded_map, gather_all
from langgraph_s3.core.values import decode_value, holders, typed_value, value_keys
from langgraph_s3.errors import ConflictError, CorruptObjectError

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


def matches(metadata: Any, filter: dict[str, Any] | None) -> bool:
    """``list(filter=...)``: every given metadata key has the given value."""
    if not filter:
        return True
    return isinstance(metadata, dict) and all(metadata.get(k) == v for k, v in filter.items())


class PackChanged(Exception):
    """The manifest names another pack than the one this read listed with: read again."""


class Stale(Exception):
    """The listing went out before the manifest read it was paired with, and misses
    what was committed in between: list again, after ``entry``."""

    def __init__(self, entry: Entry) -> None:
        super().__init__()
        self.entry = entry


def _listed_before(
    keys: NamespaceKeys, page: Sequence[Listing], entry: Entry, page_size: int
) -> bool:
    """Whether a first listing page (sent beside the manifest read) may predate the
    entry's latest: the latest is not in it, yet belongs within it (newer than its
    oldest, or the page is the whole listing), so commits landed between the two
    requests (a writer going on) and the lineage may find none of them. A newer
    checkpoint listed does not prove otherwise: a put's object may land before its
    commit, or never be committed. A latest whose object is still in flight looks the
    same, and costs one listing more."""
    ids = [ck.checkpoint_id for ck in keys.listed_checkpoints(o.key for o in page)]
    if entry.latest_id in ids:
        return False
    return not ids or len(page) < page_size or entry.latest_id > min(ids)


class Reader:
    """Turns stored objects into ``CheckpointTuple``s (one per call: see context.py)."""

    def __init__(self, ctx: SaverContext, serde: SerializerProtocol) -> None:
        self.ctx, self.serde = ctx, serde
        self.objects, self.manifest = ctx.objects, ctx.manifest
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

    # ---------------------------------------------------------------- get_tuple
    async def get_tuple(
        self, keys: NamespaceKeys, cid: str | None, *, walk: int | None = None
    ) -> CheckpointTuple | None:
        """The latest checkpoint (``cid`` None) or the one with id ``cid``; ``walk``:
        the read is a step of LangGraph's generic DeltaChannel walk (``Listed``)."""
        for _ in range(READ_ATTEMPTS):
            self.begin(keys)
            try:
                if cid is None:
                    return await self._latest(keys)
                return await self._by_id(keys, cid, walk)
            except MissingObjects as missing:
                if walk is not None:  # the walk's listing may be what misled it
                    self.ctx.listed.pop((walk, keys.prefix), None)
                try:
                    await self.confirm_missing(keys, missing)
                except PackChanged:
                    continue  # packed meanwhile: read again, with the pack
            except PackChanged:
                continue  # the thread was packed (or repacked): list with the pack
            except PackGoneError as gone:
                if not await self.repacked(keys, gone.key):
                    raise
            except CorruptObjectError:
                if not await self.replaced(keys):
                    raise
        raise ConflictError(
            f"thread {keys.thread_id!r} was packed, repacked, unpacked or replaced again and "
            f"again while it was read ({READ_ATTEMPTS} times): read it again"
        )

    async def replaced(self, keys: NamespaceKeys) -> bool:
        """After a read found objects that do not fit together: whether the namespace
        began a new life (an import's replace reuses its ids, not its bytes), was
        deleted or was packed meanwhile (1 GetItem, on that failure only); if not, the
        objects are damaged."""
        read = self.lives.get(keys.prefix)
        entry = await self.manifest.latest(keys.thread_id, keys.checkpoint_ns)
        if entry is None:
            return read is not None  # deleted meanwhile
        return self.noted(keys, entry) or (read is not None and entry.life != read)

    async def repacked(self, keys: NamespaceKeys, gone: str | None = None) -> bool:
        """After a read found less than its entry promised (or pack ``gone`` missing):
        whether the thread's pack changed meanwhile (packed, repacked, unpacked, or
        the thread deleted with its pack), recorded for the next read."""
        entry = await self.manifest.latest(keys.thread_id, keys.checkpoint_ns)
        if entry is None:
            return gone is not None  # deleted meanwhile, pack and all: read again
        changed = self.noted(keys, entry)
        if gone is not None:  # the manifest still naming the missing pack is damage
            return entry.pack is None or entry.pack.key != gone
        return changed

    def begin(self, keys: NamespaceKeys) -> None:
        """A read attempt starts: remember the pack its listings and GETs go through."""
        prefix = self.ctx.layout.thread(keys.thread_id)
        self.used[prefix] = pack_in_use(self.ctx, keys)
        self.packings.pop(prefix, None)
        self.lives.pop(keys.prefix, None)

    def noted(self, keys: NamespaceKeys, entry: Entry) -> bool:
        """Record the thread's pack; True when it is not the one this read used (then
        what it listed or read may be short: it must read again)."""
        prefix = self.ctx.layout.thread(keys.thread_id)
        used = self.used.get(prefix, pack_in_use(self.ctx, keys))
        noted(self.ctx, keys, entry)
        self.ctx.enter_life(keys.prefix, entry.life)
        self.lives.setdefault(keys.prefix, entry.life)
        first = self.packings.setdefault(prefix, entry.packings)
        return entry.pack != used or entry.packings != first

    async def _latest(self, keys: NamespaceKeys) -> CheckpointTuple | None:
        # the manifest and the namespace's newest writes go out together: the latest's
        # pending writes are near the top of the listing (newest first)
        cursor = WritesCursor(
            self.objects.list_pages(keys.writes, page_size=LATEST_WRITES_PAGE), keys
        )
        entry, _ = await gather_all(
            self.manifest.latest(keys.thread_id, keys.checkpoint_ns), cursor.upto("")
        )
        if entry is None:
            return None
        if self.noted(keys, entry):
            raise PackChanged
        ck = keys.parse_checkpoint(keys.checkpoint_at(entry.latest_tail))
        inv = invert_id(ck.checkpoint_id)
        envelopes, _ = await gather_all(
            self.objects.get_many([ck.key], cache=True), cursor.upto(inv)
        )
        if envelopes[0] is None:
            tup = await self.stand_in(keys, entry)
            if tup is None and await self.repacked(keys):
                raise PackChanged  # packed since the entry was read: its objects moved
            return tup
        writes = {inv: cursor.take(inv)}
        self.etags.update(cursor.etags)
        (tup,) = await self.materialize(keys, entry, [ck], envelopes, writes, histories=True)
        return tup

    async def stand_in(self, keys: NamespaceKeys, entry: Entry) -> CheckpointTuple | None:
        """The latest's object is not there: its put is in flight, or its writer crashed
        after the manifest update (see ``Manifest.advance``). The newest checkpoint of
        the history (the latest's parent, or the latest itself once it has landed)
        stands in for it: a few round trips more, in that window only."""
        async for tup in self.list_namespace(keys, entry, before_id=None, filter=None, limit=1):
            return tup
        return None

    async def _by_id(
        self, keys: NamespaceKeys, cid: str, walk: int | None = None
    ) -> CheckpointTuple | None:
        inv = invert_id(cid)
        remembered = self.ctx.listed.get((walk, keys.prefix)) if walk is not None else None
        hit = remembered.find(cid, inv) if remembered is not None else None
        if (
            remembered is not None
            and hit is not None
            and remembered.entry.pack == self.used.get(self.ctx.layout.thread(keys.thread_id))
        ):
            ck, wks = hit  # an older checkpoint a listing just found: no request
            self.etags.update((w, remembered.etags[w]) for w in wks if w in remembered.etags)
            (tup,) = await self.load(keys, remembered.entry, [ck], {inv: wks}, histories=True)
            return tup
        prefix = self.ctx.layout.thread(keys.thread_id)
        if prefix in self.careful:  # the count before the listing (one round trip more)
            before = await self.manifest.latest(keys.thread_id, keys.checkpoint_ns)
            if before is not None and self.noted(keys, before):
                raise PackChanged
        entry, found, wkeys = await gather_all(
            self.manifest.latest(keys.thread_id, keys.checkpoint_ns),
            self.objects.list_all(keys.checkpoint_id_prefix(cid)),
            self.objects.list_all(keys.writes_of(cid)),
        )
        if entry is not None and self.noted(keys, entry):
            raise PackChanged
        if entry is None:
            return None
        if not await self._in_history(keys, entry, cid, walk):
            await self._absent(keys, entry, cid)
            return None
        lineage = Lineage({cid}, entry.floor)
        hits = [ck for ck in keys.listed_checkpoints(o.key for o in found) if lineage.admit(ck)]
        if not hits:
            await self._absent(keys, entry, cid)
            return None
        writes = {invert_id(cid): [w.key for w in wkeys]}
        self.etags.update((w.key, w.etag) for w in wkeys if w.etag)
        (tup,) = await self.load(keys, entry, hits[:1], writes, histories=True)
        return tup

    async def _absent(self, keys: NamespaceKeys, entry: Entry, cid: str) -> None:
        """``cid`` was not listed. Within the entry's range, a thread packed (or
        repacked, unpacked) meanwhile may have moved it out of what was listed: then
        read again (1 GetItem more, on a miss only; on a thread ever packed, a whole
        read more, its manifest read before its listing); otherwise it is not there."""
        inside = entry.floor <= cid <= entry.latest_id
        if not inside or not isinstance(self.objects, PackedObjects):
            return
        if await self.repacked(keys):
            raise PackChanged
        prefix = self.ctx.layout.thread(keys.thread_id)
        if entry.packings and prefix not in self.careful:
            # packed and unpacked between this read's listing and its manifest read
            # would leave no trace in the pack: read once more, the count read first
            self.careful.add(prefix)
            raise PackChanged

    async def _in_history(
        self, keys: NamespaceKeys, entry: Entry, cid: str, walk: int | None = None
    ) -> bool:
        """Whether ``cid`` is a tip or an ancestor of one: the tips need no request,
        an older checkpoint is found by walking the listing down to it. In a walk of
        LangGraph's, the namespace's writes are listed beside: with the rest of the
        listing's page, what the walk's next reads need (``Listed``)."""
        if cid in entry.tips:
            return True
        if cid < entry.floor or cid > entry.latest_id:
            return False
        entry = await with_spilled(self.objects, keys, entry)
        if cid in entry.tips:
            return True
        lineage = lineage_of(entry, keys)
        if walk is None:
            async for page in self.objects.list_pages(keys.checkpoints):
                for ck in keys.listed_checkpoints(o.key for o in page):
                    if ck.checkpoint_id < cid or lineage.exhausted:
                        return False
                    if lineage.admit(ck) and ck.checkpoint_id == cid:
                        return True
            return False
        seen: dict[str, CheckpointKey] = {}
        cursor = WritesCursor(self.objects.list_pages(keys.writes), keys)

        async def pages() -> bool:
            found = passed = False
            async for page in self.objects.list_pages(keys.checkpoints):
                for ck in keys.listed_checkpoints(o.key for o in page):
                    if lineage.exhausted:
                        return found
                    passed = passed or ck.checkpoint_id < cid
                    if lineage.admit(ck) and ck.checkpoint_id <= cid:  # the walk goes older
                        seen[ck.checkpoint_id] = ck
                        found = found or ck.checkpoint_id == cid
                if found or passed:  # the page is read to its end: the rest is kept
                    return found
            return found

        found, _ = await gather_all(pages(), cursor.upto(invert_id(cid)))
        inv = invert_id(cid)
        self.ctx.listed[(walk, keys.prefix)] = WalkListing(
            entry=entry,
            checkpoints=seen,
            writes={i: ws for i, ws in cursor.buffered.items() if i >= inv},
            whole_after=None if cursor.done else cursor.last_inv,
            etags=dict(cursor.etags),
        )
        return bool(found)

    async def confirm_missing(self, keys: NamespaceKeys, missing: MissingObjects) -> None:
        """An object the history refers to is gone. A delete or prune that ran meanwhile
        explains it (the caller reads again); otherwise it is corruption, named."""
        entry = await self.manifest.latest(keys.thread_id, keys.checkpoint_ns)
        if entry is not None and self.noted(keys, entry):
            raise PackChanged  # packed meanwhile: read again, with the pack
        if entry is not None and entry.rev == missing.rev:
            raise CorruptObjectError(
                ", ".join(missing.keys),
                f"missing: checkpoint {missing.checkpoint_id} of thread {keys.thread_id!r} "
                "refers to it",
            )

    # ---------------------------------------------------------- materializing
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
            fetch_writes(self.objects, wkeys, self.etags, seen),
        )
        for ck, body in zip(cks, envelopes, strict=True):
            bodies[ck.key] = body
        if write_bodies is None:
            write_bodies = {**carried, **dict(zip(wkeys, fetched, strict=True))}
        out = [  # decodes every write body: a corrupt one is named here
            self._tuple(keys, entry, ck, env, cp, place, bodies, writes, write_bodies)
            for ck, (env, cp), place in zip(cks, decoded, places, strict=True)
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
            if copy is not None and self.etags.get(k) == copy[0]:
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

    def _tuple(
        self,
        keys: NamespaceKeys,
        entry: Entry,
        ck: CheckpointKey,
        env: codec.CheckpointEnvelope,
        cp: dict[str, Any],
        place: dict[str, list[str]],
        bodies: dict[str, bytes | None],
        writes: Writes,
        write_bodies: dict[str, bytes | None],
    ) -> CheckpointTuple:
        serde = self.serde
        gone = sorted({k for ks in place.values() for k in ks if bodies[k] is None})
        if gone:
            raise MissingObjects(gone, ck.checkpoint_id, entry.rev)
        values: dict[str, Any] = {}
        digests: dict[str, bytes | None] = {}
        present = cast(dict[str, bytes], bodies)
        for ch, where in place.items():
            typed, digests[ch] = typed_value(keys, ck.key, env, ch, where, present, self.envs)
            values[ch] = decode_value(serde, where[-1], ch, typed, env.runs.get(ch))
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

    # ------------------------------------------------------------------ listing
    async def list_namespace(
        self,
        keys: NamespaceKeys,
        entry: Entry | Awaitable[Entry | None] | None,
        *,
        before_id: str | None,
        filter: dict[str, Any] | None,
        limit: int | None,
    ) -> AsyncIterator[CheckpointTuple]:
        """The namespace's history, newest first: the listing filtered by the manifest's
        lineage (no phantom, nothing of a deleted life), read a chunk at a time. When
        the thread's pack changes under it, it goes on after the last checkpoint it
        gave, with the pack."""
        attempt = stale_reads = 0
        while attempt < READ_ATTEMPTS:
            try:
                async for tup in self._list_once(
                    keys, entry, before_id=before_id, filter=filter, limit=limit
                ):
                    yield tup
                    before_id = str(tup.config["configurable"]["checkpoint_id"])
                    if limit is not None:
                        limit -= 1
                return
            except PackChanged:
                pass
            except Stale as stale:
                # the page predates the entry's latest: a writer went on between the two
                # requests, or the latest's put is in flight. Both are read again, side by
                # side (an entry pinned now could lead to a latest that landed after a
                # fork it does not name: a state no reader saw); the last time, or for a
                # latest too old to be in flight (its writer died), listed after it
                stale_reads += 1
                young = may_land(stale.entry.latest_id, self.manifest.now())
                entry = None if young and stale_reads < STALE_REREADS else stale.entry
                continue
            except PackGoneError as gone:
                if not await self.repacked(keys, gone.key):
                    raise
            entry = None  # read it again
            attempt += 1
            if attempt == READ_ATTEMPTS:
                raise ConflictError(
                    f"thread {keys.thread_id!r} was packed again and again while it was "
                    "listed: list it again"
                )

    async def _list_once(
        self,
        keys: NamespaceKeys,
        entry: Entry | Awaitable[Entry | None] | None,
        *,
        before_id: str | None,
        filter: dict[str, Any] | None,
        limit: int | None,
    ) -> AsyncIterator[CheckpointTuple]:
        self.begin(keys)
        if filter:
            batch = FILTER_BATCH  # envelopes are read to filter: keep batches small
        else:
            batch = min(limit, 1000) if limit is not None else UNLIMITED_BATCH
        # the lineage is decided from the top, so `before` lists the newer keys too
        page_size = 1000 if before_id else min(batch, 1000)
        ckpt_pages = self.objects.list_pages(keys.checkpoints, page_size=page_size)
        wstart = keys.writes_older_than(before_id) if before_id else None
        cursor = WritesCursor(self.objects.list_pages(keys.writes, start_after=wstart), keys)
        # the manifest, the first checkpoint page and the first writes page go out together
        if isinstance(entry, Entry):
            found: Awaitable[Entry | None] = _ready(entry)
        elif entry is None:
            found = self.manifest.latest(keys.thread_id, keys.checkpoint_ns)
        else:
            found = entry  # on its way (a Query of every namespace)
        got, page, _ = await gather_all(
            found,
            next_page(ckpt_pages),
            cursor.upto(""),
        )
        if got is None:
            return
        if self.noted(keys, got):  # packed (or repacked): list again, with the pack
            raise PackChanged
        if not isinstance(entry, Entry) and _listed_before(keys, page, got, page_size):
            raise Stale(got)
        got = await with_spilled(self.objects, keys, got)
        lineage = lineage_of(got, keys)
        while page:
            cks = [
                ck
                for ck in keys.listed_checkpoints(item.key for item in page)
                if lineage.admit(ck) and (before_id is None or ck.checkpoint_id < before_id)
            ]
            for i in range(0, len(cks), batch):
                async for tup in self._chunk(keys, cks[i : i + batch], cursor, filter, got):
                    yield tup
                    if limit is not None:
                        limit -= 1
                        if limit <= 0:
                            return
            if lineage.exhausted:
                return
            page = await next_page(ckpt_pages)
        if await self.repacked(keys):  # the listing ended short: its objects moved
            raise PackChanged

    async def _chunk(
        self,
        keys: NamespaceKeys,
        cks: list[CheckpointKey],
        cursor: WritesCursor,
        filter: dict[str, Any] | None,
        entry: Entry,
    ) -> AsyncIterator[CheckpointTuple]:
        last_inv = invert_id(cks[-1].checkpoint_id)
        envelopes: list[bytes | None] | None = None
        if filter:
            # metadata decides which checkpoints are wanted: read envelopes first
            bodies, _ = await gather_all(
                self.objects.get_many([c.key for c in cks], cache=True), cursor.upto(last_inv)
            )
            cks, envelopes = self._filtered(cks, bodies, cursor, filter)
            if not cks:
                return
        else:
            await cursor.upto(last_inv)
        writes = {invert_id(c.checkpoint_id): cursor.take(invert_id(c.checkpoint_id)) for c in cks}
        self.etags.update(cursor.etags)
        while cks:
            try:
                if envelopes is None:
                    loaded = await self.load(keys, entry, cks, writes)
                else:
                    loaded = await self.materialize(keys, entry, cks, envelopes, writes)
                break
            except MissingObjects as missing:
                await self.confirm_missing(keys, missing)
                # maintenance removed it while we listed: it is no longer history
                at = [ck.checkpoint_id for ck in cks].index(missing.checkpoint_id)
                del cks[at]
                if envelopes is not None:
                    del envelopes[at]
        else:
            return
        for tup in loaded:
            yield tup

    def _filtered(
        self,
        cks: list[CheckpointKey],
        bodies: list[bytes | None],
        cursor: WritesCursor,
        filter: dict[str, Any],
    ) -> tuple[list[CheckpointKey], list[bytes | None]]:
        """The checkpoints whose metadata matches (a missing one is judged later)."""
        kept: list[CheckpointKey] = []
        envelopes: list[bytes | None] = []
        for ck, body in zip(cks, bodies, strict=True):
            md = None
            if body is not None:
                with codec.reading(ck.key):
                    md = self.serde.loads_typed(codec.load_checkpoint(body).metadata)
            if body is None or matches(md, filter):
                kept.append(ck)
                envelopes.append(body)
            else:
                cursor.take(invert_id(ck.checkpoint_id))  # drop unwanted writes
        return kept, envelopes


def pack_in_use(ctx: SaverContext, keys: NamespaceKeys) -> PackRef | None:
    """The pack the object store serves the thread's keys from now (None: none)."""
    objects = ctx.objects
    if not isinstance(objects, PackedObjects):
        return None
    return objects.pack_of(ctx.layout.thread(keys.thread_id))


def noted(ctx: SaverContext, keys: NamespaceKeys, entry: Entry) -> bool:
    """Tell the object store which pack the manifest names for the thread; True when
    that differs from what it knew (a read made without it must be made again)."""
    objects = ctx.objects
    if not isinstance(objects, PackedObjects):
        return False
    return objects.note(ctx.layout.thread(keys.thread_id), entry.pack)


def _flat(cks: Sequence[CheckpointKey], writes: Writes) -> list[str]:
    return [k for c in cks for k in writes.get(invert_id(c.checkpoint_id), [])]


async def _ready(entry: Entry) -> Entry:
    return entry
