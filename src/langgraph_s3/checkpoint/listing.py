"""``list``: a namespace's checkpoints, newest first, a page of the listing at a time."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple

from langgraph_s3.checkpoint.history import (
    Lineage,
    WritesCursor,
    held_writes_of,
    lineage_of,
    next_page,
    with_spilled,
)
from langgraph_s3.checkpoint.loading import (
    FILTER_BATCH,
    READ_ATTEMPTS,
    STALE_REREADS,
    UNLIMITED_BATCH,
    Loader,
    MissingObjects,
    PackChanged,
    Stale,
)
from langgraph_s3.checkpoint.packs import PackGoneError
from langgraph_s3.core import codec
from langgraph_s3.core.keys import CheckpointKey, NamespaceKeys, invert_id
from langgraph_s3.core.records import Entry, Listed, may_land
from langgraph_s3.core.tasks import gather_all
from langgraph_s3.errors import ConflictError

logger = logging.getLogger("langgraph_s3.listing")


def matches(metadata: Any, filter: dict[str, Any] | None) -> bool:
    """``list(filter=...)``: every given metadata key has the given value."""
    if not filter:
        return True
    return isinstance(metadata, dict) and all(metadata.get(k) == v for k, v in filter.items())


def _listed_before(keys: NamespaceKeys, page: Sequence[Listed], entry: Entry, whole: bool) -> bool:
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
    return not ids or whole or entry.latest_id > min(ids)


def _missed(
    keys: NamespaceKeys,
    page: Sequence[Listed],
    held: Sequence[Listed],
    lineage: Lineage,
    whole: bool,
) -> bool:
    """Whether a first page listed beside the manifest read (with the held copies laid
    over the listing after it, which are no loss) lacks a checkpoint of the history
    within its range (newer than its oldest key, or anywhere when it is the whole
    listing), once admitted: the lineage still looks for it. A held copy leaves
    its item only once its object is stored, so the page was listed before that object
    landed and the read after its copy left (a settle, a later commit's drop): list
    again after the entry. Checkpoints maintenance removed (``gone``) and those under
    the floor are no history; the latest missing is :func:`_listed_before`'s case."""
    ids = {ck.checkpoint_id for ck in keys.listed_checkpoints(o.key for o in page)}
    oldest = min(ids, default="")
    ids.update(ck.checkpoint_id for ck in keys.listed_checkpoints(o.key for o in held))
    return any(
        cid >= lineage.floor
        and cid not in lineage.gone
        and cid not in ids
        and (whole or cid > oldest)
        for cid in lineage.frontier
    )


class Lister:
    """``list_namespace``: pages of the listing, each filtered, loaded and checked
    by the read's :class:`~langgraph_s3.checkpoint.loading.Loader`."""

    def __init__(self, loader: Loader) -> None:
        self.loader = loader
        self.objects = loader.objects
        """S3 with the held checkpoints laid over it (the loader's)."""

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
                if stale.pin:
                    logger.debug("a listed page missed a copy that left the item: list again")
                else:
                    logger.debug("a listed page predated its latest: list again")
                young = may_land(stale.entry.latest_id, self.loader.manifest.now())
                again = young and not stale.pin and stale_reads < STALE_REREADS
                entry = None if again else stale.entry
                continue
            except PackGoneError as gone:
                if not await self.loader.repacked(keys, gone.key):
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
        self.loader.begin(keys)
        if filter:
            batch = FILTER_BATCH  # envelopes are read to filter: keep batches small
        else:
            batch = min(limit, 1000) if limit is not None else UNLIMITED_BATCH
        # the lineage is decided from the top, so `before` lists the newer keys too
        page_size = 1000 if before_id else min(batch, 1000)
        wstart = keys.writes_older_than(before_id) if before_id else None
        # the writes are listed after the manifest read (beside the first envelopes'
        # GETs): a write the item held may leave it, stored, between two requests
        cursor = WritesCursor(self.objects.list_pages(keys.writes, start_after=wstart), keys)
        beside: list[Listed] | None = None
        if isinstance(entry, Entry):
            got: Entry | None = entry  # read before: the listing follows it
        else:
            # the manifest read and S3's first checkpoint page go out together; what the
            # item holds (committed, maybe not stored yet) is laid over the page after
            if entry is None:
                entry = self.loader.manifest.reads.latest(keys.thread_id, keys.checkpoint_ns)
            # else on its way (a Query of every namespace)
            raw = self.objects.inner.list_pages(keys.checkpoints, page_size=page_size)
            got, beside = await gather_all(entry, next_page(raw))
        if got is None:
            return
        if self.loader.noted(keys, got):  # packed (or repacked): list again, with the pack
            raise PackChanged
        ckpt_pages = self.objects.list_pages(keys.checkpoints, page_size=page_size, first=beside)
        page = await next_page(ckpt_pages)
        whole = beside is not None and len(beside) < page_size  # S3's listing, all of it
        if beside is not None and _listed_before(keys, page, got, whole):
            raise Stale(got)
        got = await with_spilled(self.objects, keys, got)
        lineage = lineage_of(got, keys)
        check = beside is not None
        while page:
            cks = [
                ck
                for ck in keys.listed_checkpoints(item.key for item in page)
                if lineage.admit(ck) and (before_id is None or ck.checkpoint_id < before_id)
            ]
            if check:
                held = self.objects.held_under(keys.checkpoints)  # merged further down
                if _missed(keys, page, held, lineage, whole):
                    raise Stale(got, pin=True)
                check = False
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
        if await self.loader.repacked(keys):  # the listing ended short: its objects moved
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
        envelopes: list[bytes | None]
        asked = cursor.asked
        if filter:
            # metadata decides which checkpoints are wanted: read envelopes first
            bodies, _ = await gather_all(
                self.objects.get_many([c.key for c in cks], cache=True),
                cursor.upto(last_inv),
            )
            cks, envelopes = self._filtered(cks, bodies, cursor, filter)
            if not cks:
                return
        else:
            bodies, _ = await gather_all(
                self.objects.get_many([c.key for c in cks], cache=True), cursor.upto(last_inv)
            )
            envelopes = list(bodies)
        writes = {invert_id(c.checkpoint_id): cursor.take(invert_id(c.checkpoint_id)) for c in cks}
        if entry.latest_bare:  # none but those its item holds (held_writes.py)
            top = invert_id(entry.latest_id)
            writes[top] = held_writes_of(keys, entry, top)
        self.loader.etags.update(cursor.etags)
        while cks:
            try:
                loading = self.loader.materialize(keys, entry, cks, envelopes, writes)
                if cursor.asked == asked:
                    loaded = await loading
                    break
                # A packing moves the writes into its pack and deletes their objects: one
                # between the envelopes' GETs (or cache hits) and the writes LIST's answer
                # leaves the LIST short, and nothing read says so. The objects go only once
                # the manifest names the pack, so the entry read after that answer (beside
                # the values' GETs) names it: then list again, with the pack.
                now = self.loader.manifest.reads.latest(keys.thread_id, keys.checkpoint_ns)
                loaded, after = await gather_all(loading, now)
                if after is not None and self.loader.noted(keys, after):
                    raise PackChanged
                break
            except MissingObjects as missing:
                await self.loader.confirm_missing(keys, missing)
                # maintenance removed it while we listed: it is no longer history
                at = [ck.checkpoint_id for ck in cks].index(missing.checkpoint_id)
                del cks[at]
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
                    md = self.loader.serde.loads_typed(codec.load_checkpoint(body).metadata)
            if body is None or matches(md, filter):
                kept.append(ck)
                envelopes.append(body)
            else:
                cursor.take(invert_id(ck.checkpoint_id))  # drop unwanted writes
        return kept, envelopes
