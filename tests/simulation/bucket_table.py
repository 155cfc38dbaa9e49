"""The object manifest's items seen as a table (``manifest="s3"``): what the world's
checks read of the manifest, whichever kind a seed runs on.

The checks read ``world.table.items`` (each item as it is now, by (pk, sk)); a seed on
the object manifest keeps no table, only versions in the bucket. :class:`BucketTable`
answers the same questions from the bucket: each item's newest version, a pending
intent as its transaction decided (its ``post`` once the decision says committed,
else its ``pre``), deleted items left out. Writing an item writes its next version
(a checker's copy of a past state, a test's change), without a request.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, MutableMapping
from typing import Any

from langgraph_s3.manifest.objects import keys as object_keys
from langgraph_s3.manifest.objects.codec import Version, decode, encode
from langgraph_s3.testing.fakes import MemoryBucket, StoredObject

from .checks import DEPLOYMENT, LAYOUT

ROOT = LAYOUT.manifest()

Key = tuple[str, str]


class BucketItems(MutableMapping[Key, dict[str, Any]]):
    """A live view of the object manifest in ``bucket``."""

    def __init__(self, bucket: MemoryBucket) -> None:
        self.bucket = bucket

    def _heads(self) -> dict[Key, tuple[int, dict[str, Any] | None]]:
        out: dict[Key, tuple[int, dict[str, Any] | None]] = {}
        last = ""
        for key in self.bucket.keys_after(f"{ROOT}i/", None):
            prefix = key[:-12]
            if prefix == last:
                continue
            last = prefix
            found = object_keys.split(ROOT, DEPLOYMENT, key)
            if found is None:
                continue
            version = decode(self.bucket.objects[key].body, key)
            image = version.image
            if version.intent is not None:
                decided = self.bucket.objects.get(object_keys.decision_key(ROOT, version.intent.tx))
                committed = decided is not None and decided.body == b"commit"
                image = version.intent.post if committed else version.intent.pre
            out[found[0], found[1]] = (version.seq, image)
        return out

    def __getitem__(self, key: Key) -> dict[str, Any]:
        image = self._heads().get(key, (0, None))[1]
        if image is None:
            raise KeyError(key)
        return image

    def __iter__(self) -> Iterator[Key]:
        return iter(sorted(k for k, (_, image) in self._heads().items() if image is not None))

    def __len__(self) -> int:
        return sum(1 for _, image in self._heads().values() if image is not None)

    def _write(self, key: Key, image: dict[str, Any] | None) -> None:
        seq = self._heads().get(key, (-1, None))[0] + 1
        prefix = object_keys.item_prefix(ROOT, DEPLOYMENT, key[0], key[1])
        body = encode(Version(seq, image, "checker"))
        etag = f'"{hashlib.md5(body, usedforsecurity=False).hexdigest()}"'
        self.bucket.objects[object_keys.version_key(prefix, seq)] = StoredObject(
            body, etag, self.bucket.now()
        )

    def __setitem__(self, key: Key, image: dict[str, Any]) -> None:
        self._write(key, image)

    def __delitem__(self, key: Key) -> None:
        self._write(key, None)


class BucketTable:
    """What the checks use of a :class:`~langgraph_s3.testing.fakes.MemoryTable`, for a
    world whose manifest lives in its bucket."""

    objects = True

    def __init__(self, bucket: MemoryBucket) -> None:
        self.bucket = bucket
        self.items = BucketItems(bucket)
        self.name = "bucket"
        self.exists = True


def manifest_format(bucket: MemoryBucket) -> None:
    """What ``setup()`` writes for an object manifest, written directly."""
    body = b'{"format": 1, "ttl": "expires_at"}'
    etag = f'"{hashlib.md5(body, usedforsecurity=False).hexdigest()}"'
    bucket.objects[object_keys.format_key(ROOT)] = StoredObject(body, etag, bucket.now())
