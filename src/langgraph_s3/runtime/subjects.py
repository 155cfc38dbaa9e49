"""A deployment's subjects: their tokens, the data key each writes and reads with, and
the two steps of forgetting one (its life marked, then its key destroyed).

Tokens are keyed hashes under the deployment's token secret, 32 random bytes made once
per deployment, kept wrapped by the vault's key beside the subjects' items and unwrapped
once per process. Beside the secret the deployment keeps its **bound**: how long any of
its processes keeps a subject's record or key before reading it again (the first
process's ``SubjectKeys.ttl``; every later one takes the deployment's). A process that
began writing for a subject before it was forgotten may go on for at most that bound;
forgetting waits it out, and a margin for clocks that disagree, before it destroys the
key (:meth:`Subjects.forget_ends_after`).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from langgraph_s3.aws.clients import ClientFactory
from langgraph_s3.aws.kms import KmsKeyVault
from langgraph_s3.core.ports import KeyVaultPort, ObjectStorePort
from langgraph_s3.core.put_mode import CREATE
from langgraph_s3.core.sealing import DataKey, new_key_id, subject_token
from langgraph_s3.core.subject_keys import SubjectKeys
from langgraph_s3.core.subject_policy import normalize_subject
from langgraph_s3.errors import (
    CorruptObjectError,
    InvalidRequestError,
    SealBrokenError,
    SubjectForgottenError,
)
from langgraph_s3.manifest.subjects import SubjectRecord, SubjectRegistry
from langgraph_s3.manifest.table import TablePort

__all__ = ["SKEW", "Subjects", "WriteKey", "deployment_subjects"]

SKEW = 60.0
"""Seconds two processes' wall clocks may disagree by: added to the bound before a key
is destroyed (the mark's time is one process's clock, the check another's)."""
_SECRET_CONTEXT = "langgraph-s3:token-secret"


@dataclass(frozen=True)
class WriteKey:
    """What a writer seals a subject's new objects with: the subject's token, the life
    the key belongs to (a thread sealed in one life refuses another's), the key."""

    token: str
    life: int
    key: DataKey


class Subjects:
    """The subjects of one deployment: :class:`SubjectRegistry` (its items) and
    :class:`SubjectKeys` (the vault, the process's keys)."""

    def __init__(
        self,
        registry: SubjectRegistry,
        keys: SubjectKeys,
        *,
        copies: tuple[ObjectStorePort, str] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """``copies``: the object store and key of the token secret's write-once copy
        (``Layout.subjects_secret``), kept beside the manifest's item."""
        self.registry = registry
        self.keys = keys
        self.copies = copies
        self._clock = clock or _monotonic
        self._secret: bytes | None = None
        self._secret_flight: dict[int, asyncio.Future[bytes]] = {}
        self._records: dict[str, tuple[float, SubjectRecord]] = {}

    @property
    def bound(self) -> float:
        """Seconds a record or key is kept (the deployment's, once its secret was read)."""
        return self.keys.ttl

    async def token(self, subject: str) -> str:
        """The subject's token (the deployment's secret unwrapped once per process), of
        the subject id normalized (:func:`normalize_subject`: NFC)."""
        return subject_token(await self._token_secret(), normalize_subject(subject))

    async def value_token(self, name: str, text: str) -> str:
        """A sealed thread's indexed metadata value (``name``'s, as ``text``) as its
        item holds it: a keyed hash under the deployment's secret (equality still
        answers; the value is not read back from it)."""
        secret = await self._token_secret()
        return hmac.new(
            secret, f"{name}\0{text}".encode("utf-8", "surrogatepass"), hashlib.sha256
        ).hexdigest()[:32]

    async def _token_secret(self) -> bytes:
        """The secret, and the deployment's bound taken. Read from the manifest's item;
        made once, its copy in the object store written first (create-only) and the item
        after; an item lost is restored from the copy, never made anew while a copy
        exists (every subject's token would change). Processes (and event loops) racing
        to make it agree on the first one kept, the others unwrap it; callers on one
        loop share one fetch (a put and its writes ask at once)."""
        if self._secret is not None:
            return self._secret
        loop = id(asyncio.get_running_loop())
        flight = self._secret_flight.get(loop)
        if flight is None:
            flight = self._secret_flight[loop] = asyncio.ensure_future(self._fetch_secret())
            flight.add_done_callback(lambda _: self._secret_flight.pop(loop, None))
        return await asyncio.shield(flight)

    async def _fetch_secret(self) -> bytes:
        if self._secret is not None:
            return self._secret
        context = {_SECRET_CONTEXT: self.registry.deployment}
        kept = await self.registry.secret()
        made: tuple[bytes, bytes] | None = None  # the id and secret this process made
        if kept is None:
            copied = await self._copy()
            if copied is None:
                key_id = new_key_id()
                secret, wrapped = await self.keys.vault.new_data_key(
                    {**context, "langgraph-s3:key": key_id.hex()}
                )
                made = key_id, secret
                copied = await self._keep_copy((key_id, wrapped, self.keys.ttl))
            kept = await self.registry.keep_secret(*copied)
        key_id, wrapped, bound = kept
        self.keys.ttl = bound
        if made is not None and made[0] == key_id:  # ours was kept
            self._secret = made[1]
        else:
            self._secret = await self.keys.vault.unwrap(
                wrapped, {**context, "langgraph-s3:key": key_id.hex()}
            )
        return self._secret

    async def _copy(self) -> tuple[bytes, bytes, float] | None:
        """The secret's copy in the object store, if it is kept there."""
        if self.copies is None:
            return None
        objects, key = self.copies
        body = await objects.get(key)
        if body is None:
            return None
        try:
            raw = orjson.loads(body)
            return bytes.fromhex(raw["kid"]), base64.b64decode(raw["wrapped"]), float(raw["bound"])
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptObjectError(key, f"not a token secret's copy: {e}") from None

    async def _keep_copy(self, secret: tuple[bytes, bytes, float]) -> tuple[bytes, bytes, float]:
        """Write the copy unless one exists (create-only): the one kept, either way."""
        if self.copies is None:
            return secret
        objects, key = self.copies
        key_id, wrapped, bound = secret
        body = orjson.dumps(
            {"kid": key_id.hex(), "wrapped": base64.b64encode(wrapped).decode(), "bound": bound}
        )
        if await objects.put(key, body, mode=CREATE) is not None:
            return secret
        kept = await self._copy()
        if kept is None:  # pragma: no cover - a create-only write lost to a delete
            raise CorruptObjectError(key, "the token secret's copy vanished while made")
        return kept

    async def key_for_write(self, subject: str, *, life: int | None = None) -> WriteKey:
        """The key to seal the subject's new objects with: its live life's (begun now,
        with a new key, when it has none and no ``life`` is named). ``life``: the life
        the writer's thread was sealed in; any other is refused. SubjectForgottenError
        while the subject is being forgotten, or once that life is over. At most one
        record read per bound."""
        return await self.key_for_token(await self.token(subject), life=life)

    async def key_for_token(self, token: str, *, life: int | None = None) -> WriteKey:
        """:meth:`key_for_write` of the subject whose token is ``token`` (a thread's
        recorded subject: its writer need not know the subject's id)."""
        await self._token_secret()  # the deployment's bound, before any record is kept
        record = await self._record(token)
        if (record is None or record.state == "forgotten") and life is None:
            key, wrapped = await self.keys.new(token)
            record = await self.registry.begin(token, key.key_id, wrapped)
            self._keep(token, self._clock(), record)
        if (
            record is None
            or record.state != "live"
            or record.key_id is None
            or record.wrapped is None
            or (life is not None and record.life != life)
        ):
            raise SubjectForgottenError(
                f"subject {token} is forgotten or being forgotten"
                + (f" (its life {life} is over)" if life is not None else "")
                + ": nothing more is written for it"
            )
        key = await self.keys.get(token, record.key_id, record.wrapped)
        return WriteKey(token, record.life, key)

    async def key_for_read(
        self, token: str, key_id: bytes, *, life: int | None = None, where: str = ""
    ) -> DataKey:
        """The key ``key_id`` of the subject ``token``, to open what it sealed in its life
        ``life`` (when known): SubjectForgottenError when that life is over (its key
        destroyed); SealBrokenError when the life is the current one and the key is not
        its own (sealed by someone else's key)."""
        await self._token_secret()  # the deployment's bound
        record = await self._record(token)
        if record is not None and record.key_id != key_id:
            record = await self._record(token, fresh=True)  # a new life since
        if record is not None and record.key_id == key_id and record.wrapped is not None:
            return await self.keys.get(token, key_id, record.wrapped)
        if record is not None and record.life == life and record.state != "forgotten":
            raise SealBrokenError(where, "sealed with a key that is not its subject's")
        raise SubjectForgottenError(
            f"no key of subject {token}'s current life opens this object: the subject "
            "was forgotten (its key destroyed)"
        )

    async def key_of_life(self, token: str, life: int) -> DataKey:
        """The key of the subject's life ``life`` while it exists (live, or being
        forgotten): what puts back content already sealed with it (a failed deletion's
        item restored). SubjectForgottenError once it is destroyed or another life began."""
        record = await self._record(token)
        if record is None or record.life != life:
            record = await self._record(token, fresh=True)
        if record is None or record.life != life or record.key_id is None or not record.wrapped:
            raise SubjectForgottenError(f"subject {token}'s life {life} is over: its key is gone")
        return await self.keys.get(token, record.key_id, record.wrapped)

    async def forget_begins(self, subject: str, life: int | None = None) -> SubjectRecord | None:
        """Forgetting's first step: the subject's life (``life``, when a resumed
        forgetting names the one it began) marked; writers refuse from their next read
        of the record, within the bound. The record after (a later life is left alone)."""
        token = await self.token(subject)
        record = await self.registry.forgetting(token, life)
        self._records.pop(token, None)
        self.keys.drop(token)
        return record

    def forget_ends_after(self, record: SubjectRecord) -> float:
        """The earliest moment (the registry's clock, epoch seconds) the key of the
        life ``record`` is forgetting may be destroyed: every process that kept it has
        read the record again (the bound from when forgetting began, and :data:`SKEW`)."""
        began = record.began if record.began is not None else record.since
        return began + self.bound + SKEW

    async def forget_ends(self, record: SubjectRecord) -> bool:
        """Forgetting's last step: the life's key destroyed (True when this call did;
        False when it already was, as a resumed forgetting finds it). InvalidRequestError
        before :meth:`forget_ends_after` (a process may still hold the key, and would
        seal with it objects nobody could then read)."""
        if record.state == "forgotten":
            return False
        await self._token_secret()  # the deployment's bound, not this process's own
        ends = self.forget_ends_after(record)
        if self.registry.now() < ends:
            raise InvalidRequestError(
                f"subject {record.token}'s key may be destroyed from {ends:.0f} (epoch "
                f"seconds): processes may hold it until then ({self.bound:.0f} s after "
                f"its forgetting began, and {SKEW:.0f} s for clocks that disagree)"
            )
        self._records.pop(record.token, None)
        self.keys.drop(record.token)
        return await self.registry.destroy(record.token, record.life)

    async def _record(self, token: str, *, fresh: bool = False) -> SubjectRecord | None:
        held = self._records.get(token)
        if not fresh and held is not None and self._clock() - held[0] < self.bound:
            return held[1]
        asked = self._clock()  # kept from when it was asked: an answer may come late
        record = await self.registry.get(token)
        self._records.pop(token, None)
        if record is not None:
            self._keep(token, asked, record)
        return record

    def _keep(self, token: str, asked: float, record: SubjectRecord) -> None:
        self._records.pop(token, None)
        self._records[token] = (asked, record)
        while len(self._records) > self.keys.max_keys:  # the oldest read goes
            del self._records[next(iter(self._records))]


def deployment_subjects(
    clients: ClientFactory,
    table: TablePort,
    deployment: str,
    *,
    kms_key: str | KeyVaultPort | None,
    key_seconds: float,
    copies: tuple[ObjectStorePort, str],
    clock: Callable[[], float],
) -> Subjects:
    """A deployment's subjects (``deployment_key``'s): their items in ``table``, their
    keys wrapped by ``kms_key`` (a KMS key's id, ARN or alias, or a vault), the token
    secret's copy at ``copies``. A saver and a store of one deployment (one bucket,
    prefix and table) share its subjects. No request is made."""
    if kms_key is None:
        raise InvalidRequestError(
            "subjects need kms_key: the KMS key (an id, ARN or alias) that wraps each "
            "subject's data key, e.g. kms_key='alias/langgraph-s3'"
        )
    vault = KmsKeyVault(clients, kms_key) if isinstance(kms_key, str) else kms_key
    registry = SubjectRegistry(table, deployment, clock=clock)
    return Subjects(registry, SubjectKeys(vault, ttl=key_seconds), copies=copies)


def _monotonic() -> float:
    """``time.monotonic()``, looked up at each call (a test's virtual clock patches it)."""
    return time.monotonic()
