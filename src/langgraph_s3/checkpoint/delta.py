"""DeltaChannel state: each channel's seed and the writes since.

LangGraph rebuilds a ``DeltaChannel`` from its seed (the last snapshot) and the
writes made since, through ``aget_delta_channel_history``. A checkpoint whose put
stored logs (logs.py) gives them in one round trip after its envelope, and a
``get_tuple`` reads them beside its values, into the context's memo: LangGraph's
next call is then answered without a request. An older checkpoint, or one whose
put could not continue its parent's log, is walked (``history.DeltaWalk``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from langgraph.checkpoint.base import DeltaChannelHistory
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_s3.checkpoint import logs
from langgraph_s3.checkpoint.context import SaverContext
from langgraph_s3.checkpoint.history import DeltaWalk, fetch_values, snapshot_depth
from langgraph_s3.checkpoint.loading import noted, pack_in_use
from langgraph_s3.checkpoint.overlay import HeldOverlay
from langgraph_s3.core import codec
from langgraph_s3.core.keys import CheckpointKey, NamespaceKeys
from langgraph_s3.core.ports import ObjectStorePort


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
        used = pack_in_use(self.ctx, keys)  # what the walk lists through
        # the manifest first: the checkpoints its item holds are laid over the listing
        entry = await self.ctx.manifest.reads.latest(keys.thread_id, keys.checkpoint_ns)
        if entry is None:
            return {ch: {"writes": []} for ch in channels}
        noted(self.ctx, keys, entry)
        if entry.pack != used:  # packed meanwhile: walk again, with the pack
            return await self.history(keys, cid, channels)
        objects = HeldOverlay(self.ctx.objects)
        objects.hold(keys, entry)
        walk = DeltaWalk(objects, self.serde, keys, cid)
        await walk.prime(writes=False)  # a log needs none; a walk lists them as it goes
        walk.floor = entry.floor
        target = await walk.find(cid or entry.latest_id)
        if target is None and cid is None:  # the latest in flight: its parent stands in
            parent = keys.parse_checkpoint(keys.checkpoint_at(entry.latest_tail)).parent_id
            target = await walk.find(parent) if parent is not None else None
        body = await objects.get(target.key, cache=True) if target else None
        if target is not None and body is not None:
            logged = await self._logged(objects, keys, target, body, channels)
            if logged is not None:
                return logged
        depth = snapshot_depth(self.serde, body, channels, target.key if target else "")
        return await walk.history(target, channels, depth)

    async def _logged(
        self,
        objects: ObjectStorePort,
        keys: NamespaceKeys,
        target: CheckpointKey,
        body: bytes,
        channels: Sequence[str],
    ) -> dict[str, DeltaChannelHistory] | None:
        """The histories from the target's logs; None when it has none for a channel."""
        with codec.reading(target.key):
            env = codec.load_checkpoint(body)
        needed = logs.needed(keys, env, channels)
        if needed is None:
            return None
        bodies = await fetch_values(objects, keys, list(dict.fromkeys(needed)))
        return logs.histories(self.serde, keys, target.key, env, channels, bodies, {})
