"""A key vault in memory (:class:`~langgraph_s3.core.ports.KeyVaultPort`), held to the
same contract tests as :class:`~langgraph_s3.aws.kms.KmsKeyVault` on moto: data keys
wrapped with AES-GCM under a master key of its own, the context bound to the wrapping."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping

import orjson

from langgraph_s3.errors import KeyUnavailableError

__all__ = ["MemoryKeyVault"]


def _bound(context: Mapping[str, str]) -> bytes:
    return orjson.dumps(dict(context), option=orjson.OPT_SORT_KEYS)


class MemoryKeyVault:
    """A vault whose master key lives in this object; ``disable()`` refuses every call
    after it, as a disabled KMS key does."""

    def __init__(self) -> None:
        self._master = os.urandom(32)
        self.enabled = True
        self.requests: Counter[str] = Counter()
        """Calls by name (``new_data_key``, ``unwrap``), as the server would count them."""

    def disable(self) -> None:
        self.enabled = False

    def _check(self, op: str) -> None:
        self.requests[op] += 1
        if not self.enabled:
            raise KeyUnavailableError(f"kms.{op} failed: DisabledException (the key is disabled)")

    async def new_data_key(self, context: Mapping[str, str]) -> tuple[bytes, bytes]:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._check("new_data_key")
        key, nonce = os.urandom(32), os.urandom(12)
        return key, nonce + AESGCM(self._master).encrypt(nonce, key, _bound(context))

    async def unwrap(self, wrapped: bytes, context: Mapping[str, str]) -> bytes:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._check("unwrap")
        try:
            return AESGCM(self._master).decrypt(wrapped[:12], wrapped[12:], _bound(context))
        except (InvalidTag, ValueError):
            raise KeyUnavailableError(
                "kms.unwrap failed: InvalidCiphertextException (not made by this key for "
                "this context)"
            ) from None
