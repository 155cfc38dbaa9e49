"""The key vault contract: the same assertions on ``KmsKeyVault`` (moto's KMS) and on
``MemoryKeyVault``: data keys made and unwrapped, bound to their context, refused once
the key is disabled, every refusal our typed error."""

from __future__ import annotations

import pytest
from unit_helpers import Backend

from langgraph_s3.core.subject_keys import key_context
from langgraph_s3.errors import KeyUnavailableError

pytestmark = pytest.mark.unit

CONTEXT = key_context("a" * 32, b"\x01" * 16)


async def test_a_data_key_unwraps_to_itself_under_its_context(backend: Backend) -> None:
    vault, _ = await backend.vault()
    key, wrapped = await vault.new_data_key(CONTEXT)
    again, _ = await vault.new_data_key(CONTEXT)
    assert len(key) == 32 and key != again and wrapped != key and key not in wrapped
    assert await vault.unwrap(wrapped, dict(CONTEXT)) == key


async def test_another_context_or_a_changed_blob_is_refused(backend: Backend) -> None:
    vault, _ = await backend.vault()
    _, wrapped = await vault.new_data_key(CONTEXT)
    other = key_context("b" * 32, b"\x01" * 16)  # another subject's
    for blob, context in (
        (wrapped, other),
        (wrapped, {}),
        (wrapped[:-1] + bytes([wrapped[-1] ^ 1]), CONTEXT),
    ):
        with pytest.raises(KeyUnavailableError):
            await vault.unwrap(blob, context)


async def test_a_disabled_key_makes_and_unwraps_nothing(backend: Backend) -> None:
    vault, disable = await backend.vault()
    _, wrapped = await vault.new_data_key(CONTEXT)
    await disable()
    with pytest.raises(KeyUnavailableError, match=r"DisabledException|disabled"):
        await vault.unwrap(wrapped, CONTEXT)
    with pytest.raises(KeyUnavailableError):
        await vault.new_data_key(CONTEXT)
