"""A contended commit answers with what its writer must do (``core/commit.py``) and the
writer's loop (``checkpoint/committing.py``) meets it and asks again: what the manifest
decided on the way (a re-check after a wait, the rounds lost) is carried from call to
call, as it was within one call when the manifest called back into the writer."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest
from unit_helpers import checkpoint_ids

from langgraph_s3.checkpoint.committing import Meeting, commit
from langgraph_s3.core.commit import EVERY_NEED, How, Need
from langgraph_s3.errors import ConflictError
from langgraph_s3.manifest.schema import HELD_BYTES
from langgraph_s3.testing.fakes import MemoryManifest, memory_saver

pytestmark = pytest.mark.unit


def meeting(log: list[str], **answers: Any) -> Meeting:
    done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    done.set_result(True)

    async def noted(*_: Any, name: str = "") -> None:
        log.append(name)

    def answer(name: str) -> Any:
        if name in answers:
            return answers[name]

        async def run(*a: Any) -> None:
            await noted(*a, name=name)

        return run

    return Meeting(
        stored=done,
        rewrite=answer("rewrite"),
        ensure=answer("ensure"),
        clear=answer("clear"),
        sweep=answer("sweep"),
        spill=answer("spill"),
    )


async def test_a_check_again_after_a_removal_survives_a_clear() -> None:
    """A head waits for a prune's mark, so its objects are checked again after it; the
    item became crowded meanwhile and is cleared first: the check still comes."""
    m = MemoryManifest()
    a, c, b = checkpoint_ids(3)
    await m.commits.advance("t", "", a, "ta", None)
    root = await m.reads.latest("t", "")
    assert root is not None
    await m.commits.advance("t", "", b, "tb", a)
    k = m.items.key("t", "")
    key = (k["pk"]["S"], k["sk"]["S"])
    m.data.items[key][HELD_BYTES] = {"N": "0"}
    log: list[str] = []
    tasks: list[asyncio.Future[None]] = []

    async def ensure() -> None:
        log.append("ensure")
        if log.count("ensure") == 1:  # a prune begins after the first check
            # a mark a whole second away at least: the writer polls it (0.25 s) after
            # the crowding below (0.1 s), whatever the clock's phase
            m.data.items[key]["removing"] = {"SS": [f"{int(time.time()) + 2}:removal-abc"]}

            async def crowd() -> None:
                await asyncio.sleep(0.1)  # while the writer waits for the mark
                m.data.items[key].pop(HELD_BYTES, None)

            tasks.append(asyncio.ensure_future(crowd()))

    async def clear(raw: Any) -> None:
        log.append("clear")
        m.data.items[key].pop("removing", None)  # the prune ended
        m.data.items[key][HELD_BYTES] = {"N": "0"}

    keys = SimpleNamespace(thread_id="t", checkpoint_ns="")
    how = How(life=root.life, meets=EVERY_NEED)
    ways = meeting(log, ensure=ensure, clear=clear)
    await commit(m, keys, (c, "tc", a), how, ways)  # type: ignore[arg-type]
    assert log == ["ensure", "clear", "ensure"]
    e = await m.reads.latest("t", "")
    assert e is not None and c in e.heads


async def test_a_need_carries_the_rounds_lost_so_far() -> None:
    """``max_conflicts`` bounds the whole commit, not each call between two needs."""
    need = Need("ensure", life="x", lost=3)
    assert How(lost=1).after(need).lost == 3
    m = MemoryManifest(max_conflicts=2)
    (a,) = checkpoint_ids(1)
    await m.commits.advance("t", "", a, "ta", None)
    spent = How(started=True, lost=2)  # every round spent already: one try still made
    e = await m.reads.latest("t", "")
    assert e is not None
    other = checkpoint_ids(2)[1]
    await m.commits.advance("t", "", other, "to", a, spent)  # a fork: goes through
    tries: list[int] = []

    async def never(*_: Any, **__: Any) -> bool:
        tries.append(1)
        return False

    m.commits._add_tip = never  # type: ignore[method-assign]
    with pytest.raises(ConflictError):
        await m.commits.advance("t", "", checkpoint_ids(3)[2], "tz", a, spent)
    assert len(tries) == 1  # the commit's budget was spent before this call
    tries.clear()
    with pytest.raises(ConflictError):
        await m.commits.advance("t", "", checkpoint_ids(3)[2], "tz", a, How(started=True))
    assert len(tries) == 2


def test_a_sync_twin_takes_its_async_methods_arguments() -> None:
    """LangGraph passes ``task_path`` to ``put_writes`` only when its signature names
    it; every twin says the arguments of its async method."""
    from langgraph.pregel._checkpoint import put_writes_accepts_task_path

    saver = memory_saver()
    assert put_writes_accepts_task_path(saver.put_writes)
    import inspect

    for sync, name in [("get_tuple", "aget_tuple"), ("put", "aput"), ("list", "alist")]:
        ps = inspect.signature(getattr(saver, sync)).parameters
        assert list(ps) == list(inspect.signature(getattr(saver, name)).parameters), sync
        assert getattr(saver, sync).__name__ == sync


async def test_the_saver_s_concurrency_is_read_at_each_call() -> None:
    saver = memory_saver()
    saver.concurrency = 3
    assert saver._contract.concurrency == saver._threads.concurrency == 3
