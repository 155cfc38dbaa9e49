"""Objects sealed with a subject's data key: the envelope encryption that makes a
forgotten subject's every copy unreadable once its key is destroyed.

A subject (a user, a tenant: whoever a deployment says a thread or a namespace belongs
to) has one data key at a time, 32 random bytes, kept only wrapped by a KMS key. What the
library stores for the subject is sealed with it: AES-256-GCM (``cryptography``'s), bound
by its associated data to what the caller names (the saver: the subject's token and the
thread), so that a sealed body copied into another thread, or another subject's, fails
its check instead of reading as theirs. Within one thread a body is not bound to its key
(packs and moves keep bodies as they are): one who can write the bucket could put one of
the thread's own bodies in another's place; that is integrity against a bucket writer,
which sealing does not claim. Bodies are compressed
before they are sealed (ciphertext does not compress), so the stored format's savings stay.

A sealed body::

    MAGIC (7 bytes) | key id (16 bytes) | nonce (12 bytes) | ciphertext and tag (16 bytes)

``MAGIC`` starts with ``0xC1`` and 15, the codec's mark of a compression dictionary this
release reserves (no zstd frame, msgpack value or JSON document starts so), so a reader
tells a sealed body from every other format by its first bytes; whether an object must
be sealed is the manifest's to say, never the body's. The key id names the data key (a
subject that comes back after being forgotten gets a new key, hence a new id); it is
authenticated with the body, as is the format's version. Nonces are synthetic: the
first 12 bytes of an HMAC-SHA-256, under the data key, of the associated data and the
plaintext (SIV-style), so one plaintext sealed twice for one object is the same bytes.
That is what lets sealed bytes stand where plain ones did: a retried create-only PUT
that finds "the same bytes" there, a held copy compared with its object, a DynamoDB
condition naming a held body. It reveals only that two bodies of one object under one
key are equal; two different plaintexts share a nonce with chance 2**-96 per pair.

Pure logic: no I/O. The keys come from :mod:`langgraph_s3.core.subject_keys`, unwrapped
by a key vault (:class:`langgraph_s3.core.ports.KeyVaultPort`: KMS, or a fake).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass, field

from langgraph_s3.errors import SealBrokenError

__all__ = [
    "KEY_BYTES",
    "MAGIC",
    "NAMED_HEAD",
    "DataKey",
    "is_named",
    "is_sealed",
    "key_id_of",
    "name_subject",
    "named_head",
    "named_subject",
    "new_key_id",
    "seal",
    "subject_token",
    "unseal",
]

MAGIC = b"\xc1\x0fLGS3\x01"
"""A sealed body's first bytes: format 1. ``0xC1`` then 15 is what the codec reads as a
later release's compression dictionary (``codec.unpack_body``): a release that knows no
sealing names a sealed object written by a newer version (NewerFormatError), never
corrupt."""
KEY_ID_BYTES = 16
NONCE_BYTES = 12
TAG_BYTES = 16
KEY_BYTES = 32
"""A data key's length: AES-256."""
_HEAD = len(MAGIC) + KEY_ID_BYTES
_MIN = _HEAD + NONCE_BYTES + TAG_BYTES


@dataclass(frozen=True)
class DataKey:
    """One subject's data key: its id and its 32 bytes (never printed)."""

    key_id: bytes
    secret: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.key_id) != KEY_ID_BYTES:
            raise ValueError(f"a data key's id is {KEY_ID_BYTES} bytes, got {len(self.key_id)}")
        if len(self.secret) != KEY_BYTES:
            raise ValueError(f"a data key is {KEY_BYTES} bytes, got {len(self.secret)}")


def new_key_id() -> bytes:
    """A fresh key id (random: ids of two deployments never need to agree)."""
    return os.urandom(KEY_ID_BYTES)


def is_sealed(body: bytes) -> bool:
    """Whether ``body`` is a sealed body (by its first bytes; its check is :func:`unseal`'s)."""
    return bytes(body[: len(MAGIC)]) == MAGIC


def key_id_of(body: bytes, where: str = "") -> bytes:
    """The id of the data key ``body`` (the object ``where``'s) was sealed with;
    SealBrokenError when it is too short to be a sealed body at all."""
    if not is_sealed(body) or len(body) < _MIN:
        raise SealBrokenError(where, "not a sealed body, or a truncated one")
    return bytes(body[len(MAGIC) : _HEAD])


def seal(key: DataKey, where: str, plaintext: bytes | memoryview) -> bytes:
    """``plaintext`` sealed with ``key`` for ``where`` (what it is bound to: the body
    opens only there). The same arguments give the same bytes (a synthetic nonce).
    Cost: one HMAC and one AES-GCM pass, each about a gigabyte a second."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    head = MAGIC + key.key_id
    aad = head + _name(where)
    plaintext = bytes(plaintext)
    mac = hmac.new(key.secret, b"nonce", hashlib.sha256)
    mac.update(len(aad).to_bytes(8, "big") + aad)
    mac.update(plaintext)
    nonce = mac.digest()[:NONCE_BYTES]
    sealed = AESGCM(key.secret).encrypt(nonce, plaintext, aad)
    return b"".join((head, nonce, sealed))


def unseal(key: DataKey, where: str, body: bytes, *, name: str | None = None) -> bytes:
    """The plaintext of ``body``, sealed with ``key`` for ``where``; SealBrokenError
    (naming ``name``, the object's key, or else ``where``) when it was not (another key,
    another object, a changed byte)."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    body = bytes(body)
    named = where if name is None else name
    if key_id_of(body, named) != key.key_id:
        raise SealBrokenError(named, "sealed with another data key than the one given")
    head, nonce = body[:_HEAD], body[_HEAD : _HEAD + NONCE_BYTES]
    try:
        return AESGCM(key.secret).decrypt(nonce, body[_HEAD + NONCE_BYTES :], head + _name(where))
    except InvalidTag:
        raise SealBrokenError(named, "changed, truncated, or moved from another key") from None


SUBJECT_MAGIC = b"\xc1\x0fLGS3s"
"""The first bytes of a sealed body that names its subject (a store item's: no manifest
item says whose it is): the codec's reserved mark again, then ``s``."""
_NAMED = len(SUBJECT_MAGIC) + 16 + 4
NAMED_HEAD = _NAMED
"""The first bytes of a named body that hold its subject's token and life."""


def name_subject(token: str, life: int, sealed: bytes) -> bytes:
    """A sealed body with its subject's token and life ahead of it, in the clear: what a
    reader needs to find the key (one record read per bound), never the subject's id.

    ``SUBJECT_MAGIC`` | token (16 bytes) | life (4 bytes, big-endian) | sealed body"""
    if not sealed.startswith(MAGIC):
        raise ValueError("only a sealed body is named for its subject")
    return b"".join((SUBJECT_MAGIC, bytes.fromhex(token), life.to_bytes(4, "big"), sealed))


def is_named(body: bytes) -> bool:
    """Whether ``body`` is a sealed body named for its subject (by its first bytes)."""
    return bytes(body[: len(SUBJECT_MAGIC)]) == SUBJECT_MAGIC


def named_head(head: bytes) -> tuple[str, int] | None:
    """The token and life a named body's first :data:`NAMED_HEAD` bytes give (a ranged
    read's); None for any other body."""
    if not is_named(head) or len(head) < _NAMED:
        return None
    at = len(SUBJECT_MAGIC)
    return bytes(head[at : at + 16]).hex(), int.from_bytes(head[at + 16 : _NAMED], "big")


def named_subject(body: bytes, where: str = "") -> tuple[str, int, bytes] | None:
    """The token, life and sealed body of a body :func:`name_subject` made; None for any
    other body (a plain one); SealBrokenError when it is one cut short."""
    if not is_named(body):
        return None
    if len(body) < _NAMED + _MIN:
        raise SealBrokenError(where, "a sealed body cut short")
    at = len(SUBJECT_MAGIC)
    token, life = bytes(body[at : at + 16]).hex(), int.from_bytes(body[at + 16 : _NAMED], "big")
    return token, life, bytes(body[_NAMED:])


def _name(where: str) -> bytes:
    """What a body is bound to, as associated data (any ``str``, lone surrogates included)."""
    return where.encode("utf-8", "surrogatepass")


def subject_token(secret: bytes, subject: str) -> str:
    """A subject's keyed hash (HMAC-SHA-256 under the deployment's token secret, 128
    bits in hex): what the manifest indexes and a receipt names instead of the subject's
    own id, which equality lookups still find and nobody without the secret reverses."""
    if not subject:
        raise ValueError("a subject is a non-empty string")
    return hmac.new(secret, subject.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[
        :32
    ]
