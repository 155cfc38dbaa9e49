"""A deployment's subjects (``runtime/subjects.py``) on the memory table and vault:
tokens stable across processes, one key per life, writes refused once forgetting
began (after the cache's bound at most), reads refused once the key is destroyed."""

from __future__ import annotations

import asyncio

import pytest
from unit_helpers import Backend

from langgraph_s3.core.sealing import seal, unseal
from langgraph_s3.core.subject_keys import SubjectKeys
from langgraph_s3.errors import InvalidRequestError, SubjectForgottenError
from langgraph_s3.manifest import deployment_key
from langgraph_s3.manifest.subjects import SubjectRegistry
from langgraph_s3.runtime.subjects import Subjects
from langgraph_s3.testing.memory_vault import MemoryKeyVault

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def processes(n: int, *, ttl: float = 60) -> tuple[list[Subjects], MemoryKeyVault, Clock]:
    """``n`` processes of one deployment on one (memory) table and vault."""
    backend = Backend("memory", None)
    table = backend.table_client()
    await table.create(ttl_attribute="expires_at")
    vault, clock = MemoryKeyVault(), Clock()
    deployment = deployment_key(backend.bucket, "")
    return (
        [
            Subjects(
                SubjectRegistry(table, deployment, clock=clock),
                SubjectKeys(vault, ttl=ttl, clock=clock),
                clock=clock,
            )
            for _ in range(n)
        ],
        vault,
        clock,
    )


async def test_tokens_are_the_same_in_every_process_and_keyed() -> None:
    (a, b, c), vault, _ = await processes(3)
    tokens = await asyncio.gather(a.token("alice"), b.token("alice"), c.token("alice"))
    assert len(set(tokens)) == 1 and "alice" not in tokens[0]
    assert await a.token("bob") != tokens[0]
    # racing, each made a secret; the one kept is unwrapped by the others
    assert vault.requests["unwrap"] == vault.requests["new_data_key"] - 1
    (other, *_), _, _ = await processes(1)  # another deployment: another secret
    assert await other.token("alice") != tokens[0]


async def test_one_key_per_life_read_back_by_another_process() -> None:
    (writer, reader), vault, _ = await processes(2)
    token, key = await writer.key_for_write("alice")
    again_token, again = await writer.key_for_write("alice")
    assert (again_token, again) == (token, key)
    body = seal(key, "t/alice/c/1", b"hello")
    before = vault.requests["unwrap"]
    opened = await reader.key_for_read(token, key.key_id)
    assert unseal(opened, "t/alice/c/1", body) == b"hello"
    await reader.key_for_read(token, key.key_id)
    assert vault.requests["unwrap"] == before + 1  # the key, once (the secret came first)
    racing = await asyncio.gather(*(r.key_for_write("bob") for r in (writer, reader)))
    assert racing[0] == racing[1]  # two writers beginning bob's life agree on one key


async def test_forgetting_refuses_writes_within_the_bound_then_reads() -> None:
    (writer, forgetter), _, clock = await processes(2, ttl=60)
    token, key = await writer.key_for_write("alice")
    body = seal(key, "t/alice/c/1", b"secret words")
    record = await forgetter.forget_begins("alice")
    assert record is not None and record.state == "forgetting"
    with pytest.raises(SubjectForgottenError):
        await forgetter.key_for_write("alice")
    clock.now = 30  # the writer's kept record: it may still write, within the bound
    assert (await writer.key_for_write("alice"))[1] == key
    clock.now = 61  # past the bound it reads the record again: refused
    with pytest.raises(SubjectForgottenError):
        await writer.key_for_write("alice")
    assert forgetter.forget_ends_after(record) == record.since + 60 == 60
    clock.now = 59.5  # a writer may still hold the key: not yet
    with pytest.raises(InvalidRequestError, match="writers may hold it"):
        await forgetter.forget_ends(record)
    clock.now = 62
    assert await forgetter.forget_ends(record) is True
    assert await forgetter.forget_ends(record) is False  # resumed: already done
    with pytest.raises(SubjectForgottenError, match="destroyed"):
        await forgetter.key_for_read(token, key.key_id)
    clock.now = 122  # the writer read the record at 61: past its bound, it reads again
    with pytest.raises(SubjectForgottenError, match="destroyed"):
        await writer.key_for_read(token, key.key_id)
    # alice comes back: a new life, a new key; the old body stays unreadable
    back_token, back = await writer.key_for_write("alice")
    assert back_token == token and back.key_id != key.key_id
    with pytest.raises(SubjectForgottenError):
        await forgetter.key_for_read(token, key.key_id)
    assert unseal(await forgetter.key_for_read(token, back.key_id), "k", seal(back, "k", b"x"))
    assert body  # sealed with the destroyed key: nothing opens it
