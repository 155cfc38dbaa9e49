"""Seeded, in-process faults: the in-memory counterpart of the proxy test (test_faults.py).

``langgraph_s3.memory.FaultyObjectStore`` and ``FaultyTable`` wrap the in-memory
fakes (the table under every role of the manifest) and, deterministically for a seed,
fail chosen requests with the library's own transient errors: before anything is
applied (a 503 or a reset that outlasted the SDK's retries), or after (the write was
applied, its answer lost). For each seed, a
graph turn runs through them (a tool-calling chat turn, a DeltaChannel turn); then:

* when the turn failed, a clean reader on the same data sees the thread whole: every
  checkpoint and blob it lists loads, and its history is exactly the oldest part of a
  clean run's history, the turns before this one included (nothing half-made shows);
* the turn is retried as an application would (from the latest checkpoint when the
  turn's input was committed, else with the input again), faults still on, until it
  completes; the thread then holds exactly a clean run's history.

Part of the unit tier (``pytest -m unit``): no network, a few seconds in all.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import StateGraph

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.core.keys import Layout
from langgraph_s3.core.ports import ManifestPort
from langgraph_s3.errors import (
    EndpointTimeoutError,
    EndpointUnreachableError,
    S3PersistenceError,
    ServiceError,
)
from langgraph_s3.manifest import Manifest, deployment_key
from langgraph_s3.manifest.objects import ObjectTable
from langgraph_s3.testing.fakes import (
    Faults,
    FaultyObjectStore,
    FaultyTable,
    MemoryBucket,
    MemoryManifest,
    MemoryObjectStore,
    MemoryTable,
    memory_saver,
)
from langgraph_s3.testing.graphs import CHAT_TURNS, ahistory, chat_graph, delta_graph, norm_snapshot

pytestmark = pytest.mark.unit

SEEDS = range(30)
RATE = 0.08
"""Chance that a call fails: a tool turn makes 15-40 calls, so most seeds fail it once or
more. A DeltaChannel turn makes fewer (its history is in each checkpoint's log): 0.16."""
LIMIT = 4
"""Faults per seed at most: the retries then run clean, so each seed ends."""


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def user(text: str) -> dict[str, Any]:
    return {"messages": [("user", text)]}


@dataclass(frozen=True)
class TurnKind:
    builder: Callable[[], StateGraph[Any]]
    before: tuple[str, ...]
    turn: str
    rate: float = RATE


KINDS = {
    "tool": TurnKind(chat_graph, (CHAT_TURNS[0],), CHAT_TURNS[1]),  # agent -> tools -> agent
    "delta": TurnKind(lambda: delta_graph(snapshot_every=4), ("one",), "two", 2 * RATE),
}


async def reference(kind: TurnKind) -> list[dict[str, Any]]:
    """A clean run's history (normalized), newest first."""
    graph = kind.builder().compile(checkpointer=InMemorySaver())
    for text in (*kind.before, kind.turn):
        await graph.ainvoke(user(text), cfg("t"))
    return await ahistory(graph, cfg("t"))


@dataclass
class Outcome:
    failures: list[str] = field(default_factory=list)
    failed_turns: int = 0
    attempts: int = 0
    injected: Counter[str] = field(default_factory=Counter)


async def run_seed(
    kind: TurnKind, seed: int, ref: list[dict[str, Any]], out: Outcome, where_kept: str
) -> None:
    bucket, table = MemoryBucket(), MemoryTable()
    # the bucket's manifest groups a turn's writes to an item (fewer requests): more
    # of its requests fail, so that as many turns do
    rate = kind.rate * (1.5 if where_kept == "s3" else 1.0)
    faults = Faults(seed, rate, limit=LIMIT)
    store = FaultyObjectStore(MemoryObjectStore(bucket, cache_bytes=1 << 20), faults=faults)
    deployment = deployment_key(bucket.name, "")
    manifest: ManifestPort
    if where_kept == "s3":  # the manifest in the bucket: its requests fail as the store's
        objects = ObjectTable(store, Layout("").manifest(), strip=deployment)
        manifest = Manifest(objects, deployment=deployment, ttl_seconds=None)
        with faults.paused():
            await manifest.setup.create()
    else:
        manifest = MemoryManifest(table, deployment=deployment, faults=faults)
    writer = AsyncS3Saver(
        bucket=bucket.name,
        object_store=store,
        manifest=manifest,
    )
    # clean, uncached, same data
    reader = memory_saver(bucket=bucket, table=table, manifest=where_kept)
    graph = kind.builder().compile(checkpointer=writer)
    seen_by = kind.builder().compile(checkpointer=reader)
    with faults.paused():
        for text in kind.before:
            await graph.ainvoke(user(text), cfg("t"))
    before = await ahistory(seen_by, cfg("t"))
    last_step = max(s["metadata"]["step"] for s in before)
    where = f"seed {seed}"

    async def whole(after: str) -> list[dict[str, Any]] | None:
        """The thread as a clean reader sees it, or None (a failure recorded)."""
        try:
            snapshots = [s async for s in seen_by.aget_state_history(cfg("t"))]
        except S3PersistenceError as exc:
            out.failures.append(f"{where}, {after}: unreadable: {type(exc).__name__}: {exc}")
            return None
        ids = [s.config["configurable"]["checkpoint_id"] for s in snapshots]
        if len(ids) != len(set(ids)):
            out.failures.append(f"{where}, {after}: duplicate checkpoints {ids}")
            return None
        seen = [norm_snapshot(s) for s in snapshots]
        if len(seen) < len(before) or seen != ref[len(ref) - len(seen) :]:
            out.failures.append(
                f"{where}, {after}: the history is not the oldest {len(seen)} of a clean run's "
                f"{len(ref)} (faults: {faults.log})"
            )
            return None
        return seen

    for attempt in range(LIMIT + 2):
        out.attempts += 1
        latest = await reader.aget_tuple(cfg("t"))
        assert latest is not None
        try:
            if attempt and latest.metadata["step"] > last_step:
                await graph.ainvoke(None, cfg("t"))  # the input was committed: resume
            else:
                await graph.ainvoke(user(kind.turn), cfg("t"))
        except S3PersistenceError as exc:
            assert isinstance(exc, (ServiceError, EndpointUnreachableError)), (
                f"{where}: {type(exc).__name__}: {exc}"
            )
            out.failed_turns += attempt == 0
            if await whole(f"attempt {attempt} failed ({type(exc).__name__})") is None:
                return
            continue
        break
    else:
        out.failures.append(f"{where}: the turn never completed ({faults.log})")
        return
    final = await whole("the retried turn completed")
    if final is not None and final != ref:
        out.failures.append(f"{where}: the completed thread differs from a clean run's")
    out.injected.update(faults.injected)


@pytest.mark.parametrize("where_kept", ["dynamodb", "s3"])
@pytest.mark.parametrize("name", list(KINDS))
async def test_a_seeded_fault_sweep_over_a_graph_turn(name: str, where_kept: str) -> None:
    """On either manifest: a DynamoDB table, or the bucket (its versions' PUTs and
    GETs fail and lose their answers as the checkpoints' do)."""
    kind = KINDS[name]
    ref = await reference(kind)
    out = Outcome()
    for seed in SEEDS:
        await run_seed(kind, seed, ref, out, where_kept)
    assert not out.failures, "\n".join(out.failures[:5])
    # the sweep did what it is for: many turns failed, every kind of fault happened (a
    # failed PUT of a checkpoint the manifest holds fails no turn: it is stored later)
    assert out.failed_turns > len(SEEDS) // 3, out
    assert out.injected["lost:s3.PutObject"] > 0, out.injected
    # a turn's reads are the item's (held checkpoints and writes): S3 reads only where
    # something is not held
    reads = ("fail:s3.GetObject", "fail:s3.ListObjectsV2", "fail:dynamodb.GetItem")
    assert sum(out.injected[r] for r in reads) > 0, out.injected
    if where_kept == "dynamodb":
        assert out.injected["lost:dynamodb.UpdateItem"] > 0, out.injected
        assert out.injected["fail:dynamodb.UpdateItem"] > 0, out.injected
    else:
        assert not any("dynamodb" in k for k in out.injected), out.injected
        assert out.injected["fail:s3.PutObject"] > 0, out.injected


async def test_the_same_seed_makes_the_same_faults() -> None:
    """The n-th call of each kind fails or not by (seed, kind, n) alone."""

    async def faults_of(seed: int) -> list[tuple[int, str, str]]:
        faults = Faults(seed, 0.2)
        store = FaultyObjectStore(MemoryObjectStore(), faults=faults)
        manifest = MemoryManifest(faults=faults)
        saver = AsyncS3Saver(bucket="memory", object_store=store, manifest=manifest)
        parent = None
        for i in range(15):
            cp = generate_checkpoint(channel_values={"a": i}, channel_versions={"a": i + 1})
            conf = {
                "configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": parent}
            }
            with contextlib.suppress(S3PersistenceError):
                await saver.aput(conf, cp, generate_metadata(step=i), {"a": i + 1})
                parent = cp["id"]
            with contextlib.suppress(S3PersistenceError):
                await saver.aget_tuple({"configurable": {"thread_id": "t"}})
        return [(n, kind, call) for n, kind, call, _ in faults.log]

    first = await faults_of(3)
    assert first and first == await faults_of(3)
    assert first != await faults_of(4)


# ------------------------------------------------------------------ the wrappers
async def test_fail_is_before_the_write_and_lost_is_after() -> None:
    inner = MemoryObjectStore()
    fail = FaultyObjectStore(inner, seed=0, rate=1.0, lost=0.0)
    with pytest.raises((ServiceError, EndpointUnreachableError)):
        await fail.put("k", b"x")
    assert await inner.get("k") is None  # never applied
    lost = FaultyObjectStore(inner, seed=0, rate=1.0, lost=1.0)
    with pytest.raises(EndpointTimeoutError, match="answer was lost"):
        await lost.put("k", b"x")
    assert await inner.get("k") == b"x"  # applied
    with pytest.raises((ServiceError, EndpointUnreachableError)):
        await lost.get("k")  # a read never "loses" an applied change
    assert lost.faults.injected == Counter(
        {"lost": 1, "lost:s3.PutObject": 1, "fail": 1, "fail:s3.GetObject": 1}
    )


async def test_only_limit_paused_and_cache_hits() -> None:
    inner = MemoryObjectStore(cache_bytes=1 << 20)
    faulty = FaultyObjectStore(inner, seed=1, rate=1.0, only={"s3.GetObject"}, limit=2)
    await faulty.put("k", b"x", cache=True)  # not a GetObject: never fails
    assert await faulty.get("k", cache=True) == b"x"  # a cache hit: no request, no fault
    with faulty.faults.paused():
        assert await faulty.get("k") == b"x"
    for _ in range(2):
        with pytest.raises(S3PersistenceError):
            await faulty.get("k")
    assert await faulty.get("k") == b"x"  # the limit is reached
    assert faulty.faults.total == 2
    # listings fail per page, deletes per batch
    pages = FaultyObjectStore(inner, seed=1, rate=1.0, only={"s3.ListObjectsV2"})
    with pytest.raises(S3PersistenceError):
        await pages.list_all("")
    batches = FaultyObjectStore(inner, seed=1, rate=1.0, lost=1.0)
    with pytest.raises(EndpointTimeoutError):
        await batches.delete(["k"])
    assert await inner.get("k") is None


async def test_a_lost_commit_is_committed_and_its_retry_is_a_replay() -> None:
    """The ambiguous case the proxy test forces with ``lost:UpdateItem``."""
    table = MemoryTable()
    inner = MemoryManifest(table)
    faults = Faults(0, 1.0, lost=1.0, only={"dynamodb.UpdateItem"}, limit=1)
    faulty = MemoryManifest(table, faults=faults)
    with pytest.raises(EndpointTimeoutError):
        await faulty.commits.advance("t", "", "1f1ecd00-0000-6000-8000-000000000000", "tail", None)
    e = await inner.reads.latest("t", "")
    assert e is not None and e.rev == 1  # committed, though its caller was told otherwise
    await faulty.commits.advance("t", "", "1f1ecd00-0000-6000-8000-000000000000", "tail", None)
    e = await inner.reads.latest("t", "")
    assert e is not None and e.rev == 1  # the retry changed nothing


async def test_a_faulty_table_fails_under_every_role_of_the_manifest() -> None:
    """A fault at the table reaches any role: a read fails before it is made, a
    write's answer is lost after it was applied, a listing fails per page."""
    table = MemoryTable()
    cid = "1f1ecd00-0000-6000-8000-000000000000"
    reads_fail = MemoryManifest(table, faults=Faults(0, 1.0, only={"dynamodb.GetItem"}))
    with pytest.raises((ServiceError, EndpointUnreachableError)):
        await reads_fail.reads.read("t", "")
    lost = Faults(0, 1.0, lost=1.0, only={"dynamodb.UpdateItem"}, limit=1)
    with pytest.raises(EndpointTimeoutError):
        await MemoryManifest(table, faults=lost).commits.advance("t", "", cid, "tail", None)
    assert lost.injected == Counter({"lost": 1, "lost:dynamodb.UpdateItem": 1})
    assert (await MemoryManifest(table).reads.latest("t", "")) is not None  # applied
    pages = MemoryManifest(table, faults=Faults(1, 1.0, only={"dynamodb.Query"}))
    with pytest.raises(S3PersistenceError):
        await pages.reads.namespaces("t")
    tx = Faults(0, 1.0, lost=0.0, only={"dynamodb.TransactWriteItems"})
    faulty = FaultyTable(MemoryManifest(table).db, faults=tx)
    with pytest.raises(S3PersistenceError):
        await faulty.transact([])
    assert tx.log == [(1, "fail", "dynamodb.TransactWriteItems", "-")]
