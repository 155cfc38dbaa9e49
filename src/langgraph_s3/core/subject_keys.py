"""A process's subjects' data keys: made and unwrapped through a key vault (KMS), each
unwrapped key kept for a bounded time.

The bound is what forgetting a subject relies on: a process that unwrapped a subject's
key before it was destroyed can seal or open that subject's objects for at most
``ttl`` seconds more (then it must unwrap again, and the vault has nothing to unwrap).
Concurrent first reads of one key wait on a single unwrap (a cold start's burst of
requests for one user is one ``Decrypt``, not one each).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable

from langgraph_s3.core.ports import KeyVaultPort
from langgraph_s3.core.sealing import DataKey, new_key_id
from langgraph_s3.errors import KeyUnavailableError

__all__ = ["DEFAULT_TTL", "SubjectKeys", "key_context"]

DEFAULT_TTL = 300.0
"""Seconds an unwrapped key is kept: the longest a forgotten subject's key outlives its
destruction in a running process."""


def key_context(token: str, key_id: bytes) -> dict[str, str]:
    """The vault's context for a subject's data key: its subject (the keyed hash) and
    its id. A wrapped key opens only under the context it was made with."""
    return {"langgraph-s3:subject": token, "langgraph-s3:key": key_id.hex()}


class SubjectKeys:
    """Unwrapped data keys by (subject token, key id), at most ``max_keys`` of them, each
    for at most ``ttl`` seconds after it was unwrapped or made."""

    def __init__(
        self,
        vault: KeyVaultPort,
        *,
        ttl: float = DEFAULT_TTL,
        max_keys: int = 10_000,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if ttl <= 0 or max_keys <= 0:
            raise ValueError("ttl and max_keys are positive")
        self.vault = vault
        self.ttl = ttl
        self.max_keys = max_keys
        self._clock = clock or _monotonic
        self._keys: OrderedDict[tuple[str, bytes], tuple[float, DataKey]] = OrderedDict()
        self._pending: dict[tuple[int, str, bytes], asyncio.Future[DataKey]] = {}
        """Unwraps in flight, by event loop (a future is its loop's) and key."""
        self.unwraps = 0
        """Keys unwrapped through the vault (each a request)."""

    async def new(self, token: str) -> tuple[DataKey, bytes]:
        """A new data key for the subject ``token`` (one vault request) and its wrapped
        form, to keep where readers find it; the key is kept here for the bound."""
        key_id = new_key_id()
        asked = self._clock()
        secret, wrapped = await self.vault.new_data_key(key_context(token, key_id))
        try:
            key = DataKey(key_id, secret)
        except ValueError as e:
            raise KeyUnavailableError(f"the vault made no data key: {e}") from None
        self._keep((token, key_id), key, asked)
        return key, wrapped

    async def get(self, token: str, key_id: bytes, wrapped: bytes) -> DataKey:
        """The subject's data key ``key_id`` (wrapped as ``wrapped``): kept, or unwrapped
        (one vault request, shared by concurrent callers). KeyUnavailableError when the
        vault refuses; nothing is kept then."""
        slot = (token, key_id)
        while True:
            held = self._keys.get(slot)
            if held is not None and self._clock() - held[0] < self.ttl:
                self._keys.move_to_end(slot)
                return held[1]
            flight = (id(asyncio.get_running_loop()), *slot)
            pending = self._pending.get(flight)
            if pending is None:
                return await self._unwrap(flight, wrapped)
            try:
                return await asyncio.shield(pending)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if pending.cancelled() and task is not None and not task.cancelling():
                    continue  # the unwrapping caller was cancelled, not this one: again
                raise

    async def _unwrap(self, flight: tuple[int, str, bytes], wrapped: bytes) -> DataKey:
        _, token, key_id = flight
        future: asyncio.Future[DataKey] = asyncio.get_running_loop().create_future()
        self._pending[flight] = future
        asked = self._clock()  # kept from when it was asked: an answer may come late
        try:
            secret = await self.vault.unwrap(wrapped, key_context(token, key_id))
            self.unwraps += 1
            try:
                key = DataKey(key_id, secret)
            except ValueError as e:  # the vault unwrapped something else than a key
                raise KeyUnavailableError(f"the vault unwrapped no data key: {e}") from None
            self._keep((token, key_id), key, asked)
            future.set_result(key)
            return key
        except Exception as e:
            future.set_exception(e)
            future.exception()  # retrieved: no warning when nobody else waited
            raise
        except BaseException:
            future.cancel()
            raise
        finally:
            del self._pending[flight]

    def drop(self, token: str) -> int:
        """Forget every key of the subject ``token`` held here (its key was destroyed);
        how many were held."""
        gone = [slot for slot in self._keys if slot[0] == token]
        for slot in gone:
            del self._keys[slot]
        return len(gone)

    def _keep(self, slot: tuple[str, bytes], key: DataKey, asked: float) -> None:
        self._keys.pop(slot, None)
        self._keys[slot] = (asked, key)
        self._keys.move_to_end(slot)
        while len(self._keys) > self.max_keys:
            self._keys.popitem(last=False)


def _monotonic() -> float:
    """``time.monotonic()``, looked up at each call (a test's virtual clock patches it)."""
    return time.monotonic()
