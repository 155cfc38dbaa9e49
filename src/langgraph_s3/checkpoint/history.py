"""Walking a namespace's history from its listings: writes cursor and DeltaChannel walk.

Checkpoint keys carry their parent id, so one ``ListObjectsV2`` page gives the
whole parent chain without reading a single checkpoint. The writes listing is
in the same (newest-first) order, so a cursor merge-joins it with the chain.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from langgraph.checkpoint.base import DeltaChannelHistory, PendingWrite
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_s3.core import codec
from langgraph_s3.core.keys import CheckpointKey, NamespaceKeys, invert_id
from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.core.records import Entry, Listed
from langgraph_s3.core.tasks import bounded_map, gather_all
from langgraph_s3.core.values import decode_value, typed_value, value_keys
from langgraph_s3.errors import CorruptObjectError, InvalidIdError

MAX_WINDOW = 1024
DEFAULT_WINDOW = 16


class Lineage:
    """Which checkpoints of a listing belong to the thread's history.

    The manifest's tips (latest and branch heads) and their ancestors do;
    nothing older than the floor does. Keys are fed newest first, as listings
    return them, and a parent is always older than its child (uuid6 ids), so
    one pass decides: a key is in the history when some kept key named it
    as parent. A phantom (written by a crashed writer, never committed) and a
    deleted or expired life are left out.
    """

    def __init__(
        self,
        tips: set[str],
        floor: str,
        pinned: dict[str, str] | None = None,
        gone: frozenset[str] = frozenset(),
    ) -> None:
        self.frontier = set(tips)
        self.floor = floor
        self.pinned = pinned or {}
        """id -> the one key the manifest committed for it (a stray copy is not it)."""
        self.gone = gone
        """Checkpoints maintenance removed: never history, even while an object of one
        is still there (a deletion in progress, an unpacking that put it back)."""

    def admit(self, ck: CheckpointKey) -> bool:
        cid = ck.checkpoint_id
        if cid not in self.frontier or cid < self.floor or cid in self.gone:
            return False
        if self.pinned.get(cid, ck.key) != ck.key:
            return False
        self.frontier.discard(cid)
        if ck.parent_id is not None and ck.parent_id >= self.floor:
            self.frontier.add(ck.parent_id)
        return True

    @property
    def exhausted(self) -> bool:
        """Nothing further down the listing can belong to the history."""
        return not self.frontier


async def with_spilled(objects: ObjectStorePort, keys: NamespaceKeys, entry: Entry) -> Entry:
    """The entry with the heads it spilled to tip markers (``Manifest.advance``), for
    a walk of the whole history. Cost: none for an entry that never spilled (any but
    a thread of more than ``HEADS_INLINE`` branches); else one LIST per 1,000 heads."""
    if not entry.spilled or entry.spilled_heads:
        return entry
    heads = {
        head
        for o in await objects.list_all(keys.tips(entry.spilled))
        if (head := keys.tip_of(entry.spilled, o.key)) is not None
        and head >= entry.floor
        and head not in entry.gone
    }
    return replace(entry, spilled_heads=frozenset(heads))


def lineage_of(entry: Entry, keys: NamespaceKeys) -> Lineage:
    """The entry's history rule, with the latest pinned to the key it committed. The
    latest's parent is a tip too: it stands in for the latest while the latest's
    object is not there (in flight, or its writer crashed: see ``Manifest.advance``)."""
    latest = keys.checkpoint_at(entry.latest_tail)
    tips = entry.tips
    try:
        parent = keys.parse_checkpoint(latest).parent_id
    except InvalidIdError:
        parent = None
    if parent is not None:
        tips = tips | {parent}
    return Lineage(tips, entry.floor, {entry.latest_id: latest}, entry.gone)


async def fetch_values(
    objects: ObjectStorePort, keys: NamespaceKeys, vkeys: Sequence[str]
) -> dict[str, bytes | None]:
    """The objects holding values (cached: all immutable). A checkpoint that holds a
    value and is gone from ``c/`` was removed by delete_for_runs, which moved it to
    ``h/``: read there, one round trip more, only then."""
    got = dict(zip(vkeys, await objects.get_many(vkeys, cache=True), strict=True))
    gone = [k for k, body in got.items() if body is None and k.startswith(keys.checkpoints)]
    if gone:
        moved = await objects.get_many([keys.moved_copy(k) for k in gone], cache=True)
        got.update(zip(gone, moved, strict=True))
    return got


def held_writes_of(keys: NamespaceKeys, entry: Entry, inv: str) -> list[str]:
    """The keys of the writes ``entry``'s item holds for the checkpoint whose inverted id
    is ``inv``: all of a bare latest's (no listing needed)."""
    return [keys.held_key(w.tail) for w in entry.writes if w.inverted == inv]


def write_version(key: str, etag: str) -> str:
    """The cache key of one version of a write object (a regular writes object can grow
    by compare-and-swap, so the key alone does not name its bytes)."""
    return f"{key}@{etag}"


async def fetch_writes(
    objects: ObjectStorePort,
    wkeys: Sequence[str],
    etags: dict[str, str],
    seen: dict[str, str] | None = None,
) -> list[bytes | None]:
    """Write objects, each read once per version: a listed one whose ETag is cached (it
    was written or read by this process) costs no request. ``seen``: key -> the ETag of
    the version each body is (a GET may find a newer one than the listing showed)."""
    cache = objects.cache
    out: list[bytes | None] = [None] * len(wkeys)
    todo: list[int] = []
    for i, key in enumerate(wkeys):
        etag = etags.get(key)
        hit = cache.get(write_version(key, etag)) if cache is not None and etag else None
        if hit is None:
            todo.append(i)
        else:
            out[i] = hit
            if seen is not None and etag:
                seen[key] = etag
    if todo:
        got = await bounded_map(lambda i: objects.get_with_etag(wkeys[i]), todo)
        for i, (body, etag) in zip(todo, got, strict=True):
            out[i] = body
            if body is not None and etag and cache is not None:
                cache.put(write_version(wkeys[i], etag), body)
            if body is not None and etag and seen is not None:
                seen[wkeys[i]] = etag
    return out


async def _nothing() -> None:
    return None


async def next_page(pages: AsyncIterator[list[Listed]]) -> list[Listed]:
    """The next page of a listing; an empty list once it is exhausted."""
    try:
        return await pages.__anext__()
    except StopAsyncIteration:
        return []


@dataclass
class WritesCursor:
    """Pages through a namespace's write keys in checkpoint order (newest first)."""

    pages: AsyncIterator[list[Listed]]
    keys: NamespaceKeys
    buffered: dict[str, list[str]] = field(default_factory=dict)
    etags: dict[str, str] = field(default_factory=dict)
    """Write key -> its ETag when listed: the version a cached body must match."""
    last_inv: str = ""
    done: bool = False
    asked: int = 0
    """Pages asked for (each may be a LIST)."""

    async def upto(self, inv: str) -> None:
        """Page forward until every write of checkpoints up to ``inv`` is buffered."""
        while not self.done and self.last_inv <= inv:
            self.asked += 1
            try:
                page = await self.pages.__anext__()
            except StopAsyncIteration:
                self.done = True
                return
            for item in page:
                key_inv = self.keys.checkpoint_of_write(item.key)
                self.buffered.setdefault(key_inv, []).append(item.key)
                if item.etag:
                    self.etags[item.key] = item.etag
                self.last_inv = key_inv

    def take(self, inv: str) -> list[str]:
        return self.buffered.pop(inv, [])


def stored_writes(
    objects: Sequence[tuple[str, bytes | None]],
) -> list[tuple[str, codec.StoredWrite]]:
    """Decode ``(key, body)`` write objects, in ``(task_path, task_id, idx)`` order."""
    stored: list[tuple[str, codec.StoredWrite]] = []
    for key, body in objects:
        if body is not None:
            with codec.reading(key):
                stored.extend((key, w) for w in codec.load_writes(body))
    stored.sort(key=lambda kw: (kw[1].task_path, kw[1].task_id, kw[1].idx))
    return stored


def pending_writes(
    serde: SerializerProtocol, objects: Sequence[tuple[str, bytes | None]]
) -> list[PendingWrite]:
    """Decode ``(key, body)`` write objects in ``(task_path, task_id, idx)`` order."""
    return values_of(serde, stored_writes(objects))


def values_of(
    serde: SerializerProtocol, stored: Sequence[tuple[str, codec.StoredWrite]]
) -> list[PendingWrite]:
    out: list[PendingWrite] = []
    for key, w in stored:
        with codec.reading(key):
            out.append((w.task_id, w.channel, serde.loads_typed(w.value)))
    return out


def snapshot_depth(
    serde: SerializerProtocol, envelope: bytes | None, channels: Sequence[str], key: str = ""
) -> int | None:
    """How many ancestors can lie between a checkpoint and its delta seeds.

    ``counters_since_delta_snapshot`` in its metadata counts the supersteps
    since each channel's last snapshot: an upper bound on the stored
    ancestors to walk.
    """
    if envelope is None:
        return None
    with codec.reading(key):
        md = serde.loads_typed(codec.load_checkpoint(envelope).metadata) or {}
    counters = md.get("counters_since_delta_snapshot") or {}
    steps = [int(counters[ch][1]) for ch in channels if ch in counters]
    if len(steps) != len(channels):
        return None
    return max(steps) + 2


def channels_to_replay(serde: SerializerProtocol, envelope: bytes, key: str) -> list[str]:
    """The delta channels LangGraph will ask to rebuild for this checkpoint."""
    with codec.reading(key):
        env = codec.load_checkpoint(envelope)
        md = serde.loads_typed(env.metadata) or {}
        if not md.get("counters_since_delta_snapshot"):
            return []
        versions = serde.loads_typed(env.checkpoint).get("channel_versions") or {}
    return replayed(md, env, versions)


def replayed(md: Any, env: codec.CheckpointEnvelope, versions: dict[str, Any]) -> list[str]:
    """``channels_to_replay`` of a decoded checkpoint."""
    counters = (md or {}).get("counters_since_delta_snapshot") or {}
    present = set(env.present)
    return [ch for ch in counters if ch in versions and ch not in present]


class DeltaWalk:
    """The ancestors of one checkpoint, from listings, fetched concurrently.

    Round trips: (1) ``prime``: one checkpoint page (and one writes page);
    (2) the chain's envelopes and write objects together, as far back as the
    snapshot distance says: one round trip per ``concurrency`` objects (32 by
    default), since the call holds that many permits; (3) the seed blobs.
    """

    def __init__(
        self,
        objects: ObjectStorePort,
        serde: SerializerProtocol,
        keys: NamespaceKeys,
        start_id: str | None,
        floor: str = "",
    ) -> None:
        self.objects, self.serde, self.keys = objects, serde, keys
        self.floor = floor
        self._pages = objects.list_pages(
            keys.checkpoints, start_after=keys.from_id(start_id) if start_id else None
        )
        self.cursor = WritesCursor(
            objects.list_pages(
                keys.writes, start_after=keys.writes_from(start_id) if start_id else None
            ),
            keys,
        )
        self._by_id: dict[str, CheckpointKey] = {}
        self._exhausted = False

    async def prime(self, *, writes: bool = True) -> None:
        """The first checkpoint page (and writes page: a walk needs both)."""
        page, _ = await gather_all(
            next_page(self._pages), self.cursor.upto("") if writes else _nothing()
        )
        self._absorb(page)

    def _absorb(self, page: list[Listed]) -> None:
        if not page:
            self._exhausted = True
        for ck in self.keys.listed_checkpoints(item.key for item in page):
            self._by_id.setdefault(ck.checkpoint_id, ck)

    async def find(self, checkpoint_id: str) -> CheckpointKey | None:
        while checkpoint_id not in self._by_id and not self._exhausted:
            self._absorb(await next_page(self._pages))
        return self._by_id.get(checkpoint_id)

    async def extend(
        self, chain: list[CheckpointKey], target: CheckpointKey | None, n: int
    ) -> None:
        """Grow ``chain`` (target's ancestors, nearest first) to ``n`` entries or the
        floor: only as far as the walk needs, so a long history is not paged through."""
        last = chain[-1] if chain else target
        parent = last.parent_id if last else None
        while len(chain) < n and parent is not None and parent >= self.floor:
            ck = await self.find(parent)
            if ck is None:
                if self.floor:  # above the floor every ancestor must be there
                    raise CorruptObjectError(
                        f"{self.keys.checkpoint_id_prefix(parent)}...",
                        "missing: an ancestor DeltaChannel needs",
                    )
                return
            chain.append(ck)
            parent = ck.parent_id

    async def history(
        self, target: CheckpointKey | None, channels: Sequence[str], depth: int | None
    ) -> dict[str, DeltaChannelHistory]:
        """Per-channel writes (oldest first) and seed, as InMemorySaver defines them."""
        chain: list[CheckpointKey] = []
        serde = self.serde
        remaining = set(channels)
        collected: dict[str, list[PendingWrite]] = {ch: [] for ch in channels}
        seeds: dict[str, tuple[str, codec.CheckpointEnvelope, list[str]]] = {}
        # unknown depth: read the target's envelope beside a first window
        fetch_target = depth is None and target is not None
        window = depth or DEFAULT_WINDOW
        done = 0
        while remaining:
            await self.extend(chain, target, done + window)
            if done >= len(chain):
                break
            part = chain[done : done + window]
            done += len(part)
            await self.cursor.upto(invert_id(part[-1].checkpoint_id))
            wkeys = {c.checkpoint_id: self.cursor.take(invert_id(c.checkpoint_id)) for c in part}
            flat = [k for c in part for k in wkeys[c.checkpoint_id]]
            extra = [target.key] if (fetch_target and target is not None) else []
            envs, wbodies = await gather_all(
                self.objects.get_many([c.key for c in part] + extra, cache=True),
                fetch_writes(self.objects, flat, self.cursor.etags),
            )
            if extra:
                depth = snapshot_depth(serde, envs.pop(), channels, extra[0])
                fetch_target = False
            window = max(depth - done, 1) if depth else min(window * 2, MAX_WINDOW)
            wmap = dict(zip(flat, wbodies, strict=True))
            for ck, body in zip(part, envs, strict=True):
                if not remaining:
                    break
                if body is None:  # listed, then gone: the history is damaged
                    raise CorruptObjectError(ck.key, "missing: an ancestor DeltaChannel needs")
                with codec.reading(ck.key):
                    env = codec.load_checkpoint(body)
                    seeded = set(env.present) & remaining
                    versions: dict[str, Any] = {}
                    if seeded:
                        versions = serde.loads_typed(env.checkpoint)["channel_versions"]
                writes = pending_writes(serde, [(k, wmap[k]) for k in wkeys[ck.checkpoint_id]])
                for w in reversed(writes):
                    if w[1] in remaining:
                        collected[w[1]].append(w)
                if seeded:
                    place = value_keys(self.keys, ck.key, env, versions)
                for ch in seeded:
                    seeds[ch] = (ck.key, env, place[ch])
                    remaining.discard(ch)

        skeys = list(dict.fromkeys(k for _, _, ks in seeds.values() for k in ks))
        bodies = await fetch_values(self.objects, self.keys, skeys)
        result: dict[str, DeltaChannelHistory] = {}
        for ch in channels:
            entry: DeltaChannelHistory = {"writes": list(reversed(collected[ch]))}
            if ch in seeds:
                at, env, where = seeds[ch]
                if all(bodies.get(k) is not None for k in where):
                    typed, _ = typed_value(
                        self.keys, at, env, ch, where, cast(dict[str, bytes], bodies)
                    )
                    entry["seed"] = decode_value(serde, where[-1], ch, typed, env.runs.get(ch))
            result[ch] = entry
        return result
