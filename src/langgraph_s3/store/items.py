"""Store items one by one: get, upsert (``created_at`` kept), delete, conditional rewrite.

An item lives at ``Layout.store_item(namespace, key)`` as one JSON object
(:mod:`langgraph_s3.store.format`). Every write is conditional on the version it
builds on, so no write is ever lost: ``If-Match`` its ETag, or
``If-None-Match`` when there is none. This process remembers the ETag and
``created_at`` of the items it has seen (an LRU of :data:`KNOWN_ITEMS`), so an
update of a seen item is one PUT; any other costs a GET more when the guess
was wrong.

Integrity: an item is trusted only for the key it is stored at; a body that
cannot be decoded, or names another item, is corrupt (:meth:`ItemStore.load`). The
items of a deployment's subjects are stored sealed (:mod:`langgraph_s3.store.seals`):
one whose subject was forgotten reads as absent, one that fails its check is corrupt.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, cast

from cachetools import LRUCache
from langgraph.store.base import PutOp

from langgraph_s3.core import codec
from langgraph_s3.core.keys import Layout
from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.core.put_mode import CREATE, Update
from langgraph_s3.core.retry import LOST, Done, Retry, cas
from langgraph_s3.core.sealing import is_named
from langgraph_s3.core.tasks import bounded_map
from langgraph_s3.errors import ConfigurationError, CorruptObjectError, SubjectForgottenError
from langgraph_s3.store import format as it
from langgraph_s3.store.seals import ItemSeals

logger = logging.getLogger("langgraph_s3.store")

KNOWN_ITEMS = 10_000
"""Items whose ETag and ``created_at`` one store remembers (and corrupt versions it
has reported): an LRU each."""

GUESSED = Retry(after=0.0)
"""A write built on a remembered (or assumed absent) version lost: read the item,
at once and without counting a round, since nothing was read yet."""


@dataclass(slots=True)
class Live:
    """An item as stored now: its key, the ETag of this version, its content, and its
    stored bytes when they are sealed (a segment keeps them so)."""

    key: str
    etag: str
    item: it.StoredItem
    sealed: bytes | None = None


@dataclass(frozen=True, slots=True)
class Version:
    """What a put builds on: the ETag to condition on, the ``created_at`` to keep.

    ``etag`` is None when there is no item (the write is ``If-None-Match``);
    ``created_at`` is None when the item starts afresh (absent, expired or
    corrupt). ``guessed``: remembered by this process, not read from S3.
    """

    etag: str | None
    created_at: datetime | None
    guessed: bool = False


ABSENT = Version(None, None)


def sealed_only(body: bytes) -> bytes | None:
    """``body`` when it is a sealed item's (what :attr:`Live.sealed` keeps), else None."""
    return body if is_named(body) else None


def unexpired(live: Sequence[Live], at: datetime) -> list[Live]:
    """The entries still alive at ``at`` (a read never returns an expired item)."""
    return [entry for entry in live if not entry.item.expired(at)]


def new_version(
    op: PutOp, vectors: dict[str, list[float]], created: datetime | None
) -> it.StoredItem:
    """The item a put writes now, keeping ``created`` when it is given."""
    at = it.now()
    expires = at + timedelta(minutes=op.ttl) if op.ttl is not None else None
    value = cast(dict[str, Any], dict(op.value or {}))
    return it.StoredItem(op.namespace, op.key, value, created or at, at, expires, op.ttl, vectors)


class ItemStore:
    """Items by key on S3, with this process's memory of the versions it has seen.

    Args:
        objects: the bucket (S3's :class:`~langgraph_s3.aws.s3.ObjectStore`, or one in memory).
        layout: where items live.
        max_conflicts: rounds of read and conditional write one put may take
            under concurrent writers (``Limits.max_conflicts``).
        seals: the deployment's subjects' items sealed (None: it declares none).
    """

    def __init__(
        self,
        objects: ObjectStorePort,
        layout: Layout,
        *,
        max_conflicts: int,
        seals: ItemSeals | None = None,
    ) -> None:
        self.objects = objects
        self.layout = layout
        self.max_conflicts = max_conflicts
        self.seals = seals
        self.known: LRUCache[str, Version] = LRUCache(maxsize=KNOWN_ITEMS)
        self.reported: LRUCache[tuple[str, str], bool] = LRUCache(maxsize=KNOWN_ITEMS)

    # ------------------------------------------------------------------ reads
    def load(self, key: str, body: bytes) -> it.StoredItem:
        """Decode the item stored at ``key``; a body naming another item is corrupt.

        The S3 key decides where an item lives: trusting the namespace inside
        the body would let an object under ``('u', '2')`` answer as ``('admin',)``.

        Raises:
            CorruptObjectError: naming ``key``.
        """
        with codec.reading(key):
            stored = it.load_item(body)
            if self.layout.store_item(stored.namespace, stored.key) != key:
                raise ValueError(f"its body names item {stored.namespace}/{stored.key!r}")
        return stored

    async def decode(self, key: str, body: bytes) -> Live | None:
        """:meth:`load`, a sealed body opened first (Live's ETag left empty); None when
        it was sealed for a subject since forgotten (erased, never served).

        Raises:
            CorruptObjectError: naming ``key`` (SealBrokenError when its check failed).
        """
        if self.seals is None:
            if is_named(body):
                raise ConfigurationError(
                    f"store item {key!r} is sealed for its subject: this store declares no "
                    "subjects; pass the deployment's subject_label= (or subjects=) and "
                    "kms_key= (and table=)"
                )
            return Live(key, "", self.load(key, body))
        opened = await self.seals.open(key, body)
        if opened is None:
            return None
        stored = self.load(key, opened.body)
        await self.seals.check(key, stored.namespace, opened)
        if opened.token is None:
            await self.seals.note_plain(stored.namespace)
        return Live(key, "", stored, None if opened.token is None else bytes(body))

    async def encode(self, key: str, stored: it.StoredItem) -> bytes:
        """The bytes ``stored`` is kept as at ``key``: sealed for its namespace's subject,
        when it has one.

        Raises:
            SubjectForgottenError: that subject is being forgotten.
        """
        body = it.dump_item(stored)
        return body if self.seals is None else await self.seals.seal(key, stored.namespace, body)

    def report(self, exc: CorruptObjectError, etag: str) -> None:
        """Warn once per corrupt version: a search repeated every turn must not flood the log."""
        if (exc.key, etag) in self.reported:
            return
        self.reported[(exc.key, etag)] = True
        logger.warning("skipping a store item: %s", exc)

    async def get(self, key: str) -> Live | None:
        """The item at ``key`` unless it is missing or expired: one GET.

        Raises:
            CorruptObjectError: the object there is not an item stored at ``key``.
        """
        body, etag = await self.objects.get_with_etag(key)
        if body is None or etag is None:
            return None
        live = await self.decode(key, body)
        if live is None or live.item.expired(it.now()):
            return None
        live.etag = etag
        self.remember(key, Version(etag, live.item.created_at))
        return live

    async def read_all(self, keys: Sequence[str]) -> list[Live]:
        """The items at ``keys``, expired ones included: one GET each, concurrently.

        An item deleted since it was listed is left out, as is an erased one (sealed
        for a forgotten subject); a corrupt one too, with one warning (its neighbours are
        served).
        """

        async def one(key: str) -> Live | None:
            body, etag = await self.objects.get_with_etag(key)
            if body is None or etag is None:
                return None
            return await self.decoded(key, body, etag)

        return [live for live in await bounded_map(one, keys) if live is not None]

    async def decoded(self, key: str, body: bytes, etag: str) -> Live | None:
        """:meth:`decode` of the version ``etag``; a corrupt one reported (once) and
        left out, as is an erased one."""
        try:
            live = await self.decode(key, body)
        except CorruptObjectError as exc:
            self.report(exc, etag)
            return None
        if live is not None:
            live.etag = etag
        return live

    async def version(self, key: str) -> Version:
        """Read what a put builds on (one GET). An expired or corrupt item is replaced
        as a new one (no ``created_at`` kept), still conditional on its ETag."""
        body, etag = await self.objects.get_with_etag(key)
        if body is None or etag is None:
            return ABSENT
        try:
            live = await self.decode(key, body)
        except CorruptObjectError as exc:
            self.report(exc, etag)
            return Version(etag, None)
        if live is None or live.item.expired(it.now()):  # erased or expired: anew
            return Version(etag, None)
        return Version(etag, live.item.created_at)

    # ----------------------------------------------------------------- writes
    async def put(self, op: PutOp, vectors: dict[str, list[float]]) -> Live:
        """Upsert one item: the last writer wins, ``created_at`` is kept unless it was gone.

        One conditional PUT for a new item or one this process has seen; an
        unseen existing item costs a GET and a PUT more. A lost condition (a 412,
        or a 404 for an item deleted meanwhile) is retried from a fresh read,
        with jittered backoff, for ``max_conflicts`` rounds (:func:`retry.cas`).

        Raises:
            ConflictError: the item kept changing for ``max_conflicts`` rounds.
        """
        key = self.layout.store_item(op.namespace, op.key)
        remembered = [replace(self.known.get(key, ABSENT), guessed=True)]

        async def read() -> Version:  # the first round builds on what we remember
            return remembered.pop() if remembered else await self.version(key)

        async def update(base: Version) -> Done[Live] | Retry:
            stored = new_version(op, vectors, base.created_at)
            body = await self.encode(key, stored)
            etag = await self.objects.put(
                key,
                body,
                mode=CREATE if base.etag is None else Update(base.etag),
                tagging=it.tagging(op.ttl),
            )
            if etag is None:
                return GUESSED if base.guessed else LOST
            self.remember(key, Version(etag, stored.created_at))
            return Done(Live(key, etag, stored, sealed_only(body)))

        what = f"item {op.namespace}/{op.key}"
        return await cas(read, update, attempts=self.max_conflicts, what=what)

    async def rewrite(self, entry: Live, fresh: it.StoredItem) -> bool:
        """Replace ``entry`` by ``fresh`` unless it changed since (one PUT, ``If-Match``).

        False when a concurrent write won: it stands, with its own expiry; or when the
        item's subject is being forgotten (nothing more is sealed for it).
        """
        try:
            body = await self.encode(entry.key, fresh)
        except SubjectForgottenError:
            return False
        etag = await self.objects.put(
            entry.key, body, mode=Update(entry.etag), tagging=it.tagging(fresh.ttl)
        )
        if etag is None:
            return False
        self.remember(entry.key, Version(etag, fresh.created_at))
        return True

    async def delete(self, keys: Sequence[str]) -> None:
        """Delete items whatever their version: one DeleteObjects per 1,000 keys."""
        await self.objects.delete(keys)
        for key in keys:
            self.known.pop(key, None)

    async def delete_version(self, entry: Live) -> bool:
        """Delete ``entry`` only while it is this version (one DeleteObject, ``If-Match``)."""
        gone = await self.objects.delete_if_match(entry.key, entry.etag)
        if gone:
            self.known.pop(entry.key, None)
        return gone

    def remember(self, key: str, version: Version) -> None:
        """Keep what the next put of ``key`` builds on (the least recent goes first)."""
        self.known[key] = version
