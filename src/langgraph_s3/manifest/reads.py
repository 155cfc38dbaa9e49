"""Reading the manifest: one thread's items, and whole-deployment scans."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from langgraph_s3.core.keys import encode
from langgraph_s3.core.meta import Scalar, index_value, matches
from langgraph_s3.core.records import Entry, Expiry, PackRef, Raw, ThreadInfo, bound_live
from langgraph_s3.core.shards import Shard
from langgraph_s3.core.tasks import bounded_map
from langgraph_s3.errors import InvalidRequestError
from langgraph_s3.manifest.decide import (
    LATE_MARK,
    META_SK,
    Group,
    expiry_of,
    thread_info,
    uncursor,
)
from langgraph_s3.manifest.items import Items, logger
from langgraph_s3.manifest.schema import (
    ROOT_SK,
    deleting_threads,
    index_attribute,
    index_name,
    raw_of,
)
from langgraph_s3.manifest.stage_items import (
    STAGE_MARK,
    STAGE_SK,
)


def thread_pk(deployment: str, pk: str) -> bool:
    """Whether ``pk`` is a thread's partition key of ``deployment`` (not the marker,
    a run index, a late-pass record or an import's stage: ``keys.encode`` never
    yields a ``/``, and each of those has one after the deployment key)."""
    return (
        pk.startswith(deployment) and len(pk) > len(deployment) and "/" not in pk[len(deployment) :]
    )


CANDIDATES = 32
"""Threads an index names that are read at once (a caller that stops stops there)."""


class Reads:
    """Strongly consistent reads of items, and the live entries they hold: the role
    every reader, writer and maintenance operation holds."""

    def __init__(self, items: Items) -> None:
        self.items = items

    async def read(self, thread_id: str, checkpoint_ns: str) -> Raw | None:
        """The item as stored (live, tombstone or expired), for a later compare-and-swap.

        Cost: 1 GetItem (strongly consistent).

        Returns:
            The item, or None when there is none.
        """
        item = await self.items.db.get(self.items.key(thread_id, checkpoint_ns))
        return raw_of(item) if item else None

    async def latest(self, thread_id: str, checkpoint_ns: str) -> Entry | None:
        """The live entry of one (thread, namespace).

        Cost: 1 GetItem (strongly consistent); for a subgraph namespace, 1
        BatchGetItem of it and the thread's root namespace, whose life it shares.

        Returns:
            The entry; None for a thread that does not exist, was deleted or expired.
        """
        if not checkpoint_ns:
            item = await self.items.db.get(self.items.key(thread_id, checkpoint_ns))
            items = [item] if item else []
        else:
            items = await self.items.db.get_many(
                [self.items.key(thread_id, ""), self.items.key(thread_id, checkpoint_ns)]
            )
        want = encode(checkpoint_ns, "checkpoint_ns")
        entries = self._live(items, self.items.now())
        return next((e for e in entries if encode(e.checkpoint_ns, "checkpoint_ns") == want), None)

    async def namespaces(self, thread_id: str) -> list[Entry]:
        """Every live namespace of one thread.

        Cost: 1 Query per 1 MB page (sequential); one for any ordinary thread.
        """
        return self._live(await self.items.partition(self.items.pk(thread_id)), self.items.now())

    async def thread(self, thread_id: str) -> ThreadInfo | None:
        """One live thread's summary (None: it has no live namespace).

        Cost: as :meth:`namespaces`.
        """
        return await self._thread_at(self.items.pk(thread_id))

    async def _read_pair(self, thread_id: str, checkpoint_ns: str) -> tuple[Raw | None, Raw | None]:
        """(the root namespace's item, the namespace's), in one request."""
        items = await self.items.db.get_many(
            [self.items.key(thread_id, ""), self.items.key(thread_id, checkpoint_ns)]
        )
        by_sk = {i["sk"]["S"]: raw_of(i) for i in items}
        return by_sk.get(ROOT_SK), by_sk.get(encode(checkpoint_ns, "checkpoint_ns"))

    async def read_bound(self, thread_id: str, checkpoint_ns: str) -> Raw | None:
        """The item a writer decides on. A subgraph namespace's is read with its root:
        one left by an expired life of the thread (see :func:`bound_live`) counts as
        expired, so the new life starts over it instead of continuing it."""
        if not checkpoint_ns:
            return await self.read(thread_id, checkpoint_ns)
        root, sub = await self._read_pair(thread_id, checkpoint_ns)
        if sub is not None and sub.committed and not bound_live(sub, root, self.items.now()):
            return replace(sub, expires=0.0)
        marks = root.removing if root is not None else frozenset()
        if sub is not None and sub.tombstone and marks:  # a packing's: the thread's objects
            return replace(sub, removing=sub.removing | marks)
        return sub

    async def pack_of(self, encoded_thread: str) -> PackRef | None:
        """The pack of a thread named by its key segment (``keys.encode``'d id).

        Cost: 1 GetItem of the root namespace's item.
        """
        item = await self.items.db.get(
            {"pk": {"S": self.items.deployment + encoded_thread}, "sk": {"S": ROOT_SK}}
        )
        raw = raw_of(item) if item else None
        return raw.pack if raw is not None and raw.committed else None

    def _live(self, items: Iterable[dict[str, Any]], now: float) -> list[Entry]:
        """The live entries among items (the marker skipped); one another writer left
        (a hand edit, an older version of this library) is skipped with a warning.

        A subgraph namespace lives and dies with its thread's root namespace, when
        that is among ``items`` (see :func:`bound_live`; and while a deletion of the
        thread is in progress, whose revive puts the root back last): pass a thread's
        items together.
        """
        kept: list[tuple[str, Raw, Entry]] = []
        roots: dict[str, Raw] = {}
        for item in items:
            if item.get("sk", {}).get("S") in (META_SK, STAGE_SK):
                continue  # the marker, or an import's claim (read in its stage)
            try:
                raw = raw_of(item)
                entry = raw.live(now)
            except (KeyError, TypeError, AttributeError, ValueError):
                logger.warning(
                    "skipping an item of table %r that langgraph-s3 did not write: key %r",
                    self.items.table,
                    {k: item.get(k) for k in ("pk", "sk")},
                )
                continue
            if item.get("sk", {}).get("S") == ROOT_SK:
                roots[item["pk"]["S"]] = raw
            if entry is not None:
                kept.append((item["pk"]["S"], raw, entry))
        out: list[Entry] = []
        for pk, raw, e in kept:
            root = roots.get(pk)
            if e.checkpoint_ns and not bound_live(raw, root, now):
                continue
            if e.checkpoint_ns and root is not None and root.deletion_held(now) > now:
                continue  # its thread's deletion is in progress: gone, or back, whole
            if e.checkpoint_ns and root is not None and root.committed:
                e = replace(e, pack=root.pack, packings=root.packings)
            out.append(e)
        return out

    async def _groups(
        self, start: dict[str, Any] | None = None, shard: Shard | None = None, *, late: bool = False
    ) -> AsyncIterator[list[Group]]:
        """Each thread's items together (a thread split across two Scan pages is held
        back until its last item is read), a page's worth at a time; ``shard``: of
        that segment only (a thread's items all fall in one). ``late``: the late-pass
        records (``note_late``) and the imports' stages (``core.staging``) too, each
        a group of its own."""
        held: list[dict[str, Any]] = []
        kept = (
            (self.items.deployment + LATE_MARK, self.items.deployment + STAGE_MARK) if late else ()
        )
        async for page in self.items.db.scan(
            prefix=self.items.deployment, after=start, shard=shard
        ):
            done: list[Group] = []
            for item in page:
                pk = item["pk"]["S"]
                if item.get("sk", {}).get("S") == META_SK:
                    continue
                if not thread_pk(self.items.deployment, pk) and not pk.startswith(kept):
                    continue  # a run index, or (but for maintenance) a late pass or a stage
                if held and held[0]["pk"]["S"] != item["pk"]["S"]:
                    done.append(held)
                    held = []
                held.append(item)
            if done:
                yield done
        if held:
            yield [held]

    async def scan(
        self, *, deleting: set[str] | None = None, shard: Shard | None = None
    ) -> AsyncIterator[list[Entry]]:
        """Every live (thread, namespace) entry of this deployment, a page at a time.

        Args:
            deleting: gets the threads whose deletion is in progress (a tombstone
                whose lease is held): that deletion may still fail and put the thread
                back (:meth:`revive`), so a caller that must reach every thread waits
                for it. No extra request.
            shard: only this segment of the table (a parallel Scan's).

        Cost: 1 Scan per 1 MB page of the whole table, or of ``shard``'s segment
        (the filter on the deployment is applied after reading): for maintenance,
        never on a request path.
        """
        async for groups in self._groups(shard=shard):
            now = self.items.now()
            if deleting is not None:
                deleting.update(t for g in groups for t in deleting_threads(g, now))
            yield [e for g in groups for e in self._live(g, now)]

    async def threads(
        self, after: str | None = None, *, shard: Shard | None = None
    ) -> AsyncIterator[list[ThreadInfo]]:
        """Every live thread of this deployment, a Scan page at a time, in table order.

        Args:
            after: a :attr:`ThreadInfo.cursor`: resume after that thread (a cursor
                of the same ``shard``'s listing).
            shard: only this segment of the table.

        Cost: 1 Scan per 1 MB page of the whole table or of the segment (about
        3,000 namespaces).
        """
        start = uncursor(after) if after else None
        if start is not None and not start["pk"]["S"].startswith(self.items.deployment):
            raise InvalidRequestError(
                f"after={str(after)[:60]!r} is a cursor of another deployment (or not one "
                "list_threads gave): pass a ThreadInfo.cursor of this saver's listing"
            )
        async for groups in self._groups(start, shard):
            now = self.items.now()
            out = [info for g in groups if (info := thread_info(self._live(g, now), g))]
            if out:
                yield out

    async def matching(
        self,
        want: Mapping[str, Scalar],
        *,
        shard: Shard | None = None,
        after: str | None = None,
    ) -> AsyncIterator[list[ThreadInfo]]:
        """This deployment's live threads whose latest root checkpoint's recorded
        metadata holds every pair of ``want`` (``core.meta``), a page at a time.

        With a key the deployment indexes (``index_metadata``) and neither ``shard``
        nor ``after``, the index of the first such key names the candidates and each
        is read again, strongly (the index is eventually consistent): the result is
        what the items say now.

        Cost: indexed, 1 Query of the index per 1 MB of matching keys, then 1 Query
        per candidate (concurrently); otherwise as :meth:`threads` (a Scan).
        """
        indexed = [k for k in self.items.index_metadata if k in want]
        if not indexed or shard is not None or after is not None:
            async for page in self.threads(after, shard=shard):
                out = [info for info in page if matches(info.metadata, want)]
                if out:
                    yield out
            return
        key = indexed[0]
        found = self.items.db.query_index(
            index_name(key), index_attribute(key), index_value(self.items.deployment, want[key])
        )
        async for keys in found:
            pks = [k["pk"]["S"] for k in keys if thread_pk(self.items.deployment, k["pk"]["S"])]
            for at in range(0, len(pks), CANDIDATES):  # a caller's limit stops the reads
                infos = await bounded_map(self._thread_at, pks[at : at + CANDIDATES])
                out = [i for i in infos if i is not None and matches(i.metadata, want)]
                if out:
                    yield out

    async def run_entries(self, threads: list[str], deleting: set[str]) -> list[Entry]:
        """The live entries of ``threads`` (the run index's), as :meth:`scan` gives a
        deployment's: ``deleting`` gets those a revivable deletion holds.

        Cost: 1 Query per thread (per 1 MB), concurrently.
        """
        groups = await bounded_map(lambda t: self.items.partition(self.items.pk(t)), threads)
        now = self.items.now()
        for group in groups:
            deleting.update(deleting_threads(group, now))
        return [e for group in groups for e in self._live(group, now)]

    async def _thread_at(self, pk: str) -> ThreadInfo | None:
        """The live thread whose partition key is ``pk`` (1 Query per 1 MB)."""
        items = await self.items.partition(pk)
        return thread_info(self._live(items, self.items.now()), items) if items else None

    async def run_threads(self, run_tokens: Sequence[str]) -> list[str]:
        """The threads the index names for these runs (some may be gone since).

        Cost: 1 Query per run (per 1 MB of its threads), concurrently.
        """

        async def one(token: str) -> list[str]:
            return [
                i["thread_id"]["S"]
                async for page in self.items.db.query(self.items.run_pk(token))
                for i in page
            ]

        found = await bounded_map(one, list(run_tokens))
        return sorted({t for threads in found for t in threads})

    async def expired(self, *, shard: Shard | None = None) -> AsyncIterator[list[Expiry]]:
        """This deployment's threads (of ``shard``) whose TTL passed and whose objects
        are still to be swept (DynamoDB may or may not have removed the root item yet),
        those a deletion that died left, and the deletions' late passes now due.

        Cost: 1 Scan per 1 MB page of the whole table (of the segment).
        """
        async for groups in self._groups(shard=shard, late=True):
            now = self.items.now()
            out = [x for g in groups if (x := expiry_of(g, now)) is not None]
            if out:
                yield out
