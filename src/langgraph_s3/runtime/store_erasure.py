"""A forgotten subject's store namespaces erased: their items deleted, their segments too.

The subject's index names each namespace its items were sealed in (once per life,
before the first item: :mod:`langgraph_s3.store.seals`). Erasing one lists the items
directly in it (its sub-namespaces are named on their own when they are the subject's)
and deletes them, with the namespace's own segment (a segment of a wider prefix keeps
the subject's entries sealed with their key: unreadable once it is destroyed, and
dropped at its next rewrite).

While the subject's life is being forgotten no new life can begin, so every item in its
namespaces is that life's, an earlier one's, or plain: all are deleted at once (a
listing and a DeleteObjects per 1,000 items). Once the key is destroyed a new life may
write into the same namespaces: a resumed erasure then reads each item's first bytes
(its subject's token and life) and deletes, only while unchanged, those of lives up to
the forgotten one and plain ones (a ranged GET and a conditional DeleteObject each).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from langgraph_s3.core.keys import Layout
from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.core.records import Listed
from langgraph_s3.core.sealing import NAMED_HEAD, named_head
from langgraph_s3.core.tasks import bounded_map
from langgraph_s3.manifest.subjects import NamedNamespace, SubjectRegistry

__all__ = ["Erased", "StoreErasure"]


@dataclass
class Erased:
    """What one pass erased: items and their bytes, and the namespaces counted (each
    once, whatever the passes and runs)."""

    items: int = 0
    bytes: int = 0
    namespaces: set[tuple[str, ...]] = field(default_factory=set)


class StoreErasure:
    """Erases the store namespaces a subject's index names.

    Args:
        objects: the deployment's bucket (its raw objects).
        layout: the deployment's layout (the store's items are under its root).
        registry: the deployment's subjects' items.
        concurrency: requests in flight at most.
    """

    def __init__(
        self,
        objects: ObjectStorePort,
        layout: Layout,
        registry: SubjectRegistry,
        *,
        concurrency: int = 32,
    ) -> None:
        self.objects = objects
        self.layout = layout
        self.registry = registry
        self.concurrency = concurrency

    async def named(self, token: str, life: int) -> list[NamedNamespace]:
        """The namespaces named for the subject in lives up to ``life`` (1 Query per MB)."""
        out: list[NamedNamespace] = []
        async for page in self.registry.namespaces(token, upto=life):
            out.extend(page)
        return out

    async def erase(
        self, token: str, life: int, named: list[NamedNamespace], *, checked: bool
    ) -> Erased:
        """Delete the items of the named namespaces (``checked``: only the subject's of
        lives up to ``life``, and plain ones; see the module). Per namespace: a listing
        and a DeleteObjects (checked: a ranged GET and a DeleteObject per item)."""
        done = Erased()
        unique = [*{n.labels: n for n in named}.values()]

        async def one(ns: NamedNamespace) -> None:
            prefix = self.layout.store_namespace(ns.labels)
            listed = [
                e for e in await self.objects.list_all(prefix) if "/" not in e.key[len(prefix) :]
            ]
            if checked:
                kept = await bounded_map(lambda e: self._erase_one(token, life, e), listed)
                gone = [e for e, ok in zip(listed, kept, strict=True) if ok]
            else:
                await self.objects.delete([e.key for e in listed])
                gone = listed
            await self.objects.delete([self.layout.store_segment(ns.labels)])
            done.items += len(gone)
            done.bytes += sum(e.size for e in gone)
            if await self.registry.mark_deleted(token, ns):
                done.namespaces.add(ns.labels)

        await bounded_map(one, unique)
        return done

    async def _erase_one(self, token: str, life: int, entry: Listed) -> bool:
        """Delete the item while it is this version, if it is the subject's up to
        ``life`` or plain: whether it was deleted."""
        head = await self.objects.get_range(entry.key, 0, NAMED_HEAD)
        if head is None:
            return False
        named = named_head(head)
        if named is not None and (named[0] != token or named[1] > life):
            return False  # another subject's, or the subject's next life's
        return await self.objects.delete_if_match(entry.key, entry.etag)
