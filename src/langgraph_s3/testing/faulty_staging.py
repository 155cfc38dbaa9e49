"""The staging calls of :class:`~langgraph_s3.testing.faulty_manifest.FaultyManifest`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from langgraph_s3.core.ports import ManifestPort
from langgraph_s3.core.records import Late
from langgraph_s3.core.staging import Claim

T = TypeVar("T")

STAGING_WRITES = frozenset({"stage", "publish", "unstage"})
"""The staging calls that change state: only these may have their answer lost."""


class FaultyStaging:
    """An import's staging calls (``core.staging``), each failing as the plan says."""

    inner: ManifestPort

    async def _around(self, call: str, target: str, run: Callable[[], Awaitable[T]]) -> T:
        raise NotImplementedError  # FaultyManifest's

    async def stage(self, thread_id: str, claim: Claim, *, renew: bool = False) -> Claim | None:
        run = lambda: self.inner.stage(thread_id, claim, renew=renew)  # noqa: E731
        return await self._around("stage", thread_id, run)

    async def staged_claim(self, thread_id: str) -> Claim | None:
        return await self._around(
            "staged_claim", thread_id, lambda: self.inner.staged_claim(thread_id)
        )

    async def publish(self, thread_id: str, token: str) -> bool:
        return await self._around(
            "publish", thread_id, lambda: self.inner.publish(thread_id, token)
        )

    async def unstage(self, thread_id: str, token: str, *, dead: bool = False) -> Late | None:
        run = lambda: self.inner.unstage(thread_id, token, dead=dead)  # noqa: E731
        return await self._around("unstage", thread_id, run)
