"""DeltaChannel state: the writes since each channel's last snapshot.

LangGraph rebuilds a ``DeltaChannel`` from its seed (the last snapshot) and the
writes made since, through ``aget_delta_channel_history``. The walk itself is
``history.DeltaWalk``; this module decides when it runs. For the latest
checkpoint of a DeltaChannel thread, ``aget_tuple`` walks the chain overlapped
with its own reads and keeps the result in the context's memo, so LangGraph's
next call is answered without a request (4 round trips in all when a seed is
near; the ancestors' objects take one more per 32).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from langgraph.checkpoint.base import CheckpointTuple, DeltaChannelHistory
from langgraph.checkpoint.serde.base import SerializerProtocol

from .context import SaverContext
from .history import DeltaWalk, channels_to_replay, snapshot_depth
from .keys import CheckpointKey, NamespaceKeys, invert_id
from .manifest import Entry
from .tasks import gather_all

if TYPE_CHECKING:
    from .reading import Reader


class DeltaReader:
    """Rebuilds DeltaChannel histories (one per call: see context.py)."""

    def __init__(self, ctx: SaverContext, serde: SerializerProtocol) -> None:
        self.ctx, self.serde = ctx, serde

    async def history(
        self, keys: NamespaceKeys, cid: str | None, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Per-channel seed and writes up to checkpoint ``cid`` (latest when None)."""
        if not channels:
            return {}
        if cid is not None:
            ready = self.ctx.delta_memo.pop((keys.prefix, cid), None)
            if ready is not None and all(ch in ready for ch in channels):
                return {ch: ready[ch] for ch in channels}
        walk = DeltaWalk(self.ctx.objects, self.serde, keys, cid)
        entry, _ = await gather_all(
            self.ctx.manifest.latest(keys.thread_id, keys.checkpoint_ns), walk.prime()
        )
        if entry is None:
            return {ch: {"writes": []} for ch in channels}
        walk.floor = entry.floor
        target = await walk.find(cid or entry.latest_id)
        if target is None and cid is None:  # the latest in flight: its parent stands in
            parent = keys.parse_checkpoint(keys.checkpoint_at(entry.latest_tail)).parent_id
            target = await walk.find(parent) if parent is not None else None
        cache = self.ctx.objects.cache
        cached = cache.get(target.key) if (cache is not None and target is not None) else None
        depth = snapshot_depth(self.serde, cached, channels, target.key if target else "")
        return await walk.history(target, channels, depth)

    async def latest(
        self, keys: NamespaceKeys, ck: CheckpointKey, entry: Entry, reader: Reader
    ) -> CheckpointTuple | None:
        """Latest checkpoint of a DeltaChannel thread: 4 round trips in all when the
        seed is near (one more per further 32 ancestors' objects).

        (1) manifest (done); (2) the checkpoint beside the namespace's first
        checkpoint and writes pages; (3) its blobs and writes beside the
        ancestors' envelopes and writes; (4) the seed blobs.
        """
        walk = DeltaWalk(self.ctx.objects, self.serde, keys, ck.checkpoint_id, entry.floor)
        body, _ = await gather_all(self.ctx.objects.get(ck.key, cache=True), walk.prime())
        if body is None:
            return await reader.stand_in(keys, entry)
        inv = invert_id(ck.checkpoint_id)
        await walk.cursor.upto(inv)
        writes = {inv: walk.cursor.take(inv)}
        reader.etags.update(walk.cursor.etags)
        channels = channels_to_replay(self.serde, body, ck.key)
        if not channels:
            (plain,) = await reader.materialize(keys, entry, [ck], [body], writes)
            return plain
        depth = snapshot_depth(self.serde, body, channels, ck.key)
        loaded, hist = await gather_all(
            reader.materialize(keys, entry, [ck], [body], writes),
            walk.history(ck, channels, depth),
        )
        self.ctx.delta_memo[(keys.prefix, ck.checkpoint_id)] = hist
        tup: CheckpointTuple = loaded[0]
        return tup
