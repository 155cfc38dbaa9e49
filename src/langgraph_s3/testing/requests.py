"""How a fake request behaves like a network one: counted, holding a permit, in flight."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from langgraph_s3.aws.stats import RequestStats
from langgraph_s3.core.tasks import permit

__all__ = ["YIELDS", "Requester"]

YIELDS = 6
"""Event-loop turns a fake request lasts: long enough for the tasks a call starts
together (through ``gather``, ``TaskGroup``, ``bounded_map``, LangGraph's background
writes) to all be in flight before the first answer arrives, so ``round_trips``
counts as on a network (tests/unit/test_contract_saver.py compares them with moto's)."""


class Requester:
    """Counts a fake request like the real clients do, holds one of the current
    operation's permits (as ``aws.call`` does), and lets the loop turn. The one place
    every fake request passes through: the simulation replaces it with its gate."""

    stats: RequestStats
    yields: int

    @contextlib.asynccontextmanager
    async def request(self, operation: str, nbytes: int = 0) -> AsyncIterator[None]:
        async with permit():
            attempt = self.stats.sent(operation, nbytes)
            try:
                for _ in range(self.yields):
                    await asyncio.sleep(0)
                yield  # the caller applies the request here, without awaiting
            finally:
                self.stats.done(attempt)
