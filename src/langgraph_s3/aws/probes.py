"""Probes of the conditional writes the library relies on, run by ``setup()`` and
``doctor`` on scratch keys: a store that ignores one is refused with a clear error
(:class:`~langgraph_s3.errors.ConditionsIgnoredError`), never trusted silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import weakref
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from langgraph_s3.aws.s3 import ObjectStore
from langgraph_s3.core.put_mode import CREATE, Update
from langgraph_s3.errors import ConditionsIgnoredError

if TYPE_CHECKING:
    from langgraph_s3.core.ports import ObjectStorePort

__all__ = ["CONDITIONS", "RACERS", "check_conditions", "check_racing_creates", "store_name"]

_STALE = '"00000000000000000000000000000000"'
"""An ``If-Match`` ETag the probe's object never has (stale)."""
_CHECKED: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
"""Object stores probed already -> whether conditional deletes were too."""


CONDITIONS = {
    "If-None-Match on writes": (
        "a second PUT of one key with If-None-Match: * replaced it, so checkpoints and "
        "blobs would lose their immutability (a replayed or concurrent write would "
        "silently overwrite one)"
    ),
    "If-Match on writes": (
        "a PUT with a stale If-Match replaced the object, so compare-and-swap updates "
        "(pending writes, store items) would overwrite concurrent writers' changes"
    ),
    "If-Match on DELETE": (
        "a DELETE with a stale If-Match deleted the object, so the store's TTL sweep "
        "would delete items rewritten since it listed them"
    ),
}
"""Each condition the library relies on -> what is lost where a store ignores it."""


async def check_conditions(objects: ObjectStorePort, root: str, *, deletes: bool) -> None:
    """Refuse an endpoint that ignores the conditional writes the library relies on.

    On a scratch key under ``root`` (``{root}setup/<uuid>``, removed after): a second
    ``If-None-Match: *`` PUT must fail (checkpoints and blobs are write-once), a PUT
    with a stale ``If-Match`` must fail (every compare-and-swap), and with ``deletes``
    (the store's TTL sweep) a DELETE with a stale ``If-Match`` must fail. ``setup()``
    runs it: 4 requests one after another, 5 with ``deletes``, once per ``objects``
    (a second setup() of one saver or store does not probe again).

    Raises:
        ConditionsIgnoredError: naming the store and what would be lost.
    """
    with contextlib.suppress(TypeError):  # one that takes no weak reference: every time
        done = _CHECKED.get(objects)
        if done is not None and done >= deletes:
            return
    key = f"{root}setup/{secrets.token_hex(16)}"
    ignored = ""
    try:
        await objects.put(key, b"1", mode=CREATE)
        if await objects.put(key, b"2", mode=CREATE) is not None:
            ignored = "If-None-Match on writes"
        elif await objects.put(key, b"3", mode=Update(_STALE)) is not None:
            ignored = "If-Match on writes"
        elif deletes and await objects.delete_if_match(key, _STALE):
            ignored = "If-Match on DELETE"
        if ignored:
            raise ConditionsIgnoredError(await _name_of(objects), ignored, CONDITIONS[ignored])
    except BaseException:
        with contextlib.suppress(Exception):  # best effort: the probe's failure matters
            await objects.delete([key])
        raise
    await objects.delete([key])
    with contextlib.suppress(TypeError):
        _CHECKED[objects] = deletes


RACERS = 8
"""Create-only PUTs of one key sent at once by :func:`check_racing_creates`."""


async def check_racing_creates(objects: ObjectStorePort, root: str) -> None:
    """Refuse a store whose ``If-None-Match: *`` lets two racing writers both create
    one key (the object manifest's every commit relies on exactly one winning): of 8
    create-only PUTs of one scratch key at once, at most one may answer ``200`` (a
    409 is sent again, then counts as lost; a winner's lost answer leaves none), then
    the key is deleted. 9 requests, 2
    round trips; ``setup()`` of a saver with ``manifest="s3"`` runs it.

    Raises:
        ConditionsIgnoredError: more than one create succeeded.
    """
    key = f"{root}setup/{secrets.token_hex(16)}"
    try:
        made = await asyncio.gather(
            *(objects.put(key, str(n).encode(), mode=CREATE) for n in range(RACERS)),
            return_exceptions=True,
        )
        won = sum(1 for m in made if isinstance(m, str))
        failed = [m for m in made if isinstance(m, BaseException)]
        # a racer the store failed (a 5xx after the SDK's retries) did not say it won:
        # the others still tell; only all of them failing leaves nothing to judge by
        if failed and len(failed) == len(made):
            raise failed[0]
        if any(not isinstance(m, Exception) for m in failed):
            raise next(m for m in failed if not isinstance(m, Exception))
        # none may say it won (its answer lost, its retry met its own object: 412);
        # two may not
        if won > 1:
            raise ConditionsIgnoredError(
                await _name_of(objects),
                "If-None-Match between racing writers",
                f"{won} of {RACERS} racing create-only PUTs of one key succeeded: two "
                "writers could both commit one manifest version, and one of them be lost",
            )
    finally:
        with contextlib.suppress(Exception):
            await objects.delete([key])


async def _name_of(objects: ObjectStorePort) -> str:
    """Which store ``objects`` talks to, for a message (a HeadBucket for its Server
    header: only when something is wrong)."""
    if not isinstance(objects, ObjectStore):
        return "this object store"
    server = ""
    with contextlib.suppress(Exception):
        resp = await objects._call("head_bucket")
        server = str(resp.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("server", ""))
    return store_name(objects.clients.endpoint_for("s3"), server)


def store_name(endpoint: str, server: str = "") -> str:
    """The store behind an S3 endpoint, from its host or its ``Server`` header."""
    host = (urlparse(endpoint).hostname or "").lower()
    said = server.lower()
    if host.endswith("storage.googleapis.com") or "uploadserver" in said:
        return "Google Cloud Storage's XML API"
    if host.endswith("r2.cloudflarestorage.com") or "cloudflare" in said:
        return "Cloudflare R2"
    if "tigris" in host or host.endswith("storage.dev"):
        return "Tigris (without the header X-Tigris-Consistent: true)"
    for name in ("MinIO", "SeaweedFS", "Ceph"):
        if name.lower() in said:
            return name
    if host.endswith("amazonaws.com"):
        return "Amazon S3"
    return f"the S3 endpoint {endpoint}" + (f" (Server: {server})" if server else "")
