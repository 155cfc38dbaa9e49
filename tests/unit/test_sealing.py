"""Sealed bodies (``core/sealing.py``): what a subject's data key seals opens only with
that key, for that object, unchanged; everything else is a typed error, never plaintext."""

from __future__ import annotations

import os

import pytest

from langgraph_s3.core import sealing
from langgraph_s3.core.sealing import DataKey, is_sealed, key_id_of, seal, subject_token, unseal
from langgraph_s3.errors import CorruptObjectError, SealBrokenError

pytestmark = pytest.mark.unit


def key() -> DataKey:
    return DataKey(sealing.new_key_id(), os.urandom(sealing.KEY_BYTES))


@pytest.mark.parametrize("plaintext", [b"", b"x", os.urandom(100_000)])
def test_a_sealed_body_opens_with_its_key_for_its_object(plaintext: bytes) -> None:
    k = key()
    body = seal(k, "t/a/c/1", plaintext)
    assert is_sealed(body) and key_id_of(body) == k.key_id
    assert unseal(k, "t/a/c/1", body) == plaintext
    assert len(plaintext) < 16 or plaintext not in body  # a short one may occur by chance
    assert seal(k, "t/a/c/1", plaintext) == body  # the same bytes again (synthetic nonce)
    assert seal(k, "t/a/c/2", plaintext)[-28:] != body[-28:]  # bound elsewhere: other bytes
    assert seal(key(), "t/a/c/1", plaintext)[-28:] != body[-28:]  # another key: other bytes
    assert len(body) == len(plaintext) + len(sealing.MAGIC) + 16 + 12 + 16


def test_nonces_differ_for_different_plaintexts_of_one_object() -> None:
    k = key()
    nonces = {seal(k, "t/a/c/1", b"v%d" % i)[23:35] for i in range(1000)}
    assert len(nonces) == 1000


def test_every_changed_byte_moved_body_or_other_key_is_refused() -> None:
    k, other = key(), key()
    body = seal(k, "t/a/c/1", b"the user's words")
    for i in range(len(body)):  # every byte flipped: header, nonce, ciphertext, tag
        bad = body[:i] + bytes([body[i] ^ 0x01]) + body[i + 1 :]
        with pytest.raises(SealBrokenError):
            unseal(k, "t/a/c/1", bad)
    with pytest.raises(SealBrokenError, match="changed, truncated, or moved"):
        unseal(k, "t/b/c/1", body)  # copied under another thread's key
    with pytest.raises(SealBrokenError, match="another data key"):
        unseal(other, "t/a/c/1", body)
    same_id = DataKey(k.key_id, other.secret)  # a key claiming the id: its check fails
    with pytest.raises(SealBrokenError):
        unseal(same_id, "t/a/c/1", body)
    for truncated in (body[:10], body[:-1], b""):
        with pytest.raises(SealBrokenError):
            unseal(k, "t/a/c/1", truncated)
    assert issubclass(SealBrokenError, CorruptObjectError)


def test_other_formats_are_not_sealed() -> None:
    for body in (b"\x28\xb5\x2f\xfdzstd", b"\x81\xa1k\x01", b'{"json": 1}', b"", b"\xc1"):
        assert not is_sealed(body)
        with pytest.raises(SealBrokenError):
            key_id_of(body, "k")


def test_a_data_key_is_never_printed_and_has_its_lengths() -> None:
    k = key()
    assert k.secret.hex() not in repr(k) and str(k.secret) not in repr(k)
    with pytest.raises(ValueError):
        DataKey(b"short", os.urandom(32))
    with pytest.raises(ValueError):
        DataKey(sealing.new_key_id(), os.urandom(16))


def test_a_subject_token_is_keyed_and_stable() -> None:
    secret = os.urandom(32)
    token = subject_token(secret, "user-42")
    assert token == subject_token(secret, "user-42") and len(token) == 32
    assert token != subject_token(secret, "user-43")
    assert token != subject_token(os.urandom(32), "user-42")  # another deployment's
    assert "user-42" not in token
    with pytest.raises(ValueError):
        subject_token(secret, "")


def test_a_sealed_body_read_without_subjects_is_named_sealed_and_an_older_release_newer() -> None:
    """The codec meets a sealed object (a saver without the deployment's subjects): it
    says so, and what to pass, never corrupt; a release before sealing, which takes the
    mark for a later compression dictionary (15), names a newer format."""
    from langgraph_s3.core import codec
    from langgraph_s3.errors import ConfigurationError, NewerFormatError

    body = seal(key(), "t/a/c/1", b"\x81\xa1k\x01")
    with pytest.raises(ConfigurationError, match="subjects= and kms_key="), codec.reading("k"):
        codec.unpack_body(body)
    assert body[0] == codec.DICT_MARK and codec.DICT_VERSION < body[1] < 16  # older: newer
    with pytest.raises(NewerFormatError), codec.reading("t/a/c/1"):
        codec.unpack_body(bytes((codec.DICT_MARK, body[1])) + b"LGS2" + body[6:])
