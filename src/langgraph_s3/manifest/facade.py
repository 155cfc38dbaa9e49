"""The manifest: which checkpoints exist, per deployment, thread and namespace.

Design
------
**The manifest defines what exists.** A checkpoint belongs to a thread's
history only when it is ``latest`` or one of ``heads``, or an ancestor of one
(checkpoint keys carry their parent id), and is not older than ``floor``. An
object written by a writer that crashed before its manifest update is
invisible (no phantom step), and so is everything of a deleted or expired
life when the id is reused: the new life starts from a parentless checkpoint
and its own ``floor``.

**Writers.** The common put is one UpdateItem conditioned on ``latest_id`` being
the new checkpoint's parent (and older). Anything else (a fork, a concurrent
writer, a replay, a fresh namespace) reads the item and compare-and-swaps on
``rev`` (``retry.cas``). A put whose parent belongs to a deleted, expired or
pruned life is refused: its unchanged channel blobs may already be gone.

**Maintenance** conditions on ``rev``: prune raises ``floor`` before deleting,
delete_thread writes a tombstone before deleting. While the tombstone's lease
runs (the deletion is in progress), a new life on the same id waits, so the
deletion never removes its objects.

**Tenancy.** The deployment (bucket and prefix) is part of the key, so any
number of deployments share one table; the table is the only shared thing.

**One set of rules, any table.** The rules are written once, over the narrow
:class:`~langgraph_s3.core.ports.TablePort` (get, query, scan, and writes conditioned
on the item, the conditions as data): :mod:`.dynamodb` renders them for DynamoDB, the
in-memory table of :mod:`langgraph_s3.testing.table` evaluates them. The class is
laid out in floors, one module each: :mod:`.reads`, :mod:`.commits` (a writer's),
:mod:`.updates` (whole-thread), :mod:`.removals` (maintenance's), :mod:`.deletions`,
and the setup here; :mod:`.decide` holds the pure decisions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from langgraph_s3.core.conditions import SS, Absent, Change, N, S, all_of, eq
from langgraph_s3.core.keys import encode
from langgraph_s3.core.meta import index_attribute, index_name
from langgraph_s3.core.records import (
    INDEXED,
    INDEXED_KEYS,
    METADATA_RECORDED,
    MIGRATED,
    RUNS_INDEXED,
    TTL_ATTRIBUTE,
    Entry,
    Fields,
    entry_of,
)
from langgraph_s3.core.tasks import bounded_map
from langgraph_s3.manifest.decide import LAYOUT_VERSION, META_SK, RUNS_MARK, new_life
from langgraph_s3.manifest.staging import Staging

__all__ = ["Manifest"]


class Manifest(Staging):
    """The table that says which checkpoints exist: one item per (thread, namespace).

    Item layout (the key names the deployment, so deployments share a table)::

        pk = {bucket}/{prefix}/{thread}   sk = {namespace}   (each part keys.encode'd: no "/")
        thread_id, checkpoint_ns       the raw ids, for listing
        latest_id, latest_tail         newest committed checkpoint and its key tail
        heads                          other committed branch tips (forks, writers that lost
                                       the race to latest); absent when there are none
        floor                          nothing older belongs to this life of the thread
        born                           the floor the life began at, until prune raises
                                       it: a root a concurrent first writer commits
                                       late (older than the floor) lowers the floor
        gone                           checkpoints maintenance removed above the floor: a
                                       writer still holding one may not continue it
        rev                            bumped by every change: the compare-and-swap token
        uses_delta                     the latest has DeltaChannel state to rebuild
        created_at, updated_at         epoch seconds
        expires_at                     optional TTL attribute (idle threads retire)
        deleted, deleted_at,           a tombstone left by delete_thread (or drop) and
        lease_until                    the lease of the deletion in progress

    plus one marker per deployment (``pk = {bucket}/{prefix}/``, ``sk = ~layout``)
    recording the key layout its entries use.

    **The manifest defines what exists**: a checkpoint object is part of a thread
    only when the item's tips (``latest_id``, ``heads``) lead to it, not below
    ``floor``. A put sends its checkpoint object beside the fast-path update, so
    the latest may name an object still in flight (or, after a crash between the
    two, never stored): readers then take the latest's parent (a tip too, see
    ``history.lineage_of`` and ``demoted``). Every other path writes objects
    first, so a crash leaves only invisible objects.

    Cost in requests (each one round trip unless said otherwise):

    * :meth:`latest`, :meth:`read`: 1 GetItem (strongly consistent).
    * :meth:`namespaces`: 1 Query per 1 MB page of the thread's namespaces.
    * :meth:`scan`: 1 Scan per 1 MB page of the whole table (maintenance only).
    * :meth:`advance`: 1 UpdateItem on the fast path (the parent is latest);
      otherwise + 1 GetItem and 1 conditional write per contended round.
    * :meth:`raise_floor`, :meth:`replace`, :meth:`merge`, :meth:`drop`:
      1 conditional write.
    * :meth:`tombstone`: 1 Query page, then 1 UpdateItem per namespace (concurrent).
    * :meth:`renew`, :meth:`release`: 1 UpdateItem per namespace (concurrent).

    Example::

        manifest = Manifest(
            ClientFactory(), "checkpoints",  # or any TablePort, and no name
            deployment=deployment_key("my-bucket", "prod"), ttl_seconds=None,
        )
        await manifest.advance("t1", "", cid, tail, None)  # a new life: 1 UpdateItem
        entry = await manifest.latest("t1", "")            # 1 GetItem
        assert entry is not None and entry.latest_id == cid
    """

    # -- setup --------------------------------------------------------------
    async def exists(self) -> bool:
        """Whether the table exists. Cost: 1 DescribeTable."""
        return await self.db.exists()

    async def create(self) -> None:
        """Create the table, wait until it is active, enable its TTL (``expires_at``).

        A table that already exists is fine. Cost on DynamoDB: 1 CreateTable, 1
        DescribeTable per poll (usually a few), 1 UpdateTimeToLive.
        """
        await self.db.create(ttl_attribute=TTL_ATTRIBUTE)

    # ---------------------------------------------------------- the run index
    def _run_pk(self, run_token: str) -> str:
        return f"{self.deployment}{RUNS_MARK}{run_token}"

    async def note_run(self, thread_id: str, run_token: str) -> None:
        """Record that ``run_token``'s run wrote to the thread (``delete_for_runs``
        finds its threads by it): one item per (run, thread), under the run.

        Cost: 1 PutItem (unconditional: writing it again changes nothing).
        """
        item = {
            "pk": {"S": self._run_pk(run_token)},
            "sk": {"S": encode(thread_id, "thread_id")},
            "thread_id": {"S": thread_id},
        }
        await self.db.put(item)

    async def marker_says(self) -> frozenset[str]:
        """What the deployment's marker holds of ``MIGRATED`` (:meth:`migrated`),
        ``RUNS_INDEXED`` (the run index holds
        every run) and ``METADATA_RECORDED`` (every thread's item records its latest
        metadata), as a ``setup()`` that made it so wrote. Cost: 1 GetItem."""
        item = await self.db.get({"pk": {"S": self.deployment}, "sk": {"S": META_SK}}) or {}
        says = {n for n in (RUNS_INDEXED, METADATA_RECORDED) if n in item}
        says |= {INDEXED + k for k in item.get(INDEXED_KEYS, {}).get("SS", ())}
        if int(item.get("version", {}).get("N", "0")) >= LAYOUT_VERSION:
            says.add(MIGRATED)
        return frozenset(says)

    async def marker_add(self, name: str) -> None:
        """Write ``name`` (and when) into the deployment's marker; ``INDEXED + key``:
        the items of older threads carry the key's index value. Cost: 1 UpdateItem."""
        if name.startswith(INDEXED):
            change = Change(add={INDEXED_KEYS: SS([name.removeprefix(INDEXED)])})
        else:
            change = Change({name: N(int(self.now()))})
        await self.db.update({"pk": {"S": self.deployment}, "sk": {"S": META_SK}}, change)

    async def record_meta(self, thread_id: str, latest_id: str, metadata: Any) -> bool:
        """Record the metadata of a thread's latest root checkpoint in its item, if
        ``latest_id`` is still the latest (a later commit records its own).

        Cost: 1 conditional UpdateItem. Returns False when the latest moved.
        """
        change = self.meta_change("", metadata)
        assert change is not None
        sets, removes = change
        update = Change({k: S(v) for k, v in sets.items()}, remove=removes)
        when = all_of(eq("latest_id", S(latest_id)), Absent("deleted"))
        return await self._if(self.db.update(self.key(thread_id, ""), update, when=when))

    async def run_threads(self, run_tokens: Sequence[str]) -> list[str]:
        """The threads the index names for these runs (some may be gone since).

        Cost: 1 Query per run (per 1 MB of its threads), concurrently.
        """

        async def one(token: str) -> list[str]:
            return [
                i["thread_id"]["S"]
                async for page in self.db.query(self._run_pk(token))
                for i in page
            ]

        found = await bounded_map(one, list(run_tokens))
        return sorted({t for threads in found for t in threads})

    async def missing_indexes(self) -> list[str]:
        """The keys of ``index_metadata`` whose index the table lacks. Cost: 1 DescribeTable
        (none when no key is declared)."""
        if not self.index_metadata:
            return []
        have = set(await self.db.indexes())
        return [k for k in self.index_metadata if index_name(k) not in have]

    async def create_index(self, key: str) -> None:
        """Add the index of one metadata key (DynamoDB fills it from the items there).
        Cost: 1 UpdateTable, then 1 DescribeTable per poll until it is ACTIVE."""
        await self.db.create_index(index_name(key), index_attribute(key))

    async def migrated(self) -> bool:
        """Whether this deployment's marker says its entries use this key layout.

        Cost: 1 GetItem.
        """
        item = await self.db.get({"pk": {"S": self.deployment}, "sk": {"S": META_SK}}) or {}
        return int(item.get("version", {}).get("N", "0")) >= LAYOUT_VERSION

    async def legacy_entries(self) -> AsyncIterator[Entry]:
        """Entries written by langgraph-s3 0.1 (key without the deployment).

        Cost: 1 Scan per 1 MB page of the whole table.
        """
        async for items in self.db.scan():
            for item in items:
                if "/" in item.get("pk", {}).get("S", "/") or "rev" in item:
                    continue
                try:
                    yield entry_of(item)
                except (KeyError, TypeError, AttributeError, ValueError):
                    continue

    async def adopt(self, legacy: Entry) -> None:
        """Give a 0.1 entry this deployment's key (its whole history stays visible).

        Cost: 1 PutItem, conditioned on there being no entry under the new key yet
        (one there already stands).
        """
        new = Fields(
            legacy.latest_id, legacy.latest_tail, "", legacy.uses_delta, 0, set(), life=new_life()
        )
        await self._swap(legacy.thread_id, legacy.checkpoint_ns, new, rev=None)

    async def mark_migrated(self, also: Iterable[str] = ()) -> None:
        """Record that this deployment's entries use this key layout, and the flags
        ``also`` (see :meth:`marker_says`). Cost: 1 PutItem."""
        now = {"N": str(int(self.now()))}
        item = {
            "pk": {"S": self.deployment},
            "sk": {"S": META_SK},
            "version": {"N": str(LAYOUT_VERSION)},
            "migrated_at": now,
        }
        await self.db.put(item | {name: now for name in also})
