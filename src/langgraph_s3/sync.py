"""The sync façade: the same async core, driven from a private background loop."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .clients import conn_kwargs
from .saver import _S3SaverBase
from .store import _S3StoreBase


def _caller_loop() -> asyncio.AbstractEventLoop | None:
    """The loop of the thread calling a sync close(), if any: it cannot answer until
    close() returns, so its clients' close is queued rather than waited for."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class S3Saver(_S3SaverBase):
    """Sync LangGraph checkpointer on S3 with a DynamoDB manifest.

    Every call runs the async core on one background event loop owned by
    this saver, so clients live as long as the saver (a warm Lambda reuses
    them) and ``graph.invoke`` may call it from any worker thread. Its async
    methods work too, on the caller's loop.
    """

    @classmethod
    @contextmanager
    def from_conn_string(cls, conn_string: str, **kwargs: Any) -> Iterator[S3Saver]:
        """``s3://BUCKET/PREFIX?table=TABLE[&region=R][&endpoint_url=URL]``."""
        saver = cls(**conn_kwargs(conn_string, kwargs, with_table=True))
        try:
            yield saver
        finally:
            saver.close()

    @classmethod
    def from_url(cls, conn_string: str, **kwargs: Any) -> S3Saver:
        """Build from a connection string without a context manager (module scope)."""
        return cls(**conn_kwargs(conn_string, kwargs, with_table=True))

    def setup(self) -> None:
        """Create the bucket and the manifest table when missing; idempotent."""
        self._runner.run(self._asetup())

    def close(self) -> None:
        """Close the clients and stop the background loop."""
        self._runner.run(self.clients.aclose(blocked=_caller_loop()))
        self._runner.close()

    def __enter__(self) -> S3Saver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class S3Store(_S3StoreBase):
    """Sync LangGraph store on S3, driven from a private background loop.

    ``start_ttl_sweeper`` runs the sweeper on that loop, so it keeps sweeping
    between calls for as long as the store is open.
    """

    @classmethod
    @contextmanager
    def from_conn_string(cls, conn_string: str, **kwargs: Any) -> Iterator[S3Store]:
        """``s3://BUCKET/PREFIX[?region=R][&endpoint_url=URL]``."""
        store = cls(**conn_kwargs(conn_string, kwargs, with_table=False))
        try:
            yield store
        finally:
            store.close()

    @classmethod
    def from_url(cls, conn_string: str, **kwargs: Any) -> S3Store:
        """Build from a connection string without a context manager (module scope)."""
        return cls(**conn_kwargs(conn_string, kwargs, with_table=False))

    def setup(self) -> None:
        """Create the bucket when missing and install the TTL lifecycle rules; idempotent."""
        self._runner.run(self._asetup())

    def sweep(self) -> int:
        """Delete every expired item now; how many were deleted."""
        return self._runner.run(self.sweep_ttl())

    def start_sweeper(self, sweep_interval_minutes: float | None = None) -> None:
        """Start the background TTL sweeper on this store's loop."""
        self._runner.run(self._start_in_loop(sweep_interval_minutes))

    async def _start_in_loop(self, minutes: float | None) -> None:
        await self.start_ttl_sweeper(minutes)

    def stop_sweeper(self, timeout: float | None = None) -> bool:
        return self._runner.run(self._stop_sweeper(timeout, blocked=_caller_loop()))

    def close(self) -> None:
        self._runner.run(self._stop_sweeper(None, blocked=_caller_loop()))
        self._runner.run(self.clients.aclose(blocked=_caller_loop()))
        self._runner.close()

    def __enter__(self) -> S3Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
