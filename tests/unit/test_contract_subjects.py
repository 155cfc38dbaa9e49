"""Subjects' items (``manifest/subjects.py``) on DynamoDB (moto) and the memory table:
lives begun, raced, forgotten and begun again, each change conditioned on what it read."""

from __future__ import annotations

import asyncio

import pytest
from unit_helpers import Backend

from langgraph_s3.core.sealing import subject_token
from langgraph_s3.manifest import deployment_key
from langgraph_s3.manifest.subjects import SUBJECTS_MARK, SubjectRegistry

pytestmark = pytest.mark.unit


@pytest.fixture
def backend(tables: Backend) -> Backend:
    """Every table: DynamoDB's (memory, moto) and the object manifest's."""
    return tables


TOKEN = subject_token(b"s" * 32, "user-1")


async def registry(backend: Backend, prefix: str = "") -> SubjectRegistry:
    table = backend.table_client()
    if not await table.exists():
        await table.create(ttl_attribute="expires_at")
    return SubjectRegistry(table, deployment_key(backend.bucket, prefix))


async def test_a_subject_lives_is_forgotten_and_comes_back_with_a_new_key(
    backend: Backend,
) -> None:
    subjects = await registry(backend)
    assert await subjects.get(TOKEN) is None
    first = await subjects.begin(TOKEN, b"\x01" * 16, b"wrapped-1")
    assert (first.life, first.state, first.key_id, first.wrapped) == (
        1,
        "live",
        b"\x01" * 16,
        b"wrapped-1",
    )
    again = await subjects.begin(TOKEN, b"\x02" * 16, b"wrapped-2")  # live: kept
    assert again.key_id == b"\x01" * 16 and again.life == 1
    marked = await subjects.forgetting(TOKEN)
    assert marked is not None and marked.state == "forgetting"
    refused = await subjects.begin(TOKEN, b"\x03" * 16, b"wrapped-3")
    assert refused.state == "forgetting" and refused.key_id == b"\x01" * 16
    assert await subjects.destroy(TOKEN, 1) is True
    assert await subjects.destroy(TOKEN, 1) is False  # a resumed forgetting: done
    gone = await subjects.get(TOKEN)
    assert gone is not None and gone.state == "forgotten" and gone.wrapped is None
    # which key it was, and when forgetting began, stay for a resumed run's receipt
    assert gone.key_id == b"\x01" * 16 and gone.began == marked.began
    back = await subjects.begin(TOKEN, b"\x04" * 16, b"wrapped-4")
    assert (back.life, back.state, back.key_id) == (2, "live", b"\x04" * 16)
    assert await subjects.destroy(TOKEN, 1) is False  # the old life's forgetting: nothing
    resumed = await subjects.forgetting(TOKEN, life=1)  # a resumed run names its life
    assert resumed is not None and (resumed.life, resumed.state) == (2, "live")
    assert (await subjects.get(TOKEN)).key_id == b"\x04" * 16  # type: ignore[union-attr]


async def test_writers_racing_to_begin_a_life_agree_on_one_key(backend: Backend) -> None:
    subjects = await registry(backend)
    records = await asyncio.gather(
        *(subjects.begin(TOKEN, bytes([i]) * 16, b"w%d" % i) for i in range(8))
    )
    assert len({r.key_id for r in records}) == 1 and {r.life for r in records} == {1}


async def test_a_subject_item_is_the_deployments_own(backend: Backend) -> None:
    ours, theirs = await registry(backend, "app"), await registry(backend, "app2")
    await ours.begin(TOKEN, b"\x01" * 16, b"w")
    assert await theirs.get(TOKEN) is None
    assert ours.key(TOKEN)["pk"]["S"].startswith(deployment_key(backend.bucket, "app"))
    assert SUBJECTS_MARK in ours.key(TOKEN)["pk"]["S"]
    with pytest.raises(ValueError):
        ours.key("user-1")  # a subject's own id is never a key
