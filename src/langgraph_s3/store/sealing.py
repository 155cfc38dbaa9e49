"""Sealing an existing store: the items of its subjects' namespaces stored plain (before
the deployment declared subjects) rewritten sealed, in place (docs/subjects.md).

An item is rewritten only while it is the version read (``If-Match`` its ETag): a put
beside the migration wins, and seals its item itself. Segments are caches: one that
holds a subject's item in plain is deleted (the next search writes it again, sealed),
and none is written with one (:func:`~langgraph_s3.store.segments.dumped`). Sharded by
the items' keys: N runs of ``segment`` 0..N-1 of N rewrite each item once.

Cost: a listing of every item (1,000 keys a request) and of the segments; a GET per
item in the shard (the segments are not trusted: they may be stale); a PUT per item
rewritten (its subject's key taken once per process and bound); a GET per segment, a
DeleteObjects for those dropped.
"""

from __future__ import annotations

from typing import Any

from langgraph_s3.aws.clients import ClientFactory
from langgraph_s3.core import codec
from langgraph_s3.core.clock import wall_clock
from langgraph_s3.core.keys import Layout
from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.core.records import Listed
from langgraph_s3.core.sealing import is_named
from langgraph_s3.core.shards import Shard
from langgraph_s3.core.tasks import bounded_map
from langgraph_s3.errors import CorruptObjectError, InvalidRequestError
from langgraph_s3.runtime.remains import iso, versions
from langgraph_s3.store import format as it
from langgraph_s3.store.items import ItemStore, Live
from langgraph_s3.store.seals import ItemSeals

__all__ = ["ItemSealing"]


class ItemSealing:
    """``AsyncS3Store.aseal``: the subjects' plain items rewritten sealed."""

    def __init__(
        self, items: ItemStore, objects: ObjectStorePort, layout: Layout, clients: ClientFactory
    ) -> None:
        self.items, self.objects, self.layout, self.clients = items, objects, layout, clients

    def _seals(self) -> ItemSeals:
        if self.items.seals is None:
            raise InvalidRequestError(
                "this store declares no subjects: pass subjects= (a namespace label's "
                "index, such as 1) and kms_key= to seal a subject's items"
            )
        return self.items.seals

    async def aseal(self, *, dry_run: bool = False, shard: Shard | None = None) -> dict[str, Any]:
        """``AsyncS3Store.aseal``."""
        seals = self._seals()
        began = wall_clock()
        listed = [
            e
            for e in await self.objects.list_all(self.layout.store_namespace(()))
            if shard is None or shard.holds(e.key)
        ]
        found = await bounded_map(self._plain, listed)
        todo = [
            live for live in found if live is not None and seals.has_subject(live.item.namespace)
        ]
        segments = await self._plain_segments(seals)
        if dry_run:
            return {"state": "dry-run", "items": len(todo), "segments": len(segments)}
        refused: list[str] = []

        async def rewrite(live: Live) -> bool:
            try:
                return await self.items.rewrite(live, live.item)
            except InvalidRequestError as exc:  # a subject the policy refuses: said
                refused.append(f"{live.key}: {exc}")
                return False

        done = await bounded_map(rewrite, todo)
        await self.objects.delete(segments)
        sealed = sum(done)
        return {
            "state": "sealed",
            "items": sealed,
            "changed": len(todo) - sealed - len(refused),  # written (sealed) by others
            "refused": refused,
            "segments": len(segments),
            "began": iso(began),
            "remains": await versions(
                self.clients,
                self.objects.bucket,
                began,
                "the plain versions of the items rewritten, and the segments deleted",
            )
            if sealed or segments
            else [],
        }

    async def _plain(self, entry: Listed) -> Live | None:
        """The item at ``entry`` when it is stored plain (a corrupt one is skipped)."""
        body, etag = await self.objects.get_with_etag(entry.key)
        if body is None or etag is None or is_named(body):
            return None
        try:
            return Live(entry.key, etag, self.items.load(entry.key, body))
        except CorruptObjectError as exc:
            self.items.report(exc, etag)
            return None

    async def _plain_segments(self, seals: ItemSeals) -> list[str]:
        """The segments holding a subject's item in plain (1 GET each)."""
        listed = await self.objects.list_all(self.layout.store_segments(()))

        async def plain(entry: Listed) -> str | None:
            body = await self.objects.get(entry.key)
            if body is None:
                return None
            try:
                with codec.reading(entry.key):
                    held = it.load_segment(body)
            except CorruptObjectError:
                return entry.key  # unreadable: a cache, dropped
            for _, item in held.values():
                if not isinstance(item, bytes) and seals.has_subject(item.namespace):
                    return entry.key
            return None

        return [k for k in await bounded_map(plain, listed) if k is not None]
