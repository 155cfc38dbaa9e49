"""An object manifest's items, version by version: finding an item's newest version,
creating the next one, and settling a transaction's intent met on the way.

**Newest, in bounded requests.** An item's newest version is the first key under its
prefix. Cold: one LIST (``MaxKeys=1``) and one GET, whatever the history (an absent
item: the LIST alone). Warm, from a copy cached less than :data:`BASIS_SECONDS` ago
at version n: one GET of version n+1, whose 404 proves n is still the newest; a
found one is followed up to :data:`PROBES` times, then a LIST.

**A write** creates version n+1 with ``If-None-Match: *``: one PUT on the fast path.
A 412 means another writer made n+1 first (unless the version there carries this
writer's token: the PUT was applied and its answer lost); the caller reads the new
newest and evaluates its condition again.

**Intents.** A version that is a transaction's pending part (:mod:`.tx`) is settled
before anyone builds on it or reads it: whoever meets it waits up to
:data:`INTENT_WAIT` seconds for its outcome (the next version, or the decision
object of a transaction of several writes), then aborts it, first writer winning.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from langgraph_s3.core import fence
from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.core.put_mode import CREATE
from langgraph_s3.core.records import Listed
from langgraph_s3.core.tasks import in_background
from langgraph_s3.errors import StaleBasisError
from langgraph_s3.manifest.objects import gc, keys
from langgraph_s3.manifest.objects.codec import DEAD_MAX, Image, Intent, Version, decode, encode

logger = logging.getLogger(__name__)

__all__ = ["BASIS_SECONDS", "INTENT_WAIT", "PROBES", "Head", "Versions"]

BASIS_SECONDS = fence.BASIS_SECONDS
"""How long a cached newest version is built on without reading again (a write or a
probe built on an older read is not sent: :mod:`langgraph_s3.core.fence`)."""
PROBES = 4
"""Successors of a cached version read one by one before a LIST (SlateDB's 4)."""
INTENT_WAIT = 2.0
"""Seconds a reader or writer waits on another's pending intent before aborting it."""
ERASED = "erased"
"""The token of a version :meth:`~.table.ObjectTable.erase_history` blanked: never an
item's newest, and never read as one (its slot taken, its content gone)."""
_POLL = 0.02
COMMITTED, ABORTED = b"commit", b"abort"
CACHE_BYTES = 32 << 20


@dataclass(frozen=True, slots=True)
class Head:
    """An item's newest version as read at ``basis`` (``time.monotonic()``): ``seq``
    -1 when the item never had one."""

    seq: int
    image: Image | None
    intent: Intent | None
    basis: float
    token: str = ""


def _absent(basis: float) -> Head:
    return Head(-1, None, None, basis)


def _retrieved(task: asyncio.Task[None]) -> None:
    """A background task's end, taken: a process that dies with it running (its loop
    closed, a crash) leaves nothing to report (``_collect`` logs its own failures)."""
    if not task.cancelled():
        task.exception()


def new_token() -> str:
    return secrets.token_hex(8)


class Versions:
    """One object manifest's versions under ``root``, on ``store``, with a cache of
    newest versions (bounded by bytes, shared by every task of the process)."""

    def __init__(self, store: ObjectStorePort, root: str, strip: str) -> None:
        self.store, self.root, self.strip = store, root, strip
        self._cache: OrderedDict[str, tuple[Head, int]] = OrderedDict()
        self._collecting: set[asyncio.Task[None]] = set()
        self._cached_bytes = 0

    # -- the cache ----------------------------------------------------------
    def cached(self, prefix: str) -> Head | None:
        hit = self._cache.get(prefix)
        if hit is None:
            return None
        self._cache.move_to_end(prefix)
        return hit[0]

    def remember(self, prefix: str, head: Head, size: int) -> None:
        old = self._cache.pop(prefix, None)
        if old is not None:
            if old[0].seq > head.seq:  # never back: a slower reader's older copy
                self._cache[prefix] = old
                return
            self._cached_bytes -= old[1]
        self._cache[prefix] = (head, size)
        self._cached_bytes += size
        while self._cached_bytes > CACHE_BYTES and self._cache:
            _, (_, dropped) = self._cache.popitem(last=False)
            self._cached_bytes -= dropped

    def forget(self, prefix: str) -> None:
        old = self._cache.pop(prefix, None)
        if old is not None:
            self._cached_bytes -= old[1]

    # -- reading ------------------------------------------------------------
    async def _read(self, key: str, basis: float | None = None) -> Version | None:
        """The version at ``key``; ``basis``: a probe's, whose 404 counts only while
        the read it follows is young (a slot is freed no sooner: ``core/fence.py``)."""
        if basis is None:
            data = await self.store.get(key)
        else:
            with fence.based_on(basis):
                data = await self.store.get(key)
        return decode(data, key) if data is not None else None

    def _keep(self, prefix: str, version: Version, basis: float) -> Head:
        head = Head(version.seq, version.image, version.intent, basis, version.token)
        self.remember(prefix, head, 256 + len(str(version.image)) if version.image else 64)
        return head

    async def listed_head(self, prefix: str) -> Head:
        """The newest version by a LIST and a GET (the LIST alone for an absent item)."""
        while True:
            basis = time.monotonic()
            first = await self._first(prefix)
            if first is None:
                head = _absent(basis)
                self.remember(prefix, head, 64)
                return head
            version = await self._read(first.key)
            # else freed, or erased, since it was listed: newer ones exist, list again
            if version is not None and version.token != ERASED:
                return self._keep(prefix, version, basis)

    async def _first(self, prefix: str) -> Listed | None:
        async for page in self.store.list_pages(prefix, page_size=1):
            return page[0] if page else None
        return None

    async def newest(self, prefix: str) -> Head:
        """The item's newest version, strongly consistent, intents as they are."""
        head = self.cached(prefix)
        if head is None or time.monotonic() - head.basis > BASIS_SECONDS:
            return await self.listed_head(prefix)
        for _ in range(PROBES):
            basis = time.monotonic()
            try:
                version = await self._read(keys.version_key(prefix, head.seq + 1), head.basis)
            except StaleBasisError:
                return await self.listed_head(prefix)
            if version is None:
                if head.token == ERASED:  # erased versions are never the newest
                    return await self.listed_head(prefix)
                head = Head(head.seq, head.image, head.intent, basis, head.token)
                self.remember(prefix, head, 64 if head.image is None else 256)
                return head
            head = self._keep(prefix, version, basis)
        return await self.listed_head(prefix)

    async def head(self, prefix: str, *, fresh: bool = False) -> Head:
        """The item's newest version with no intent pending (one met is settled).
        ``fresh``: read now even when a cached copy is young (a strong read)."""
        head = await self.newest(prefix) if fresh else await self.base(prefix)
        while head.intent is not None:
            head = await self.settle(prefix, head)
        return head

    async def base(self, prefix: str) -> Head:
        """The cached newest while it is younger than the basis bound (a write's base:
        its create-only PUT checks it), else read."""
        head = self.cached(prefix)
        if head is not None and time.monotonic() - head.basis <= BASIS_SECONDS:
            return head
        return await self.newest(prefix)

    async def at(self, listed: Listed, prefix: str, basis: float) -> Head:
        """The head a listing made at ``basis`` showed (served from the cache when it
        holds that version)."""
        seq = keys.seq_of(listed.key)
        hit = self.cached(prefix)
        if hit is not None and hit.seq == seq:
            head = hit
        else:
            version = await self._read(listed.key)
            if version is None or version.token == ERASED:  # newer ones exist since
                head = await self.listed_head(prefix)
            else:
                head = self._keep(prefix, version, basis)
        while head.intent is not None:
            head = await self.settle(prefix, head)
        return head

    # -- writing ------------------------------------------------------------
    async def create(self, prefix: str, version: Version, basis: float) -> bool:
        """Create ``version`` where none is, built on a read at ``basis``: True if it
        is there now (this writer's, by its token, even when the PUT's answer was
        lost), False if another's is.

        Raises:
            StaleBasisError: the read was too old to build on (the fence): not sent,
                the item's copy forgotten.
        """
        key = keys.version_key(prefix, version.seq)
        started = time.monotonic()
        try:
            with fence.based_on(basis):
                etag = await self.store.put(key, encode(version), mode=CREATE)
        except StaleBasisError:
            self.forget(prefix)
            raise
        if etag is not None:
            self._keep(prefix, version, started)
            if (version.seq + 1) % gc.EVERY == 0:
                task = in_background(self._collect(prefix))
                self._collecting.add(task)
                task.add_done_callback(_retrieved)
                task.add_done_callback(self._collecting.discard)
            return True
        there = await self._read(key)
        if there is not None and there.token == version.token:
            self._keep(prefix, there, time.monotonic())
            return True
        if there is not None:  # another's: the newest known, probed on from here
            self._keep(prefix, there, time.monotonic())
        else:
            self.forget(prefix)
        return False

    async def try_create(self, prefix: str, version: Version, basis: float) -> bool:
        """:meth:`create`, False when the fence refused it (not sent)."""
        try:
            return await self.create(prefix, version, basis)
        except StaleBasisError:
            return False

    async def _collect(self, prefix: str) -> None:
        try:
            await gc.collect_item(self.store, prefix)
        except Exception:  # the next writer, or the sweep, frees them
            logger.debug("freeing old versions of %s failed", prefix, exc_info=True)

    # -- intents ------------------------------------------------------------
    async def decision(self, txid: str) -> bytes | None:
        return await self.store.get(keys.decision_key(self.root, txid))

    async def decide(self, txid: str, outcome: bytes, basis: float) -> bytes | None:
        """Record ``outcome`` for a transaction of several writes unless one is
        recorded: the outcome that stands (None: the read at ``basis`` that says the
        transaction is pending is too old to decide on; read again)."""
        key = keys.decision_key(self.root, txid)
        try:
            with fence.based_on(basis):
                made = await self.store.put(key, outcome, mode=CREATE)
        except StaleBasisError:
            return None
        if made is not None:
            return outcome
        there = await self.store.get(key)
        if there is None:  # deleted once every part was resolved: it committed
            return COMMITTED
        return there

    async def settle(self, prefix: str, head: Head) -> Head:
        """The version after the pending intent ``head``: its outcome, waited for up
        to :data:`INTENT_WAIT` seconds, then decided (aborted) here."""
        intent = head.intent
        assert intent is not None
        deadline = time.monotonic() + INTENT_WAIT
        delay = _POLL
        while True:
            basis = time.monotonic()  # the intent is pending as of this read, if 404
            after = await self._read(keys.version_key(prefix, head.seq + 1))
            if after is not None and after.token == ERASED:  # resolved, and more since
                return await self.listed_head(prefix)
            if after is not None:
                return self._keep(prefix, after, basis)
            outcome = await self.decision(intent.tx) if intent.multi else None
            if outcome is None and time.monotonic() >= deadline:
                outcome = await self.decide(intent.tx, ABORTED, basis) if intent.multi else ABORTED
            if outcome is not None:
                image = intent.post if outcome == COMMITTED else intent.pre
                resolved = Version(head.seq + 1, image, new_token())
                await self.try_create(prefix, resolved, basis)  # or another's: the same
                return await self.newest_after(prefix, head.seq)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.2)

    async def version_at(self, prefix: str, seq: int) -> Version | None:
        """Version ``seq`` of the item, if it is there (1 GET)."""
        return await self._read(keys.version_key(prefix, seq))

    async def newest_after(self, prefix: str, seq: int) -> Head:
        """The version right after ``seq`` (written: it resolves an intent)."""
        version = await self._read(keys.version_key(prefix, seq + 1))
        if version is None or version.token == ERASED:
            return await self.listed_head(prefix)
        return self._keep(prefix, version, time.monotonic())

    # -- listings -----------------------------------------------------------
    @staticmethod
    def firsts(page: Sequence[Listed], last: str) -> list[tuple[str, Listed]]:
        """Each item's newest version in a page of version keys (item prefix, key),
        deleted items (⊥, by their size) left out; ``last``: the item the page
        before ended with (its older versions may open this one)."""
        out: list[tuple[str, Listed]] = []
        for listed in page:
            prefix = listed.key[:-12]
            if prefix == last:
                continue
            last = prefix
            if listed.size > DEAD_MAX:
                out.append((prefix, listed))
        return out
