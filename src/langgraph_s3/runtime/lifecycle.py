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
from langgraph_s3.aws.config import SUBJECT_PARAMS
from langgraph_s3.errors import InvalidRequestError
from langgraph_s3.runtime.periodic import PeriodicSweep
from langgraph_s3.runtime.runner import BackgroundLoop

STORE_PARAMS = frozenset(
    {
        "region",
        "endpoint_url",
        "table",
        "manifest",
        *LIMIT_NAMES,
        *(set(SUBJECT_PARAMS) - {"subjects", "receipts"}),
    }
)
"""Connection string parameters of a store: where, the request limits, and its subjects
(the table their keys are kept in, a namespace label naming them, the KMS key)."""
SAVER_PARAMS = STORE_PARAMS | {"subjects", "receipts"}
"""A saver's: a store's, its threads' subjects (a metadata key), and where forgetting
receipts are kept."""


def store_url_of(saver_url: str) -> str:
    """The store beside a saver: its connection string's bucket, prefix and options, the
    threads' subjects and the receipts' place left out (the saver's alone)."""
    base, _, query = saver_url.partition("?")
    kept = [
        p
        for p in query.split("&")
        if p and not p.startswith("subjects=") and not p.startswith("receipts=")
    ]
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


class SweeperLifecycle:
    """The TTL sweeper's life, the saver's and the store's alike: one background task
    per object, on the loop that starts it, sweeping every few minutes until stopped.

    A class gives what differs: one sweep (``_sweep_once``: how many it removed) and
    its default pause (``_sweep_minutes``: the saver's 60 minutes, the store's TTL
    config's or 5). No request but the sweeps'.
    """

    _sweeper: PeriodicSweep

    async def _sweep_once(self) -> int:
        """One sweep of the whole deployment; how many it removed."""
        raise NotImplementedError

    def _sweep_minutes(self, minutes: float | None) -> float:
        """The pause between sweeps: ``minutes``, else the class's default."""
        raise NotImplementedError

    @property
    def ttl_sweeper(self) -> asyncio.Task[None] | None:
        """The task of the TTL sweeper :meth:`start_ttl_sweeper` started, until
        :meth:`stop_ttl_sweeper` (None: none was started, or it was stopped)."""
        return self._sweeper.task

    async def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> asyncio.Task[None]:
        """Sweep (``asweep_ttl``) every few minutes on the running loop until stopped.

        Args:
            sweep_interval_minutes: the pause after each sweep; by default the
                saver's ``sweep_interval_minutes`` (60), or the store's TTL config's
                ``sweep_interval_minutes`` (else 5).

        Returns:
            The sweeper task (the running one, if the sweeper was started before).
        """
        minutes = self._sweep_minutes(sweep_interval_minutes)
        if not minutes > 0:
            raise InvalidRequestError(f"sweep_interval_minutes must be positive, got {minutes!r}")
        return self._sweeper.start(self._sweep_once, minutes)

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper, wherever it runs; no request.

        Returns:
            True when it stopped within ``timeout`` seconds (None: no limit).
        """
        return await self._sweeper.stop(timeout)

    async def _stop_sweeper(
        self, timeout: float | None, *, blocked: asyncio.AbstractEventLoop | None = None
    ) -> bool:
        """:meth:`stop_ttl_sweeper`, for a sync close(); ``blocked`` as in
        :meth:`PeriodicSweep.stop <langgraph_s3.runtime.periodic.PeriodicSweep.stop>`."""
        return await self._sweeper.stop(timeout, blocked=blocked)
