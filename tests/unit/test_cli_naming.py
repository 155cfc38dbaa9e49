"""How operators name checkpoints and namespaces (``ops/refs.py``), and what the
command line shows of a conversation (``ops/conversation.py``): pure functions."""

from __future__ import annotations

import click
import pytest

from langgraph_s3.ops.conversation import (
    changes,
    headline,
    is_message,
    message,
    messages_changed,
    structural,
)
from langgraph_s3.ops.tools.cli.base import hoisted
from langgraph_s3.ops.tools.refs import (
    Back,
    RefError,
    match_id,
    match_namespaces,
    namespace_listing,
    node_path,
    parse,
)

IDS = [
    "1f1ef224-8cec-67d2-8005-d2cb20eafb3c",
    "1f1ef224-8b6b-64b5-8004-fddc35fdc111",
    "1f1ef224-8b6b-64b5-8003-aaaa35fdc222",
]


def test_latest_and_latest_n() -> None:
    assert parse(None) == Back(0) and parse("latest") == Back(0)
    assert parse("latest~3") == Back(3) and parse(" latest~12 ") == Back(12)
    assert parse("latest~") == "latest~" and parse("latest~x") == "latest~x"
    assert parse(IDS[0]) == IDS[0]


def test_an_id_by_itself_a_unique_prefix_or_a_unique_suffix() -> None:
    assert match_id(IDS[1], IDS, where="t") == IDS[1]
    assert match_id("1f1ef224-8cec", IDS, where="t") == IDS[0]
    assert match_id(IDS[2][-12:], IDS, where="t") == IDS[2]
    with pytest.raises(RefError) as many:
        match_id("1f1ef224-8b6b", IDS, where="thread 't'")
    assert many.value.ambiguous and IDS[1] in str(many.value) and IDS[2] in str(many.value)
    with pytest.raises(RefError) as none:
        match_id("beef", IDS, where="thread 't'")
    assert not none.value.ambiguous and "3 checkpoints" in str(none.value)
    with pytest.raises(RefError):
        match_id("", IDS, where="t")


def test_namespaces_by_node_path() -> None:
    spaces = ["", "middle:aa", "middle:bb", "middle:aa|inner:cc", "other:dd"]
    assert node_path("middle:aa|inner:cc") == "middle/inner" and node_path("") == ""
    assert match_namespaces("middle:aa|inner:cc", spaces) == ["middle:aa|inner:cc"]
    assert match_namespaces("middle/inner", spaces) == ["middle:aa|inner:cc"]
    assert match_namespaces("/middle|inner/", spaces) == ["middle:aa|inner:cc"]
    assert match_namespaces("middle", spaces) == ["middle:aa", "middle:bb"]
    assert match_namespaces("inner", spaces) == []
    assert namespace_listing(spaces) == "(root), middle (2 runs), middle/inner, other"


def test_global_options_move_to_the_front() -> None:
    opts = {"--url": True, "--json": False}
    assert hoisted(["threads", "--json", "--url", "s3://b"], opts) == [
        "--json",
        "--url",
        "s3://b",
        "threads",
    ]
    assert hoisted(["show", "t", "--url=s3://b", "x"], opts) == ["--url=s3://b", "show", "t", "x"]
    # after --, nothing moves: a value that looks like an option stays a value
    assert hoisted(["store", "put", "--", "--json"], opts) == ["store", "put", "--", "--json"]


def human(text: str, id: str) -> dict[str, object]:
    return {"type": "human", "content": text, "id": id}


def ai(text: str, id: str, calls: list[dict[str, object]] | None = None) -> dict[str, object]:
    return {"type": "ai", "content": text, "id": id, "tool_calls": calls or []}


def test_messages_added_removed_and_edited_by_id() -> None:
    before = [human("hi", "1"), ai("hello", "2"), human("bye", "3")]
    after = [human("hi", "1"), ai("hello, you", "2"), ai("", "4", [{"name": "f", "args": {}}])]
    got = messages_changed(before, after)
    assert [m["text"] for m in got["removed"]] == ["bye"]
    assert got["added"] == [
        {"role": "assistant", "text": "", "tool_calls": [{"name": "f", "args": {}}], "id": "4"}
    ]
    assert [(e["before"]["text"], e["after"]["text"]) for e in got["edited"]] == [
        ("hello", "hello, you")
    ]
    # without ids: by position
    plain = messages_changed(
        [{"type": "human", "content": "a"}],
        [
            {"type": "human", "content": "a"},
            {"type": "ai", "content": [{"type": "text", "text": "b"}, {"type": "image"}]},
        ],
    )
    assert plain["added"] == [{"role": "assistant", "text": "b\n[image]"}]


def test_changes_set_langgraph_channels_apart_and_diff_the_rest() -> None:
    before = {"messages": [human("hi", "1")], "branch:to:agent": None, "n": {"a": 1, "b": [1]}}
    after = {
        "messages": [human("hi", "1"), ai("yo", "2")],
        "branch:to:agent": 1,
        "n": {"a": 2, "b": [1, 5]},
    }
    got = changes(before, after)
    assert got["internal"] == ["branch:to:agent"]
    assert got["messages"]["messages"]["added"][0]["text"] == "yo"
    assert got["channels"]["n"]["changes"] == [
        {"path": "a", "before": 1, "after": 2},
        {"path": "b[1]", "before": None, "after": 5},
    ]
    assert "branch:to:agent" in changes(before, after, all_channels=True)["channels"]
    assert structural(1, 1) == [] and structural(1, 2) == [
        {"path": "(value)", "before": 1, "after": 2}
    ]


def test_a_headline_is_cut_at_a_word() -> None:
    m = {"role": "user", "text": "one two three four five six"}
    assert headline(m, 100) == "user: one two three four five six"
    assert headline(m, 20) == "user: one two three…"
    call = {
        "role": "assistant",
        "text": "",
        "tool_calls": [{"name": "weather", "args": {"city": "Oslo"}}],
    }
    assert headline(call) == "assistant: → weather(city='Oslo')"


def test_option_values_and_mistakes_are_not_hoisted() -> None:
    opts = {"--url": True, "--json": False}
    valued = frozenset({"--ns", "--query"})
    assert hoisted(["history", "--ns", "--json", "t"], opts, valued) == [
        "history",
        "--ns",
        "--json",
        "t",
    ]
    with pytest.raises(click.UsageError, match="given twice"):
        hoisted(["--json", "threads", "--json"], opts)
    with pytest.raises(click.UsageError, match="needs a value"):
        hoisted(["delete", "chat", "--url"], opts)


def test_odd_values_are_no_messages() -> None:
    assert not is_message({"type": ["string", "null"], "content": 1})
    assert is_message({"type": "AIMessageChunk", "content": "x"})
    assert message({"type": "AIMessageChunk", "content": "x"})["role"] == "assistant"
    assert message({"type": "ai", "content": [{"type": "text", "text": ""}]})["text"] == ""
    word = {"role": "user", "text": "x" * 100}
    assert headline(word, 20) == "user: " + "x" * 13 + "…"


def test_a_root_and_a_part_of_an_id() -> None:
    assert match_namespaces("(root)", ["", "a:1"]) == [""]
    assert match_namespaces("(root)", ["a:1"]) == []
    assert match_id("8cec-67d2", IDS, where="t") == IDS[0]
