"""The sync façade: the same async core, driven from a private background loop."""

from __future__ import annotations

from .lifecycle import SAVER_PARAMS, STORE_PARAMS, SyncLifecycle, caller_loop
from .saver import _S3SaverBase
from .store import _S3StoreBase


class S3Saver(SyncLifecycle, _S3SaverBase):
    """Sync LangGraph checkpointer on S3 with a DynamoDB manifest.

    Every call runs the async core on one background event loop owned by
    this saver, so clients live as long as the saver (a warm Lambda reuses
    them) and ``graph.invoke`` may call it from any worker thread. Its async
    methods work too, on the caller's loop.
    """

    CONN_STRING = "s3://BUCKET/PREFIX?table=TABLE[&region=R][&endpoint_url=URL]"
    CONN_PARAMS = SAVER_PARAMS

    def start_sweeper(self, sweep_interval_minutes: float | None = None) -> None:
        """Start the background thread TTL sweeper on this saver's loop."""
        self._runner.run(self._start_in_loop(sweep_interval_minutes))

    async def _start_in_loop(self, minutes: float | None) -> None:
        await self.start_ttl_sweeper(minutes)

    def stop_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the background sweeper; False when it did not stop within ``timeout``."""
        return self._runner.run(self._stop_sweeper(timeout, blocked=caller_loop()))

    def close(self) -> None:
        """Stop the sweeper, then close the clients and the background loop."""
        self._runner.run(self._stop_sweeper(None, blocked=caller_loop()))
        super().close()


class S3Store(SyncLifecycle, _S3StoreBase):
    """Sync LangGraph store on S3, driven from a private background loop.

    ``start_ttl_sweeper`` runs the sweeper on that loop, so it keeps sweeping
    between calls for as long as the store is open.
    """

    CONN_STRING = "s3://BUCKET/PREFIX[?region=R][&endpoint_url=URL]"
    CONN_PARAMS = STORE_PARAMS

    def sweep(self) -> int:
        """Delete every expired item now; how many were deleted."""
        return self._runner.run(self.sweep_ttl())

    def start_sweeper(self, sweep_interval_minutes: float | None = None) -> None:
        """Start the background TTL sweeper on this store's loop."""
        self._runner.run(self._start_in_loop(sweep_interval_minutes))

    async def _start_in_loop(self, minutes: float | None) -> None:
        await self.start_ttl_sweeper(minutes)

    def stop_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the background sweeper; False when it did not stop within ``timeout``."""
        return self._runner.run(self._stop_sweeper(timeout, blocked=caller_loop()))

    def close(self) -> None:
        """Stop the sweeper, then close the clients and the background loop."""
        self._runner.run(self._stop_sweeper(None, blocked=caller_loop()))
        super().close()
