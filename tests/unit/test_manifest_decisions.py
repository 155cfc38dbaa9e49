"""The manifest's pure decisions and item readings (no table): deployment keys, ids'
times, ``trim_gone``, ``Raw``, and ``decide``: how a commit lands on an item."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from langgraph.checkpoint.base.id import uuid6

from langgraph_s3.core.records import Entry, Fields, uuid6_time
from langgraph_s3.errors import CheckpointConflictError
from langgraph_s3.manifest import (
    GONE_LIMIT,
    GONE_SECONDS,
    deployment_key,
    trim_gone,
)
from langgraph_s3.manifest.decide import decide
from langgraph_s3.manifest.schema import raw_of

pytestmark = pytest.mark.unit


def ids(n: int) -> list[str]:
    """n uuid6 checkpoint ids, oldest first (they sort by time)."""
    out = [str(uuid6()) for _ in range(n)]
    assert out == sorted(out)
    return out


def uuid6_at(epoch: float) -> str:
    """A uuid6 id made at ``epoch`` (what uuid6() gives at that time)."""
    ticks = int(epoch * 1e7) + 0x01B21DD213814000
    value = (ticks >> 12) << 80 | 6 << 76 | (ticks & 0xFFF) << 64 | 0b10 << 62 | 12345
    return str(uuid.UUID(int=value))


def item(**attrs: Any) -> dict[str, Any]:
    """A stored item: str -> S, bool -> BOOL, int -> N, set -> SS."""
    out: dict[str, Any] = {"thread_id": {"S": "t"}, "checkpoint_ns": {"S": ""}}
    for k, v in attrs.items():
        if isinstance(v, bool):
            out[k] = {"BOOL": v}
        elif isinstance(v, int):
            out[k] = {"N": str(v)}
        elif isinstance(v, set):
            out[k] = {"SS": sorted(v)}
        else:
            out[k] = {"S": v}
    return out


# ------------------------------------------------------------- pure functions
def test_deployment_key_names_bucket_and_prefix_without_slashes_inside() -> None:
    assert deployment_key("b", "/p/q/") == deployment_key("b", "p/q")
    key = deployment_key("b", "p/q")
    assert key.startswith("b/") and key.endswith("/")
    assert key.count("/") == 2  # the prefix's own slash is encoded away
    assert deployment_key("b", "p") != deployment_key("b", "") != deployment_key("c", "")


def test_uuid6_time_reads_the_timestamp_of_uuid6_ids_only() -> None:
    before = time.time()
    got = uuid6_time(str(uuid6()))
    assert got is not None and before - 1 <= got <= time.time() + 1
    assert uuid6_time("not-a-uuid") is None
    assert uuid6_time("8f14e45f-ceea-467a-9575-4f5c5ef1d3a2") is None  # uuid4


def test_trim_gone_keeps_recent_ids_above_the_floor_up_to_the_limit() -> None:
    many = ids(GONE_LIMIT + 5)
    now = uuid6_time(many[-1])
    assert now is not None
    kept = trim_gone(many, "", now)
    assert kept == set(many[-GONE_LIMIT:])  # the newest
    assert trim_gone(many[:3], many[1], now) == set(many[1:3])  # below the floor goes
    assert trim_gone(many[:3], "", now + GONE_SECONDS + 1) == set()  # older than an hour
    assert trim_gone({"run-a"}, "", now) == {"run-a"}  # no time in it: kept


def test_entry_tips() -> None:
    e = Entry("t", "", "c3", "c3.tail", heads=frozenset({"c1", "c2"}))
    assert e.tips == {"c1", "c2", "c3"}


def test_raw_reads_rev_tombstone_lease_and_expiry() -> None:
    live = raw_of(item(latest_id="c1", latest_tail="x", rev=4, expires_at=100))
    assert live.rev == 4 and not live.tombstone and live.lease_until == 0
    assert not live.expired(99) and live.expired(100)
    entry = live.live(99)
    assert entry is not None and entry.latest_id == "c1" and entry.rev == 4
    assert entry.expires_at == 100
    assert live.live(100) is None  # expired reads as absent
    stone = raw_of(item(deleted=True, lease_until=50, rev=2))
    assert stone.tombstone and stone.lease_until == 50 and stone.live(0) is None
    assert raw_of({}).rev == 0


def test_decide_starts_a_new_life_over_nothing_or_a_finished_deletion() -> None:
    step = decide(None, "c2", "tail", None, True, 0)
    assert isinstance(step, Fields) and step.life  # a new life, with its token
    assert step == Fields("c2", "tail", "c2", True, 0, set(), born="c2", life=step.life)
    # over a deleted life: runs of it may be in flight, so the floor never comes down
    step = decide(raw_of(item(deleted=True, rev=3)), "c2", "tail", None, True, 0)
    assert isinstance(step, Fields) and step.life
    assert step == Fields("c2", "tail", "c2", True, 0, set(), born="", life=step.life)
    # a parent the item never heard of (a life deleted item and all) starts one too
    assert isinstance(decide(None, "c2", "tail", "c1", False, 0), Fields)


@pytest.mark.parametrize(
    ("attrs", "now", "said"),
    [({"deleted": True}, 0, "deleted"), ({"latest_id": "c1", "expires_at": 5}, 9, "expired")],
)
def test_decide_refuses_to_continue_a_deleted_or_expired_life(
    attrs: dict[str, Any], now: float, said: str
) -> None:
    raw = raw_of(item(latest_tail="x", rev=1, **attrs))
    with pytest.raises(CheckpointConflictError, match=said):
        decide(raw, "c2", "tail", "c1", False, now)


def test_decide_on_a_live_entry() -> None:
    raw = raw_of(item(latest_id="c5", latest_tail="x", floor="c2", heads={"c4"}, gone={"c3"}))
    assert decide(raw, "c5", "x", "c4", False, 0) is None  # already latest
    assert decide(raw, "c4", "x", "c2", False, 0) is None  # already a head
    step = decide(raw, "c6", "y", "c5", False, 0)
    assert isinstance(step, Entry) and step.latest_id == "c5"  # add a tip to it
    for parent in ("c1", "c3"):  # below the floor, or removed above it
        with pytest.raises(CheckpointConflictError, match="removed"):
            decide(raw, "c6", "y", parent, False, 0)
    # a root older than a floor prune raised (born unset): refused, not hidden
    with pytest.raises(CheckpointConflictError, match="older than the thread's history"):
        decide(raw, "c1", "y", None, False, 0)


def test_decide_lowers_a_floor_no_prune_raised_for_a_late_root() -> None:
    """Two writers start one thread: the newer root committed first; the older one
    must join the life (the floor comes down), not vanish below it."""
    c1, c2, c3, c4, c5 = ids(5)
    raw = raw_of(item(latest_id=c5, latest_tail="x", floor=c3, born=c3, heads={c4}))
    step = decide(raw, c2, "y", None, False, 0)
    assert step == Fields(c5, "x", c2, False, 0, {c4, c2}, set(), born=c2)
    with pytest.raises(CheckpointConflictError, match="removed"):  # not a continuation
        decide(raw, c2, "y", c1, False, 0)
    # a root from more than an hour before the floor's: a writer stalled across a
    # deletion or an expiry, not a concurrent first writer
    stale = uuid6_at(uuid6_time(c2) - GONE_SECONDS - 60)  # type: ignore[operator]
    with pytest.raises(CheckpointConflictError, match="older than the thread's history"):
        decide(raw, stale, "y", None, False, 0)
    # a non-uuid6 id cannot be dated: refused rather than guessed
    with pytest.raises(CheckpointConflictError, match="older than the thread's history"):
        decide(raw, "0-custom", "y", None, False, 0)


# -------------------------------------------------------------- against moto


def test_an_expiry_reads_past_items_another_program_wrote() -> None:
    from langgraph_s3.manifest.decide import expiry_of
    from langgraph_s3.manifest.schema import ROOT_SK

    keys = {"pk": {"S": "b/p/t"}, "sk": {"S": ROOT_SK}}
    good = [{**item(latest_id="c1", latest_tail="x", rev=2, expires_at=100), **keys}]
    found = expiry_of(good, 101)
    assert found is not None and (found.thread_id, found.rev) == ("t", 2)
    assert expiry_of(good, 99) is None  # not expired yet
    odd = {**good[0], "thread_id": {"N": "7"}, "rev": {"N": "1.5"}}
    assert expiry_of([odd], 101) is None  # skipped with a warning, not a crash
