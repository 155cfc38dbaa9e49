"""What the item holds for its readers beside the latest: committed checkpoints'
envelopes until their objects are stored, and whether the latest has pending writes.

A fast commit (:meth:`~langgraph_s3.manifest.commits.Commits.advance` with an
:class:`~langgraph_s3.core.records.InlineCommit`) carries its checkpoint's envelope in
the item and its object is written off the critical path; the copy leaves the item
only once the object is known to be stored (:meth:`Held.settle`, or a later commit's
``drop``). So every committed checkpoint is, at every moment, in the item or in S3.
"""

from __future__ import annotations

from collections.abc import Iterable

from langgraph_s3.core.conditions import Absent, Change, Exists, all_of, eq
from langgraph_s3.core.conditions import S as Str
from langgraph_s3.core.records import BARE_ATTRIBUTE, INLINE_PREFIX
from langgraph_s3.manifest.commits import Commits


class Held(Commits):
    """``written`` (a checkpoint gained pending writes) and ``settle`` (held copies
    whose objects are stored leave the item)."""

    async def written(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> bool:
        """``checkpoint_id`` has pending writes: if the item says it is a bare latest,
        it no longer is (readers of the latest list its writes again).

        Cost: 1 UpdateItem, conditioned on the item naming it bare (no change, and no
        error, otherwise).

        Returns:
            Whether the item named it bare (and no longer does).
        """
        change = Change(remove=(BARE_ATTRIBUTE,))
        when = eq(BARE_ATTRIBUTE, Str(checkpoint_id))
        return await self._if(self.db.update(self.key(thread_id, checkpoint_ns), change, when=when))

    async def settle(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_ids: Iterable[str],
        *,
        life: str | None = None,
    ) -> None:
        """Held copies whose objects are stored leave the item (none named: no request).

        Cost: 1 UpdateItem, conditioned on the item being there and, given ``life``,
        in that life (a new life may reuse the ids: its copies are not these); a copy
        already gone is no change.
        """
        names = tuple(sorted({INLINE_PREFIX + c for c in checkpoint_ids}))
        if not names:
            return
        change = Change(remove=names)
        same = None if life is None else eq("life", Str(life)) if life else Absent("life")
        when = all_of(Exists("pk"), same)
        await self._if(self.db.update(self.key(thread_id, checkpoint_ns), change, when=when))
