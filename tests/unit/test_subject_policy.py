"""A deployment's subject policy (``core/subject_policy.py``): whom a thread or a store
namespace belongs to, from metadata, a label or a function; ids normalized."""

from __future__ import annotations

import unicodedata

import pytest

from langgraph_s3.core.subject_policy import SubjectPolicy, normalize_subject
from langgraph_s3.errors import InvalidRequestError

pytestmark = pytest.mark.unit


def test_a_thread_subject_comes_from_its_metadata_or_a_function() -> None:
    by_key = SubjectPolicy(metadata_key="user_id")
    assert by_key.active
    assert by_key.thread_subject({"user_id": "u1", "step": 3}) == "u1"
    assert by_key.thread_subject({"user_id": 42}) == "42"
    assert by_key.thread_subject({"step": 3}) is None  # no subject: as without a policy
    assert by_key.namespace_subject(("users", "u1")) is None
    by_fn = SubjectPolicy(of_thread=lambda md: md.get("tenant"))
    assert by_fn.thread_subject({"tenant": "acme"}) == "acme"
    assert by_fn.thread_subject({}) is None
    with pytest.raises(InvalidRequestError, match="checkpoint metadata 'user_id'"):
        by_key.thread_subject({"user_id": {"nested": 1}})
    with pytest.raises(InvalidRequestError, match="1 to 1024"):
        by_key.thread_subject({"user_id": ""})
    assert not SubjectPolicy().active and SubjectPolicy().thread_subject({"x": 1}) is None


def test_a_namespace_subject_comes_from_a_label_or_a_function() -> None:
    by_label = SubjectPolicy(namespace_label=1)
    assert by_label.namespace_subject(("users", "u1", "memories")) == "u1"
    assert by_label.namespace_subject(("users",)) is None  # too short: none
    by_fn = SubjectPolicy(of_namespace=lambda ns: ns[-1] if ns[0] == "tenants" else None)
    assert by_fn.namespace_subject(("tenants", "acme")) == "acme"
    assert by_fn.namespace_subject(("shared", "docs")) is None


def test_one_person_written_two_ways_is_one_subject() -> None:
    composed, decomposed = "Zo\u00eb", unicodedata.normalize("NFD", "Zo\u00eb")
    assert composed != decomposed
    assert normalize_subject(composed) == normalize_subject(decomposed) == composed
    with pytest.raises(InvalidRequestError):
        normalize_subject(True)
    with pytest.raises(InvalidRequestError):
        normalize_subject("x" * 1025)


def test_a_policy_names_one_source_each() -> None:
    with pytest.raises(InvalidRequestError, match="not both"):
        SubjectPolicy(metadata_key="user_id", of_thread=lambda md: None)
    with pytest.raises(InvalidRequestError, match="not both"):
        SubjectPolicy(namespace_label=0, of_namespace=lambda ns: None)
    with pytest.raises(InvalidRequestError):
        SubjectPolicy(namespace_label=-1)
    with pytest.raises(InvalidRequestError):
        SubjectPolicy(metadata_key="")
