"""The strict test server's KMS rule: a disabled key, or one pending deletion, refuses
to make or unwrap data keys (moto serves them anyway), and a blob KMS did not make is
``InvalidCiphertextException`` (moto answers AccessDenied, with no message, when the
blob names no key of its)."""

from __future__ import annotations

import json
from typing import Any

from langgraph_s3.testing.wsgi import Signed, capture, moto_account, send, take_body

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
    status, headers, body = capture(app, environ)
    if (
        operation == "Decrypt"
        and status.startswith("400")
        and b"AccessDeniedException" in body
        and b"not authorized" not in body  # an IAM policy's denial stays one
    ):  # moto's answer to a blob that names no key of its: KMS's is this
        return _error(start_response, "InvalidCiphertextException", "")
    return send(start_response, status, headers, body)
