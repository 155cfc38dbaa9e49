"""Where ``put`` keeps each value of a checkpoint (``checkpoint.placement.place``): a pure
decision, no request. Unchanged values point at their holder, small ones go inline, large
ones into blobs of their own, lists into runs; a custom serializer is never bypassed."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_s3.checkpoint.placement import place, utf8_blob
from langgraph_s3.core import codec
from langgraph_s3.core.keys import Layout
from langgraph_s3.core.runs import RawValue, Ref, Runs, Tip
from langgraph_s3.core.values import INLINE_MAX

pytestmark = pytest.mark.unit

SERDE = JsonPlusSerializer()
KEYS = Layout("p").namespace("t", "")
BIG = "x" * (INLINE_MAX + 1)


class Wrapped(JsonPlusSerializer):
    """A serializer subclass (one that might encrypt): its bytes are what is stored."""


def test_small_values_go_inline_and_large_ones_into_blobs_first() -> None:
    values = {"a": 1, "b": {"k": "v"}, "big": BIG.encode()}
    versions = {"a": "1", "b": "1", "big": "1"}
    out = place(SERDE, KEYS, values, versions, versions, None)
    assert out.present == ("a", "b", "big")
    assert set(out.inline) == {"a", "b"} and SERDE.loads_typed(out.inline["a"]) == 1
    assert [k for k, _ in out.blobs] == [KEYS.blob("big", "1")]
    assert out.raw == {"big": SERDE.dumps_typed(BIG.encode())[0]}
    assert out.held == {} and out.runs == {}


def test_a_large_string_is_its_utf8_bytes_unless_the_serializer_is_a_subclass() -> None:
    out = place(SERDE, KEYS, {"s": BIG}, {"s": "2"}, {"s": "2"}, None)
    assert out.raw == {"s": codec.UTF8} and out.blobs == [(KEYS.blob("s", "2"), BIG.encode())]
    wrapped = place(Wrapped(), KEYS, {"s": BIG}, {"s": "2"}, {"s": "2"}, None)
    assert wrapped.raw["s"] != codec.UTF8  # the serializer's own bytes
    assert utf8_blob(Wrapped(), BIG) is None and utf8_blob(SERDE, "short") is None


def test_unchanged_values_point_at_where_the_parent_keeps_them() -> None:
    tip = Tip((Ref("c/older", 3, 0),), 3, b"d" * 16)
    known: dict[str, Any] = {
        "a": ("1", "c/parent"),  # inline in the parent's object
        "l": ("1", tip),  # a list's runs
        "r": ("1", RawValue(codec.UTF8)),  # a raw blob
        "gone": ("0", "c/older"),  # an older version: changed, stored anew
    }
    values = {"a": 1, "l": [1, 2, 3], "r": BIG, "gone": 5}
    versions = {"a": "1", "l": "1", "r": "1", "gone": "1"}
    out = place(SERDE, KEYS, values, versions, {}, known)
    assert out.held == {"a": "c/parent"}
    assert out.runs == {"l": Runs(tip.refs, 3)} and out.digests == {"l": tip.digest}
    assert out.raw == {"r": codec.UTF8} and out.blobs == []  # nothing stored again
    assert "gone" in out.inline  # its version moved: the value is stored with this one


def test_a_changed_value_is_stored_even_when_the_parent_holds_its_version() -> None:
    known: dict[str, Any] = {"a": ("1", "c/parent")}
    out = place(SERDE, KEYS, {"a": 2}, {"a": "1"}, {"a": "1"}, known)
    assert out.held == {} and SERDE.loads_typed(out.inline["a"]) == 2


def test_a_list_is_stored_as_runs_and_a_long_new_run_as_a_blob() -> None:
    short = place(SERDE, KEYS, {"l": [1, 2]}, {"l": "1"}, {"l": "1"}, None)
    assert short.runs["l"].count == 2 and short.blobs == [] and short.digests["l"]
    long = ["y" * 1024 for _ in range(300)]  # over INLINE_MAX once encoded
    out = place(SERDE, KEYS, {"l": long}, {"l": "3"}, {"l": "3"}, None)
    ((key, body),) = out.blobs
    assert key.startswith(KEYS.prefix) and len(body) > 0
    assert out.runs["l"].count == 300 and out.runs["l"].refs[-1].key == key[len(KEYS.prefix) :]


def test_values_without_a_version_are_not_placed() -> None:
    out = place(SERDE, KEYS, {"a": 1, "stray": 2}, {"a": "1"}, {"a": "1"}, None)
    assert out.present == ("a",) and set(out.inline) == {"a"}
