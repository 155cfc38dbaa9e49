"""Deployments sharing one table: two prefixes whose names nest (``a`` and ``a-b``)."""

from __future__ import annotations

from typing import cast

import pytest

from helpers import chat, clocked, keys_of, names_of, nest
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.manifest import Manifest
from langgraph_s3.testing.graphs import CHAT_TURNS

pytestmark = pytest.mark.engines  # also on SeaweedFS and ministack (conftest)


async def test_two_prefixes_one_table(endpoint: str, manifest_kind: str) -> None:
    names = names_of(manifest_kind)
    na = {**names, "prefix": "a"}
    nb = {**names, "prefix": "a-b"}
    async with (
        AsyncS3Saver(endpoint_url=endpoint, thread_ttl_days=1, **na) as a,
        AsyncS3Saver(endpoint_url=endpoint, thread_ttl_days=1, **nb) as b,
    ):
        await a.setup()
        await b.setup()
        for s in (a, b):
            await chat(s, "t", *CHAT_TURNS[:2])
            await nest(s, "n")
        ka, kb = await keys_of(a, "t"), await keys_of(b, "t")
        assert ka and kb
        ca = clocked(a)
        cast(Manifest, b.manifest).clock = ca
        ca.advance(2)  # both expired by the clock; sweep only b
        assert {t.thread_id async for t in a.alist_threads()} == set()
        rb = await b.asweep_ttl()
        assert rb.threads == 2, rb
        assert await keys_of(a, "t") == ka and await keys_of(a, "n") != []
        ca.advance(-2)
        assert {t.thread_id async for t in a.alist_threads()} == {"t", "n"}
        await chat(b, "t", "again")
        await b.apack(["t"])
        assert await keys_of(a, "t") == ka
        assert (
            await a.aget_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
        ) is not None
