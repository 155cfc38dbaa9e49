"""Key encoding: injective, S3-safe, bounded; adversarial ids never collide."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata

from helpers import cfg
from langgraph_s3 import AsyncS3Saver, InvalidIdError
from langgraph_s3.core.keys import (
    Layout,
    checkpoint_tail,
    decode,
    encode,
    invert_id,
    parse_checkpoint_tail,
    uninvert_id,
)

SAFE_KEY = re.compile(r"^[A-Za-z0-9_~./-]*$")
ids = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80) | st.sampled_from(
    ["", "/", "..", ".", "%", "%2F", "~", "~~", "a/b", "a", "ab", "b", "ns|x:1"]
)


@given(st.lists(ids, min_size=2, max_size=2, unique=True))
def test_encode_is_injective_and_safe(pair: list[str]) -> None:
    a, b = (encode(x) for x in pair)
    assert a != b
    for enc in (a, b):
        assert SAFE_KEY.match(enc) and "/" not in enc and "." not in enc


@given(ids)
def test_encode_round_trips(value: str) -> None:
    enc = encode(value)
    if not enc.startswith("~~"):
        assert decode(enc) == value


@given(st.lists(ids, min_size=2, max_size=2, unique=True))
def test_thread_prefixes_never_nest(pair: list[str]) -> None:
    """delete_thread(a) deletes prefix(a): it must not be a prefix of prefix(b)."""
    layout = Layout("p")
    pa, pb = (layout.thread(x) for x in pair)
    assert not pa.startswith(pb) and not pb.startswith(pa)


@given(st.tuples(ids, ids), st.tuples(ids, ids))
def test_thread_and_namespace_pairs_never_meet(x: tuple[str, str], y: tuple[str, str]) -> None:
    layout = Layout("p")
    if x != y:
        nx, ny = layout.namespace(*x), layout.namespace(*y)
        assert not nx.prefix.startswith(ny.prefix) and not ny.prefix.startswith(nx.prefix)


def test_long_ids_are_hashed_and_keys_stay_under_1024_bytes() -> None:
    long = "é" * 5000
    layout = Layout("a" * 200)
    nsp = layout.namespace(long, long)
    cid = str(uuid6())
    key = nsp.checkpoint(cid, cid, long)
    write = nsp.regular_write(cid, long)
    blob = nsp.blob(long, "x" * 3000)
    for k in (key, write, blob):
        assert len(k.encode()) <= 1024, len(k)
    assert encode(long) != encode(long + "é")
    with pytest.raises(InvalidIdError, match="hashed"):
        decode(encode(long))


def test_checkpoint_key_order_is_newest_first_and_parses_back() -> None:
    cids = [str(uuid6(clock_seq=i)) for i in range(50)]
    tails = [checkpoint_tail(c, None, "run-1") for c in cids]
    assert sorted(tails) == tails[::-1]
    parsed = parse_checkpoint_tail("k", checkpoint_tail(cids[3], cids[2], "r/1"))
    assert (parsed.checkpoint_id, parsed.parent_id, parsed.run_token) == (
        cids[3],
        cids[2],
        encode("r/1"),
    )
    assert uninvert_id(invert_id("abc")) == "abc"
    # prefix ids still order correctly: "ab" < "abc" so "abc" lists first
    assert checkpoint_tail("abc", None, None) < checkpoint_tail("ab", None, None)


@pytest.mark.parametrize(
    "bad",
    ["", "x" * 65, "\ud800"],
    ids=["empty", "too-long", "lone-surrogate"],
)
def test_bad_checkpoint_ids_fail_clearly(bad: str) -> None:
    with pytest.raises(InvalidIdError):
        invert_id(bad)


def test_bad_prefix_is_rejected() -> None:
    with pytest.raises(InvalidIdError, match="segment"):
        Layout("a/../b")


# ----------------------------------------------------- end to end, on moto
ADVERSARIAL = ["a", "ab", "a/b", "a%2Fb", "..", ".", "", "日本語", "x" * 300, "a b", "a~b"]


async def test_adversarial_threads_and_namespaces_stay_isolated(s3_saver: AsyncS3Saver) -> None:
    pairs = [(t, ns) for t in ADVERSARIAL for ns in ("", "b", "outer:1|inner:2", "..")]
    for thread, ns in pairs:
        cp = generate_checkpoint(channel_values={"who": [thread, ns]}, channel_versions={"who": 1})
        stored = await s3_saver.aput(cfg(thread, ns=ns), cp, generate_metadata(), {"who": 1})
        await s3_saver.aput_writes(stored, [("w", [thread, ns])], "task")
    for thread, ns in pairs:
        tup = await s3_saver.aget_tuple(cfg(thread, ns=ns))
        assert tup is not None
        assert tup.checkpoint["channel_values"] == {"who": [thread, ns]}
        assert [w[2] for w in tup.pending_writes or []] == [[thread, ns]]
        listed = [t async for t in s3_saver.alist(cfg(thread, ns=ns))]
        assert len(listed) == 1
    # deleting "a" leaves "ab", "a/b" and every other thread intact
    await s3_saver.adelete_thread("a")
    assert await s3_saver.aget_tuple(cfg("a")) is None
    for thread, ns in pairs:
        if thread != "a":
            tup = await s3_saver.aget_tuple(cfg(thread, ns=ns))
            assert tup is not None and tup.checkpoint["channel_values"]["who"] == [thread, ns]
    every = {
        (t.config["configurable"]["thread_id"], t.config["configurable"]["checkpoint_ns"])
        async for t in s3_saver.alist(None)
    }
    assert every == {p for p in pairs if p[0] != "a"}


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(ids, ids), min_size=2, max_size=4, unique=True))
async def test_property_random_ids_never_collide(
    s3_saver: AsyncS3Saver, pairs: list[tuple[str, str]]
) -> None:
    tag = str(uuid6())
    for i, (thread, ns) in enumerate(pairs):
        cp = generate_checkpoint(channel_values={"v": [tag, i]}, channel_versions={"v": tag})
        await s3_saver.aput(cfg(thread, ns=ns), cp, generate_metadata(), {"v": tag})
    for i, (thread, ns) in enumerate(pairs):
        tup = await s3_saver.aget_tuple(cfg(thread, ns=ns))
        assert tup is not None and tup.checkpoint["channel_values"]["v"] == [tag, i]


@given(ids, ids, st.none() | ids)
def test_namespace_keys_build_what_they_parse(thread: str, ns: str, run: str | None) -> None:
    """Every checkpoint key NamespaceKeys builds parses back to its ids; write keys name
    their checkpoint; the tail the manifest stores rebuilds the key."""
    keys = Layout("p").namespace(thread, ns)
    parent, cid = sorted([str(uuid6()), str(uuid6())])
    key = keys.checkpoint(cid, parent, run)
    ck = keys.parse_checkpoint(key)
    assert (ck.key, ck.checkpoint_id, ck.parent_id) == (key, cid, parent)
    assert ck.run_token == ("" if run is None else encode(run, "run_id"))
    assert keys.checkpoint_at(keys.tail(key)) == key
    assert key.startswith(keys.checkpoint_id_prefix(cid)) and key < keys.older_than(cid)
    assert keys.from_id(cid) < key
    for wkey in (keys.regular_write(cid, "task"), keys.special_write(cid, "task", -2)):
        assert wkey.startswith(keys.writes_of(cid))
        assert keys.checkpoint_of_write(wkey) == invert_id(cid)
    assert keys.special_write(cid, "task", -2).endswith("/s2")
    assert keys.listed_checkpoints([key, keys.checkpoints + "notes.txt"]) == [ck]


def test_rehome_moves_a_key_between_threads_and_refuses_foreign_keys() -> None:
    layout = Layout("p")
    src, dst = layout.namespace("a", "ns"), layout.namespace("b", "ns")
    assert layout.rehome(src.blob("ch", "1"), "a", "b") == dst.blob("ch", "1")
    with pytest.raises(InvalidIdError, match="not a key of thread"):
        layout.rehome(dst.blob("ch", "1"), "a", "b")
