"""A deployment's subjects (``runtime/subjects.py``) on the memory table and vault:
tokens stable across processes, one key per life, writes refused once forgetting
began (within the deployment's bound), keys destroyed only after the bound and the
clocks' margin, reads refused once they are; resumed forgettings; one process per
event loop, as on Lambda."""

from __future__ import annotations

import asyncio

import pytest
from unit_helpers import Backend

from helpers import Clock
from langgraph_s3.core.keys import Layout
from langgraph_s3.core.sealing import seal, unseal
from langgraph_s3.core.subject_keys import SubjectKeys
from langgraph_s3.errors import InvalidRequestError, SubjectForgottenError
from langgraph_s3.manifest import deployment_key
from langgraph_s3.manifest.subjects import SubjectRegistry
from langgraph_s3.runtime.subjects import SKEW, Subjects
from langgraph_s3.testing.memory_vault import MemoryKeyVault

pytestmark = pytest.mark.unit


class Deployment:
    """Processes of one deployment on one (memory) table and vault, one clock."""

    def __init__(self) -> None:
        self.backend = Backend("memory", None)
        self.vault, self.clock = MemoryKeyVault(), Clock()
        self.clock.now = 0.0
        self.backend.memory_bucket.exists = True
        self.objects = self.backend.store()
        self.copy_key = Layout("app").subjects_secret()

    async def process(self, *, ttl: float = 60) -> Subjects:
        table = self.backend.table_client()
        if not await table.exists():
            await table.create(ttl_attribute="expires_at")
        registry = SubjectRegistry(table, deployment_key(self.backend.bucket, ""), clock=self.clock)
        keys = SubjectKeys(self.vault, ttl=ttl, clock=self.clock)
        return Subjects(registry, keys, copies=(self.objects, self.copy_key), clock=self.clock)


async def test_tokens_are_the_same_in_every_process_and_keyed() -> None:
    d = Deployment()
    a, b, c = [await d.process() for _ in range(3)]
    tokens = await asyncio.gather(a.token("alice"), b.token("alice"), c.token("alice"))
    assert len(set(tokens)) == 1 and "alice" not in tokens[0]
    assert await a.token("bob") != tokens[0]
    # racing, each made a secret; the one kept is unwrapped by the others
    assert d.vault.requests["unwrap"] == d.vault.requests["new_data_key"] - 1
    other = await Deployment().process()  # another deployment: another secret
    assert await other.token("alice") != tokens[0]


async def test_one_key_per_life_read_back_by_another_process() -> None:
    d = Deployment()
    writer, reader = await d.process(), await d.process()
    first = await writer.key_for_write("alice")
    assert await writer.key_for_write("alice") == first and first.life == 1
    body = seal(first.key, "t/alice/c/1", b"hello")
    before = d.vault.requests["unwrap"]
    opened = await reader.key_for_read(first.token, first.key.key_id)
    assert unseal(opened, "t/alice/c/1", body) == b"hello"
    await reader.key_for_read(first.token, first.key.key_id)
    # the deployment's secret (its bound is the reader's too) and the key, each once
    assert d.vault.requests["unwrap"] == before + 2
    racing = await asyncio.gather(*(p.key_for_write("bob") for p in (writer, reader)))
    assert racing[0] == racing[1]  # two writers beginning bob's life agree on one key


async def test_forgetting_refuses_writes_within_the_bound_then_reads() -> None:
    d = Deployment()
    writer, forgetter = await d.process(), await d.process()
    first = await writer.key_for_write("alice")
    record = await forgetter.forget_begins("alice")
    assert record is not None and record.state == "forgetting" and record.began == 0
    with pytest.raises(SubjectForgottenError):
        await forgetter.key_for_write("alice")
    d.clock.now = 30  # the writer's kept record: it may still write, within the bound
    assert (await writer.key_for_write("alice")).key == first.key
    d.clock.now = 61  # past the bound it reads the record again: refused
    with pytest.raises(SubjectForgottenError):
        await writer.key_for_write("alice")
    assert forgetter.forget_ends_after(record) == 60 + SKEW
    d.clock.now = 60 + SKEW - 1  # a process may still hold the key: not yet
    with pytest.raises(InvalidRequestError, match="processes may hold it"):
        await forgetter.forget_ends(record)
    d.clock.now = 60 + SKEW
    assert await forgetter.forget_ends(record) is True
    assert await forgetter.forget_ends(record) is False  # resumed: already done
    with pytest.raises(SubjectForgottenError, match="forgotten"):
        await forgetter.key_for_read(first.token, first.key.key_id)
    d.clock.now += 61  # the writer's record and key are past the bound: read again
    with pytest.raises(SubjectForgottenError, match="forgotten"):
        await writer.key_for_read(first.token, first.key.key_id)
    # alice comes back: a new life and key; the old body stays unreadable
    back = await writer.key_for_write("alice")
    assert back.token == first.token and back.life == 2 and back.key != first.key
    with pytest.raises(SubjectForgottenError):
        await forgetter.key_for_read(first.token, first.key.key_id)
    sealed = seal(back.key, "k", b"x")
    assert unseal(await forgetter.key_for_read(back.token, back.key.key_id), "k", sealed)


async def test_a_writer_of_a_life_is_refused_once_it_is_over() -> None:
    """A thread sealed in life 1 is never written in life 2: a run that still holds its
    conversation in memory cannot store it again under the new life's readable key."""
    d = Deployment()
    writer, forgetter = await d.process(), await d.process()
    first = await writer.key_for_write("alice")
    record = await forgetter.forget_begins("alice")
    assert record is not None
    d.clock.now = 60 + SKEW
    await forgetter.forget_ends(record)
    back = await forgetter.key_for_write("alice")  # alice came back
    d.clock.now += 61
    with pytest.raises(SubjectForgottenError, match="life 1 is over"):
        await writer.key_for_write("alice", life=first.life)
    assert (await writer.key_for_write("alice", life=back.life)).key == back.key


async def test_every_process_keeps_keys_for_the_deployments_bound() -> None:
    """The bound is the deployment's (kept with its secret): a process configured with
    a longer one keeps keys no longer than the first process said."""
    d = Deployment()
    first = await d.process(ttl=60)
    await first.token("x")  # the deployment's secret and bound: 60 s
    patient = await d.process(ttl=3600)
    wk = await patient.key_for_write("alice")
    assert patient.bound == 60
    record = await first.forget_begins("alice")
    assert record is not None
    d.clock.now = 61
    with pytest.raises(SubjectForgottenError):
        await patient.key_for_write("alice")
    d.clock.now = 60 + SKEW
    assert await first.forget_ends(record) is True
    d.clock.now = 60 + SKEW + 61
    with pytest.raises(SubjectForgottenError):
        await patient.key_for_read(wk.token, wk.key.key_id)


async def test_a_resumed_forgetting_finds_its_life_and_leaves_a_new_one_alone() -> None:
    d = Deployment()
    p = await d.process()
    await p.key_for_write("alice")
    record = await p.forget_begins("alice")
    assert record is not None
    d.clock.now = 60 + SKEW
    assert await p.forget_ends(record) is True
    again = await p.registry.get(record.token)  # a crashed run, resumed, reads it
    assert again is not None and again.state == "forgotten"
    assert await p.forget_ends(again) is False  # done, without waiting again
    await p.key_for_write("alice")  # alice came back
    resumed = await p.forget_begins("alice", life=record.life)
    assert resumed is not None and (resumed.life, resumed.state) == (2, "live")


def test_each_invocation_on_its_own_event_loop() -> None:
    """Lambda runs each invocation in a new event loop: one Subjects serves them all,
    after a failed one too."""
    d = Deployment()
    p = asyncio.run(d.process())
    d.vault.disable()
    with pytest.raises(Exception, match="disabled"):
        asyncio.run(p.token("alice"))
    d.vault.enabled = True
    tokens = [asyncio.run(p.token("alice")) for _ in range(2)]
    assert tokens[0] == tokens[1]
    first = asyncio.run(p.key_for_write("bob"))
    assert asyncio.run(p.key_for_read(first.token, first.key.key_id)) == first.key


async def test_a_lost_secret_item_is_restored_from_its_copy_never_made_anew() -> None:
    """Every subject's token depends on the deployment's secret: its manifest item, if
    ever lost (a restore from an older backup, a hand's delete), is put back from the
    write-once copy beside the objects, and tokens stay what they were."""
    d = Deployment()
    first = await d.process()
    token = await first.token("alice")
    assert await d.objects.get(d.copy_key) is not None
    table = d.backend.table_client()
    await table.delete(first.registry.secret_key())
    again = await d.process()
    assert await again.token("alice") == token
    assert await first.registry.secret() is not None  # the item is back
    racing = Deployment()  # a new deployment: processes racing, one secret and copy
    ps = [await racing.process() for _ in range(4)]
    tokens = await asyncio.gather(*(p.token("bob") for p in ps))
    assert len(set(tokens)) == 1
    assert racing.vault.requests["unwrap"] == racing.vault.requests["new_data_key"] - 1


async def test_a_subject_written_two_ways_has_one_token() -> None:
    p = await Deployment().process()
    assert await p.token("Zo\u00eb") == await p.token("Zoe\u0308")


def test_only_a_rule_over_the_whole_bucket_bounds_what_versions_keep() -> None:
    from langgraph_s3.runtime.remains import noncurrent_days

    def rule(days: int, **kw: object) -> dict[str, object]:
        return {"Status": "Enabled", "NoncurrentVersionExpiration": {"NoncurrentDays": days}, **kw}

    assert noncurrent_days([rule(30), rule(10, Filter={"Prefix": ""})]) == 10
    assert noncurrent_days([rule(30, Filter={})]) == 30
    scoped = [
        rule(1, Filter={"Prefix": "threads/"}),
        rule(1, Filter={"And": {"Prefix": "", "Tags": [{"Key": "k", "Value": "v"}]}}),
        rule(1, Filter={"Tag": {"Key": "k", "Value": "v"}}),
        rule(1, Filter={"ObjectSizeGreaterThan": 10}),
        rule(1, Prefix="threads/"),
        {**rule(1), "Status": "Disabled"},
    ]
    assert noncurrent_days(scoped) is None


def test_a_receipts_place_is_checked_when_it_is_named() -> None:
    from langgraph_s3.aws.config import receipts_location
    from langgraph_s3.errors import ConfigurationError

    assert receipts_location("s3://audit-bucket/langgraph/") == ("audit-bucket", "langgraph")
    assert receipts_location("s3://audit-bucket") == ("audit-bucket", "")
    assert receipts_location(None) is None
    for bad in ("s3://b/a/../x", "s3://audit-bucket/legal#hold", "https://x/y", "s3://Bad_B/x"):
        with pytest.raises(ConfigurationError):
            receipts_location(bad)
