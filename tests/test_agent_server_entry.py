"""The Agent Server entry points (``langgraph_s3.agent_server``) on their own, against
moto: what the environment configures, the TTL sweepers running inside the context
managers and stopped on exit, and the errors at start, each naming its fix. (The
server itself drives them in tests/test_agent_server.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from helpers import cfg
from langgraph_s3.errors import ConfigurationError, MissingResourceError
from langgraph_s3.ops.handlers import agent_server
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.graphs import chat_graph


@pytest.fixture
def env(s3_fresh: MotoServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    names = unique_names()
    for name in ("LANGGRAPH_S3_STORE_URL", "LANGGRAPH_S3_THREAD_TTL_DAYS", "LANGGRAPH_S3_SETUP"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_fresh.url)
    monkeypatch.setenv("LANGGRAPH_S3_URL", f"s3://{names['bucket']}/app?table={names['table']}")
    return names


async def test_the_entry_points_set_up_persist_and_sweep(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGGRAPH_S3_SETUP", "1")
    monkeypatch.setenv("LANGGRAPH_S3_THREAD_TTL_DAYS", "30")
    ttl = {"default_ttl": 60.0, "refresh_on_read": True, "sweep_interval_minutes": 5}
    monkeypatch.setattr(agent_server, "_server_store_config", lambda: {"ttl": ttl})
    async with agent_server.checkpointer() as saver, agent_server.store() as store:
        assert saver.target.bucket == env["bucket"] and saver.target.prefix.startswith("app")
        assert saver.manifest.ttl_seconds == 30 * 86400
        sweepers: list[Any] = [saver.ttl_sweeper, store.ttl_sweeper]
        assert all(t is not None and not t.done() for t in sweepers)
        graph = chat_graph().compile(checkpointer=saver, store=store)
        await graph.ainvoke({"messages": [("user", "hi")]}, cfg("t"))
        await store.aput(("users",), "u1", {"name": "Ada"})
        # the store shares the saver's bucket and prefix, without its table
        assert store.objects.bucket == env["bucket"]
        # a second entry (another server thread) adds no sweeper: one per process
        async with agent_server.checkpointer() as second, agent_server.store() as twin:
            assert second.ttl_sweeper is None and twin.ttl_sweeper is None
    assert all(t.done() for t in sweepers)  # both stopped on exit
    async with agent_server.checkpointer() as again, agent_server.store() as same:
        assert (await again.aget_tuple(cfg("t"))) is not None
        item = await same.aget(("users",), "u1")
        assert item is not None and item.value == {"name": "Ada"}
        assert again.ttl_sweeper is not None  # a TTL configured: its sweeper runs


async def test_no_sweeper_without_ttl_and_a_store_url_of_its_own(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGGRAPH_S3_SETUP", "yes")
    other = unique_names()["bucket"]
    monkeypatch.setenv("LANGGRAPH_S3_STORE_URL", f"s3://{other}/memories")
    monkeypatch.setattr(agent_server, "_server_store_config", dict)
    async with agent_server.checkpointer() as saver, agent_server.store() as store:
        assert saver.ttl_sweeper is None and store.ttl_sweeper is None
        assert store.objects.bucket == other


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("LANGGRAPH_S3_URL", "", "LANGGRAPH_S3_URL is not set: set it to s3://BUCKET"),
        ("LANGGRAPH_S3_SETUP", "maybe", "LANGGRAPH_S3_SETUP='maybe': use 1"),
        ("LANGGRAPH_S3_THREAD_TTL_DAYS", "-1", "give a number of days above 0"),
        ("LANGGRAPH_S3_THREAD_TTL_DAYS", "nan", "give a number of days above 0"),
    ],
)
async def test_a_bad_setting_is_refused_at_start_with_the_fix(
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    setting: str,
    value: str,
    message: str,
) -> None:
    monkeypatch.setenv(setting, value)
    with pytest.raises(ConfigurationError, match=message.replace("?", r"\?")):
        async with agent_server.checkpointer():
            pass


async def test_a_missing_bucket_or_table_is_refused_at_start_unless_set_up(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent_server, "_server_store_config", dict)
    with pytest.raises(MissingResourceError, match="set LANGGRAPH_S3_SETUP=1 to create it"):
        async with agent_server.checkpointer():
            pass
    with pytest.raises(MissingResourceError, match=f"bucket '{env['bucket']}' does not exist"):
        async with agent_server.store():
            pass
    monkeypatch.setenv("LANGGRAPH_S3_SETUP", "1")
    async with agent_server.store():  # the bucket now, not the table
        pass
    monkeypatch.setenv("LANGGRAPH_S3_SETUP", "0")
    with pytest.raises(MissingResourceError, match=f"table '{env['table']}' does not exist"):
        async with agent_server.checkpointer():
            pass
