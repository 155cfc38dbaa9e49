"""A process's subjects' data keys (``core/subject_keys.py``): made and unwrapped
through the vault once, kept for a bounded time, never another subject's."""

from __future__ import annotations

import asyncio

import pytest

from helpers import Clock
from langgraph_s3.core.sealing import seal, unseal
from langgraph_s3.core.subject_keys import SubjectKeys
from langgraph_s3.errors import KeyUnavailableError
from langgraph_s3.testing.memory_vault import MemoryKeyVault

pytestmark = pytest.mark.unit


async def test_a_key_is_unwrapped_once_and_kept_for_its_bound() -> None:
    vault, clock = MemoryKeyVault(), Clock()
    clock.now = 0.0
    maker = SubjectKeys(vault, ttl=60, clock=clock)
    key, wrapped = await maker.new("alice")
    body = seal(key, "t/a", b"hello")
    reader = SubjectKeys(vault, ttl=60, clock=clock)  # another process
    for _ in range(3):
        got = await reader.get("alice", key.key_id, wrapped)
        assert unseal(got, "t/a", body) == b"hello"
    assert reader.unwraps == 1 and vault.requests["unwrap"] == 1
    clock.now = 59.9
    await reader.get("alice", key.key_id, wrapped)
    assert vault.requests["unwrap"] == 1
    clock.now = 60.0  # the bound: unwrapped again, or refused once the key is gone
    await reader.get("alice", key.key_id, wrapped)
    assert vault.requests["unwrap"] == 2
    vault.disable()
    clock.now = 120.0
    with pytest.raises(KeyUnavailableError):
        await reader.get("alice", key.key_id, wrapped)


async def test_concurrent_first_reads_share_one_unwrap() -> None:
    vault = MemoryKeyVault()
    key, wrapped = await SubjectKeys(vault).new("bob")
    reader = SubjectKeys(vault)
    keys = await asyncio.gather(*(reader.get("bob", key.key_id, wrapped) for _ in range(20)))
    assert all(k == key for k in keys) and vault.requests["unwrap"] == 1


async def test_a_refusal_is_not_kept_and_a_cancelled_unwrap_leaves_others_to_retry() -> None:
    vault = MemoryKeyVault()
    key, wrapped = await SubjectKeys(vault).new("carol")
    reader = SubjectKeys(vault)
    with pytest.raises(KeyUnavailableError):
        await reader.get("dave", key.key_id, wrapped)  # carol's key under dave's name
    assert await reader.get("carol", key.key_id, wrapped) == key

    slow = MemoryKeyVault()
    k2, w2 = await SubjectKeys(slow).new("erin")
    gate = asyncio.Event()
    unwrap = slow.unwrap

    async def held(wrapped: bytes, context: dict[str, str]) -> bytes:
        await gate.wait()
        return await unwrap(wrapped, context)

    slow.unwrap = held  # type: ignore[method-assign]
    readers = SubjectKeys(slow)
    first = asyncio.create_task(readers.get("erin", k2.key_id, w2))
    await asyncio.sleep(0)
    second = asyncio.create_task(readers.get("erin", k2.key_id, w2))
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.sleep(0)
    gate.set()
    assert await second == k2  # it unwrapped the key itself
    assert first.cancelled()


async def test_drop_forgets_a_subjects_keys_and_the_cache_is_bounded() -> None:
    vault = MemoryKeyVault()
    keys = SubjectKeys(vault, max_keys=3)
    made = [await keys.new(f"s{i}") for i in range(4)]
    assert keys.drop("s0") == 0  # the oldest was let go at the bound
    assert keys.drop("s3") == 1
    key, wrapped = made[3]
    await keys.get("s3", key.key_id, wrapped)
    assert keys.unwraps == 1  # dropped: unwrapped again
    with pytest.raises(ValueError):
        SubjectKeys(vault, ttl=0)
