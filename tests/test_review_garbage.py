from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from helpers import cfg, chat, keys_of
from langgraph_s3 import AsyncS3Saver, CorruptObjectError, InvalidRequestError
from langgraph_s3.graphs import CHAT_TURNS
from langgraph_s3.testing import MotoServer, unique_names


def s3(server: MotoServer, names: dict[str, str], **kw: Any) -> AsyncS3Saver:
    return AsyncS3Saver(endpoint_url=server.url, **names, **kw)


async def test_garbage(s3_fresh: MotoServer) -> None:
    names = unique_names()
    async with s3(s3_fresh, names) as a:
        await a.setup()
        for t in ("bad", "gone"):
            await chat(a, t, *CHAT_TURNS[:2])
            await a.apack([t])
        pb = (await a.manifest.latest("bad", "")).pack
        body = await a.raw_objects.get(pb.key)
        await a.raw_objects.put(pb.key, body[:20] + b"\x00" * 30 + body[50:])
        pg = (await a.manifest.latest("gone", "")).pack
        await a.raw_objects.delete([pg.key])
        async with s3(s3_fresh, names) as cold:
            for t in ("bad", "gone"):  # named as corrupt, never served as empty
                with pytest.raises(CorruptObjectError):
                    await cold.aget_tuple(cfg(t))
                with pytest.raises(CorruptObjectError):
                    await cold.apack([t])
                with pytest.raises(CorruptObjectError):
                    await cold.aprune([t], keep_last=1)
                assert (await cold.adelete_thread(t)).threads == 1  # and deleted whole
                assert await keys_of(cold, t) == []
                assert await cold.raw_objects.list_all(cold.layout.packs(t)) == []
        assert [t.thread_id async for t in a.alist_threads(after="")] == []  # from the start
        for cur in [
            "!!!",
            base64.urlsafe_b64encode(orjson.dumps(["", ""])).decode(),
            base64.urlsafe_b64encode(orjson.dumps("ab")).decode(),
            base64.urlsafe_b64encode(orjson.dumps(["x" * 3000, "y"])).decode(),
        ]:
            with pytest.raises(InvalidRequestError, match="cursor"):
                [t.thread_id async for t in a.alist_threads(after=cur)]
