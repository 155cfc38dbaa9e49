"""Packing: a thread's objects into one pack object, and back out."""

from __future__ import annotations

import asyncio

from langgraph_s3.aws.probes import check_conditions
from langgraph_s3.checkpoint import packs
from langgraph_s3.checkpoint.erasure import late_put_seconds
from langgraph_s3.checkpoint.maintenance.base import (
    LEASE_POLL,
    ORPHAN_PACK_SECONDS,
    Shared,
    counted,
    pack_time,
)
from langgraph_s3.checkpoint.packs import PackGoneError
from langgraph_s3.core.keys import erasure_marker
from langgraph_s3.core.put_mode import CREATE
from langgraph_s3.core.records import (
    Entry,
    Listed,
    PackRef,
    mark_token,
    mark_until,
    marks_until,
    removal_mark,
)
from langgraph_s3.core.report import Report
from langgraph_s3.core.tasks import bounded_map, gather_all
from langgraph_s3.errors import (
    ConflictError,
    InvalidRequestError,
)


class Packing:
    """pack_thread and unpack_thread: a thread's objects into one pack and back."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.ctx, self.serde, self.manifest = shared.ctx, shared.serde, shared.manifest
        self.objects, self.layout = shared.objects, shared.layout
        self.packed, self.raw = shared.packed, shared.raw

    # ----------------------------------------------------------------- packing
    async def pack_thread(self, thread: str) -> Report:
        """Put every object of a thread in one new pack, then switch the manifest to
        it, then remove the objects it holds (and an earlier pack). A crash at any
        step loses nothing: before the switch the objects are all there; after it,
        the pack holds them (an object left beside it is read as its copy)."""
        if self.packed is None:
            raise InvalidRequestError("packs need the saver's own object store")
        # a failed packing takes back what it wrote with DELETE If-Match: a store that
        # ignores it (MinIO) could lose a writer's object, so it packs nothing (5
        # requests, once per process: ``check_conditions``)
        await check_conditions(self.raw, self.layout.root, deletes=True)
        entries = await self.manifest.reads.namespaces(thread)
        root = next((e for e in entries if not e.checkpoint_ns), None)
        if root is None:
            return Report(skipped=1)  # nothing, or no root namespace to name a pack
        prefix = self.layout.thread(thread)
        self.packed.note(prefix, root.pack)
        try:
            listed, loose_now = await gather_all(
                self.objects.list_all(prefix), self.raw.list_all(prefix)
            )
            plain = [o for o in loose_now if not erasure_marker(prefix, o.key, o.size)]
            if root.pack is not None and not plain:
                await self._clear_pack_marks(thread, root)
                return Report(skipped=1)  # packed, and nothing written since
            # as stored (a sealed thread's sealed: a pack holds them so)
            bodies = await self.packed.get_many([o.key for o in listed])
        except PackGoneError as gone:  # repacked or unpacked by another meanwhile
            await self.shared.repacked_or_raise(root, gone)
            return Report(skipped=1)
        if any(b is None for b in bodies):
            return Report(skipped=1)  # changed meanwhile (a prune, a deletion)
        made = self.manifest.now()
        # the mark goes on before the pack is stored: a pack is never without its
        # mark, and the switch requires it (a later packing that finds the mark run
        # out takes it off and the pack with it: an orphan, never switched to)
        mark = removal_mark(made, "pack")
        if not await self.manifest.upkeep.mark(root, mark):
            return Report(skipped=1)  # changed since it was read
        try:
            return await self._pack_marked(thread, listed, bodies, entries, root, made, mark)
        finally:
            await self.shared.unmark(thread, "", mark)

    async def _pack_marked(
        self,
        thread: str,
        listed: list[Listed],
        bodies: list[bytes | None],
        entries: list[Entry],
        root: Entry,
        made: float,
        mark: str,
    ) -> Report:
        """Store the pack (named for ``mark``), switch to it, remove what it holds."""
        prefix = self.layout.thread(thread)
        body = packs.build(
            thread,
            made,
            [(o.key[len(prefix) :], b, o.etag) for o, b in zip(listed, bodies, strict=True) if b],
        )
        key = self.layout.pack(thread, made, mark_token(mark))
        await self.raw.put(key, body, mode=CREATE)
        index, _ = packs.parse_index(key, body)
        ref = PackRef(
            key,
            len(body),
            len(body) - sum(len(b or b"") for b in bodies) - packs.HEAD,
            len(listed),
            upto=max(e.updated_at for e in entries),  # what a later write moves past
            bare=root.latest_bare,  # ... and what a later pending write clears
        )
        assert self.packed is not None
        if not await self.manifest.upkeep.set_pack(
            thread, ref, root.pack, mark=mark, life=root.life
        ):
            await self.raw.delete([key])  # the thread changed: this pack is no one's
            return Report(skipped=1)
        self.packed.note(prefix, ref)
        return await self._after_switch(thread, prefix, key, index, listed, root, made, mark)

    async def _after_switch(
        self,
        thread: str,
        prefix: str,
        key: str,
        index: packs.PackIndex,
        listed: list[Listed],
        root: Entry,
        made: float,
        mark: str,
    ) -> Report:
        """A packing's deletes, under its mark, once the thread names the new pack."""
        # only objects still as packed go (a special write rewritten meanwhile stays)
        packed_etags = {prefix + rel: etag for rel, (_, _, etag) in index.entries.items()}
        loose = await self.raw.list_all(prefix)
        gone = [o for o in loose if packed_etags.get(o.key) == o.etag]
        # erasure markers older than any PUT they could still refuse go too
        since = made - late_put_seconds(self.ctx.limits.request_timeout)
        gone += [o for o in loose if erasure_marker(prefix, o.key, o.size) and o.modified < since]
        old = [root.pack.key] if root.pack is not None else []
        old += list(await self._orphans(thread, (key, *old), made))
        if not self.shared.in_time(mark_until(mark), thread):
            gone, old = [], []
        await self.raw.delete([*(o.key for o in gone), *old])
        report = counted(prefix, listed, threads=1)
        report.objects = len(gone) + len(old)  # removed; one pack stored instead
        report.bytes = sum(o.size for o in gone)
        return report

    async def _orphans(
        self, thread: str, keep: tuple[str, ...], made: float
    ) -> dict[str, str | None]:
        """The packs no entry names and no packing may switch to any more, once this
        one switched (beside the packs in ``keep``): each packing's mark goes on before
        its pack is stored and its switch requires it, so a pack whose mark ran out is
        taken off here first (the pack of a packer killed before its switch), and one
        with no mark is another version's, removed once it is an hour old. Returns each
        such pack's key and the mark taken off for it (None: it had none).

        Cost: 1 LIST; with another pack listed, 1 GetItem, and 1 UpdateItem per mark."""
        listed = [o.key for o in await self.raw.list_all(self.layout.packs(thread))]
        others = [k for k in listed if k not in keep]
        if not others:
            return {}
        root = await self.manifest.reads.latest(thread, "")  # after the listing
        if root is None:
            return {}
        now, out = self.manifest.now(), dict[str, str | None]()
        marks = {mark_token(m): m for m in root.removing if ":pack-" in m}
        for k in others:
            m = marks.get(_token(k))
            if m is None and pack_time(k, made) < made - ORPHAN_PACK_SECONDS:
                out[k] = None
            elif m is not None and mark_until(m) <= now and not self._named(root, k):
                await self.manifest.upkeep.unmark(thread, "", m)  # its switch can never come
                out[k] = m
        return out

    @staticmethod
    def _named(root: Entry, key: str) -> bool:
        return root.pack is not None and root.pack.key == key

    async def _clear_pack_marks(self, thread: str, root: Entry) -> None:
        """Take off the marks of packings that ran out (a packer killed after its
        switch, whose leftovers a later packing removed; one killed before, whose pack
        goes with it: ``_orphans``): the thread counts as packed again. Cost: 1
        UpdateItem per such mark; none in the usual case."""
        now = self.manifest.now()
        taken: set[str | None] = set()
        if any(":pack-" in m and mark_until(m) <= now for m in root.removing):
            assert root.pack is not None
            gone = await self._orphans(thread, (root.pack.key,), now)
            await self.raw.delete(list(gone))
            taken = set(gone.values())
        for m in sorted(root.removing):
            if ":pack-" in m and mark_until(m) <= now and m not in taken:
                await self.shared.unmark(thread, "", m)

    async def unpack_thread(self, thread: str) -> bool:
        """Turn a packed thread's pack back into objects (before a prune, a copy or a
        rollback changes them); False when it had no pack.

        A packing that switched to its pack may still be deleting the loose objects
        it packed: the unpacking waits for its mark (a ``pack`` one: a prune's or a
        rollback's, the caller's own included, does not count), so that what it finds
        loose stays there."""
        if self.packed is None:
            return False
        unpacked = False
        attempts = 0
        while attempts < self.ctx.limits.max_conflicts:
            root = await self.manifest.reads.latest(thread, "")
            if root is None or root.pack is None:
                return unpacked
            now = self.manifest.now()
            busy = marks_until(root.removing, now, kinds=("pack",))
            if busy > now:
                await asyncio.sleep(min(busy - now, LEASE_POLL))
                continue
            attempts += 1
            try:
                if await self._unpack(thread, root):
                    return True
            except PackGoneError as gone:  # repacked or unpacked by another: again
                await self.shared.repacked_or_raise(root, gone)
            unpacked = True  # its objects are out, whoever switched the pack
        raise ConflictError(
            f"thread {thread!r} was packed again and again while it was unpacked: "
            "run the call again"
        )

    async def _unpack(self, thread: str, root: Entry) -> bool:
        """Put ``root``'s pack's objects back, then switch the thread to no pack; False
        when the switch failed (packed again, or unpacked, meanwhile).

        Its writes come before its commit, so a mark on the root item (1 UpdateItem
        each way) holds a new life off meanwhile (an import's replace reuses the keys):
        when the thread was replaced or deleted under it, it deletes what it wrote of
        the old life before the mark comes off."""
        assert self.packed is not None and root.pack is not None
        mark = removal_mark(self.manifest.now(), "unpack")
        if not await self.manifest.upkeep.mark(root, mark):
            return False  # changed since it was read
        try:
            return await self._unpack_marked(thread, root, mark)
        finally:
            await self.shared.unmark(thread, "", mark)

    async def _unpack_marked(self, thread: str, root: Entry, mark: str) -> bool:
        assert self.packed is not None and root.pack is not None
        prefix = self.layout.thread(thread)
        self.packed.note(prefix, root.pack)
        index, packed_at, plain_listed = await gather_all(
            self.packed.index(root.pack, prefix),
            self.raw.list_all(self.layout.packs(thread)),
            self.raw.list_all(prefix),
        )
        plain = {o.key for o in plain_listed}
        # when the pack was stored, by S3's clock: everything in it is older
        made = next((o.modified for o in packed_at if o.key == root.pack.key), 0.0)
        todo = [rel for rel in index.entries if prefix + rel not in plain]
        bodies = await self.packed.get_many([prefix + rel for rel in todo])  # as stored

        sent: dict[str, bytes] = {}  # every PUT sent: one that failed may have landed
        wrote: dict[str, str] = {}

        async def put(pair: tuple[str, bytes | None]) -> None:
            if pair[1] is not None:
                sent[prefix + pair[0]] = pair[1]
                etag = await self.raw.put(prefix + pair[0], pair[1], mode=CREATE)
                if etag is not None:
                    wrote[prefix + pair[0]] = etag
                self.shared.restored[prefix + pair[0]] = made - 1.0

        try:
            await bounded_map(put, list(zip(todo, bodies, strict=True)))
            switched = await self.manifest.upkeep.set_pack(thread, None, root.pack, life=root.life)
        except Exception:  # a failed request: the switch may or may not have landed
            await self._unwrite(thread, root, sent, wrote, mark)
            raise
        if not switched:
            await self._unwrite(thread, root, sent, wrote, mark)
            return False
        self.packed.note(prefix, None)
        await self.raw.delete([root.pack.key])
        return True

    async def _unwrite(
        self, thread: str, root: Entry, sent: dict[str, bytes], wrote: dict[str, str], mark: str
    ) -> None:
        """An unpacking that did not commit: when the thread is no longer in the life
        it unpacked (replaced, deleted), what it wrote is a stray of the old life under
        keys a new one may reuse, and goes: the versions it wrote, and those of PUTs
        that failed yet may have landed (read back: its bytes, 1 GET each). In the same
        life they stay (another unpacking may have counted them as its own), and once
        its mark ran out too (a new life may have written them since)."""
        if not sent:
            return
        now = await self.manifest.reads.latest(thread, "")
        if now is not None and now.life == root.life:
            return
        if not self.shared.in_time(mark_until(mark), thread):
            return

        async def take_back(key: str) -> None:
            etag = wrote.get(key)
            if etag is None:
                body, etag = await self.raw.get_with_etag(key)
                if body != sent[key]:
                    etag = None
            if etag is not None:
                await self.raw.delete_if_match(key, etag)

        await bounded_map(take_back, list(sent))


def _token(pack_key: str) -> str:
    """The token a pack's key ends with (``Layout.pack``: its packing's mark's)."""
    name = pack_key.rsplit("/", 1)[-1]
    return name.removesuffix(".pack").split("-", 1)[-1] if name.endswith(".pack") else ""
