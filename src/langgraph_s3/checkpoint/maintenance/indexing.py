"""What ``setup()`` fills in once for threads an older release wrote: the run index
(``delete_for_runs`` without a Scan) and each thread's recorded metadata
(``alist_threads(metadata=...)`` and the indexes of ``index_metadata``)."""

from __future__ import annotations

import logging

from langgraph_s3.checkpoint.maintenance.base import Shared
from langgraph_s3.checkpoint.packs import PackGoneError
from langgraph_s3.core import codec
from langgraph_s3.core.meta import loads
from langgraph_s3.core.records import Entry
from langgraph_s3.core.tasks import bounded_map
from langgraph_s3.errors import ConflictError, CorruptObjectError
from langgraph_s3.manifest.schema import METADATA_ATTRIBUTE, index_attribute

logger = logging.getLogger("langgraph_s3.maintenance")


class Indexing:
    """The run index and the recorded metadata of every thread, filled in."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.ctx, self.serde, self.manifest = shared.ctx, shared.serde, shared.manifest
        self.objects, self.layout = shared.objects, shared.layout
        self.packed, self.raw = shared.packed, shared.raw

    async def _entries_by_thread(self) -> dict[str, list[Entry]]:
        by_thread: dict[str, list[Entry]] = {}
        async for page in self.manifest.reads.scan():
            for e in page:
                by_thread.setdefault(e.thread_id, []).append(e)
        return by_thread

    async def index_runs(self) -> int:
        """Name every thread of the deployment in the run index under each run its
        checkpoints belong to (``setup()``, once, for threads written before the index
        was kept); how many (run, thread) pairs.

        Cost: a manifest Scan, a LIST per namespace (per 1,000 checkpoints), a PutItem
        per pair.
        """
        by_thread = await self._entries_by_thread()

        async def runs_of(thread: str) -> list[tuple[str, str]]:
            found: set[str] = set()
            for _ in range(self.ctx.limits.max_conflicts):
                entries = by_thread[thread]
                if self.packed is not None and entries:  # a packed thread's keys: its pack's
                    pack = next((e.pack for e in entries if e.pack), None)
                    self.packed.note(self.layout.thread(thread), pack)
                try:
                    for e in entries:
                        keys = self.shared.keys(e)
                        listed = await self.objects.list_all(keys.checkpoints)
                        found |= {
                            c.run_token for c in keys.listed_checkpoints(o.key for o in listed)
                        }
                    break
                except PackGoneError:  # repacked meanwhile: read its entries again
                    by_thread[thread] = await self.manifest.reads.namespaces(thread)
            else:
                raise ConflictError(
                    f"thread {thread!r} was packed again and again while its runs were "
                    "listed: run setup() again"
                )
            return [(thread, token) for token in sorted(found) if token]

        pairs = [p for ps in await bounded_map(runs_of, sorted(by_thread)) for p in ps]
        await bounded_map(lambda p: self.manifest.commits.note_run(*p), pairs)
        return len(pairs)

    async def record_metadata(self, *, read_checkpoints: bool) -> int:
        """Record in each thread's root item what its latest checkpoint's commit would
        (``core.meta``): from the pairs the item records already (a newly declared
        index key), or, with ``read_checkpoints``, for an item that records none, from
        the latest checkpoint itself. A thread written meanwhile records its own.
        How many items were written.

        Cost: a manifest Scan; per item to fill, a GET (``read_checkpoints``) and 1
        conditional UpdateItem.
        """
        by_thread = await self._entries_by_thread()
        roots = [e for es in by_thread.values() for e in es if not e.checkpoint_ns]

        declared = tuple(getattr(self.ctx.manifest, "index_metadata", ()))

        async def one(root: Entry) -> bool:
            held = dict(root.meta)
            metadata: object
            if METADATA_ATTRIBUTE in held:
                metadata = loads(held[METADATA_ATTRIBUTE])
                due = [k for k in declared if k in metadata and index_attribute(k) not in held]
                if not due:
                    return False
            elif read_checkpoints:
                metadata = await self._latest_metadata(root)
                if metadata is None:
                    return False
            else:
                return False
            return await self.manifest.upkeep.record_meta(root.thread_id, root.latest_id, metadata)

        return sum(await bounded_map(one, roots))

    async def _latest_metadata(self, root: Entry) -> object:
        """The metadata of a root entry's latest checkpoint (None: not readable now)."""
        keys = self.shared.keys(root)
        if self.packed is not None:  # a packed thread's checkpoint is in its pack
            self.packed.note(self.layout.thread(root.thread_id), root.pack)
        key = keys.checkpoint_at(root.latest_tail)
        try:
            body = await self.objects.get(key)
            if body is None:
                return None
            with codec.reading(key):
                return self.serde.loads_typed(codec.load_checkpoint(body).metadata)
        except (PackGoneError, CorruptObjectError) as exc:  # its next commit records it
            logger.warning("thread %r: its latest metadata not recorded: %s", root.thread_id, exc)
            return None
