"""The LangGraph checkpoint saver protocol on S3 + a DynamoDB manifest: the façade.

One module per part of the class: :mod:`.wiring` (clients, ports, context),
:mod:`.contract` (LangGraph's saver contract), :mod:`.threads` (maintenance of
chosen threads), :mod:`.deployment` (the TTL sweep, export, import, listing),
:mod:`.twins` (the sync twins).

``AsyncS3Saver`` is the one async core; ``S3Saver`` (sync.py) and the sync
methods here drive it from a private background loop. The work is done by
parts named for their job, each built per call around the shared context:
``reading`` (get_tuple, list), ``writing`` (put, put_writes), ``delta``
(DeltaChannel history) and ``maintenance`` (delete, prune, copy).

Costs, in round trips (the longest chain of requests, each sent after the one
before it answered):

* ``aput``: one object (the checkpoint, its small changed values inline;
  ``If-None-Match: *``) beside one conditional manifest update: 1 (2 when a
  value over 256 KiB is a blob, stored first).
* ``aget_tuple`` latest: manifest GetItem beside the newest writes LIST; the
  checkpoint GET; the GETs of the older objects holding its other values (and
  of its writes): 3 cold, 1 warm, whatever the history length.
* ``alist(limit=k)``: manifest + one checkpoint LIST page + one writes LIST
  page; envelope and write GETs; the objects holding older values: 3.

Every call is one operation: at most ``concurrency`` of its requests are in
flight at once (tasks.py).
"""

from __future__ import annotations

import logging

from langgraph_s3.checkpoint.saver.twins import SyncTwins
from langgraph_s3.checkpoint.saver.wiring import (
    DEFAULT_CACHE_BYTES,
    DEFAULT_TABLE,
    LEGACY_VERSION_WIDTH,
    VERSION_WIDTH,
    Namespaces,
    walk_scope,
)
from langgraph_s3.errors import S3PersistenceError
from langgraph_s3.runtime.lifecycle import SAVER_PARAMS, AsyncLifecycle

logger = logging.getLogger("langgraph_s3.saver")

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "DEFAULT_TABLE",
    "LEGACY_VERSION_WIDTH",
    "VERSION_WIDTH",
    "AsyncS3Saver",
    "Namespaces",
    "walk_scope",
]


class _S3SaverBase(SyncTwins):
    """Everything both savers share: the async core and its sync twins (see
    :class:`~langgraph_s3.checkpoint.saver.wiring.SaverWiring` for the arguments)."""


class AsyncS3Saver(AsyncLifecycle, _S3SaverBase):
    """Async LangGraph checkpointer on S3 with a DynamoDB manifest.

    Safe to build at import time, outside any event loop: clients are created
    per loop on first use, so a warm Lambda calling ``asyncio.run`` per
    invocation keeps working.

    Example::

        async with AsyncS3Saver.from_conn_string("s3://my-bucket/agents?table=t") as saver:
            await saver.setup()  # once per deployment: bucket, table, migration
            graph = builder.compile(checkpointer=saver)
            await graph.ainvoke(inputs, {"configurable": {"thread_id": "42"}})
    """

    CONN_STRING = "s3://BUCKET/PREFIX?table=TABLE[&region=R][&endpoint_url=URL]"
    CONN_PARAMS = SAVER_PARAMS

    async def aclose(self) -> None:
        """Stop the TTL sweeper, wait for the objects of checkpoints still being
        stored (``aflush``; when that fails, the manifest keeps holding them, and the
        next writer or maintenance stores them), then close the clients."""
        await self.stop_ttl_sweeper()
        try:
            await self.aflush()
        except S3PersistenceError as exc:
            logger.info("aclose: held checkpoints stay in the manifest: %r", exc)
        await super().aclose()
