"""Whether a checkpoint a commit relies on is there: its parent's object (loose, packed,
or a copy its item holds), its thread's item alive; the reads a contended commit and
a PUT over an erasure marker make."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from langgraph_s3.checkpoint.context import SaverContext
from langgraph_s3.checkpoint.packs import PackedObjects, PackGoneError, packed_view
from langgraph_s3.core.keys import NamespaceKeys
from langgraph_s3.core.ports import ManifestPort, ObjectStorePort

__all__ = ["living", "parent_there"]


async def parent_there(
    ctx: SaverContext, objects: ObjectStorePort, keys: NamespaceKeys, checkpoint_id: str
) -> bool:
    """Whether a checkpoint's object is there, its pack included (the pack is read from
    the manifest first: this process may not know it), or its namespace's item holds a
    copy of it (committed, its object still on its way: over an erasure marker an
    import's replace left under its id). Two round trips, a GetItem more when not."""
    prefix = keys.checkpoint_id_prefix(checkpoint_id)
    packed = packed_view(objects)
    if packed is None:
        found = bool(await objects.list_all(prefix))
    else:
        found = await _listed_packed(ctx, packed, keys, prefix)
    if found:
        return True
    raw = await ctx.manifest.reads.read(keys.thread_id, keys.checkpoint_ns)
    held = raw.inline if raw is not None else ()
    return any(c.checkpoint_id == checkpoint_id for c in held)


async def _listed_packed(
    ctx: SaverContext, objects: PackedObjects, keys: NamespaceKeys, prefix: str
) -> bool:
    thread = ctx.layout.thread(keys.thread_id)
    encoded = thread[len(ctx.layout.threads()) : -1]
    for attempt in range(3):  # a pack replaced or unpacked meanwhile: ask again
        objects.note(thread, await ctx.manifest.reads.pack_of(encoded))
        try:
            return bool(await objects.list_all(prefix))
        except PackGoneError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def living(
    manifest: ManifestPort, thread_id: str, checkpoint_ns: str
) -> Callable[[], Awaitable[bool]]:
    """Whether the item of (thread, namespace) is there and no tombstone (1 GetItem)."""

    async def check() -> bool:
        raw = await manifest.reads.read(thread_id, checkpoint_ns)
        return raw is not None and raw.committed and not raw.tombstone

    return check
