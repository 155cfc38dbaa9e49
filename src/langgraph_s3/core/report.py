"""What a maintenance call did, and how it reports progress on the way.

Every maintenance call of the saver (delete, prune, copy, the TTL sweep)
returns a :class:`Report`; long ones also call an optional ``progress``
callback after each thread, which the command-line tool draws as a bar.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

__all__ = ["Progress", "Report"]


@dataclass(slots=True)
class Report:
    """Counts of what one maintenance call did (removed; copied for a copy;
    written or read for an export or an import)."""

    threads: int = 0
    """Threads it acted on."""
    namespaces: int = 0
    """Checkpoint namespaces among them."""
    checkpoints: int = 0
    """Checkpoints removed (or copied)."""
    objects: int = 0
    """S3 objects removed (or copied): checkpoints, writes, blobs."""
    bytes: int = 0
    """Their stored size (for an export: the file's)."""
    writes: int = 0
    """Pending writes exported or imported."""
    skipped: int = 0
    """Threads left alone: they changed meanwhile (a new conversation on an expired
    id), or had nothing to do."""

    def __add__(self, other: Report) -> Report:
        return Report(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


Progress = Callable[[Report, int, int], None]
"""Called after each thread with the running totals, the threads done and the
threads in all (the total may grow while a Scan is still reading)."""
