"""The partition keys a deployment's runtime role is limited to (``ops.iam.leading_keys``,
which the terraform module renders as ``dynamodb:LeadingKeys``): every key the code
builds for a deployment falls under its patterns and under no other deployment's, and
every key the saver sends to the table while it serves a deployment does too."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from langgraph.types import Command

from helpers import cfg
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.core.keys import encode
from langgraph_s3.core.meta import index_value
from langgraph_s3.core.records import METADATA_RECORDED, RUNS_INDEXED
from langgraph_s3.core.shards import Shard
from langgraph_s3.manifest import deployment_key
from langgraph_s3.manifest.conditions import Change, Cond
from langgraph_s3.manifest.schema import index_attribute, index_name
from langgraph_s3.ops.deploy.iam import allows, leading_keys, like
from langgraph_s3.ops.tools.doctor import INFO, OK, WARN, _reach_check, foreign_key, probe_key
from langgraph_s3.testing.fakes import MemoryManifest, MemoryObjectStore, MemoryTable
from langgraph_s3.testing.graphs import chat_graph, nested_graph
from langgraph_s3.testing.table import MemoryTableClient

pytestmark = pytest.mark.unit

DEPLOYMENTS = [
    ("bkt", "app"),
    ("bkt", "app2"),  # prefix app must not grant app2...
    ("bkt", "app/eu"),  # ...nor a prefix nested in it
    ("bkt", "ap"),
    ("bkt", ""),  # the whole bucket
    ("bkt2", "app"),
    ("my.bucket", "agents/prod"),
    ("bkt", "ü ~.*?[x]/y"),
    ("bkt", "p" * 130),  # encoded past 120 characters: hashed
]
THREADS = ["t", "", "a/b", "~runs/x", "~doctor~x", "*", "ü" * 50, "x" * 200]
VALUES: list[Any] = ["u1", "", 7, 2.5, True, None, "a/b*"]


def shapes(bucket: str, prefix: str) -> dict[str, list[str]]:
    """Every kind of partition key the code builds for one deployment, by its builders."""
    m = MemoryManifest(deployment=deployment_key(bucket, prefix))
    return {
        "thread items": [m.key(t, ns)["pk"]["S"] for t in THREADS for ns in ("", "sub:1")],
        "marker": [m.deployment],
        "run index": [m.items.run_pk(encode(r, "run_id")) for r in THREADS],
        "index hash keys": [index_value(m.deployment, v) for v in VALUES],
        "doctor's probe": [probe_key(m.deployment)],
    }


def test_like_is_iams_string_like() -> None:
    assert like("b/app/*", "b/app/") and like("b/app/*", "b/app/x/y")
    assert not like("b/app/*", "b/app2/x") and not like("b/app/*", "B/app/x")
    assert like("a?c", "abc") and not like("a?c", "ac")
    assert like("a.c", "a.c") and not like("a.c", "abc")  # no regular expression


@pytest.mark.parametrize(("bucket", "prefix"), DEPLOYMENTS)
def test_every_key_of_a_deployment_falls_under_its_patterns_and_no_others(
    bucket: str, prefix: str
) -> None:
    mine = leading_keys(bucket, prefix)
    for kind, keys in shapes(bucket, prefix).items():
        assert all(allows(mine, k) for k in keys), (kind, [k for k in keys if not allows(mine, k)])
        for other in DEPLOYMENTS:
            if other != (bucket, prefix):
                theirs = leading_keys(*other)
                assert not any(allows(theirs, k) for k in keys), (kind, other)
    # the doctor's look outside: a key no deployment has, next to this one's
    outside = foreign_key(deployment_key(bucket, prefix))
    assert not any(allows(leading_keys(*d), outside) for d in DEPLOYMENTS)


class KeysSeen(MemoryTableClient):
    """The in-memory table, noting every partition key a request names (an index
    Query's: the index's hash key) and every Scan."""

    def __init__(self, table: MemoryTable) -> None:
        super().__init__(table)
        self.pks: list[str] = []
        self.scans = 0

    async def get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        self.pks.append(key["pk"]["S"])
        return await super().get(key)

    async def get_many(self, keys: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        self.pks += [k["pk"]["S"] for k in keys]
        return await super().get_many(keys)

    def query(self, pk: str) -> AsyncIterator[list[dict[str, Any]]]:
        self.pks.append(pk)
        return super().query(pk)

    def query_index(
        self, index: str, attribute: str, value: str
    ) -> AsyncIterator[list[dict[str, Any]]]:
        self.pks.append(value)
        return super().query_index(index, attribute, value)

    def scan(
        self,
        *,
        prefix: str = "",
        after: dict[str, Any] | None = None,
        shard: Shard | None = None,
    ) -> AsyncIterator[list[dict[str, Any]]]:
        self.scans += 1
        return super().scan(prefix=prefix, after=after, shard=shard)

    async def update(
        self,
        key: dict[str, Any],
        change: Change,
        *,
        when: Cond | None = None,
        old: bool = False,
    ) -> dict[str, Any] | None:
        self.pks.append(key["pk"]["S"])
        return await super().update(key, change, when=when, old=old)

    async def put(self, item: dict[str, Any], *, when: Cond | None = None) -> None:
        self.pks.append(item["pk"]["S"])
        await super().put(item, when=when)

    async def delete(self, key: dict[str, Any], *, when: Cond | None = None) -> None:
        self.pks.append(key["pk"]["S"])
        await super().delete(key, when=when)


async def test_every_key_the_runtime_sends_falls_under_its_deployments_patterns() -> None:
    """A deployment's runtime at work (a chat and its fork, nested subgraphs and an
    interrupt, reads and lists of one thread, copy, prune, pack, a rollback of a run,
    an indexed metadata lookup, delete), next to a deployment on prefix ``app2``: every
    key it names is its own, and it never Scans."""
    table = MemoryTable()
    table.indexes[index_name("user_id")] = index_attribute("user_id")
    seen = {p: KeysSeen(table) for p in ("app", "app2")}

    def saver(prefix: str) -> AsyncS3Saver:
        manifest = MemoryManifest(
            table, deployment=deployment_key("bkt", prefix), client=seen[prefix]
        )
        manifest.items.index_metadata = ("user_id",)
        return AsyncS3Saver(
            bucket="bkt",
            prefix=prefix,
            table=table.name,
            object_store=MemoryObjectStore("bkt"),
            manifest=manifest,
        )

    app, neighbour = saver("app"), saver("app2")
    for s in (app, neighbour):  # what the terraform module writes for a new deployment
        await s.manifest.setup.mark_migrated(also=(RUNS_INDEXED, METADATA_RECORDED))
    await chat_graph().compile(checkpointer=neighbour).ainvoke(user("hi"), cfg("chat"))
    seen["app"].pks.clear()

    chat = chat_graph().compile(checkpointer=app)
    meta = {"configurable": {"thread_id": "chat", "run_id": "run-1"}, "metadata": {"user_id": "u1"}}
    await chat.ainvoke(user("hello"), meta)
    assert [t.thread_id async for t in app.alist_threads(metadata={"user_id": "u1"})] == ["chat"]
    history = [s async for s in chat.aget_state_history(cfg("chat"))]
    await chat.ainvoke(None, await chat.aupdate_state(history[1].config, user("a fork")))
    nest = nested_graph().compile(checkpointer=app)
    await nest.ainvoke({"trail": []}, cfg("nest", ns=None))
    await nest.ainvoke(Command(resume="yes"), cfg("nest", ns=None))
    assert await app.aget_tuple(cfg("chat")) is not None
    assert [t async for t in app.alist(cfg("nest", ns=None))]
    await app.acopy_thread("chat", "copy")
    await app.aprune(["copy"], strategy="keep_latest")
    await app.apack(["chat"])
    assert (await app.adelete_for_runs(["run-1"])).checkpoints > 0  # unpacks it first
    await app.adelete_thread("copy")

    keys = set(seen["app"].pks)
    assert [k for k in keys if not allows(leading_keys("bkt", "app"), k)] == []
    assert seen["app"].scans == 0
    d = deployment_key("bkt", "app")  # each kind of key was named: the test sees them
    for kind in (d, d + encode("chat"), d + encode("nest"), index_value(d, "u1")):
        assert kind in keys, kind
    assert any(k.startswith(d + "~runs/") for k in keys)


def user(text: str) -> dict[str, Any]:
    return {"messages": [("user", text)]}


def test_the_doctor_warns_only_of_a_reach_beyond_the_deployments_keys() -> None:
    """Its two looks outside (a GetItem of a key no deployment has, a Scan): either one
    let through is a warning; both denied, the line holds; anything else, a note."""
    assert _reach_check("denied", "denied").status == OK
    assert _reach_check("allowed", "denied").status == WARN
    assert _reach_check("denied", "allowed").status == WARN
    assert _reach_check("denied", "ResourceNotFoundException").status == INFO
