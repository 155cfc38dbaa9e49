"""runs.py's pure logic: when a list is runs of its parent's, how runs merge, how
holders' keys pack, and that the encodings join into the serializer's own bytes."""

from __future__ import annotations

import uuid

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_s3.core import codec
from langgraph_s3.core.keys import checkpoint_tail
from langgraph_s3.core.runs import (
    FANOUT,
    WHOLE,
    Ref,
    Runs,
    Tip,
    array,
    elements,
    pack_key,
    plan,
    unpack_key,
)

SERDE = JsonPlusSerializer()


def tip_of(planned: object, key: str) -> Tip:
    runs = planned.runs  # type: ignore[attr-defined]
    refs = runs.refs
    if runs.own is not None:
        refs = (*refs, Ref(key, runs.own_count, runs.level))
    return Tip(refs, runs.count, planned.digest)  # type: ignore[attr-defined]


def test_encodings_join_into_the_serializers_own_bytes() -> None:
    value = [HumanMessage(content="hi", id="1"), AIMessage(content="x" * 300, id="2"), 3, "s"]
    encs = elements(SERDE, value)
    assert encs is not None
    assert array(len(value), encs) == SERDE.dumps_typed(value)[1]
    for n in (0, 15, 16, 70000):  # every msgpack array header size
        assert SERDE.loads_typed(("msgpack", array(n, [b"\x01"] * n))) == [1] * n


def test_only_lists_of_msgpack_elements_under_jsonplus_are_runs() -> None:
    assert elements(SERDE, "not a list") is None
    assert elements(SERDE, []) is None

    class Sealed(JsonPlusSerializer):  # an encrypting serializer's kind of answer
        def dumps_typed(self, obj: object) -> tuple[str, bytes]:
            kind, data = super().dumps_typed(obj)
            return f"{kind}+aes", data[::-1]

    assert elements(Sealed(), [1, 2]) is None  # values are never stored in the clear
    assert elements(EncryptedSerializer(cipher=None), [1, 2]) is None  # type: ignore[arg-type]
    for odd in (None, b"raw", bytearray(b"raw")):  # not msgpack under dumps_typed
        assert elements(SERDE, [1, odd, 2]) is None


def test_each_encoding_is_the_serializers_own() -> None:
    """The encoder ``elements`` calls for LangGraph's serializer gives what its
    ``dumps_typed`` gives, element by element; a subclass's own ``dumps_typed`` is
    called as it is."""
    value = [HumanMessage(content="hi", id="1"), {"k": [1, 2.5, "x"]}, 3, "s", True]
    assert elements(SERDE, value) == [SERDE.dumps_typed(v)[1] for v in value]

    class Tagged(JsonPlusSerializer):
        def dumps_typed(self, obj: object) -> tuple[str, bytes]:
            return "msgpack", SERDE.dumps_typed(["tagged", obj])[1]

    tagged = Tagged()
    assert elements(tagged, value) == [tagged.dumps_typed(v)[1] for v in value]


def test_the_digest_is_of_the_encodings_one_after_another() -> None:
    """A tip's digest is kept in the manifest: it stays the BLAKE2b-128 of the elements'
    encodings fed one after another, whether a list extends its parent or not."""
    import hashlib

    encs = [SERDE.dumps_typed(f"m{i}" * i)[1] for i in range(40)]

    def fed(parts: list[bytes]) -> bytes:
        h = hashlib.blake2b(digest_size=16)
        for part in parts:
            h.update(part)
        return h.digest()

    first = plan(encs[:30], None)
    assert first.digest == fed(encs[:30])
    extended = plan(encs, tip_of(first, "c/a"))
    assert extended.runs.level != WHOLE and extended.digest == fed(encs)


def test_appends_are_runs_that_merge_into_levels() -> None:
    encs = [SERDE.dumps_typed(f"m{i}")[1] for i in range(200)]
    first = plan(encs[:1], None)
    assert first.runs.level == WHOLE and first.runs.refs == ()
    tip = tip_of(first, "c/0")
    for n in range(2, 200):
        p = plan(encs[:n], tip)
        runs = p.runs
        assert runs.count == n and runs.own is not None
        # every run but the first (the list as it started) is below the top level
        assert [r.level for r in runs.refs][:1] == [WHOLE]
        levels = [r.level for r in runs.refs[1:]] + [runs.level]
        assert levels == sorted(levels, reverse=True)  # older runs are the bigger ones
        assert all(levels.count(lv) < FANOUT for lv in set(levels))
        assert len(runs.refs) <= 1 + (FANOUT - 1) * 3
        tip = tip_of(p, f"c/{n}")
    # 198 appends after the first list: 3 * 64 + 6 = levels 2, 2, 2, then six of level 0
    assert [r.level for r in tip.refs[1:]] == [2, 2, 2] + [0] * 6


def test_a_list_whose_prefix_changed_is_stored_whole() -> None:
    encs = [SERDE.dumps_typed(f"m{i}")[1] for i in range(10)]
    tip = tip_of(plan(encs[:5], None), "c/a")
    edited = [SERDE.dumps_typed("changed")[1], *encs[1:6]]
    p = plan(edited, tip)
    assert p.runs.level == WHOLE and p.runs.refs == () and p.runs.own == b"".join(edited)
    shorter = plan(encs[:3], tip)  # a removal
    assert shorter.runs.level == WHOLE and shorter.runs.count == 3


def test_holder_keys_pack_to_48_bytes_and_back() -> None:
    ids = [str(uuid.uuid4()) for _ in range(3)]
    for parent, run in ((ids[1], ids[2]), (None, ids[2]), (ids[1], None)):
        key = "c/" + checkpoint_tail(ids[0], parent, run)
        packed = pack_key(key)
        assert isinstance(packed, list) and sum(len(b) for b in packed) <= 48
        assert unpack_key(packed) == key
    for odd in ("c/" + checkpoint_tail("not-a-uuid", None, None), "b/messages/s1", "c/zz"):
        assert pack_key(odd) == odd and unpack_key(odd) == odd
    runs = Runs((Ref("c/" + checkpoint_tail(ids[0], ids[1], ids[2]), 3, 1),), 4, b"\x01", 0)
    assert Runs.load(runs.dump()) == runs
    env = codec.CheckpointEnvelope(("msgpack", b"\x80"), ("msgpack", b"\x80"), ("m",), ("m",))
    assert codec.load_checkpoint(codec.dump_checkpoint(env)) == env
