"""The saver's logic on the in-memory fakes: puts in flight
(the manifest names a latest whose object has not landed) beside maintenance, large runs
of a list, crafted compressed objects, and random list edits against InMemorySaver."""

from __future__ import annotations

import asyncio
import datetime
import decimal
import enum
import random
import resource
import uuid
from typing import Annotated, Any, TypedDict

import ormsgpack
import pytest
import zstandard
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from langgraph_s3 import NewerFormatError
from langgraph_s3.checkpoint.context import HOLDERS_SIZE
from langgraph_s3.core import codec
from langgraph_s3.errors import CorruptObjectError
from langgraph_s3.testing.fakes import MemoryBucket, MemoryTable, StoredObject, memory_saver
from langgraph_s3.testing.graphs import chat_graph, norm

R1 = "11111111-1111-4111-8111-111111111111"
R2 = "22222222-2222-4222-8222-222222222222"


def cfg(thread: str, **extra: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": "", **extra}}


def ck_key(bucket: MemoryBucket, saver: Any, thread: str, cid: str) -> str:
    prefix = saver.layout.namespace(thread, "").checkpoint_id_prefix(cid)
    (key,) = [k for k in bucket.objects if k.startswith(prefix)]
    return key


async def ids(saver: Any, thread: str) -> list[str]:
    return [c.config["configurable"]["checkpoint_id"] async for c in saver.alist(cfg(thread))]


@pytest.mark.parametrize("which", ["last", "first"])
async def test_delete_for_runs_waits_for_another_runs_put_in_flight(which: str) -> None:
    """delete_for_runs of an old run while another run's checkpoint is in flight (named
    latest, its object not landed; "first": its parent belongs to the old run, and its
    values may be held by the old run's objects): the manifest holds the checkpoint in
    flight, so the removal stores it itself instead of waiting for it, and the answer
    the run returned stays the thread's state."""
    b, t = MemoryBucket(), MemoryTable()
    writer, admin = memory_saver(bucket=b, table=t), memory_saver(bucket=b, table=t)
    g = chat_graph().compile(checkpointer=writer)
    await g.ainvoke({"messages": [HumanMessage("hello")]}, cfg("t", run_id=R1))
    n_turn = sum(1 for k in b.objects if "/c/" in k)  # checkpoints one plain turn writes
    hold = n_turn if which == "last" else 1
    real_put = writer.objects.put
    seen: list[str] = []
    held, release = asyncio.Event(), asyncio.Event()

    async def put(key: str, body: bytes, **kw: Any) -> Any:
        if "/c/" in key and R2 in key:
            seen.append(key)
            if len(seen) == hold:
                held.set()
                await release.wait()
        return await real_put(key, body, **kw)

    writer.objects.put = put  # type: ignore[method-assign]
    run = asyncio.create_task(
        g.ainvoke({"messages": [HumanMessage("second")]}, cfg("t", run_id=R2))
    )
    await held.wait()
    for _ in range(50):  # the manifest update sent beside it lands
        await asyncio.sleep(0)
    delete = asyncio.create_task(admin.adelete_for_runs([R1]))  # the OLD run only
    await asyncio.wait_for(asyncio.shield(delete), 5)  # no wait for the held object
    assert any(k in b.objects for k in seen)  # the removal stored it
    release.set()
    out, _ = await asyncio.gather(run, delete)
    tup = await memory_saver(bucket=b, table=t).aget_tuple(cfg("t"))
    assert tup is not None
    msgs = [m.content for m in tup.checkpoint["channel_values"]["messages"]]
    assert msgs[-1] == out["messages"][-1].content, msgs  # the answer the run returned
    history = [c async for c in memory_saver(bucket=b, table=t).alist(cfg("t"))]
    assert history and {c.metadata.get("run_id") for c in history} == {R2}  # R1's are gone


@pytest.mark.parametrize("held", [True, False])
async def test_copy_thread_from_a_source_whose_latest_never_landed(held: bool) -> None:
    """The source's latest writer crashed after its manifest update, before its object
    landed; the target has a newer conversation. ``held``: the manifest holds the latest
    (a commit that carried it): every source checkpoint is readable, and copied. Not
    held (an envelope too large to carry): the parent stands in for it, and every
    readable source checkpoint is readable in the target."""
    b, t = MemoryBucket(), MemoryTable()
    w = memory_saver(bucket=b, table=t)
    g = chat_graph().compile(checkpointer=w)
    await g.ainvoke({"messages": [HumanMessage("src turn")]}, cfg("s"))
    top = await w.aget_tuple(cfg("s"))
    assert top is not None
    src = await ids(w, "s")
    for _ in range(50):  # every PUT in flight lands
        await asyncio.sleep(0)
    del b.objects[ck_key(b, w, "s", top.config["configurable"]["checkpoint_id"])]
    item = next(i for k, i in t.items.items() if k[1] == "~")
    assert any(n.startswith("inline:") for n in item)
    if not held:
        for name in [n for n in item if n.startswith("inline:")]:
            del item[name]
    fresh = memory_saver(bucket=b, table=t)
    before = await ids(fresh, "s")
    assert before == (src if held else src[1:])
    await g.ainvoke({"messages": [HumanMessage("dst turn")]}, cfg("d"))
    await fresh.acopy_thread("s", "d")
    got = set(await ids(memory_saver(bucket=b, table=t), "d"))
    assert set(before) <= got


class Doc(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    n: int


def doc_graph() -> StateGraph[Any]:
    """A long answer (a run over INLINE_MAX: a blob), then a step that leaves it."""

    def talk(s: Doc) -> dict[str, Any]:
        return {"messages": [AIMessage("x" * 300_000)]}

    def count(s: Doc) -> dict[str, Any]:
        return {"n": s.get("n", 0) + 1}

    b = StateGraph(Doc)
    b.add_node("talk", talk)
    b.add_node("count", count)
    b.add_edge(START, "talk")
    b.add_edge("talk", "count")
    b.add_edge("count", END)
    return b


async def test_a_large_run_and_the_whole_list_at_one_version_never_share_a_key() -> None:
    """The writer does not know where the parent keeps an unchanged list (its holders
    cache was churned by other threads) and stores it whole at the version whose newest
    run went to a blob: two different blobs, and the thread reads whole."""
    b, t = MemoryBucket(), MemoryTable()
    w = memory_saver(bucket=b, table=t)
    g = doc_graph().compile(checkpointer=w)
    await g.ainvoke({"messages": [HumanMessage("hi")]}, cfg("t"))
    real_put = w.aput
    churned = False

    async def aput(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        nonlocal churned
        if not churned and "n" in new_versions and config["configurable"]["thread_id"] == "t":
            churned = True
            for i in range(HOLDERS_SIZE + 1):
                await real_put(cfg(f"other{i}"), empty_checkpoint(), {"step": -1}, {})
        return await real_put(config, checkpoint, metadata, new_versions)

    w.aput = aput  # type: ignore[method-assign]
    await g.ainvoke({"messages": [HumanMessage("again")]}, cfg("t"))
    assert churned
    tup = await memory_saver(bucket=b, table=t).aget_tuple(cfg("t"))
    assert tup is not None and len(tup.checkpoint["channel_values"]["messages"]) == 4


async def one_turn() -> tuple[MemoryBucket, MemoryTable, str]:
    """A thread "t" of one chat turn, and its latest checkpoint's key."""
    b, t = MemoryBucket(), MemoryTable()
    w = memory_saver(bucket=b, table=t)
    await chat_graph().compile(checkpointer=w).ainvoke({"messages": [("user", "hi")]}, cfg("t"))
    top = await w.aget_tuple(cfg("t"))
    assert top is not None
    await w.aflush()  # stored, and read from S3, not from the manifest's copy
    return b, t, ck_key(b, w, "t", top.config["configurable"]["checkpoint_id"])


async def test_a_compressed_bomb_is_corrupt_not_a_gigabyte() -> None:
    b, t, key = await one_turn()
    co = zstandard.ZstdCompressor(level=19).compressobj(size=1 << 30)
    bomb = b"".join(co.compress(b"\0" * (1 << 20)) for _ in range(1024)) + co.flush()
    assert len(bomb) < 64 * 1024
    b.objects[key] = StoredObject(bomb, '"x"', b.now(), None)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(CorruptObjectError, match="zstd"):
        await memory_saver(bucket=b, table=t).aget_tuple(cfg("t"))
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 100, f"reading a {len(bomb)}-byte object took {grown_mib:.0f} MiB"


async def test_objects_use_the_dictionary_and_plain_zstd_ones_still_read() -> None:
    """Checkpoints are compressed with zdict.V1 (smaller than plain zstd); an object an
    earlier version compressed without it reads the same."""
    b, t = MemoryBucket(), MemoryTable()
    w = memory_saver(bucket=b, table=t)
    question = {"messages": [("user", "a long question about the harbour " * 60)]}
    await chat_graph().compile(checkpointer=w).ainvoke(question, cfg("t"))

    def size(k: str) -> int:
        return len(ormsgpack.packb(codec.unpack_body(b.objects[k].body)))

    key = max((k for k in b.objects if "/c/" in k), key=size)
    body = b.objects[key].body  # the checkpoint whose run holds the question
    assert body[0] == codec.DICT_MARK and body[1] == codec.DICT_VERSION
    raw = ormsgpack.packb(codec.unpack_body(body))
    plain = zstandard.ZstdCompressor(level=3).compress(raw)
    assert len(body) < len(plain)
    before = [c.checkpoint async for c in memory_saver(bucket=b, table=t).alist(cfg("t"))]
    b.objects[key] = StoredObject(plain, '"x"', b.now(), None)
    after = [c.checkpoint async for c in memory_saver(bucket=b, table=t).alist(cfg("t"))]
    assert len(before) > 2 and after == before


async def test_a_bomb_behind_the_dictionary_mark_is_corrupt() -> None:
    b, t, key = await one_turn()
    co = zstandard.ZstdCompressor(level=19).compressobj(size=1 << 30)
    bomb = b"".join(co.compress(b"\0" * (1 << 20)) for _ in range(1024)) + co.flush()
    body = bytes((codec.DICT_MARK, codec.DICT_VERSION)) + bomb
    b.objects[key] = StoredObject(body, '"x"', b.now(), None)
    with pytest.raises(CorruptObjectError, match="zstd"):
        await memory_saver(bucket=b, table=t).aget_tuple(cfg("t"))


async def test_a_newer_dictionary_says_upgrade() -> None:
    b, t, key = await one_turn()
    body = b.objects[key].body
    newer = bytes((codec.DICT_MARK, codec.DICT_VERSION + 1)) + body[2:]
    b.objects[key] = StoredObject(newer, '"x"', b.now(), None)
    with pytest.raises(NewerFormatError, match="upgrade this process"):
        await memory_saver(bucket=b, table=t).aget_tuple(cfg("t"))


def test_the_dictionary_is_frozen() -> None:
    """Objects name zdict.V1 by number: its bytes may never change."""
    import hashlib

    from langgraph_s3.core import zdict

    assert len(zdict.V1) == 2111
    assert hashlib.sha256(zdict.V1).hexdigest()[:16] == "57881ed32480258b"


# ------------------------------------------- random list edits against InMemorySaver
class Color(enum.Enum):
    RED = "red"


def replace_or_add(old: list[Any], new: Any) -> list[Any]:
    if isinstance(new, dict) and "replace" in new:
        return list(new["replace"])
    return old + new


class S(TypedDict, total=False):
    items: Annotated[list[Any], replace_or_add]
    msgs: Annotated[list[Any], add_messages]
    other: int
    turn: int


def item(rng: random.Random) -> Any:
    k = rng.randrange(14)
    return [
        lambda: rng.randrange(-(2**62), 2**62),
        lambda: None,
        lambda: b"\x00\xff" * rng.randrange(3),
        lambda: "s" * rng.randrange(5),
        lambda: (1, "two", 3.0),
        lambda: {"a": [1, 2], "b": None},
        lambda: datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
        lambda: uuid.UUID(int=rng.getrandbits(128)),
        lambda: Color.RED,
        lambda: decimal.Decimal("1.25"),
        lambda: [],
        lambda: 1.5,
        lambda: {1: "int key"},
        lambda: "x" * rng.choice([10, 70_000]),
    ][k]()


def build(seed: int) -> StateGraph[Any]:
    def step(s: S) -> dict[str, Any]:
        rng = random.Random(seed * 1000 + s.get("turn", 0))
        r = rng.random()
        out: dict[str, Any] = {}
        if r < 0.6:
            out["items"] = [item(rng) for _ in range(rng.randrange(1, 4))]
        elif r < 0.7:
            cur = list(s.get("items", []))
            if cur:
                cur[rng.randrange(len(cur))] = "edited"
            out["items"] = {"replace": cur}
        elif r < 0.8:
            cur = list(s.get("items", []))
            out["items"] = {"replace": cur[: max(0, len(cur) - 2)]}
        else:
            out["other"] = rng.randrange(100)
        m = rng.random()
        msgs = s.get("msgs", [])
        if m < 0.5:
            mid = str(uuid.UUID(int=rng.getrandbits(128)))
            out["msgs"] = [AIMessage(f"a{rng.random()}", id=mid)]
        elif m < 0.6 and msgs:
            out["msgs"] = [RemoveMessage(id=msgs[rng.randrange(len(msgs))].id)]
        elif m < 0.7 and msgs:
            victim = msgs[rng.randrange(len(msgs))]
            out["msgs"] = [AIMessage("edited", id=victim.id)]
        return out

    b = StateGraph(S)
    b.add_node("step", step)
    b.add_edge(START, "step")
    b.add_edge("step", END)
    return b


async def run(saver: Any, seed: int, turns: int) -> Any:
    g = build(seed).compile(checkpointer=saver)
    for i in range(turns):
        await g.ainvoke({"msgs": [HumanMessage(f"h{i}", id=f"h{i}")], "turn": i}, cfg("t"))
    return g


@pytest.mark.parametrize("seed", range(4))
async def test_random_list_edits_read_back_as_in_memory(seed: int) -> None:
    b, t = MemoryBucket(), MemoryTable()
    await run(memory_saver(bucket=b, table=t, cache_bytes=1 << 24), seed, 30)
    mem = InMemorySaver()
    await run(mem, seed, 30)
    fresh = memory_saver(bucket=b, table=t)
    exp = [norm(c.checkpoint["channel_values"]) async for c in mem.alist(cfg("t"))]
    got = [norm(c.checkpoint["channel_values"]) async for c in fresh.alist(cfg("t"))]
    assert len(exp) == len(got)
    for i, (e, g) in enumerate(zip(exp, got, strict=True)):
        assert repr(e) == repr(g), i


async def test_an_object_of_a_newer_format_says_upgrade_not_delete() -> None:
    b, t, key = await one_turn()
    raw = codec.unpack_body(b.objects[key].body)
    b.objects[key] = StoredObject(ormsgpack.packb({**raw, "v": 99}), '"x"', b.now(), None)
    with pytest.raises(NewerFormatError, match="upgrade this process") as err:
        await memory_saver(bucket=b, table=t).aget_tuple(cfg("t"))
    assert err.value.key == key and "delete the thread" not in str(err.value)
