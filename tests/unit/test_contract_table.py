"""The table contract: the same assertions on ``DynamoTable`` (moto) and on
``MemoryTableClient``: conditions and changes as data mean what DynamoDB makes of them,
and what DynamoDB refuses is refused by both."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
from unit_helpers import Backend

from langgraph_s3.core.shards import Shard
from langgraph_s3.errors import (
    ConditionFailedError,
    MissingResourceError,
    ServiceError,
    TransactionFailedError,
)
from langgraph_s3.manifest import TTL_ATTRIBUTE
from langgraph_s3.manifest.conditions import (
    BOOL,
    SS,
    Absent,
    Change,
    Compare,
    Cond,
    Contains,
    Exists,
    N,
    Not,
    S,
    TxCheck,
    TxDelete,
    TxPut,
    TxUpdate,
    TxWrite,
    Typed,
    all_of,
    any_of,
    eq,
)
from langgraph_s3.manifest.table import TablePort
from langgraph_s3.testing.table import holds

pytestmark = pytest.mark.unit


def key(pk: str = "d/t", sk: str = "r") -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


@pytest.fixture
def backend(tables: Backend) -> Backend:
    """Every table: DynamoDB's (memory, moto) and the object manifest's."""
    return tables


@pytest.fixture
async def table(backend: Backend) -> TablePort:
    t = backend.table_client()
    await t.create(ttl_attribute=TTL_ATTRIBUTE)
    return t


async def items(pages: AsyncIterator[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [i async for page in pages for i in page]


async def test_a_table_until_created(backend: Backend) -> None:
    t = backend.table_client()
    assert await t.exists() is False
    with pytest.raises(MissingResourceError):
        await t.get(key())
    await t.create(ttl_attribute=TTL_ATTRIBUTE)
    await t.create(ttl_attribute=TTL_ATTRIBUTE)  # again: fine
    assert await t.exists() is True
    assert await t.get(key()) is None


async def test_an_update_creates_the_item_from_its_key(table: TablePort) -> None:
    change = Change({"a": S("x"), "n": N(1)}, add={"rev": N(1), "s": SS(["b", "a"])})
    assert await table.update(key(), change, when=Absent("pk"), old=True) is None
    item = await table.get(key())
    assert item is not None
    assert {k: item[k] for k in ("a", "n", "rev")} == {"a": S("x"), "n": N(1), "rev": N(1)}
    assert sorted(item["s"]["SS"]) == ["a", "b"]
    with pytest.raises(ConditionFailedError):
        await table.update(key(), change, when=Absent("pk"))  # it exists now


async def test_add_remove_delete_and_the_old_item(table: TablePort) -> None:
    await table.put({**key(), "rev": N(4), "s": SS(["a", "b"]), "gone": S("x")})
    old = await table.update(
        key(),
        Change(remove=("gone",), add={"rev": N(1)}, delete={"s": SS(["a", "zz"])}),
        old=True,
    )
    assert old is not None and old["rev"] == N(4) and "gone" in old
    item = await table.get(key())
    assert item is not None and item["rev"] == N(5) and item["s"]["SS"] == ["b"]
    assert "gone" not in item
    await table.update(key(), Change(delete={"s": SS(["b"])}, add={"t": SS(["c"])}))
    item = await table.get(key())
    assert item is not None and "s" not in item  # a set left empty goes
    assert item["t"]["SS"] == ["c"]
    await table.update(key(), Change(delete={"missing": SS(["x"])}))  # nothing to take
    assert await table.get(key()) == item


CONDITIONS: list[tuple[Cond, bool]] = [
    (Exists("latest_id"), True),
    (Absent("latest_id"), False),
    (Absent("deleted"), True),
    (eq("latest_id", S("c5")), True),
    (eq("latest_id", S("c4")), False),
    (Compare("latest_id", "<", S("c6")), True),
    (Compare("latest_id", ">=", S("c5")), True),
    (Compare("latest_id", ">", S("c5")), False),
    (Compare("missing", "<", S("z")), False),  # a missing attribute compares false
    (Not(Compare("missing", "<", S("z"))), True),
    (eq("latest_id", N(5)), False),  # another type compares false
    (Compare("rev", ">", N(9)), True),  # numbers compare as numbers, not strings
    (Compare("rev", "<", N(100)), True),
    (eq("heads", SS(["h2", "h1"])), True),  # sets compare as sets
    (eq("heads", SS(["h1"])), False),
    (Contains("heads", S("h1")), True),
    (Contains("heads", S("h3")), False),
    (Contains("tail", S(".run")), True),  # a substring of a string
    (Contains("tail", S(".other")), False),
    (eq("pack.key", S("packs/p1")), True),  # inside a map, by a reserved word
    (eq("pack.key", S("packs/p2")), False),
    (eq("flag", BOOL(True)), True),
    (any_of(Absent("gone"), Not(Contains("gone", S("c5")))), True),
    (all_of(Exists("latest_id"), eq("rev", N(10))), True),
    (all_of(Exists("latest_id"), eq("rev", N(11))), False),
    (any_of(eq("rev", N(11)), eq("rev", N(10))), True),
    (Typed("rev", "N"), True),  # attribute_type
    (Typed("latest_id", "N"), False),
    (Typed("missing", "N"), False),
    # a string TTL is no expiry: tested for its type before any comparison
    (any_of(Absent("tail"), Not(Typed("tail", "N")), Compare("tail", ">", N(5))), True),
]


@pytest.mark.parametrize("cond, expected", CONDITIONS, ids=[str(c) for c, _ in CONDITIONS])
async def test_a_condition_holds_as_dynamodb_says(
    table: TablePort, cond: Cond, expected: bool
) -> None:
    item = {
        **key(),
        "latest_id": S("c5"),
        "rev": N(10),
        "heads": SS(["h1", "h2"]),
        "tail": S("ns/c5.c4.run"),
        "pack": {"M": {"key": S("packs/p1"), "size": N(3)}},
        "flag": BOOL(True),
    }
    await table.put(item)
    if expected:
        await table.update(key(), Change({"seen": S("yes")}), when=cond)
        after = await table.get(key())
        assert after is not None and after["seen"] == S("yes")
    else:
        with pytest.raises(ConditionFailedError):
            await table.update(key(), Change({"seen": S("yes")}), when=cond)
        assert await table.get(key()) == item  # nothing changed
    assert holds(cond, item) is expected  # the evaluator, as the table said


async def test_a_missing_item_has_no_attributes(table: TablePort) -> None:
    with pytest.raises(ConditionFailedError):
        await table.update(key(), Change({"a": S("x")}), when=Exists("pk"))
    assert await table.get(key()) is None
    with pytest.raises(ConditionFailedError):
        await table.put({**key(), "a": S("x")}, when=eq("rev", N(1)))
    await table.delete(key())  # a missing item is fine without a condition
    with pytest.raises(ConditionFailedError):
        await table.delete(key(), when=Exists("pk"))


async def test_conditional_put_and_delete(table: TablePort) -> None:
    await table.put({**key(), "rev": N(1)}, when=Absent("pk"))
    with pytest.raises(ConditionFailedError):
        await table.put({**key(), "rev": N(9)}, when=Absent("pk"))
    await table.put({**key(), "rev": N(2)}, when=eq("rev", N(1)))
    with pytest.raises(ConditionFailedError):
        await table.delete(key(), when=eq("rev", N(1)))
    await table.delete(key(), when=eq("rev", N(2)))
    assert await table.get(key()) is None


async def test_refusals_before_and_by_the_table(table: TablePort) -> None:
    with pytest.raises(ValueError, match="two actions"):
        Change({"a": S("x")}, remove=("a",))
    with pytest.raises(ValueError, match="empty"):
        SS([])
    with pytest.raises(ValueError, match="something"):
        Change()
    await table.put({**key(), "word": S("text")})
    with pytest.raises(ServiceError, match="ValidationException"):
        await table.update(key(), Change(add={"word": N(1)}))  # a string is no number
    with pytest.raises(ServiceError, match="ValidationException"):
        await table.update(key(), Change({"sk": S("other")}))  # part of the key
    with pytest.raises(ServiceError, match="ValidationException"):
        await table.put({**key(), "big": S("x" * 410_000)})  # over 400 KB
    with pytest.raises(ServiceError, match="ValidationException"):
        await table.put({**key(sk=""), "v": S("x")})  # a key string may not be empty
    item = await table.get(key())
    assert item is not None and item == {**key(), "word": S("text")}


async def test_query_scan_and_get_many(table: TablePort) -> None:
    for pk in ("a/t1", "a/t2", "b/t1"):
        for sk in ("r", "s1", "s2"):
            await table.put({**key(pk, sk), "v": S(pk + sk)})
    got = await items(table.query("a/t2"))
    assert [i["sk"]["S"] for i in got] == ["r", "s1", "s2"]
    scanned = await items(table.scan(prefix="a/"))
    assert sorted((i["pk"]["S"], i["sk"]["S"]) for i in scanned) == [
        (pk, sk) for pk in ("a/t1", "a/t2") for sk in ("r", "s1", "s2")
    ]
    assert len(await items(table.scan())) == 9
    many = await table.get_many([key("a/t1", "s1"), key("b/t1", "r"), key("none", "r")])
    assert sorted(i["v"]["S"] for i in many) == ["a/t1s1", "b/t1r"]


def script(seed: int, steps: int = 120) -> list[tuple[str, int, int, int, str, str]]:
    """(namespace, condition, rev, change, letter, text) per step, drawn in one order."""
    rng = random.Random(seed)
    return [
        (
            rng.choice(["r", "a"]),
            rng.randrange(4),
            rng.randrange(4),
            rng.randrange(4),
            rng.choice("xyz"),
            str(rng.random()),
        )
        for _ in range(steps)
    ]


async def test_a_random_script_leaves_the_same_items(table: TablePort) -> None:
    """One seeded run of conditional writes gives the answers and items the rules
    written out by hand give, on both tables."""
    answers = []
    for sk, pick, rev, c, letter, text in script(7):
        when = [None, Absent("pk"), eq("rev", N(rev)), Contains("s", S("x"))][pick]
        change = [
            Change(add={"rev": N(1)}),
            Change(add={"s": SS([letter])}),
            Change(delete={"s": SS([letter])}, add={"rev": N(1)}),
            Change({"v": S(text)}, remove=("w",)),
        ][c]
        try:
            await table.update(key("d/t", sk), change, when=when)
            answers.append(True)
        except ConditionFailedError:
            answers.append(False)
    final = [_sorted(i) for i in await items(table.query("d/t"))]
    assert (answers, final) == _by_hand(script(7))
    assert answers.count(True) > 20 and answers.count(False) > 20  # both kinds met


def _sorted(item: dict[str, Any]) -> dict[str, Any]:
    return {k: ({"SS": sorted(v["SS"])} if "SS" in v else v) for k, v in item.items()}


def _by_hand(
    steps: list[tuple[str, int, int, int, str, str]],
) -> tuple[list[bool], list[dict[str, Any]]]:
    """The same script on plain dicts, DynamoDB's rules written out by hand."""
    state: dict[str, dict[str, Any]] = {}
    answers = []
    for sk, pick, rev, c, letter, text in steps:
        item = state.get(sk)
        ok = [
            True,
            item is None,
            item is not None and item.get("rev") == rev,
            item is not None and "x" in item.get("s", set()),
        ][pick]
        answers.append(ok)
        if not ok:
            continue
        new = dict(item or {})
        if c in (0, 2):
            new["rev"] = new.get("rev", 0) + 1
        if c == 1:
            new["s"] = new.get("s", set()) | {letter}
        elif c == 2 and "s" in new:
            new["s"] = new["s"] - {letter}
            if not new["s"]:
                del new["s"]
        elif c == 3:
            new["v"] = text
            new.pop("w", None)
        state[sk] = new
    final = []
    for sk in sorted(state):
        out: dict[str, Any] = {**key("d/t", sk)}
        for name, v in state[sk].items():
            out[name] = (
                {"N": str(v)} if name == "rev" else {"SS": sorted(v)} if name == "s" else S(v)
            )
        final.append(out)
    return answers, final


async def test_reserved_words_and_odd_names_are_attributes_like_any(table: TablePort) -> None:
    """``size``, ``data``, ``key`` are DynamoDB reserved words, ``x-y`` no identifier:
    DynamoDB refuses them spelled out in an expression (the table names them through
    placeholders), and they hold and change like any other attribute."""
    await table.put({**key(), "size": N(3), "data": {"M": {"key": S("k")}}, "x-y": S("a")})
    change = Change({"x-y": S("b")}, add={"size": N(1)})
    when = all_of(eq("size", N(3)), eq("data.key", S("k")), Exists("x-y"))
    await table.update(key(), change, when=when)
    item = await table.get(key())
    assert item is not None and item["size"] == N(4) and item["x-y"] == S("b")
    with pytest.raises(ConditionFailedError):
        await table.update(key(), change, when=eq("size", N(3)))


@pytest.mark.parametrize(
    "item",
    [
        {"s": {"SS": []}},  # an empty set
        {"n": {"N": "abc"}},  # no number
        {"m": {"M": {"inner": {"NS": []}}}},  # inside a map too
    ],
    ids=["empty set", "bad number", "nested empty set"],
)
async def test_values_dynamodb_refuses_are_refused_by_both(
    table: TablePort, item: dict[str, Any]
) -> None:
    with pytest.raises(ServiceError, match="ValidationException"):
        await table.put({**key(), **item})
    assert await table.get(key()) is None  # nothing written


async def test_delete_from_what_is_no_set_and_duplicate_keys_are_refused(
    table: TablePort,
) -> None:
    await table.put({**key(), "removing": S("not a set")})
    with pytest.raises(ServiceError, match="ValidationException"):
        await table.update(key(), Change(delete={"removing": SS(["x"])}))
    assert (await table.get(key()) or {}).get("removing") == S("not a set")
    with pytest.raises(ServiceError, match="ValidationException"):
        await table.get_many([key(), key()])
    with pytest.raises(ValueError, match="top-level"):
        Change({"pack.key": S("x")})


async def test_contains_finds_an_element_of_a_list(table: TablePort) -> None:
    await table.put({**key(), "l": {"L": [S("a"), N(2)]}})
    await table.update(key(), Change({"seen": S("a")}), when=Contains("l", S("a")))
    await table.update(key(), Change({"seen": S("2")}), when=Contains("l", N(2)))
    with pytest.raises(ConditionFailedError):
        await table.update(key(), Change({"seen": S("b")}), when=Contains("l", S("b")))
    assert (await table.get(key()) or {}).get("seen") == S("2")


async def test_the_segments_of_a_scan_split_the_table_whole(table: TablePort) -> None:
    for t in range(12):
        for sk in ("a", "b", "c"):
            await table.put({**key(f"d/t{t}", sk), "n": N(t)})
    await table.put({**key("e/other", "a")})  # another deployment's: the prefix filters
    everything = {(i["pk"]["S"], i["sk"]["S"]) for i in await items(table.scan(prefix="d/"))}
    for total in (1, 2, 5):
        seen: list[tuple[str, str]] = []
        for segment in range(total):
            shard = Shard(segment, total)
            part = [
                (i["pk"]["S"], i["sk"]["S"])
                for i in await items(table.scan(prefix="d/", shard=shard))
            ]
            # a thread's items are in one segment, together and in key order
            assert part == sorted(part)
            seen += part
        assert sorted(seen) == sorted(everything) and len(seen) == len(set(seen))
        assert all(sum(1 for p, _ in seen if p == pk) == 3 for pk, _ in seen)


async def test_an_index_names_the_items_of_one_value(table: TablePort) -> None:
    await table.create_index("meta_user", "ix_user")
    assert await table.indexes() == ["meta_user"]
    for t, user in (("t1", "d/u1"), ("t2", "d/u2"), ("t3", "d/u1")):
        await table.put({**key(f"d/{t}", "r"), "ix_user": S(user)})
    await table.put({**key("d/t4", "r")})  # no attribute: not in the index
    found = await items(table.query_index("meta_user", "ix_user", "d/u1"))
    assert sorted(i["pk"]["S"] for i in found) == ["d/t1", "d/t3"]
    await table.create_index("meta_user", "ix_user")  # again: fine


async def test_a_transaction_writes_every_part_or_none(table: TablePort) -> None:
    await table.put({**key(sk="root"), "deleted": BOOL(True), "rev": N(3)})
    await table.put({**key(sk="gone"), "rev": N(1)})
    parts: list[TxWrite] = [
        TxUpdate(key(sk="ns"), Change({"a": S("x")}, add={"rev": N(1)}), when=Absent("pk")),
        TxPut({**key(sk="other"), "b": S("y")}),
        TxDelete(key(sk="gone"), when=eq("rev", N(1))),
        TxCheck(key(sk="root"), Absent("deleted")),
    ]
    with pytest.raises(TransactionFailedError) as failed:
        await table.transact(parts)
    assert failed.value.failed == (3,)  # the check on the tombstoned root
    assert await table.get(key(sk="ns")) is None  # nothing of it was written
    assert await table.get(key(sk="other")) is None
    assert await table.get(key(sk="gone")) is not None
    parts[3] = TxCheck(key(sk="root"), eq("rev", N(3)))
    await table.transact(parts)
    ns = await table.get(key(sk="ns"))
    assert ns is not None and ns["a"] == S("x") and ns["rev"] == N(1)
    assert await table.get(key(sk="other")) == {**key(sk="other"), "b": S("y")}
    assert await table.get(key(sk="gone")) is None
    # a check on a missing item sees no attributes
    await table.transact([TxCheck(key(sk="never"), Absent("deleted")), TxPut(key(sk="x"))])
    assert await table.get(key(sk="never")) is None


async def test_a_transaction_naming_one_item_twice_is_refused(table: TablePort) -> None:
    with pytest.raises(ServiceError, match="ValidationException"):
        await table.transact([TxPut(key(sk="a")), TxCheck(key(sk="a"), Absent("deleted"))])
    assert await table.get(key(sk="a")) is None
