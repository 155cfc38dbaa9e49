"""Build, set up, use and close: the lifecycle every saver and store shares.

A class gets ``from_conn_string`` / ``from_url`` / ``setup`` / closing and the
context manager protocol by listing a mixin *first* among its bases, in front
of its core (the class that builds ``clients`` and ``_runner`` and defines
``_asetup``)::

    class AsyncS3Store(AsyncLifecycle, _S3StoreBase):
        CONN_STRING = "s3://BUCKET/PREFIX[?region=R][&endpoint_url=URL]"
        CONN_PARAMS = STORE_PARAMS

    async with AsyncS3Store.from_conn_string("s3://my-bucket/memories") as store:
        await store.setup()

What differs between classes is data: the class attributes ``CONN_STRING`` (the
shape of its connection string, for docs and messages) and ``CONN_PARAMS``
(the query parameters it accepts). A class that holds more than clients and a
loop (the store's TTL sweeper) extends ``aclose``/``close`` and calls ``super()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, ClassVar, Protocol, Self

from langgraph_s3.aws.clients import LIMIT_NAMES, ClientFactory, conn_kwargs
from langgraph_s3.runtime.runner import BackgroundLoop

STORE_PARAMS = frozenset({"region", "endpoint_url", *LIMIT_NAMES})
"""Connection string parameters of a store: where, and the request limits."""
SAVER_PARAMS = STORE_PARAMS | {"table"}
"""A saver's: a store's, and the manifest table."""


def store_url_of(saver_url: str) -> str:
    """The store beside a saver: its connection string's bucket, prefix and options,
    the manifest table left out."""
    base, _, query = saver_url.partition("?")
    kept = [p for p in query.split("&") if p and not p.startswith("table=")]
    return base + ("?" + "&".join(kept) if kept else "")


class Core(Protocol):
    """What a lifecycle mixin's class provides (its core, after the mixin)."""

    _runner: BackgroundLoop

    async def _asetup(self, *, dry_run: bool = False) -> list[str]:
        """Create what the object needs, when missing; idempotent. What it created."""


class ConnLifecycle:
    """What both mixins share: construction from a connection string."""

    CONN_STRING: ClassVar[str] = "s3://BUCKET/PREFIX[?region=R][&endpoint_url=URL]"
    """The shape of this class's connection string."""
    CONN_PARAMS: ClassVar[frozenset[str]] = STORE_PARAMS
    """The query parameters its connection string accepts."""

    clients: ClientFactory
    _runner: BackgroundLoop

    @classmethod
    def from_url(cls, conn_string: str, **kwargs: Any) -> Self:
        """Build from a connection string, without a context manager.

        For module scope (a Lambda handler's), where the object lives as long
        as the process. No request is made.

        Args:
            conn_string: ``CONN_STRING``: bucket, prefix, and optionally the
                region, endpoint and request limits as query parameters.
            **kwargs: constructor arguments; they win over the connection string.

        Raises:
            ConfigurationError: a malformed connection string, or a parameter
                outside ``CONN_PARAMS``.
        """
        return cls(**conn_kwargs(conn_string, kwargs, accepts=cls.CONN_PARAMS))


class AsyncLifecycle(ConnLifecycle):
    """The lifecycle of the async classes: ``async with``, ``setup``, ``aclose``."""

    @classmethod
    @asynccontextmanager
    async def from_conn_string(cls, conn_string: str, **kwargs: Any) -> AsyncIterator[Self]:
        """Build from a connection string (see :meth:`from_url`); closed on exit.

        No request is made; call :meth:`setup` once per deployment.
        """
        obj = cls.from_url(conn_string, **kwargs)
        try:
            yield obj
        finally:
            await obj.aclose()

    async def setup(self: Core, *, dry_run: bool = False) -> list[str]:
        """Create what this object stores into, when missing; idempotent.

        Run it once per deployment (a deploy script, a test fixture), not per
        request: what it creates and costs is in the class docstring.

        Returns:
            What it created, one phrase each (empty: all was there); with
            ``dry_run``, what it would create, without writing anything.
        """
        return await self._asetup(dry_run=dry_run)

    async def aclose(self) -> None:
        """Close the clients (on every loop they were opened on) and the sync twins'
        background loop. No request is made."""
        await self.clients.aclose()
        self._runner.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def caller_loop() -> asyncio.AbstractEventLoop | None:
    """The loop of the thread calling a sync close(), if any: it cannot answer until
    close() returns, so its clients' close is queued rather than waited for."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class SyncLifecycle(ConnLifecycle):
    """The lifecycle of the sync classes: ``with``, ``setup``, ``close``.

    Calls run on the object's private background loop (``_runner``).
    """

    @classmethod
    @contextmanager
    def from_conn_string(cls, conn_string: str, **kwargs: Any) -> Iterator[Self]:
        """Build from a connection string (see :meth:`from_url`); closed on exit.

        No request is made; call :meth:`setup` once per deployment.
        """
        obj = cls.from_url(conn_string, **kwargs)
        try:
            yield obj
        finally:
            obj.close()

    def setup(self: Core, *, dry_run: bool = False) -> list[str]:
        """Create what this object stores into, when missing; idempotent.

        Run it once per deployment, not per request: what it creates and costs
        is in the class docstring. Returns what it created (see the async ``setup``).
        """
        return self._runner.run(self._asetup(dry_run=dry_run))

    def close(self) -> None:
        """Close the clients and stop the background loop. No request is made."""
        self._runner.run(self.clients.aclose(blocked=caller_loop()))
        self._runner.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
