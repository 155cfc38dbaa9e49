"""prune of a packed thread while a writer in another process is between its blob
PUT and its commit: unpack re-puts the latest with a new LastModified, which is
prune's cutoff for unreferenced blobs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing import MotoServer, unique_names


def s3(server: MotoServer, names: dict[str, str], **kw: Any) -> AsyncS3Saver:
    return AsyncS3Saver(endpoint_url=server.url, **names, **kw)


async def put(saver: AsyncS3Saver, parent: dict | None, values: dict[str, Any], step: int):
    base = empty_checkpoint() if parent is None else parent["ck"]
    ck = create_checkpoint(base, None, step)
    versions = {}
    for ch, v in values.items():
        ck["channel_values"][ch] = v
        versions[ch] = saver.get_next_version(ck["channel_versions"].get(ch), None)
        ck["channel_versions"][ch] = versions[ch]
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    if parent is not None:
        config = parent["config"]
    out = await saver.aput(config, ck, {"source": "loop", "step": step}, versions)
    return {"ck": ck, "config": out}


@pytest.mark.parametrize("packed", [True, False])
async def test_prune_keeps_a_blob_a_writer_has_yet_to_commit(
    s3_fresh: MotoServer, packed: bool
) -> None:
    names = unique_names()
    async with s3(s3_fresh, names) as w, s3(s3_fresh, names) as admin:
        await w.setup()
        c1 = await put(w, None, {"a": "one"}, 0)
        c2 = await put(w, c1, {"a": "two"}, 1)
        if packed:  # unpacking rewrites the objects: their times must not move the cutoff
            assert (await admin.apack(["t"])).threads == 1
        orig = w.manifest.advance

        async def advance(*args: Any, **kw: Any) -> str | None:
            # the writer's blob is stored; its commit is slow (a retry, a GC pause)
            await asyncio.sleep(1.1)  # LastModified has 1 s resolution on S3
            print("prune:", await admin.aprune(["t"]))
            return await orig(*args, **kw)

        w.manifest.advance = advance  # type: ignore[method-assign]
        big = "x" * (300 * 1024)
        await put(w, c2, {"big": big}, 2)
        w.manifest.advance = orig  # type: ignore[method-assign]
        async with s3(s3_fresh, names, cache_bytes=0) as cold:
            tup = await cold.aget_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
            assert tup is not None and tup.checkpoint["channel_values"]["big"] == big
            assert tup.checkpoint["channel_values"].get("big") == big
