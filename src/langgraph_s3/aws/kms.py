"""Subjects' data keys made and unwrapped by a KMS key (``GenerateDataKey``,
``Decrypt``): the only place a data key is wrapped or unwrapped on AWS.

The encryption context names the subject (by its keyed hash) and the data key's id, so a
wrapped key copied into another subject's item does not unwrap there, and CloudTrail's
record of each ``Decrypt`` says whose key it was. Destroying a subject's key is deleting
its wrapped copies (the manifest's item); the KMS key itself stays, wrapping the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph_s3.aws import door
from langgraph_s3.aws.clients import ClientFactory

__all__ = ["KmsKeyVault"]


class KmsKeyVault:
    """:class:`~langgraph_s3.core.ports.KeyVaultPort` on one KMS key (an id, an ARN or
    an alias)."""

    def __init__(self, clients: ClientFactory, key_id: str) -> None:
        self.clients = clients
        self.key_id = key_id

    async def new_data_key(self, context: Mapping[str, str]) -> tuple[bytes, bytes]:
        """One ``GenerateDataKey`` (AES-256): the key and its ``CiphertextBlob``."""
        resp: dict[str, Any] = await door.call(
            self.clients,
            "kms",
            "generate_data_key",
            KeyId=self.key_id,
            KeySpec="AES_256",
            EncryptionContext=dict(context),
        )
        return bytes(resp["Plaintext"]), bytes(resp["CiphertextBlob"])

    async def unwrap(self, wrapped: bytes, context: Mapping[str, str]) -> bytes:
        """One ``Decrypt``, naming the key (KMS refuses a blob another key made)."""
        resp: dict[str, Any] = await door.call(
            self.clients,
            "kms",
            "decrypt",
            KeyId=self.key_id,
            CiphertextBlob=wrapped,
            EncryptionContext=dict(context),
        )
        return bytes(resp["Plaintext"])
