"""Subjects on the store, on moto (S3, DynamoDB and KMS over HTTP): the items of a
subject's namespaces sealed with the subject's own key, in their objects and in the
segments that fold many subjects' items, read back as written, refused when moved or
named for another subject, and erased when the subject is forgotten (through the
saver of the same deployment) so that no version or item opens with any key left."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from helpers import answer, run, url_of
from langgraph_s3 import AsyncS3Saver, AsyncS3Store
from langgraph_s3.core import sealing
from langgraph_s3.errors import SealBrokenError, SubjectForgottenError
from langgraph_s3.runtime.lifecycle import store_url_of
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.graphs import chat_graph, norm
from subjects_world import World, opens, opens_item, remaining_keys

WORDS = "ocelot-quokka-2291"
"""What alice's memories hold: found in no byte the bucket or the table keeps."""
BOBS = "narwhal-ibis-5150"
SHARED = "plain-shared-fact-77"


@pytest_asyncio.fixture
async def world(s3_fresh: MotoServer) -> AsyncIterator[World]:
    w = World(s3_fresh)
    saver = w.saver()
    await saver.setup()  # the bucket and the table the subjects' keys live in
    yield w
    await w.aclose()


async def fill(store: AsyncS3Store) -> None:
    for i in range(3):
        await store.aput(("users", "alice", "memories"), f"m{i}", {"text": f"{WORDS} {i}"})
    await store.aput(("users", "alice", "prefs"), "theme", {"text": f"{WORDS} dark"})
    await store.aput(("users", "bob", "memories"), "m0", {"text": BOBS})
    await store.aput(("shared",), "fact", {"text": SHARED})  # no subject: plain


def item_key(world: World, ns: tuple[str, ...], key: str) -> str:
    return world.stores[0].layout.store_item(ns, key)


async def test_a_subjects_items_are_sealed_and_read_as_written(world: World) -> None:
    store = world.store()
    await store.setup()
    await fill(store)
    assert world.plaintext(WORDS) == [] and world.plaintext(BOBS) == []
    assert world.plaintext(SHARED)  # an item without a subject is stored as before
    # a new process (its own keys) reads every item back, one by one and by search
    again = world.store()
    got = await again.aget(("users", "alice", "memories"), "m1")
    assert got is not None and got.value == {"text": f"{WORDS} 1"}
    hits = await again.asearch(("users",), limit=20)
    assert sorted(h.value["text"] for h in hits) == sorted(
        [f"{WORDS} {i}" for i in range(3)] + [f"{WORDS} dark", BOBS]
    )
    found = await again.asearch(("users", "alice"), filter={"text": f"{WORDS} dark"})
    assert [h.key for h in found] == ["theme"]
    assert set(await again.alist_namespaces(prefix=("users",))) == {
        ("users", "alice", "memories"),
        ("users", "alice", "prefs"),
        ("users", "bob", "memories"),
    }
    # a segment folds both subjects' items: each stays sealed with its own key
    assert await again.acompact(("users",)) == 5
    assert world.plaintext(WORDS) == [] and world.plaintext(BOBS) == []
    third = world.store()
    third.stats.reset()
    hits = await third.asearch(("users",), limit=20)
    assert len(hits) == 5 and "s3.GetObject" in third.stats.by_operation
    assert third.stats.by_operation["s3.GetObject"] == 1  # the segment alone, no item
    # the namespaces are named in the subjects' index, once per life
    names = [i for i in world.items() if i["sk"]["S"].startswith("n/")]
    assert len(names) == 3 and all("alice" not in i["pk"]["S"] for i in names)


async def test_an_item_moved_or_sealed_for_another_subject_is_refused(world: World) -> None:
    store = world.store()
    await store.setup()
    await fill(store)
    bucket = world.names["bucket"]
    m0 = item_key(world, ("users", "alice", "memories"), "m0")
    m1 = item_key(world, ("users", "alice", "memories"), "m1")
    moved = world.s3.get_object(Bucket=bucket, Key=m0)["Body"].read()
    world.s3.put_object(Bucket=bucket, Key=m1, Body=moved)  # the same subject's, elsewhere
    with pytest.raises(SealBrokenError, match="failed its authentication"):
        await world.store().aget(("users", "alice", "memories"), "m1")
    hits = await world.store().asearch(("users", "alice", "memories"))
    assert sorted(h.key for h in hits) == ["m0", "m2"]  # skipped, its neighbours served
    # a writer whose policy says otherwise seals bob's namespace for alice: refused
    wrong = AsyncS3Store(
        endpoint_url=world.moto.url,
        subjects=_everything_alices(),
        kms_key=world.key,
        **world.names,
    )
    world.stores.append(wrong)
    await wrong.aput(("users", "bob", "memories"), "m9", {"text": "forged"})
    with pytest.raises(SealBrokenError, match="sealed for another subject"):
        await world.store().aget(("users", "bob", "memories"), "m9")
    # a truncated body is refused too, never served
    world.s3.put_object(Bucket=bucket, Key=m0, Body=moved[:40])
    with pytest.raises(SealBrokenError):
        await world.store().aget(("users", "alice", "memories"), "m0")


def _everything_alices() -> Any:
    from langgraph_s3 import SubjectPolicy

    return SubjectPolicy(of_namespace=lambda ns: "alice")


async def test_forgetting_a_user_erases_their_store_items(world: World) -> None:
    bucket = world.names["bucket"]
    world.s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    store = world.store()
    await store.setup()
    await fill(store)
    await store.acompact(("users",))  # a segment holding both subjects' items
    saver = world.saver(subject_label=1)
    plan = await saver.aforget("alice", dry_run=True)
    assert plan["store_namespaces"] == 2 and plan["threads"] == 0

    began = await saver.aforget("alice", wait=False)
    assert began["state"] == "forgetting"
    assert began["deleted"]["store_items"] == 4 and began["deleted"]["store_namespaces"] == 2
    assert await world.store().aget(("users", "alice", "memories"), "m0") is None
    with pytest.raises(SubjectForgottenError):  # a process reading the record now
        await world.store().aput(("users", "alice", "memories"), "m5", {"text": WORDS})

    later = saver.manifest.now() + 10_000  # the bound and the clocks' margin passed
    saver.manifest.clock = lambda: later
    receipt = await saver.aforget("alice")
    assert receipt["state"] == "forgotten"
    deleted = receipt["deleted"]
    assert deleted["store_namespaces"] == 2 and deleted["store_items"] == 4
    assert deleted["store_bytes"] > 0 and deleted["threads"] == 0

    # nothing anyone can read: no plaintext, and no remaining key opens a version
    assert world.plaintext(WORDS) == []
    keys = remaining_keys(world)
    root = store.layout.root
    versions = [(k, b) for k, b in world.bodies() if sealing.is_named(b)]
    alices = [(k, b) for k, b in versions if "/alice/" in k]
    assert len(alices) >= 4  # versioning keeps them
    for key, body in alices:
        assert not opens_item(keys, body, key[len(root) :]), key
    bobs = [(k, b) for k, b in versions if "/bob/" in k]
    assert bobs and all(opens_item(keys, b, k[len(root) :]) for k, b in bobs)
    segment = [b for k, b in world.bodies() if k.endswith(".seg")]
    assert segment and all(WORDS.encode() not in b for b in segment)
    # bob reads exactly as before (his entries of the shared segment too)
    hits = await world.store().asearch(("users",), limit=20)
    assert [h.value["text"] for h in hits] == [BOBS]
    assert (await world.store().aget(("shared",), "fact")) is not None


async def test_forgetting_a_user_everywhere_threads_items_a_pack_an_export_and_versions(
    world: World, tmp_path: Path
) -> None:
    """The issue's check: alice has threads (one packed), store items (in a segment beside
    bob's), a sealed export and object versions; once forgotten nothing the library or an
    operator with the bucket, the table and the remaining keys can read yields her words,
    bob reads exactly as before, and the receipt says what happened."""
    bucket = world.names["bucket"]
    world.s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    saver = world.saver(subject_label=1)
    store = world.store()
    await store.setup()
    graph = chat_graph().compile(checkpointer=saver)
    for thread, user, words in (
        ("a1", "alice", WORDS),
        ("a2", "alice", WORDS),
        ("b1", "bob", BOBS),
    ):
        config = {"configurable": {"thread_id": thread, "user_id": user}}
        for i in range(2):
            await graph.ainvoke({"messages": [("user", f"{words} {i}")]}, config)
    bobs_state = norm((await graph.aget_state({"configurable": {"thread_id": "b1"}})).values)
    await saver.aflush()
    assert (await saver.apack(["a2"])).threads == 1
    await fill(store)
    await store.acompact(("users",))
    export = tmp_path / "all.jsonl"
    await saver.aexport(None, str(export), sealed=True)
    assert WORDS.encode() not in export.read_bytes()
    assert world.plaintext(WORDS) == []

    await saver.aforget("alice", wait=False)
    later = saver.manifest.now() + 10_000
    saver.manifest.clock = lambda: later
    receipt = await saver.aforget("alice")
    deleted = receipt["deleted"]
    assert deleted["threads"] == 2 and deleted["store_items"] == 4
    assert deleted["store_namespaces"] == 2 and deleted["objects"] > 5
    assert receipt["exports"]["sealed"] == 1 and receipt["exports"]["plaintext"] == 0

    assert world.plaintext(WORDS) == []
    keys = remaining_keys(world)
    root = store.layout.root
    checked = {"items": 0, "threads": 0}
    for key, body in world.bodies():  # every version of every object
        if sealing.is_named(body) and "/alice/" in key:
            assert not opens_item(keys, body, key[len(root) :]), key
            checked["items"] += 1
        elif sealing.is_sealed(body) and ("/a1/" in key or "/a2/" in key):
            token = receipt["subject"]
            assert not opens(keys, body, token, key.split("/")[1]), key
            checked["threads"] += 1
    assert checked["items"] >= 4 and checked["threads"] >= 8, checked  # versions kept them
    # the export: alice's threads skipped wherever it is imported, bob's whole
    target = AsyncS3Saver(endpoint_url=world.moto.url, **unique_names())
    world.savers.append(target)
    await target.setup()
    imported = await target.aimport(str(export), sealed_by=world.saver(subject_label=1))
    assert imported.threads == 1 and imported.skipped == 2
    state = (
        await chat_graph()
        .compile(checkpointer=target)
        .aget_state({"configurable": {"thread_id": "b1"}})
    )
    assert norm(state.values) == bobs_state
    hits = await world.store().asearch(("users",), limit=20)
    assert [h.value["text"] for h in hits] == [BOBS]


async def test_a_forgotten_subject_comes_back_and_a_resumed_forgetting_spares_it(
    world: World,
) -> None:
    store = world.store(subject_key_seconds=1)
    await store.setup()
    await fill(store)
    saver = world.saver(subject_label=1, subject_key_seconds=1)
    await saver.aforget("alice", wait=False)
    later = saver.manifest.now() + 1_000
    saver.manifest.clock = lambda: later
    first = await saver.aforget("alice")
    back = world.store(subject_key_seconds=1)
    await back.aput(("users", "alice", "memories"), "new", {"text": "second life"})
    # a forgetting of the first life run again (a crash before its receipt's record)
    # erases nothing of the second life's
    stores = saver._w.seals
    assert stores is not None
    from langgraph_s3.runtime.store_erasure import StoreErasure

    erasure = StoreErasure(saver.raw_objects, saver.layout, stores.subjects.registry)
    named = await erasure.named(first["subject"], 2)
    erased = await erasure.erase(first["subject"], 1, named)  # after any batch: checked
    assert erased.items == 0
    got = await world.store().aget(("users", "alice", "memories"), "new")
    assert got is not None and got.value == {"text": "second life"}


async def test_a_url_serves_the_saver_and_the_store_of_one_deployment(world: World) -> None:
    url = url_of(world.names) + f"&subjects=user_id&subject_label=1&kms_key={world.key}"
    beside = store_url_of(url)
    assert "subjects=user_id" not in beside and "subject_label=1" in beside
    async with AsyncS3Store.from_conn_string(beside, endpoint_url=world.moto.url) as store:
        await store.aput(("users", "alice", "memories"), "m0", {"text": WORDS})
    assert world.plaintext(WORDS) == []
    plan = answer(run(world.moto, url, "--json", "forget", "alice", "--dry-run"))
    assert plan["store_namespaces"] == 1
