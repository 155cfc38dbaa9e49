"""What a deletion's late pass removes from a thread that lives again (a new
conversation on the id, or an import's replace): the write objects its writers' PUTs in
flight brought back after the deletion listed the thread, and nothing of the life now
there.

A write object names its checkpoint and a task id no deletion can know, so no erasure
marker can refuse it (``erasure.py``); a writer frozen with its ``put_writes`` PUT
queued sends it within :func:`~langgraph_s3.checkpoint.erasure.late_pass_seconds`.
"""

from __future__ import annotations

from collections.abc import Iterable

from langgraph_s3.checkpoint.erasure import LATE_MARGIN
from langgraph_s3.checkpoint.history import lineage_of, with_spilled
from langgraph_s3.core.keys import Layout, NamespaceKeys
from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.core.records import Entry, Listed, uuid6_upto
from langgraph_s3.errors import InvalidIdError


def upto_of(layout: Layout, thread: str, keys: Iterable[str], now: float) -> str:
    """``Late.upto`` of a deletion that saw ``keys`` at ``now``: the newest checkpoint
    id among them, or ``now`` plus :data:`LATE_MARGIN` as a uuid6, the larger (a
    writer's clock may run ahead of the deleter's: its checkpoint in flight, never
    listed, is still the ended life's)."""
    ids = [cid for k in keys if (cid := layout.checkpoint_id_of(thread, k)) is not None]
    return max([uuid6_upto(now + LATE_MARGIN), *ids])


async def leftovers(
    layout: Layout,
    objects: ObjectStorePort,
    thread: str,
    found: tuple[list[Entry], list[Listed], list[str]],
    upto: str,
) -> list[Listed]:
    """The write objects of ``found`` an ended life left: of checkpoints made up to
    ``upto`` (the ended life's ids; a later life's own are newer) that the live history
    does not hold, walked from the items' tips over the checkpoint keys listed, packed
    or held. ``found``: the live entries, the thread's objects and the keys its packs
    hold, read while no entry changed (a write the listing shows was then made for a
    checkpoint the entries already had: an import writes a checkpoint's writes after
    its commit). A write of a checkpoint made since ``upto`` is never one: a
    conversation begun since may write a checkpoint's writes before its commit.

    Cost: 1 LIST per namespace whose branch heads spilled out of its item.
    """
    entries, listed, packed = found
    prefix = layout.thread(thread)
    keys = [*packed, *(o.key for o in listed)]
    history: set[tuple[str, str]] = set()
    for e in entries:
        space = layout.namespace(thread, e.checkpoint_ns)
        history |= {(space.prefix, cid) for cid in await _lineage(objects, space, e, keys)}
    gone: list[Listed] = []
    for o in listed:
        ns = Layout.namespace_prefix_of(prefix, o.key)
        cid = layout.checkpoint_id_of(thread, o.key)
        kind = Layout.kind_in_thread(prefix, o.key)
        if ns is None or cid is None or kind is None or kind[1] != "w" or cid > upto:
            continue
        if (ns, cid) not in history:
            gone.append(o)
    return gone


async def _lineage(
    objects: ObjectStorePort, ns: NamespaceKeys, entry: Entry, keys: list[str]
) -> set[str]:
    """The checkpoint ids of one namespace's history: its tips, and the ancestors the
    checkpoint keys (loose, packed, held by the item) lead to."""
    entry = await with_spilled(objects, ns, entry)
    lineage = lineage_of(entry, ns)
    mine = [k for k in keys if k.startswith(ns.checkpoints)]
    mine += [ns.checkpoint_at(c.tail) for c in entry.inline]
    out = set(entry.tips)
    for key in sorted(set(mine)):  # newest first: ids are inverted in keys
        try:
            ck = ns.parse_checkpoint(key)
        except InvalidIdError:
            continue
        if lineage.admit(ck):
            out.add(ck.checkpoint_id)
    return out
