"""An existing deployment taking subjects on, on moto (S3, DynamoDB and KMS over HTTP):
``aseal`` / ``langgraph-s3 seal`` rewrites the subjects' plain threads and store items
sealed and says what plaintext remains; sealed exports open only with the subject's
key, elsewhere with the source deployment's, and never once the subject is forgotten."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest
import pytest_asyncio

from helpers import answer, run, url_of
from langgraph_s3 import AsyncS3Saver, AsyncS3Store
from langgraph_s3.errors import ConfigurationError, CorruptExportError
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.graphs import chat_graph, norm
from subjects_world import World, alice, bob, chat

WORDS = "tapir-kestrel-9080"
BOBS = "marmot-egret-1212"


@pytest_asyncio.fixture
async def world(s3_fresh: MotoServer) -> AsyncIterator[World]:
    w = World(s3_fresh)
    yield w
    await w.aclose()


def plain_saver(world: World) -> AsyncS3Saver:
    """The deployment before it declared subjects."""
    s = AsyncS3Saver(endpoint_url=world.moto.url, index_metadata=["user_id"], **world.names)
    world.savers.append(s)
    return s


def plain_store(world: World) -> AsyncS3Store:
    s = AsyncS3Store(endpoint_url=world.moto.url, **world.names)
    world.stores.append(s)
    return s


async def test_seal_rewrites_a_deployments_plain_subjects_and_says_what_remains(
    world: World,
) -> None:
    before = plain_saver(world)
    await before.setup()
    alices = await chat(before, alice(), WORDS, turns=2)
    bobs = await chat(before, bob(), BOBS)
    other = await chat(before, {"configurable": {"thread_id": "anon"}}, "nobody-words")
    await before.aflush()
    store = plain_store(world)
    await store.aput(("users", "alice", "memories"), "m0", {"text": WORDS})
    await store.aput(("users", "bob", "memories"), "m0", {"text": BOBS})
    await store.acompact(("users",))  # a segment holding both in plain
    assert world.plaintext(WORDS) and world.plaintext(BOBS)

    saver = world.saver(subject_label=1)
    plan = await saver.aseal(dry_run=True, idle_minutes=0)
    assert plan["threads"] == 2 and plan["busy"] == [] and plan["refused"] == []
    waiting = await saver.aseal(dry_run=True)  # the default: an hour idle
    assert waiting["threads"] == 0 and sorted(waiting["busy"]) == ["a1", "b1"]
    done = await saver.aseal(idle_minutes=0)
    assert done["threads"] == 2 and done["checkpoints"] >= 8
    sealed_store = world.store()
    items = await sealed_store.aseal()
    assert items["items"] == 2 and items["segments"] == 1
    await saver.aflush()
    assert world.plaintext(WORDS) == [] and world.plaintext(BOBS) == []
    # everything reads as it was, from a new process; a second run finds nothing
    again = world.saver(subject_label=1)
    for config, out in ((alice(), alices), (bob(), bobs)):
        state = await chat_graph().compile(checkpointer=again).aget_state(config)
        assert norm(state.values) == out
    anon = {"configurable": {"thread_id": "anon"}}
    assert norm((await chat_graph().compile(checkpointer=again).aget_state(anon)).values) == other
    got = await world.store().aget(("users", "alice", "memories"), "m0")
    assert got is not None and got.value == {"text": WORDS}
    assert (await again.aseal(idle_minutes=0))["threads"] == 0
    assert (await world.store().aseal())["items"] == 0
    # the threads go on sealed
    await chat(again, alice(), WORDS, turns=1)
    await again.aflush()
    assert world.plaintext(WORDS) == []


async def test_seal_on_a_versioned_bucket_says_the_plain_versions_remain(world: World) -> None:
    bucket = world.names["bucket"]
    before = plain_saver(world)
    await before.setup()
    world.s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    world.s3.put_bucket_lifecycle_configuration(
        Bucket=bucket,
        LifecycleConfiguration={
            "Rules": [
                {
                    "ID": "noncurrent",
                    "Status": "Enabled",
                    "Filter": {"Prefix": ""},
                    "NoncurrentVersionExpiration": {"NoncurrentDays": 30},
                }
            ]
        },
    )
    await chat(before, alice(), WORDS, turns=2)
    await before.aflush()
    done = await world.saver().aseal(idle_minutes=0)
    assert done["threads"] == 1
    versions = [r for r in done["remains"] if "noncurrent" in r["what"]]
    assert versions and "30 days" in versions[0]["why"]
    assert versions[0]["readable_until"] > done["began"]


async def test_a_sealed_export_opens_with_its_subjects_key_and_never_once_forgotten(
    world: World, tmp_path: Path
) -> None:
    saver = world.saver()
    await saver.setup()
    alices = await chat(saver, alice(), WORDS)
    bobs = await chat(saver, bob(), BOBS)
    path = tmp_path / "sealed.jsonl.gz"
    report = await saver.aexport(None, str(path), sealed=True)
    assert report.threads == 2
    import gzip

    raw = gzip.decompress(path.read_bytes())
    assert WORDS.encode() not in raw and BOBS.encode() not in raw
    assert raw.count(b'{"kind":"sealed"') == 2
    # elsewhere: a plain deployment cannot read it, unless given the source's keys
    names = unique_names()
    target = AsyncS3Saver(endpoint_url=world.moto.url, **names)
    world.savers.append(target)
    await target.setup()
    with pytest.raises(ConfigurationError, match="sealed_by"):
        await target.aimport(str(path))
    imported = await target.aimport(str(path), sealed_by=saver)
    assert imported.threads == 2 and imported.skipped == 0
    state = await chat_graph().compile(checkpointer=target).aget_state(alice())
    assert norm(state.values) == alices
    # alice forgotten: her thread in the file is erased for every importer
    await saver.aforget("alice", wait=False)
    later = saver.manifest.now() + 10_000
    saver.manifest.clock = lambda: later
    receipt = await saver.aforget("alice")
    assert receipt["exports"]["sealed"] == 1 and receipt["exports"]["plaintext"] == 0
    third = AsyncS3Saver(endpoint_url=world.moto.url, **unique_names())
    world.savers.append(third)
    await third.setup()
    after = await third.aimport(str(path), sealed_by=world.saver())
    assert after.threads == 1 and after.skipped == 1
    assert await third.aget_tuple(alice()) is None
    state = await chat_graph().compile(checkpointer=third).aget_state(bob())
    assert norm(state.values) == bobs


async def test_the_cli_seals_and_exports_sealed(world: World, tmp_path: Path) -> None:
    before = plain_saver(world)
    await before.setup()
    await chat(before, alice(), WORDS, turns=2)
    await before.aflush()
    await plain_store(world).aput(("users", "alice", "m"), "k", {"text": WORDS})
    url = url_of(world.names) + f"&subjects=user_id&subject_label=1&kms_key={world.key}"
    plan = answer(run(world.moto, url, "--json", "seal", "--dry-run", "--idle-minutes", "0"))
    assert plan["threads"]["threads"] == 1 and plan["store"]["items"] == 1
    done = answer(run(world.moto, url, "--json", "seal", "--idle-minutes", "0", "--yes"))
    assert done["threads"]["threads"] == 1 and done["store"]["items"] == 1
    out = tmp_path / "a.jsonl"
    proc = run(world.moto, url, "export", "a1", "-o", str(out), "--sealed")
    assert proc.returncode == 0, proc.stderr
    assert b'"kind":"sealed"' in out.read_bytes() and WORDS.encode() not in out.read_bytes()
    assert world.plaintext(WORDS) == []
    # imported elsewhere, opened with the source deployment's keys
    elsewhere = url_of(unique_names())
    assert run(world.moto, elsewhere, "setup").returncode == 0
    refused = run(world.moto, elsewhere, "import", str(out))
    assert refused.returncode != 0 and b"--sealed-by" in refused.stderr
    done = run(world.moto, elsewhere, "import", str(out), "--sealed-by", url)
    assert done.returncode == 0, done.stderr
    target = AsyncS3Saver.from_url(elsewhere, endpoint_url=world.moto.url)
    world.savers.append(target)
    state = await chat_graph().compile(checkpointer=target).aget_state(alice())
    assert WORDS in str(state.values)


async def test_seal_refuses_a_thread_of_two_subjects_and_seals_one_begun_anonymous(
    world: World,
) -> None:
    """A thread whose turns named alice then bob (a shared device) is refused and left
    plain (a thread keeps one subject); one whose first turns named nobody and later ones
    alice (a login) is sealed whole for alice."""
    before = plain_saver(world)
    await before.setup()
    await chat(before, alice("shared"), WORDS, turns=1)
    await chat(before, bob("shared"), BOBS, turns=1)
    anon = {"configurable": {"thread_id": "login"}}
    await chat(before, anon, "anonymous-words-31", turns=1)
    await chat(before, alice("login"), WORDS, turns=1)
    await chat(before, alice("logout"), WORDS, turns=1)  # alice's, its last turn nobody's
    await chat(before, {"configurable": {"thread_id": "logout"}}, "anonymous-words-32", turns=1)
    await before.aflush()
    saver = world.saver()
    done = await saver.aseal(idle_minutes=0)
    assert done["refused"] == ["shared"] and done["threads"] == 2
    await saver.aflush()
    assert world.plaintext("anonymous-words-31") == []  # sealed with the rest of it
    assert world.plaintext("anonymous-words-32") == []
    again = world.saver()
    state = await chat_graph().compile(checkpointer=again).aget_state(alice("shared"))
    assert BOBS in str(state.values)  # left as it was, readable
    state = await chat_graph().compile(checkpointer=again).aget_state(alice("login"))
    assert "anonymous-words-31" in str(state.values) and WORDS in str(state.values)
    assert (await again.aseal(idle_minutes=0))["threads"] == 0  # nothing left to do


async def test_the_store_seal_refuses_an_item_the_policy_cannot_name_and_seals_the_rest(
    world: World,
) -> None:
    saver = world.saver()
    await saver.setup()
    plain = plain_store(world)
    await plain.aput(("users", "x" * 1100, "m"), "k", {"text": "a label too long"})
    for i in range(3):
        await plain.aput(("users", f"user{i}", "m"), "k", {"text": f"secret-{i}-qq"})
    done = await world.store().aseal()
    assert done["items"] == 3 and len(done["refused"]) == 1
    assert "1 to 1024 characters" in done["refused"][0]
    assert all(world.plaintext(f"secret-{i}-qq") == [] for i in range(3))


async def test_a_sealed_export_from_elsewhere_without_its_keys_is_refused(
    world: World, tmp_path: Path
) -> None:
    saver = world.saver()
    await saver.setup()
    await chat(saver, alice(), WORDS, turns=1)
    path = tmp_path / "a.jsonl.gz"
    await saver.aexport(None, str(path), sealed=True)
    other = AsyncS3Saver(
        endpoint_url=world.moto.url, subjects="user_id", kms_key=world.key, **unique_names()
    )
    world.savers.append(other)
    await other.setup()
    with pytest.raises(ConfigurationError, match="made by another deployment"):
        await other.aimport(str(path))
    assert await other.aget_tuple(alice()) is None
    # a line whose subject and life were changed (to bob's, a life he never had) is
    # refused as damaged, never skipped as if its subject were forgotten
    await chat(saver, bob(), BOBS, turns=1)
    bobs_token = await saver._w.seals.subjects.token("bob")  # type: ignore[union-attr]
    raw = gzip.decompress(path.read_bytes())
    line = next(x for x in raw.splitlines(keepends=True) if x.startswith(b'{"kind":"sealed"'))
    rec = orjson.loads(line)
    rec["subject"], rec["life"] = bobs_token, rec["life"] + 3
    path.write_bytes(gzip.compress(raw.replace(line, orjson.dumps(rec) + b"\n")))
    with pytest.raises(CorruptExportError, match="never had"):
        await saver.aimport(str(path), replace=True)
    assert await saver.aget_tuple(alice()) is not None  # nothing replaced
    # a damaged file is named as such, whatever byte is hit
    good = path.read_bytes()
    kinds = set()
    for at in range(20, len(good) - 8, max(1, len(good) // 30)):
        raw = bytearray(good)
        for i in range(at, min(at + 8, len(raw))):
            raw[i] ^= 0x5A
        path.write_bytes(bytes(raw))
        try:
            await other.aimport(str(path), sealed_by=saver, replace=True)
            kinds.add("ok")
        except Exception as exc:
            kinds.add(type(exc).__name__)
    assert kinds <= {"ok", "CorruptExportError"}, kinds
