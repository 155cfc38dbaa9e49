"""The sync façade: the same async core, driven from a private background loop."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .saver import _S3SaverBase, _target_kwargs


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
        saver = cls(**_target_kwargs(conn_string, kwargs))
        try:
            yield saver
        finally:
            saver.close()

    def setup(self) -> None:
        """Create the bucket and the manifest table when missing; idempotent."""
        self._runner.run(self._asetup())

    def close(self) -> None:
        """Close the clients and stop the background loop."""
        self._runner.run(self.clients.aclose())
        self._runner.close()

    def __enter__(self) -> S3Saver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
