"""Pending writes the manifest holds until their objects are stored: ``put_writes`` on
DynamoDB's clock.

**The rule.** A task's writes (at most :data:`~langgraph_s3.core.held.HELD_WRITES_MAX`
bytes in all) are one conditional UpdateItem on the namespace's item (``Held.hold``):
one ``hw:<tail>`` attribute per write object, the object's key and body as S3 would
hold them. The call returns once DynamoDB answered; the object is written beside, off
the caller's path, and leaves the item only in a later write that knows it is stored
(the commit of a newer checkpoint, a settle), so a write is, at every moment, in the
item or in S3. A hold is conditioned on the item's life (a writer frozen mid-task and
thawed after a deletion holds nothing: no license check is needed), on it being live,
and on room under the held budget; the writes that do not fit go to S3 first, as before.

* **Regular writes** (first write wins per index): the item's attribute is merged
  first-wins on the rare conflict (two runs of one task); its object is merged into S3
  by compare-and-swap with S3's writes winning (:func:`merged`), and a reader that
  finds both lays them over each other the same way.
* **Special writes** (error, interrupt, resume...: last write wins): the attribute is
  replaced; its object replaces an older one only while the item still holds it
  (``inline.store_held``), so a background PUT never replaces a newer write.
* **Readers** lay held writes over the listing (``overlay.py``); the ``bare`` word
  means "no pending writes beyond those the item holds": a latest's held writes leave
  the item only once a newer checkpoint is committed, or with the word (maintenance).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable

from langgraph_s3.checkpoint.erasure import ERASED, HELD_LICENSE
from langgraph_s3.checkpoint.inline import WriteStore, store_held
from langgraph_s3.core import codec
from langgraph_s3.core.held import HeldWrite
from langgraph_s3.core.keys import NamespaceKeys
from langgraph_s3.core.ports import ManifestPort, ObjectStorePort
from langgraph_s3.core.put_mode import CREATE, Update
from langgraph_s3.errors import ConflictError

STORE_ROUNDS = 4
"""Compare-and-swap rounds of a regular write's merge into S3."""


def merged(stored: bytes, held: bytes, key: str) -> bytes:
    """A regular writes object as S3 and the item together hold it: S3's writes win
    per index (a held body reaches S3 only merged into what S3 has, so S3's were
    there first), the item's others join in index order. ``stored`` itself when the
    item adds nothing."""
    with codec.reading(key):
        old, new = codec.load_writes(stored), codec.load_writes(held)
    have = {w.idx for w in old}  # (an erasure marker is no writes: ``stored`` is checked)
    extra = [w for w in new if w.idx not in have]
    if not extra or not old:
        return stored if old else held
    both = sorted([*old, *extra], key=lambda w: w.idx)
    return codec.dump_writes(
        old[0].task_id, old[0].task_path, [(w.idx, w.channel, w.value) for w in both]
    )


def md5_etag(body: bytes) -> str:
    """The ETag S3 gives a single-part object of ``body`` without SSE-KMS (the MD5 of its
    bytes): a listed write with it holds exactly those bytes (under KMS it never matches,
    and the object is read)."""
    return '"' + hashlib.md5(body, usedforsecurity=False).hexdigest() + '"'


def write_held_by(
    manifest: ManifestPort, thread_id: str, checkpoint_ns: str, write: HeldWrite
) -> Callable[[], Awaitable[bool]]:
    """Whether the item of (thread, namespace) still holds ``write`` as named (1 GetItem)."""

    async def check() -> bool:
        raw = await manifest.reads.read(thread_id, checkpoint_ns)
        return raw is not None and not raw.tombstone and write in raw.writes

    return check


async def store_write(
    objects: ObjectStorePort,
    key: str,
    write: HeldWrite,
    still_held: Callable[[], Awaitable[bool]],
    *,
    seen: float | None = None,
) -> bool:
    """Store a held write's object; True when S3 then holds it (a regular one: its
    writes, S3's own winning per index). Past :data:`HELD_LICENSE` since the item was
    last seen holding it (``seen``, the loop's clock), the item is asked first (1
    GetItem) and nothing is PUT when it no longer holds it (stored by another process,
    its thread deleted).

    Cost: a special write as ``inline.store_held``. A regular one: 1 PUT
    (``If-None-Match``); where an object is there, 1 GET, and when the item's writes
    add to it, 1 GetItem (still held?) and 1 PUT ``If-Match`` per round."""
    if not write.regular:
        return await store_held(objects, key, write.body, still_held, seen=seen)
    stale = seen is not None and asyncio.get_running_loop().time() - seen > HELD_LICENSE
    if stale and not await still_held():
        return False
    for _ in range(STORE_ROUNDS):
        if await objects.put(key, write.body, mode=CREATE):
            return True
        existing, etag = await objects.get_with_etag(key)
        if existing is None:
            continue  # deleted meanwhile: store it again
        if existing == ERASED:  # a deletion's marker: replaced only while still held
            if not await still_held():  # (a new life's write, an import reusing ids)
                return False
            if await objects.put(key, write.body, mode=Update(etag) if etag else None):
                return True
            continue
        body = merged(existing, write.body, key)
        if body == existing:
            return True  # S3 holds every write of it already
        if not await still_held():
            return False
        if await objects.put(key, body, mode=Update(etag) if etag else None):
            return True
    raise ConflictError(f"writes object {key!r} kept changing while it was stored: retry")


def write_storer(
    objects: ObjectStorePort, manifest: ManifestPort, keys: NamespaceKeys
) -> WriteStore:
    """Stores a write a namespace's item holds (this process's, or one another left)."""

    async def store(write: HeldWrite, seen: float | None) -> bool:
        check = write_held_by(manifest, keys.thread_id, keys.checkpoint_ns, write)
        return await store_write(objects, keys.held_key(write.tail), write, check, seen=seen)

    return store
