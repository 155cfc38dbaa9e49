"""A thread's drawing: its checkpoints in rows (newest first) and lanes (one per fork).

Pure functions of ids and parents, no request: the viewer (:mod:`.viewer`) lays out
each namespace with them.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence

__all__ = ["lanes", "order"]


def order(ids: Iterable[str], parents: dict[str, str | None]) -> tuple[list[str], set[str]]:
    """Rows, oldest first, with every parent above its children, and the links cut
    to make that possible.

    Ids are time-ordered, so sorting them is the usual answer; a host whose clock
    was behind can still write a child that sorts before its parent, and a damaged
    or hand-made thread can hold a loop (a checkpoint its own ancestor). Kahn's
    algorithm on the id order gives the first; a loop is cut at its oldest member.
    """
    ids = sorted(set(ids))
    known = set(ids)
    cut: set[str] = set()
    done: set[str] = set()
    for start in ids:  # one parent each: a walk up either ends or closes a loop
        path: list[str] = []
        on_path: dict[str, int] = {}
        at: str | None = start
        while at is not None and at in known and at not in done:
            if at in on_path:
                cut.add(min(path[on_path[at] :]))
                break
            on_path[at] = len(path)
            path.append(at)
            at = parents.get(at)
        done.update(path)
    children: dict[str, list[str]] = {}
    heap: list[str] = []
    for cid in ids:
        p = parents.get(cid)
        if p is not None and p in known and cid not in cut:
            children.setdefault(p, []).append(cid)
        else:
            heap.append(cid)
    heapq.heapify(heap)
    placed: list[str] = []
    while heap:
        cid = heapq.heappop(heap)
        placed.append(cid)
        for child in children.get(cid, ()):
            heapq.heappush(heap, child)
    return placed, cut


def lanes(ids: Sequence[str], parents: dict[str, str | None]) -> dict[str, int]:
    """The lane of each checkpoint, ``ids`` in row order (each parent above its
    children: :func:`order`).

    Lane 0 is the line that ends at the newest checkpoint: what the thread continues
    from. Every other leaf, newest first, climbs to the first checkpoint already
    placed; the checkpoints it passes form a branch on the lowest lane free over the
    rows the branch covers (from the row below its fork point down to its leaf).
    A checkpoint thus has at most one child on its own lane, and every other child
    starts a fork.
    """
    row = {cid: i for i, cid in enumerate(ids)}
    children: set[str] = set()
    for cid in ids:
        p = parents.get(cid)
        if p is not None and p in row and p != cid:
            children.add(p)
    lane: dict[str, int] = {}
    busy: dict[int, list[tuple[int, int]]] = {}
    for leaf in sorted((c for c in ids if c not in children), key=row.__getitem__, reverse=True):
        chain: list[str] = []
        at: str | None = leaf
        seen: set[str] = set()
        while at is not None and at in row and at not in lane and at not in seen:
            seen.add(at)
            chain.append(at)
            at = parents.get(at)
        forked = at is not None and at in lane
        span = (row[at] + 1 if forked else row[chain[-1]], row[leaf])  # type: ignore[index]
        n = 0
        while any(a <= span[1] and span[0] <= b for a, b in busy.get(n, [])):
            n += 1
        busy.setdefault(n, []).append(span)
        for cid in chain:
            lane[cid] = n
    return lane
