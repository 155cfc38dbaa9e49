"""What the manifest records of a checkpoint's metadata, and how an index key reads."""

from __future__ import annotations

import pytest

from langgraph_s3.core.meta import MAX_PAIRS, index_keys, index_value, matches, recorded, wanted
from langgraph_s3.errors import InvalidRequestError
from langgraph_s3.manifest.schema import meta_attributes

pytestmark = pytest.mark.unit


def test_scalars_are_recorded_and_the_rest_is_not() -> None:
    md = {"user_id": "u1", "n": 2, "f": 1.5, "ok": True, "none": None, "nan": float("nan")}
    md |= {"list": [1], "obj": {"a": 1}, "long": "x" * 300, "bad": "\ud800", 7: "seven"}
    assert recorded(md) == {"user_id": "u1", "n": 2, "f": 1.5, "ok": True, "none": None}


def test_indexed_keys_are_recorded_before_the_32_others() -> None:
    md = {f"a{i:02d}": i for i in range(40)} | {"user_id": "u1"}
    assert "user_id" not in recorded(md)  # by key order, it comes last
    kept = recorded(md, ["user_id"])
    assert len(kept) == MAX_PAIRS and kept["user_id"] == "u1"
    sets, removes = meta_attributes(md, "d/", ["user_id", "org"])
    assert sets["ix_user_id"] == 'd/"u1"' and removes == ("ix_org",)


def test_an_index_value_is_one_for_values_python_finds_equal() -> None:
    assert index_value("d/", True) == index_value("d/", 1) == index_value("d/", 1.0)
    assert index_value("d/", 2) != index_value("d/", "2")
    assert index_value("d1/", "u") != index_value("d2/", "u")  # deployments apart
    assert matches({"x": True}, {"x": 1}) and not matches({"x": "1"}, {"x": 1})


def test_index_keys_name_attributes_and_indexes() -> None:
    assert index_keys(["user_id", "org-1"]) == ("user_id", "org-1")
    for bad in (["user.id"], ["a b"], [""], ["x" * 61], ["a", "a"]):
        with pytest.raises(InvalidRequestError):
            index_keys(bad)
    with pytest.raises(InvalidRequestError, match="a list of keys"):
        index_keys("user_id")


def test_a_filter_takes_what_can_be_recorded() -> None:
    assert wanted({"user_id": "u1", "n": None}) == {"user_id": "u1", "n": None}
    for bad in ({"x": [1]}, {"x": "y" * 300}, {1: "x"}, ["x"]):
        with pytest.raises(InvalidRequestError):
            wanted(bad)
