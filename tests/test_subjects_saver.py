"""Subjects on the saver, on moto (S3, DynamoDB and KMS over HTTP): a subject's threads
sealed with its own key wherever they are stored (objects, packs, versions, the
manifest's held copies and metadata), read back as they were written, and forgotten
with a receipt so that nothing the library or an operator with the bucket, the table
and the remaining keys can read yields their content."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from helpers import answer, run, url_of
from langgraph_s3.core import sealing
from langgraph_s3.errors import SealBrokenError, SubjectForgottenError
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.graphs import chat_graph, norm
from subjects_world import World, alice, bob, chat, opens, remaining_keys

WORDS = "zebra-penguin-7731"
"""What alice says: found in no byte the bucket or the table keeps, sealed or forgotten."""
BOBS = "walrus-heron-4410"


@pytest_asyncio.fixture
async def world(s3_fresh: MotoServer, manifest_kind: str) -> AsyncIterator[World]:
    """A deployment with subjects, its manifest in a table or in the bucket."""
    w = World(s3_fresh, manifest_kind)
    yield w
    await w.aclose()


async def test_a_subjects_thread_is_sealed_everywhere_and_reads_as_written(world: World) -> None:
    saver = world.saver()
    await saver.setup()
    out = await chat(saver, alice(), WORDS)
    await chat(saver, {"configurable": {"thread_id": "plain"}}, BOBS)  # no subject: plain
    await saver.aflush()
    assert world.plaintext(WORDS) == []
    assert world.plaintext(BOBS)  # a thread without a subject is stored as before
    # a new process (its own caches and keys) reads it back as it was written
    again = world.saver()
    state = await chat_graph().compile(checkpointer=again).aget_state(alice())
    assert norm(state.values) == out
    assert len([t async for t in again.alist(alice())]) >= 3
    found = [t async for t in again.alist_threads(metadata={"user_id": "alice"})]
    assert [t.thread_id for t in found] == ["a1"] and found[0].metadata["user_id"] == "alice"
    item = next(i for i in world.items() if i["pk"]["S"].endswith("a1"))
    assert "alice" not in repr(item) and item["sj"]["S"] and item["md"]["B"]


async def test_a_plain_body_or_another_threads_body_in_a_sealed_thread_is_refused(
    world: World,
) -> None:
    saver = world.saver()
    await saver.setup()
    await chat(saver, alice("a1"), WORDS)
    await chat(saver, alice("a2"), WORDS)
    await saver.aflush()
    bucket = world.names["bucket"]
    keys = [k for k, _ in world.bodies() if "/c/" in k]
    a1 = min(k for k in keys if "/a1/" in k)  # inverted ids: the newest first
    a2 = min(k for k in keys if "/a2/" in k)
    moved = world.s3.get_object(Bucket=bucket, Key=a2)["Body"].read()
    world.s3.put_object(Bucket=bucket, Key=a1, Body=moved)  # the same subject's, elsewhere
    reader = world.saver()
    with pytest.raises(SealBrokenError):
        await reader.aget_tuple(alice("a1"))
    world.s3.put_object(Bucket=bucket, Key=a1, Body=b"\x80")  # plaintext (an empty map)
    with pytest.raises(SealBrokenError, match="plain, in a thread the manifest says is sealed"):
        await world.saver().aget_tuple(alice("a1"))


async def test_a_thread_keeps_its_subject(world: World) -> None:
    saver = world.saver()
    await saver.setup()
    await chat(saver, alice(), WORDS, turns=1)
    graph = chat_graph().compile(checkpointer=saver)
    with pytest.raises(Exception, match="belongs to another subject"):
        await graph.ainvoke({"messages": [("user", "hi")]}, {"configurable": {
            "thread_id": "a1", "user_id": "mallory"}})  # fmt: skip
    # a later checkpoint naming no subject stays sealed for the thread's own
    await graph.ainvoke({"messages": [("user", WORDS)]}, {"configurable": {"thread_id": "a1"}})
    await saver.aflush()
    assert world.plaintext(WORDS) == []


async def test_forgetting_a_user_leaves_nothing_readable_and_a_receipt(world: World) -> None:
    world.s3.create_bucket(Bucket=world.names["bucket"])
    world.s3.put_bucket_versioning(
        Bucket=world.names["bucket"], VersioningConfiguration={"Status": "Enabled"}
    )
    saver = world.saver()
    await saver.setup()
    bobs = await chat(saver, bob(), BOBS)
    await chat(saver, alice("a1"), WORDS)
    await chat(saver, alice("a2"), WORDS, turns=2)
    await saver.aflush()
    assert (await saver.apack(["a2"])).threads == 1  # a pack: a2's objects in one
    pack = [b for k, b in world.bodies() if k.startswith("packs/a2/")]
    assert len(pack) == 1 and pack[0].count(sealing.MAGIC) >= 4  # its members sealed as stored
    assert await saver.aget_tuple(alice("a2")) is not None  # and read from it
    await saver.acopy_thread("a1", "a1-copy")  # a copy is alice's too
    assert world.plaintext(WORDS) == []
    plan = await saver.aforget("alice", dry_run=True)
    assert plan["threads"] == 3 and plan["state"] == "dry-run"

    began = await saver.aforget("alice", wait=False)
    assert began["state"] == "forgetting" and began["deleted"]["threads"] == 3
    assert await saver.aget_tuple(alice("a1")) is None
    with pytest.raises(SubjectForgottenError):  # a process that reads the record now
        await chat(world.saver(), alice("a3"), WORDS, turns=1)
    again = await saver.aforget("alice", wait=False)  # resumed: nothing more to do yet
    assert again["state"] == "forgetting"

    later = saver.manifest.now() + 10_000  # the bound and the clocks' margin passed
    saver.manifest.clock = lambda: later
    receipt = await saver.aforget("alice")
    assert receipt["state"] == "forgotten" and receipt["seq"] == 1
    assert receipt["subject"] != "alice" and len(receipt["subject"]) == 32
    assert receipt["life"] == 1 and receipt["key_destroyed"] and receipt["began"]
    deleted = receipt["deleted"]  # what the runs deleted together (the first run's mostly)
    assert deleted["threads"] == 3 and deleted["objects"] > 10 and deleted["bytes"] > 0
    # the second pass found only what the first left (erasure markers): counted once
    assert deleted["checkpoints"] == began["deleted"]["checkpoints"]
    assert deleted["objects"] == began["deleted"]["objects"]
    assert [r["what"].split()[0] for r in receipt["remains"]][:1] == ["object"]
    assert await saver.aforget("alice") == receipt  # forgotten: its receipt again

    # nothing anyone can read: no plaintext, and no key left opens a sealed body
    assert world.plaintext(WORDS) == []
    keys = remaining_keys(world)
    sealed = [(k, b) for k, b in world.bodies() if sealing.is_sealed(b)]
    bobs_token = next(i["sj"]["S"] for i in world.items() if i["pk"]["S"].endswith("/b1"))
    opened = [k for k, b in sealed if "/b1/" in k and opens(keys, b, bobs_token, "b1")]
    assert opened  # the way of testing works: bob's bodies open with his key
    alices = [(k, b) for k, b in sealed if "/a1" in k or "/a2" in k]
    assert alices  # versioning keeps them
    for key, body in alices:
        thread = key.split("/")[1]  # threads/<thread>/... or packs/<thread>/...
        assert not opens(keys, body, receipt["subject"], thread), key
    # bob reads exactly as before, in a new process
    state = await chat_graph().compile(checkpointer=world.saver()).aget_state(bob())
    assert norm(state.values) == bobs
    # the receipts' chain holds, and shows a change
    assert await saver.receipts().verify() is None
    first = saver.receipts().key(1)
    body = world.s3.get_object(Bucket=world.names["bucket"], Key=first)["Body"].read()
    world.s3.put_object(
        Bucket=world.names["bucket"], Key=first, Body=body.replace(b'"life": 1', b'"life": 2')
    )
    broken = await saver.receipts().verify()
    assert (broken is not None and broken.seq == 2) or (broken is not None and broken.seq == 1)


async def test_a_forgotten_user_comes_back_with_a_new_key(world: World) -> None:
    saver = world.saver(subject_key_seconds=1)
    await saver.setup()
    await chat(saver, alice(), WORDS, turns=1)
    began = await saver.aforget("alice", wait=False)
    later = saver.manifest.now() + 1_000
    saver.manifest.clock = lambda: later
    await saver.aforget("alice")
    assert began["life"] == 1
    back = world.saver(subject_key_seconds=1)
    out = await chat(back, alice("a9"), WORDS, turns=1)
    state = await chat_graph().compile(checkpointer=world.saver()).aget_state(alice("a9"))
    assert norm(state.values) == out
    record = next(
        i
        for i in world.items()
        if "~subjects/" in i["pk"]["S"] and i["sk"]["S"] == "~" and "life" in i
    )
    assert record["life"]["N"] == "2" and record["state"]["S"] == "live"


async def test_the_cli_forgets_a_user_and_prints_the_receipts(world: World) -> None:
    saver = world.saver()
    await saver.setup()
    await chat(saver, alice(), WORDS, turns=1)
    await chat(saver, bob(), BOBS, turns=1)
    url = url_of(world.names) + f"&subjects=user_id&kms_key={world.key}"
    plan = answer(run(world.moto, url, "--json", "forget", "alice", "--dry-run"))
    assert plan["dry_run"] and plan["threads"] == 1 and plan["key"] == "live"
    began = answer(run(world.moto, url, "--json", "forget", "alice", "--no-wait", "--yes"))
    assert began["state"] == "forgetting" and began["deleted"]["threads"] == 1
    human = run(world.moto, url, "forget", "alice", "--no-wait", "--yes").stdout.decode()
    assert "run this again then" in human
    later = saver.manifest.now() + 10_000  # what the CLI would find after the bound
    saver.manifest.clock = lambda: later
    receipt = await saver.aforget("alice")
    listed = answer(run(world.moto, url, "--json", "receipts", "--verify"))
    assert listed["verified"] and [r["digest"] for r in listed["receipts"]] == [receipt["digest"]]
    human = run(world.moto, url, "receipts").stdout.decode()
    assert f"subject {receipt['subject']} (life 1) forgotten" in human and "remains:" in human
    missing = run(world.moto, url, "receipts", "--subject", "0" * 32)
    assert missing.returncode == 3
    plain = run(world.moto, url_of(world.names), "forget", "alice", "--yes")
    assert plain.returncode == 2 and b"declares no subjects" in plain.stderr


async def test_a_long_thread_id_is_sealed_like_any_other(world: World) -> None:
    saver = world.saver()
    await saver.setup()
    long_id = "conversation-" + "x" * 300  # stored under a hashed name (~~<sha256>)
    out = await chat(saver, alice(long_id), WORDS, turns=2)
    await saver.aflush()
    assert world.plaintext(WORDS) == [] and world.plaintext("alice") == []
    again = world.saver()
    state = await chat_graph().compile(checkpointer=again).aget_state(alice(long_id))
    assert norm(state.values) == out
    await chat(again, alice(long_id), WORDS, turns=1)  # another process continues it
    world.saver().manifest.clock  # noqa: B018 - a new process reads it as well
    assert (await saver.aforget("alice", dry_run=True))["threads"] == 1


async def test_a_put_on_a_thread_another_process_began_meanwhile_is_sealed(world: World) -> None:
    first, second = world.saver(), world.saver()
    await first.setup()
    assert await first.aget_tuple(alice("t")) is None  # first saw it absent
    await chat(second, alice("t"), WORDS, turns=1)  # second began it for alice
    await second.aflush()
    # first continues it with a checkpoint that names no subject: sealed for alice
    graph = chat_graph().compile(checkpointer=first)
    await graph.ainvoke({"messages": [("user", WORDS)]}, {"configurable": {"thread_id": "t"}})
    await first.aflush()
    assert world.plaintext(WORDS) == []


async def test_forgetting_deletes_only_threads_still_the_subjects(world: World) -> None:
    saver = world.saver()
    await saver.setup()
    await chat(saver, alice("shared"), WORDS, turns=1)
    await saver.adelete_thread("shared")  # alice's thread deleted; its id is free again
    bobs = await chat(world.saver(), bob("shared"), BOBS, turns=1)  # bob begins it
    plain = await chat(world.saver(), {"configurable": {"thread_id": "p"}}, BOBS, turns=1)
    await saver.aforget("alice", wait=False)
    later = saver.manifest.now() + 10_000
    saver.manifest.clock = lambda: later
    receipt = await saver.aforget("alice")
    assert receipt["deleted"]["threads"] == 0  # the id is bob's now
    reader = world.saver()
    state = await chat_graph().compile(checkpointer=reader).aget_state(bob("shared"))
    assert norm(state.values) == bobs
    state = (
        await chat_graph()
        .compile(checkpointer=reader)
        .aget_state({"configurable": {"thread_id": "p"}})
    )
    assert norm(state.values) == plain


async def test_a_forgotten_subjects_thread_id_begins_again_for_anyone(world: World) -> None:
    saver = world.saver(subject_key_seconds=1)
    await saver.setup()
    await chat(saver, alice("a1"), WORDS, turns=1)
    await chat(saver, alice("a2"), WORDS, turns=1)
    await saver.aforget("alice", wait=False)
    later = saver.manifest.now() + 10_000
    saver.manifest.clock = lambda: later
    assert (await saver.aforget("alice"))["state"] == "forgotten"
    # the same process, which knew both threads sealed for alice's first life
    back = await chat(saver, alice("a1"), WORDS, turns=1)  # alice comes back: life 2
    other = await chat(saver, bob("a2"), BOBS, turns=1)  # bob takes a2
    reader = chat_graph().compile(checkpointer=world.saver())
    assert norm((await reader.aget_state(alice("a1"))).values) == back
    assert norm((await reader.aget_state(bob("a2"))).values) == other
    assert world.plaintext(WORDS) == []


async def test_a_sealed_thread_is_copied_into_a_new_thread_only(world: World) -> None:
    saver = world.saver()
    await saver.setup()
    await chat(saver, alice("a1"), WORDS, turns=1)
    await chat(saver, {"configurable": {"thread_id": "p1"}}, BOBS, turns=1)
    with pytest.raises(Exception, match="copy a sealed thread into a new thread"):
        await saver.acopy_thread("a1", "p1")
    assert (await saver.acopy_thread("a1", "a1-copy")).threads == 1
    assert await world.saver().aget_tuple(alice("a1-copy")) is not None
    assert await world.saver().aget_tuple({"configurable": {"thread_id": "p1"}}) is not None


async def test_an_items_content_sealed_by_another_subject_or_garbled_is_refused(
    world: World,
) -> None:
    saver = world.saver()
    await saver.setup()
    await chat(saver, alice("a1"), WORDS, turns=1)
    await chat(saver, bob("b1"), BOBS, turns=1)
    await saver.aflush()
    items = {i["pk"]["S"].rsplit("/", 1)[1]: i for i in world.items() if i["sk"]["S"] == "~"}
    a1, b1 = items["a1"], items["b1"]
    world.set_attribute(a1, "md", b1["md"])  # bob's sealed metadata laid into alice's item
    with pytest.raises(SealBrokenError):
        [t async for t in world.saver().alist_threads()]
    a1 = {**a1, "md": b1["md"]}
    world.set_attribute(a1, "sl", {"N": "1.5"})
    with pytest.raises(SealBrokenError, match="subject attributes"):
        await world.saver().aget_tuple(alice("a1"))


async def test_a_process_keeps_keys_no_longer_than_the_deployments_bound(world: World) -> None:
    first = world.saver(subject_key_seconds=1)
    await first.setup()
    await chat(first, alice("a1"), WORDS, turns=1)
    reader = world.saver(subject_key_seconds=3600)  # names no subject: only reads
    assert await reader.aget_tuple(alice("a1")) is not None
    assert reader._w.seals is not None and reader._w.seals.subjects.bound == 1


async def test_two_forgettings_of_one_subject_at_once_keep_one_receipt(world: World) -> None:
    first, second = world.saver(), world.saver()
    await first.setup()
    await chat(first, alice("a1"), WORDS, turns=1)
    await first.aforget("alice", wait=False)
    later = first.manifest.now() + 10_000
    first.manifest.clock = second.manifest.clock = lambda: later
    one, other = await asyncio.gather(first.aforget("alice"), second.aforget("alice"))
    assert one == other and one["seq"] == 1
    assert [r["seq"] async for r in first.receipts().all()] == [1]
    assert await first.aforget("alice") == one


async def test_receipts_are_kept_where_the_deployment_says(world: World) -> None:
    """``receipts=s3://audit-bucket/prefix``: a compliance bucket of its own (made by
    setup when missing); the chain's head stays in the table."""
    audit = unique_names()["bucket"]
    saver = world.saver(receipts=f"s3://{audit}/audit")
    made = await saver.setup()
    assert any(audit in line for line in made)
    await chat(saver, alice(), WORDS, turns=1)
    await saver.aforget("alice", wait=False)
    later = saver.manifest.now() + 10_000
    saver.manifest.clock = lambda: later
    receipt = await saver.aforget("alice")
    keys = [o["Key"] for o in world.s3.list_objects_v2(Bucket=audit)["Contents"]]
    assert len(keys) == 1 and receipt["seq"] == 1
    assert keys[0].startswith(f"audit/{world.names['bucket']}/")  # one chain per deployment
    assert keys[0].endswith("/receipts/0000000001.json")
    assert not [k for k, _ in world.bodies() if "receipts/" in k]
    assert await saver.receipts().verify() is None
    url = url_of(world.names) + f"&subjects=user_id&kms_key={world.key}&receipts=s3://{audit}/audit"
    printed = answer(run(world.moto, url, "--json", "receipts", "--verify"))
    assert printed["verified"] and [r["seq"] for r in printed["receipts"]] == [1]


async def test_two_deployments_share_a_receipts_place_each_with_its_own_chain(
    world: World,
) -> None:
    audit = unique_names()["bucket"]
    place = f"s3://{audit}/audit"
    other = World(world.moto)
    savers = [world.saver(receipts=place), other.saver(receipts=place)]
    try:
        for saver in savers:
            await saver.setup()
            await chat(saver, alice(), WORDS, turns=1)
            await saver.aforget("alice", wait=False)
            later = saver.manifest.now() + 10_000
            saver.manifest.clock = lambda later=later: later
            assert (await saver.aforget("alice"))["seq"] == 1
        for saver in savers:
            assert await saver.receipts().verify() is None
            assert len([r async for r in saver.receipts().all()]) == 1
    finally:
        await other.aclose()
