"""The manifest's item schema: what ``manifest/schema.py`` reads off DynamoDB's wire
format is what the manifest wrote (a whole item, a pack, held copies, metadata), an item
another writer left is kept apart instead of read wrong, and the held bytes a copy
counts match the attribute that holds it."""

from __future__ import annotations

import pytest

from langgraph_s3.core.held import InlineCopy, held_size
from langgraph_s3.core.records import Fields, PackRef
from langgraph_s3.manifest.decide import whole_item
from langgraph_s3.manifest.schema import (
    INLINE_PREFIX,
    deleting_threads,
    inline_attribute,
    inline_copies,
    pack_attribute,
    pack_of,
    raw_of,
)

pytestmark = pytest.mark.unit

KEY = {"pk": {"S": "d/t"}, "sk": {"S": "~"}}


def test_a_whole_item_reads_back_as_the_fields_written() -> None:
    copy = InlineCopy("c2", "c2.tail", b"body")
    pack = PackRef("packs/t/p1", 1000, 64, 7, upto=99, bare=True)
    new = Fields(
        "c2",
        "c2.tail",
        "c1",
        True,
        50,
        {"h1"},
        gone={"g1"},
        born="c1",
        pack=pack,
        spilled="s1",
        packings=3,
        life="L",
        inline=(copy,),
    )
    item = whole_item(KEY, "t", "", new, 4, 100, 3600)
    raw = raw_of(item)
    assert (raw.rev, raw.life, raw.born, raw.created_at, raw.updated_at) == (5, "L", "c1", 50, 100)
    assert raw.expires == 3700 and raw.inline == (copy,) and raw.held_bytes == held_size(copy)
    entry = raw.live(100)
    assert entry is not None
    assert (entry.latest_id, entry.floor, entry.heads, entry.pack) == ("c2", "c1", {"h1"}, pack)
    assert (entry.packings, entry.spilled, entry.uses_delta, entry.life) == (3, "s1", True, "L")
    assert raw.live(3700) is None  # its TTL passed


def test_a_pack_reads_back_as_written() -> None:
    for ref in (PackRef("k", 1, 2, 3), PackRef("k", 1, 2, 3, upto=9, bare=True)):
        assert pack_of(pack_attribute(ref)) == ref
    assert pack_of(None) is None and pack_of({}) is None


def test_a_held_copy_counts_the_bytes_of_its_attribute() -> None:
    copy = InlineCopy("1f0-id", "tail/of/it", b"x" * 100)
    attr = inline_attribute(copy)
    name = INLINE_PREFIX + copy.checkpoint_id
    tags = 8  # the map's keys and type tags (t, b, M, S, B), about
    assert held_size(copy) == len(name) + len(copy.tail) + len(copy.body) + tags
    assert inline_copies({name: attr, "inline:bad": {"S": "x"}}) == (copy,)


def test_an_item_another_writer_left_is_kept_apart_not_read_wrong() -> None:
    raw = raw_of({**KEY, "latest_id": {"N": "1"}, "rev": {"S": "x"}, "lease_until": {"S": "?"}})
    assert raw.garbled and raw.committed and raw.rev == 0 and raw.lease_until == 0
    with pytest.raises(ValueError, match="no readable latest"):
        raw.live(0)
    stone = raw_of({**KEY, "deleted": {"BOOL": True}, "latest_id": {"S": "c1"}})
    assert stone.tombstone and not stone.committed and stone.live(0) is None


def test_a_revivable_tombstone_within_its_lease_holds_its_thread() -> None:
    held = {"thread_id": {"S": "a"}, "deleted": {"BOOL": True}, "revivable": {"BOOL": True}}
    items = [
        {**held, "lease_until": {"N": "150"}},
        {**held, "thread_id": {"S": "b"}, "lease_until": {"N": "90"}},  # ran out
        {
            **held,
            "thread_id": {"S": "c"},
            "revivable": {"BOOL": False},
            "lease_until": {"N": "150"},
        },
        {"thread_id": "garbage"},
    ]
    assert deleting_threads(items, 100) == {"a"}
