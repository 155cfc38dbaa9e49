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

from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_s3.checkpoint.context import SaverContext, WalkListing
from langgraph_s3.checkpoint.history import (
    Lineage,
    WritesCursor,
    held_writes_of,
    lineage_of,
    with_spilled,
)
from langgraph_s3.checkpoint.listing import Lister, matches
from langgraph_s3.checkpoint.loading import (
    LATEST_WRITES_PAGE,
    READ_ATTEMPTS,
    Loader,
    MissingObjects,
    PackChanged,
    noted,
    pack_in_use,
)
from langgraph_s3.checkpoint.packs import PackGoneError, packed_view
from langgraph_s3.core.keys import CheckpointKey, NamespaceKeys, invert_id
from langgraph_s3.core.records import Entry
from langgraph_s3.core.tasks import gather_all
from langgraph_s3.errors import ConflictError, CorruptObjectError

__all__ = ["MissingObjects", "Reader", "matches", "noted", "pack_in_use"]


async def _nothing() -> None:
    """No request (a bare latest's writes are not listed)."""


class Reader:
    """One read (one per call: see context.py): ``get_tuple`` (the latest, or a
    checkpoint by id) and ``list_namespace``, both through one
    :class:`~langgraph_s3.checkpoint.loading.Loader` (what the read decoded, held and
    noted of the manifest)."""

    def __init__(self, ctx: SaverContext, serde: SerializerProtocol) -> None:
        self.loader = Loader(ctx, serde)
        self.ctx, self.objects = ctx, self.loader.objects
        self.lister = Lister(self.loader)
        self.list_namespace = self.lister.list_namespace

    async def get_tuple(
        self, keys: NamespaceKeys, cid: str | None, *, walk: int | None = None
    ) -> CheckpointTuple | None:
        """The latest checkpoint (``cid`` None) or the one with id ``cid``; ``walk``:
        the read is a step of LangGraph's generic DeltaChannel walk (``WalkListing``)."""
        for _ in range(READ_ATTEMPTS):
            self.loader.begin(keys)
            try:
                if cid is None:
                    return await self._latest(keys)
                return await self._by_id(keys, cid, walk)
            except MissingObjects as missing:
                if walk is not None:  # the walk's listing may be what misled it
                    self.ctx.listed.pop((walk, keys.prefix), None)
                try:
                    await self.loader.confirm_missing(keys, missing)
                except PackChanged:
                    continue  # packed meanwhile: read again, with the pack
            except PackChanged:
                continue  # the thread was packed (or repacked): list with the pack
            except PackGoneError as gone:
                if not await self.loader.repacked(keys, gone.key):
                    raise
            except CorruptObjectError:
                if not await self.loader.replaced(keys):
                    raise
        raise ConflictError(
            f"thread {keys.thread_id!r} was packed, repacked, unpacked or replaced again and "
            f"again while it was read ({READ_ATTEMPTS} times): read it again"
        )

    async def _latest(self, keys: NamespaceKeys) -> CheckpointTuple | None:
        # the manifest first: it holds the latest's envelope when its object has not
        # landed, and says when the latest has no pending writes (no listing then)
        entry = await self.loader.manifest.reads.latest(keys.thread_id, keys.checkpoint_ns)
        if entry is None:
            return None
        if self.loader.noted(keys, entry):
            raise PackChanged
        ck = keys.parse_checkpoint(keys.checkpoint_at(entry.latest_tail))
        inv = invert_id(ck.checkpoint_id)
        cursor = WritesCursor(
            self.objects.list_pages(keys.writes, page_size=LATEST_WRITES_PAGE), keys
        )
        envelopes, _ = await gather_all(
            self.objects.get_many([ck.key], cache=True),
            _nothing() if entry.latest_bare else cursor.upto(inv),
        )
        if envelopes[0] is None:
            tup = await self.stand_in(keys, entry)
            if tup is None and await self.loader.repacked(keys):
                raise PackChanged  # packed since the entry was read: its objects moved
            return tup
        writes = {inv: held_writes_of(keys, entry, inv) if entry.latest_bare else cursor.take(inv)}
        self.loader.etags.update(cursor.etags)
        (tup,) = await self.loader.materialize(keys, entry, [ck], envelopes, writes, histories=True)
        return tup

    async def stand_in(self, keys: NamespaceKeys, entry: Entry) -> CheckpointTuple | None:
        """The latest's object is not there: its put is in flight, or its writer crashed
        after the manifest update (see ``Manifest.advance``). The newest checkpoint of
        the history (the latest's parent, or the latest itself once it has landed)
        stands in for it: a few round trips more, in that window only."""
        async for tup in self.lister.list_namespace(
            keys, entry, before_id=None, filter=None, limit=1
        ):
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
            and remembered.entry.pack
            == self.loader.used.get(self.ctx.layout.thread(keys.thread_id))
        ):
            ck, wks = hit  # an older checkpoint a listing just found: no request
            self.loader.etags.update((w, remembered.etags[w]) for w in wks if w in remembered.etags)
            (tup,) = await self.loader.load(
                keys, remembered.entry, [ck], {inv: wks}, histories=True
            )
            return tup
        prefix = self.ctx.layout.thread(keys.thread_id)
        if prefix in self.loader.careful:  # the count before the listing (one round trip more)
            before = await self.loader.manifest.reads.latest(keys.thread_id, keys.checkpoint_ns)
            if before is not None and self.loader.noted(keys, before):
                raise PackChanged
        entry, found, wkeys = await gather_all(
            self.loader.manifest.reads.latest(keys.thread_id, keys.checkpoint_ns),
            self.objects.list_all(keys.checkpoint_id_prefix(cid)),
            self.objects.list_all(keys.writes_of(cid)),
        )
        if entry is not None and self.loader.noted(keys, entry):
            raise PackChanged
        if entry is None:
            return None
        if not await self._in_history(keys, entry, cid, walk):
            await self._absent(keys, entry, cid)
            return None
        lineage = Lineage({cid}, entry.floor)
        if not found:  # held by the item (its object landing), or listed before it landed
            prefix = keys.checkpoint_id_prefix(cid)
            found = self.objects.held_under(prefix) or await self.objects.list_all(prefix)
        hits = [ck for ck in keys.listed_checkpoints(o.key for o in found) if lineage.admit(ck)]
        if not hits:
            await self._absent(keys, entry, cid)
            return None
        bare = entry.latest_bare and cid == entry.latest_id  # none but those the item holds
        inv = invert_id(cid)
        # the listing went out beside the manifest read: the held writes join it here
        listed = sorted({*(w.key for w in wkeys), *held_writes_of(keys, entry, inv)})
        writes = {inv: held_writes_of(keys, entry, inv) if bare else listed}
        self.loader.etags.update((w.key, w.etag) for w in wkeys if w.etag)
        (tup,) = await self.loader.load(keys, entry, hits[:1], writes, histories=True)
        return tup

    async def _absent(self, keys: NamespaceKeys, entry: Entry, cid: str) -> None:
        """``cid`` was not listed. Within the entry's range, a thread packed (or
        repacked, unpacked) meanwhile may have moved it out of what was listed: then
        read again (1 GetItem more, on a miss only; on a thread ever packed, a whole
        read more, its manifest read before its listing); otherwise it is not there."""
        inside = entry.floor <= cid <= entry.latest_id
        if not inside or packed_view(self.ctx.objects) is None:
            return
        if await self.loader.repacked(keys):
            raise PackChanged
        prefix = self.ctx.layout.thread(keys.thread_id)
        if entry.packings and prefix not in self.loader.careful:
            # packed and unpacked between this read's listing and its manifest read
            # would leave no trace in the pack: read once more, the count read first
            self.loader.careful.add(prefix)
            raise PackChanged

    async def _in_history(
        self, keys: NamespaceKeys, entry: Entry, cid: str, walk: int | None = None
    ) -> bool:
        """Whether ``cid`` is a tip or an ancestor of one: the tips need no request,
        an older checkpoint is found by walking the listing down to it. In a walk of
        LangGraph's, the namespace's writes are listed beside: with the rest of the
        listing's page, what the walk's next reads need (``WalkListing``)."""
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
