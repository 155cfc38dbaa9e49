"""A deployment's subjects: their tokens, the data key each writes and reads with, and
the two steps of forgetting one (its life marked, then its key destroyed).

Tokens are keyed hashes under the deployment's token secret, 32 random bytes made once
per deployment, kept wrapped by the vault's key beside the subjects' items and unwrapped
once per process. A writer asks for the subject's key at most once per ``ttl`` (the
record and the key are kept that long): a process that began writing for a subject
before it was forgotten may go on for at most that bound, which is what forgetting
waits out before it destroys the key (``forget_ends_after``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from langgraph_s3.core.sealing import DataKey, new_key_id, subject_token
from langgraph_s3.core.subject_keys import SubjectKeys
from langgraph_s3.errors import InvalidRequestError, SubjectForgottenError
from langgraph_s3.manifest.subjects import SubjectRecord, SubjectRegistry

__all__ = ["Subjects"]

_SECRET_CONTEXT = "langgraph-s3:token-secret"


class Subjects:
    """The subjects of one deployment: :class:`SubjectRegistry` (its items) and
    :class:`SubjectKeys` (the vault, the process's keys)."""

    def __init__(
        self,
        registry: SubjectRegistry,
        keys: SubjectKeys,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self.keys = keys
        self._clock = clock
        self._secret: bytes | None = None
        self._secret_lock = asyncio.Lock()
        self._records: dict[str, tuple[float, SubjectRecord]] = {}

    async def token(self, subject: str) -> str:
        """The subject's token (the deployment's secret unwrapped once per process)."""
        return subject_token(await self._token_secret(), subject)

    async def _token_secret(self) -> bytes:
        if self._secret is not None:
            return self._secret
        async with self._secret_lock:
            if self._secret is None:
                context = {_SECRET_CONTEXT: self.registry.deployment}
                kept = await self.registry.secret()
                if kept is None:
                    key_id = new_key_id()
                    secret, wrapped = await self.keys.vault.new_data_key(
                        {**context, "langgraph-s3:key": key_id.hex()}
                    )
                    kept = await self.registry.keep_secret(key_id, wrapped)
                    if kept[0] == key_id:  # ours was kept
                        self._secret = secret
                        return secret
                key_id, wrapped = kept
                self._secret = await self.keys.vault.unwrap(
                    wrapped, {**context, "langgraph-s3:key": key_id.hex()}
                )
            return self._secret

    async def key_for_write(self, subject: str) -> tuple[str, DataKey]:
        """The subject's token and the key to seal its new objects with: its live
        life's (begun now, with a new key, when it has none). SubjectForgottenError
        while it is being forgotten. At most one record read per ``ttl``."""
        token = await self.token(subject)
        record = await self._record(token)
        if record is None or record.state == "forgotten":
            key, wrapped = await self.keys.new(token)
            record = await self.registry.begin(token, key.key_id, wrapped)
            self._records.pop(token, None)
            self._records[token] = (self._clock(), record)
        if record.state != "live" or record.key_id is None or record.wrapped is None:
            raise SubjectForgottenError(
                f"subject {token} is being forgotten: nothing more is written for it"
            )
        return token, await self.keys.get(token, record.key_id, record.wrapped)

    async def key_for_read(self, token: str, key_id: bytes) -> DataKey:
        """The key ``key_id`` of the subject ``token``, to open what it sealed;
        SubjectForgottenError when that key was destroyed (the subject forgotten, or a
        later life's objects asked with an earlier life's key)."""
        record = await self._record(token)
        if record is not None and record.key_id != key_id:
            record = await self._record(token, fresh=True)  # a new life since
        if record is None or record.key_id != key_id or record.wrapped is None:
            raise SubjectForgottenError(
                f"the key that sealed this object of subject {token} was destroyed: "
                "the subject was forgotten"
            )
        return await self.keys.get(token, key_id, record.wrapped)

    async def forget_begins(self, subject: str) -> SubjectRecord | None:
        """Forgetting's first step: the subject's life marked (writers refuse from the
        next time they read it, at most ``ttl`` from now). The record after."""
        token = await self.token(subject)
        record = await self.registry.forgetting(token)
        self._records.pop(token, None)
        self.keys.drop(token)
        return record

    def forget_ends_after(self, record: SubjectRecord) -> float:
        """The earliest moment (the registry's clock: epoch seconds) its key may be
        destroyed: every writer that kept its key has had to read the record again
        (the bound, from when it was marked)."""
        return record.since + self.keys.ttl

    async def forget_ends(self, record: SubjectRecord) -> bool:
        """Forgetting's last step: the life's key destroyed (True when this call did).
        InvalidRequestError before :meth:`forget_ends_after` (a writer may still hold
        the key, and would seal with it objects nobody could then read)."""
        now = self.registry.now()
        if now < self.forget_ends_after(record):
            raise InvalidRequestError(
                f"subject {record.token}'s key may be destroyed from "
                f"{self.forget_ends_after(record):.0f} (epoch seconds), {self.keys.ttl:.0f} s "
                "after its forgetting began: writers may hold it until then"
            )
        self._records.pop(record.token, None)
        self.keys.drop(record.token)
        return await self.registry.destroy(record.token, record.life)

    async def _record(self, token: str, *, fresh: bool = False) -> SubjectRecord | None:
        held = self._records.get(token)
        if not fresh and held is not None and self._clock() - held[0] < self.keys.ttl:
            return held[1]
        record = await self.registry.get(token)
        self._records.pop(token, None)
        if record is not None:
            self._records[token] = (self._clock(), record)
            while len(self._records) > self.keys.max_keys:  # the oldest read goes
                del self._records[next(iter(self._records))]
        return record
