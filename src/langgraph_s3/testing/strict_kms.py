"""The strict test server's KMS rule: a disabled key, or one pending deletion, refuses
to make or unwrap data keys (moto serves them anyway)."""

from __future__ import annotations

import json
from typing import Any

from langgraph_s3.testing.wsgi import Signed, moto_account, send, take_body

USES = frozenset(
    {
        "Encrypt",
        "Decrypt",
        "ReEncrypt",
        "GenerateDataKey",
        "GenerateDataKeyWithoutPlaintext",
        "GenerateDataKeyPair",
    }
)
"""The operations that use a key's material: refused unless the key is enabled."""


def _error(start_response: Any, code: str, message: str) -> list[bytes]:
    body = json.dumps({"__type": code, "message": message}).encode()
    return send(
        start_response, "400 Bad Request", [("Content-Type", "application/x-amz-json-1.1")], body
    )


def key_state(app: Any, environ: dict[str, Any], start_response: Any, signed: Signed) -> Any:
    """A use of a key answered as KMS answers it in the key's state."""
    operation = str(environ.get("HTTP_X_AMZ_TARGET") or "").rpartition(".")[2]
    if operation not in USES:
        return app(environ, start_response)
    try:
        request = json.loads(take_body(environ) or b"{}")
    except ValueError:
        return app(environ, start_response)
    named = request.get("KeyId") or request.get("DestinationKeyId")
    if isinstance(named, str):
        from moto.kms.models import kms_backends

        backend = kms_backends[moto_account(signed)][signed.region]
        try:
            key = backend.keys.get(backend.any_id_to_key_id(named))
        except Exception:  # an alias or ARN moto cannot place: its own answer
            key = None
        state = getattr(key, "key_state", "Enabled")
        if key is not None and state == "Disabled":
            return _error(start_response, "DisabledException", f"{key.arn} is disabled.")
        if key is not None and state == "PendingDeletion":
            return _error(
                start_response, "KMSInvalidStateException", f"{key.arn} is pending deletion."
            )
    return app(environ, start_response)
