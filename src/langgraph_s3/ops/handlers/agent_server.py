"""Entry points for LangGraph's Agent Server (``langgraph dev``, self-hosted deployments).

One line each in ``langgraph.json``, no code of yours::

    "checkpointer": {"path": "langgraph_s3.agent_server.checkpointer"},
    "store": {"path": "langgraph_s3.agent_server.store"}

(The server reads a path holding ``/`` or ``.py:`` as a file and imports anything
else up to its last dot.) Both are async context managers the server enters once
per thread that uses them and leaves on shutdown; with ``BG_JOB_ISOLATED_LOOPS`` the
background threads' ones are not left (the server closes the main thread's only):
their clients close with the process. One TTL sweeper of each kind runs per
process, however many threads enter. They are configured from the environment
(the server loads the app's ``.env``):

- ``LANGGRAPH_S3_URL``: the saver, ``s3://BUCKET/PREFIX?table=TABLE`` (required).
- ``LANGGRAPH_S3_STORE_URL``: the store, ``s3://BUCKET/PREFIX``; by default the
  saver's bucket and prefix.
- ``LANGGRAPH_S3_SETUP=1``: create the bucket and table at start (local
  development); without it a missing one stops the server at start with the fix.
  A deployment made with the terraform module needs none.
- ``LANGGRAPH_S3_THREAD_TTL_DAYS``: threads expire this long after their last write;
  the thread TTL sweeper then runs inside the server.
- The store's TTL and vector index come from ``langgraph.json``'s ``store.ttl`` and
  ``store.index``, as for the server's own store (which skips its TTL sweeper for a
  custom store: this one runs its own when TTL is configured).
- The usual AWS variables (``AWS_REGION``, credentials, ``AWS_ENDPOINT_URL`` for moto).

Both features of the server are alpha: tested with the versions named in the README.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import AsyncIterator
from typing import Any

from langgraph_s3.checkpoint.saver import AsyncS3Saver
from langgraph_s3.errors import ConfigurationError, MissingResourceError
from langgraph_s3.runtime.lifecycle import store_url_of
from langgraph_s3.store.facade import AsyncS3Store

URL = "LANGGRAPH_S3_URL"
STORE_URL = "LANGGRAPH_S3_STORE_URL"
SETUP = "LANGGRAPH_S3_SETUP"
THREAD_TTL_DAYS = "LANGGRAPH_S3_THREAD_TTL_DAYS"


_SWEEPING: set[str] = set()
"""The TTL sweepers this process runs ("threads", "store"): one of each is enough."""
_SWEEPING_LOCK = threading.Lock()  # the server enters from several threads


@contextlib.asynccontextmanager
async def _one_sweeper(kind: str, wanted: bool, start: Any, stop: Any) -> AsyncIterator[None]:
    """Run ``start()`` … ``stop()`` around the body, unless another entry of this
    process already sweeps ``kind`` (the server enters once per thread)."""
    with _SWEEPING_LOCK:
        mine = wanted and kind not in _SWEEPING
        if mine:
            _SWEEPING.add(kind)
    if not mine:
        yield
        return
    try:
        await start()
    except BaseException:
        _SWEEPING.discard(kind)
        raise
    try:
        yield
    finally:
        try:
            await stop()
        finally:
            _SWEEPING.discard(kind)


def _setup_wanted() -> bool:
    value = os.environ.get(SETUP, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise ConfigurationError(f"{SETUP}={value!r}: use 1 to create what is missing, or 0")


def _saver_url() -> str:
    url = os.environ.get(URL, "").strip()
    if not url:
        raise ConfigurationError(
            f"{URL} is not set: set it to s3://BUCKET/PREFIX?table=TABLE in the server's "
            "environment (the app's .env file for `langgraph dev`)"
        )
    return url


def _thread_ttl_days() -> float | None:
    value = os.environ.get(THREAD_TTL_DAYS, "").strip()
    if not value:
        return None
    try:
        days = float(value)
    except ValueError:
        days = float("nan")
    if not days > 0 or days == float("inf"):
        raise ConfigurationError(f"{THREAD_TTL_DAYS}={value!r}: give a number of days above 0")
    return days


def _server_store_config() -> dict[str, Any]:
    """``store.ttl`` and ``store.index`` of the app's ``langgraph.json``, as the server
    parsed them (nothing when not run by the server)."""
    try:
        from langgraph_api import config  # the server's own settings
    except Exception:
        return {}
    found = getattr(config, "STORE_CONFIG", None) or {}
    return {k: found[k] for k in ("ttl", "index") if found.get(k)}


@contextlib.asynccontextmanager
async def checkpointer() -> AsyncIterator[AsyncS3Saver]:
    """The checkpoint saver, configured from the environment (see the module doc)."""
    saver = AsyncS3Saver.from_url(_saver_url(), thread_ttl_days=_thread_ttl_days())
    async with saver:
        if _setup_wanted():
            await saver.setup()
        else:
            if not await saver.objects.bucket_exists():
                raise _missing("bucket", saver.target.bucket)
            if not await saver.manifest.setup.exists():
                raise _missing("table", saver.manifest.table)
        async with _one_sweeper(
            "threads",
            bool(saver.manifest.ttl_seconds),
            saver.start_ttl_sweeper,
            lambda: saver.stop_ttl_sweeper(timeout=10),
        ):
            yield saver


@contextlib.asynccontextmanager
async def store() -> AsyncIterator[AsyncS3Store]:
    """The long-term memory store, configured from the environment and from
    ``langgraph.json``'s ``store.ttl`` / ``store.index`` (see the module doc)."""
    url = os.environ.get(STORE_URL, "").strip() or store_url_of(_saver_url())
    found = AsyncS3Store.from_url(url, **_server_store_config())
    async with found:
        if _setup_wanted():
            await found.setup()
        elif not await found.objects.bucket_exists():
            raise _missing("bucket", found.objects.bucket)
        ttl = found.ttl_config or {}
        async with _one_sweeper(
            "store",
            bool(ttl.get("default_ttl") or ttl.get("sweep_interval_minutes")),
            found.start_ttl_sweeper,
            lambda: found.stop_ttl_sweeper(timeout=10),
        ):
            yield found


def _missing(kind: str, name: str) -> MissingResourceError:
    return MissingResourceError(
        kind,
        name,
        fix=f"set {SETUP}=1 to create it at start (local development), or apply the "
        "terraform module in terraform/ (a deployment)",
    )
