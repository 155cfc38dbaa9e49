"""A writer's commit as data: what it commits (:class:`How`), and what the manifest
asks of it before a contended commit can go on (:class:`Need`).

The manifest never calls back up into the writer. On a contended commit it decides
(``manifest.decide``, pure) and, when the decision needs the writer's objects touched
first (stored, stored again after a deletion, an old life swept, heads spilled to
markers, an item's held copies cleared), it answers with that :class:`Need`; the writer
meets it and asks again with ``how.after(need)``. SlateDB's manifest updates run the
same way: the caller holds the loop, the store holds the rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from langgraph_s3.core.held import InlineCommit
from langgraph_s3.core.records import Entry, Expiry, Raw

NeedKind = Literal["stored", "clear", "sweep", "ensure", "spill", "rewrite"]
EVERY_NEED: frozenset[NeedKind] = frozenset(
    {"stored", "clear", "sweep", "ensure", "spill", "rewrite"}
)
"""What a writer meets: all of it (a caller that meets none gets the commit alone)."""


@dataclass(frozen=True)
class Need:
    """What the writer must do before its contended commit goes on.

    * ``stored``: its checkpoint's object is stored (the fast path failed; the
      contended path commits only stored objects).
    * ``clear``: the item's held copies (``raw``) are stored and taken out.
    * ``sweep``: the expired life (``expiry``) is swept, but for this checkpoint.
    * ``ensure``: its objects are there, in the life ``life`` it joins.
    * ``spill``: tip markers of ``heads`` under ``generation`` are stored (the item
      then drops those heads).
    * ``rewrite``: its objects are stored again, a deletion (the tombstones ``revs``)
      having ended.
    """

    kind: NeedKind
    raw: Raw | None = None
    expiry: Expiry | None = None
    life: str = ""
    entry: Entry | None = None
    heads: tuple[str, ...] = ()
    generation: str = ""
    revs: tuple[int, ...] = ()
    ensured: str | None = None
    """The commit's progress as the manifest saw it when it asked (``How``'s fields of
    the same names), carried into the next call by :meth:`How.after`: a re-check it
    decided on (after waiting for a removal, or a deletion) is not lost on the way."""
    rewritten: tuple[int, ...] | None = None
    lost: int = 0


@dataclass(frozen=True)
class How:
    """How a checkpoint is committed, and what its writer did so far for it.

    Args:
        uses_delta: it has DeltaChannel state to rebuild from history.
        life: the life the parent was read in, when known (see ``advance``).
        inline: what the fast path carries (``InlineCommit``).
        metadata: its metadata; a root latest records its pairs (``core.meta``).
        meets: the needs the writer meets; one it does not is skipped (its objects
            then left as they are).
    """

    uses_delta: bool = False
    life: str | None = None
    inline: InlineCommit | None = None
    metadata: Mapping[str, Any] | None = None
    meets: frozenset[NeedKind] = frozenset()
    started: bool = False
    """The fast path was tried (and failed): the next call goes to the contended path."""
    cleared: bool = False
    ensured: str | None = None
    rewritten: tuple[int, ...] | None = None
    spilled: Need | None = None
    """A spill whose markers are stored: the item drops those heads on the next call."""
    lost: int = 0
    """Rounds lost to other writers so far: ``max_conflicts`` bounds the whole commit."""

    def after(self, need: Need) -> How:
        """This commit once ``need`` was met (a spill's heads are dropped once)."""
        met = replace(
            self,
            started=True,
            spilled=None,
            ensured=need.ensured,
            rewritten=need.rewritten,
            lost=need.lost,
        )
        if need.kind == "clear":
            return replace(met, cleared=True)
        if need.kind == "ensure":
            return replace(met, ensured=need.life)
        if need.kind == "rewrite":
            return replace(met, rewritten=need.revs)
        if need.kind == "spill":
            return replace(met, spilled=need)
        return met


PLAIN = How()
"""A commit with nothing to carry, whose caller meets no need."""
