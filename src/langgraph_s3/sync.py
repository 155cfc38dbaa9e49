"""The sync façade: the same async core, driven from a private background loop."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol, cast

from langgraph_s3.checkpoint.saver import _S3SaverBase
from langgraph_s3.errors import S3PersistenceError
from langgraph_s3.runtime.lifecycle import SAVER_PARAMS, STORE_PARAMS, SyncLifecycle, caller_loop
from langgraph_s3.runtime.runner import BackgroundLoop
from langgraph_s3.store.facade import _S3StoreBase


class _Sweeping(Protocol):
    """What :class:`_SweepsInLoop` needs of its class's async core."""

    _runner: BackgroundLoop

    async def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Any: ...

    async def _stop_sweeper(
        self, timeout: float | None, *, blocked: asyncio.AbstractEventLoop | None = None
    ) -> bool: ...


class _SweepsInLoop(SyncLifecycle):
    """A sync class whose async core has a TTL sweeper: it runs on the private loop."""

    def start_sweeper(self: _Sweeping, sweep_interval_minutes: float | None = None) -> None:
        """Start the background TTL sweeper on this object's loop: it keeps sweeping
        between calls for as long as the object is open."""
        self._runner.run(self.start_ttl_sweeper(sweep_interval_minutes))

    def stop_sweeper(self: _Sweeping, timeout: float | None = None) -> bool:
        """Stop the background sweeper; False when it did not stop within ``timeout``."""
        return self._runner.run(self._stop_sweeper(timeout, blocked=caller_loop()))

    def close(self) -> None:
        """Stop the sweeper, then close the clients and the background loop."""
        sweeping = cast(_Sweeping, self)
        self._runner.run(sweeping._stop_sweeper(None, blocked=caller_loop()))
        super().close()


class S3Saver(_SweepsInLoop, _S3SaverBase):
    """Sync LangGraph checkpointer on S3 with a DynamoDB manifest.

    Every call runs the async core on one background event loop owned by
    this saver, so clients live as long as the saver (a warm Lambda reuses
    them) and ``graph.invoke`` may call it from any worker thread. Its async
    methods work too, on the caller's loop.
    """

    CONN_STRING = "s3://BUCKET/PREFIX?table=TABLE[&region=R][&endpoint_url=URL]"
    CONN_PARAMS = SAVER_PARAMS

    def close(self) -> None:
        """Wait for the objects of checkpoints still being stored (``flush``), stop
        the sweeper, then close the clients and the background loop."""
        try:
            self.flush()
        except S3PersistenceError as exc:  # they stay held: see AsyncS3Saver.aclose
            logging.getLogger("langgraph_s3.saver").info("close: %r", exc)
        super().close()


class S3Store(_SweepsInLoop, _S3StoreBase):
    """Sync LangGraph store on S3, driven from a private background loop.

    ``start_ttl_sweeper`` runs the sweeper on that loop, so it keeps sweeping
    between calls for as long as the store is open.
    """

    CONN_STRING = "s3://BUCKET/PREFIX[?region=R][&endpoint_url=URL]"
    CONN_PARAMS = STORE_PARAMS

    def sweep_ttl(self) -> int:
        """Delete every expired item now; how many were deleted (:meth:`asweep_ttl`,
        blocking, under the name LangGraph's sync stores give it)."""
        return self._runner.run(self.asweep_ttl())

    def seal(self, **kwargs: Any) -> dict[str, Any]:
        """:meth:`aseal`, blocking: the subjects' plain items rewritten sealed."""
        return self._runner.run(self.aseal(**kwargs))

    def sweep(self) -> int:
        """:meth:`sweep_ttl` (the name it had before 0.2)."""
        return self.sweep_ttl()
