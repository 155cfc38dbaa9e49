"""Shards of a deployment: N workers, each one a disjoint part of the table, together all of it.

A :class:`Shard` is DynamoDB's parallel Scan segment (``Segment`` of
``TotalSegments``): DynamoDB puts every item of one partition key (one thread)
in the same segment, so a worker sees each of its threads whole. Calls that
walk the whole deployment take ``segment`` and ``total_segments``
(:func:`shard_of`); the command-line tool takes ``--segment I/N``
(:meth:`Shard.parse`). Where the data is not in the table (the store's objects),
:meth:`Shard.holds` splits keys by a hash the same way. Pure, no I/O.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from langgraph_s3.errors import InvalidRequestError

__all__ = ["MAX_SEGMENTS", "Shard", "shard_of"]

MAX_SEGMENTS = 1_000_000
"""DynamoDB's most ``TotalSegments``."""
_TEXT = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True, slots=True)
class Shard:
    """Segment ``segment`` (zero-based) of ``total`` disjoint segments."""

    segment: int
    total: int

    def __post_init__(self) -> None:
        for name, value in (("segment", self.segment), ("total_segments", self.total)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidRequestError(f"{name} must be an integer, got {value!r}")
        if not 1 <= self.total <= MAX_SEGMENTS:
            raise InvalidRequestError(
                f"total_segments must be from 1 to {MAX_SEGMENTS:,} (DynamoDB's most), "
                f"got {self.total}"
            )
        if not 0 <= self.segment < self.total:
            raise InvalidRequestError(
                f"segment must be from 0 to total_segments - 1 = {self.total - 1} "
                f"(segments count from 0, as DynamoDB's), got {self.segment}"
            )

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"I/N"`` (zero-based ``I``), as ``--segment`` takes it."""
        found = _TEXT.fullmatch(text)
        if found is None:
            raise InvalidRequestError(
                f"a segment is I/N (segment I of N, I from 0 to N-1, e.g. 0/4), got {text!r}"
            )
        return cls(int(found.group(1)), int(found.group(2)))

    def holds(self, key: str) -> bool:
        """Whether ``key`` falls in this shard by its hash (for data outside the table).

        Every key falls in exactly one shard of ``total``; the same key always in the same.
        """
        if self.total == 1:
            return True
        digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        return int.from_bytes(digest, "big") % self.total == self.segment

    def __str__(self) -> str:
        return f"{self.segment}/{self.total}"


def shard_of(segment: int | None, total_segments: int | None) -> Shard | None:
    """The shard a call's ``segment`` / ``total_segments`` name (None: the whole
    deployment); one without the other is refused, as DynamoDB refuses it."""
    if segment is None and total_segments is None:
        return None
    if segment is None or total_segments is None:
        given, missing = (
            ("total_segments", "segment") if segment is None else ("segment", "total_segments")
        )
        raise InvalidRequestError(
            f"{given} needs {missing}: pass both (segment I of total_segments N) or neither"
        )
    return Shard(segment, total_segments)
