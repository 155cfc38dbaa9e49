"""The one door every AWS request goes through.

* A deadline (``Limits.request_timeout``) bounds the request, botocore's retries
  and the reading of the body together: a stalled endpoint fails a call in
  seconds, not botocore's ~5 minutes.
* Bodies are read here, in full; a truncated body (of an answer or of an
  error) is requested again, like any other transient fault.
* Every failure leaves as our own error, chosen from :data:`BY_CODE` and
  :data:`BY_TYPE`, naming the action, the resource and the endpoint (never a
  secret), with the AWS exception chained as ``__cause__``. Expected outcomes
  come out typed too (:class:`NotFoundError`, :class:`ConditionFailedError`),
  so callers branch on our types, never on botocore's.
"""

from __future__ import annotations

import asyncio
import io
import re
from typing import Any, cast

from langgraph_s3.aws import hot
from langgraph_s3.aws.clients import ClientFactory, abandon_attempt, redact, single_attempt
from langgraph_s3.core.retry import backoff
from langgraph_s3.core.tasks import permit
from langgraph_s3.errors import (
    AccessDeniedError,
    ClosedError,
    ConditionFailedError,
    ConfigurationError,
    EndpointTimeoutError,
    EndpointUnreachableError,
    KeyUnavailableError,
    MissingResourceError,
    NotFoundError,
    RequestConflictError,
    S3PersistenceError,
    ServiceError,
)

_THROTTLED = (
    "after {attempts}, AWS still throttled or failed it: retry later, raise "
    "max_attempts, or spread the load"
)
_DENIED = (
    "check the credentials in the AWS environment and that the IAM policy (the terraform "
    "module's `policy_json`) allows it"
)
_REJECTED = "AWS rejected the request as invalid"
_SCAN_DENIED = (
    "a Scan reads every deployment's items in the table, so an agent's policy limited to "
    "its deployment's partition keys (the terraform module's) leaves it out: listing every "
    "thread (list(None), list_threads), the TTL sweep, setup()'s backfills and "
    "delete_for_runs before setup() marked the run index complete need a role that may "
    "Scan the table, an operator's or the archiver's "
    "(langgraph_s3.ops.deploy.iam.WHOLE_TABLE_ACTIONS)"
)

# error code (or HTTP status) -> (our error type, what to do); the first match wins
BY_CODE: dict[str, tuple[type[S3PersistenceError], str]] = {
    **dict.fromkeys(("NoSuchKey", "404", "NotFound"), (NotFoundError, "")),
    **dict.fromkeys(
        ("PreconditionFailed", "412", "ConditionalCheckFailedException"),
        (ConditionFailedError, "a conditional write lost to another writer"),
    ),
    "ConditionalRequestConflict": (
        RequestConflictError,
        "another conditional write of the key was in progress",
    ),
    "NoSuchBucket": (MissingResourceError, "bucket"),
    **dict.fromkeys(
        (
            "DisabledException",
            "KMSInvalidStateException",
            "NotFoundException",
            "KeyUnavailableException",
            "InvalidCiphertextException",
            "IncorrectKeyException",
            "InvalidKeyUsageException",
        ),
        (
            KeyUnavailableError,
            "the KMS key that wraps subjects' data keys is disabled, pending deletion or "
            "missing, or this wrapped key was not made by it for this subject: check the "
            "key's state (aws kms describe-key) and the deployment's subjects key",
        ),
    ),
    "ResourceNotFoundException": (MissingResourceError, "manifest table"),
    **dict.fromkeys(
        (
            "AccessDenied",
            "AccessDeniedException",
            "403",
            "Forbidden",
            "AllAccessDisabled",
            "InvalidAccessKeyId",
            "SignatureDoesNotMatch",
            "UnrecognizedClientException",
            "InvalidSignatureException",
            "InvalidClientTokenId",
            "ExpiredToken",
            "ExpiredTokenException",
            "InvalidToken",
            "MissingAuthenticationToken",
        ),
        (AccessDeniedError, _DENIED),
    ),
    **dict.fromkeys(
        (
            "SlowDown",
            "Throttling",
            "ThrottlingException",
            "ProvisionedThroughputExceededException",
            "RequestLimitExceeded",
            "TooManyRequestsException",
            "InternalError",
            "InternalServerError",
            "ServiceUnavailable",
            "500",
            "502",
            "503",
            "504",
        ),
        (ServiceError, _THROTTLED),
    ),
}


def _by_type() -> list[tuple[tuple[type[BaseException], ...], type[S3PersistenceError], str]]:
    """Exceptions raised before or instead of an AWS answer; most specific first."""
    from aiohttp import ClientConnectionError, ClientPayloadError
    from botocore import exceptions as bx

    return [
        (
            (bx.ReadTimeoutError,),
            EndpointTimeoutError,
            "no answer within read_timeout={read}s, {attempts}: check the endpoint, "
            "or raise read_timeout / request_timeout",
        ),
        (
            (bx.ConnectTimeoutError,),
            EndpointTimeoutError,
            "no connection within connect_timeout={connect}s, {attempts}: check the "
            "endpoint and the network (VPC endpoint, NAT), or raise connect_timeout",
        ),
        (
            (ClientPayloadError, bx.IncompleteReadError, bx.ResponseStreamingError, _Truncated),
            EndpointUnreachableError,
            "the answer kept arriving truncated ({attempts}): check the network path",
        ),
        (
            (bx.NoCredentialsError, bx.PartialCredentialsError, bx.NoRegionError),
            ConfigurationError,
            "set AWS credentials and a region (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a "
            "profile or role; AWS_REGION or region=)",
        ),
        (
            (bx.ParamValidationError,),
            ConfigurationError,
            "botocore refused the request's parameters",
        ),
        (
            (
                bx.EndpointConnectionError,
                bx.ConnectionClosedError,
                bx.HTTPClientError,
                ClientConnectionError,
                ConnectionError,
                OSError,
            ),
            EndpointUnreachableError,
            "could not connect ({attempts}): check endpoint_url / AWS_ENDPOINT_URL, "
            "the region and the network",
        ),
    ]


_URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s\"'<>]+", re.IGNORECASE)


class _Truncated(Exception):
    """A body shorter than its Content-Length."""


def describe(service: str, params: dict[str, Any]) -> str:
    """What a request touched, for messages: ``s3://bucket/key`` or ``table 'name'``."""
    name = _resource_name(service, params)
    if service == "s3":
        return f"s3://{name}/{params.get('Key') or params.get('Prefix') or ''}"
    if service == "kms":
        return f"KMS key {name!r}" if name != service else service
    return f"table {name!r}" if name != service else service


def _resource_name(service: str, params: dict[str, Any]) -> str:
    """The bucket or table a request addressed."""
    if service == "s3":
        return str(params.get("Bucket", "?"))
    if service == "kms":
        return str(params.get("KeyId", "kms"))
    tables = (
        [params["TableName"]] if "TableName" in params else list(params.get("RequestItems") or {})
    )
    return str(tables[0]) if tables else service


def translate(
    exc: BaseException, clients: ClientFactory, service: str, op: str, params: dict[str, Any]
) -> S3PersistenceError:
    """Our error for ``exc`` (the one place AWS failures are mapped)."""
    if isinstance(exc, S3PersistenceError):
        return exc
    resource = describe(service, params)
    endpoint = clients.endpoint_for(service)
    where = f"{service}.{op} on {resource} via {endpoint}"
    limits = clients.limits
    attempts = 1 if single_attempt() else limits.max_attempts
    fill: dict[str, Any] = {
        "attempts": f"{attempts} attempt{'' if attempts == 1 else 's'}",
        "read": limits.read_timeout,
        "connect": limits.connect_timeout,
    }
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        err = response.get("Error") or {}
        code = str(err.get("Code") or "")
        status = int((response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0)
        message = str(err.get("Message") or "")
        kind, hint = BY_CODE.get(code) or BY_CODE.get(str(status)) or (ServiceError, _REJECTED)
        if kind is MissingResourceError:
            missing = MissingResourceError(hint, _resource_name(service, params))
            missing.code = code or str(status)
            return missing
        if kind is AccessDeniedError and (service, op) == ("dynamodb", "scan"):
            hint = _SCAN_DENIED  # before the TLS note: a policy, not the transport
        elif kind is AccessDeniedError and endpoint.startswith("http://"):
            hint += (
                "; the endpoint is plain http://, and the terraform module's bucket policy "
                "denies requests without TLS: use https, or apply the module with "
                "enforce_tls = false for a local emulator"
            )
        text = f"{where} failed: {code or status} {message}".rstrip()
        if code == "ValidationException" and "item size" in message.lower():
            hint = _ITEM_TOO_BIG  # the manifest item of one (thread, namespace)
        full = f"{text}: {hint.format(**fill)}" if hint else text
        if issubclass(kind, ServiceError):
            return ServiceError(full, code=code, status=status)
        out = kind(full)
        out.code = code or str(status)
        return out
    for types, kind, hint in _by_type():
        if isinstance(exc, types):
            return kind(f"{where} failed: {_said(exc)}: {hint.format(**fill)}")
    return ServiceError(f"{where} failed: {_said(exc)}")


_ITEM_TOO_BIG = (
    "the manifest item passed DynamoDB's 400 KB (a thread with thousands of branches "
    "merged by copy_thread or repointed by delete_for_runs keeps their heads inline "
    "until a writer spills them): prune the thread (aprune / langgraph-s3 prune) to "
    "drop its old branches, then retry"
)


_TX_CONFLICT = "TransactionConflictException"


def _code(exc: BaseException) -> str:
    """The AWS error code of a botocore ClientError ("" for anything else)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return ""
    return str((response.get("Error") or {}).get("Code") or "")


def cancellation_reasons(exc: BaseException) -> list[str] | None:
    """The per-part codes of a TransactionCanceledException our error was made from
    (``ConditionalCheckFailed``, ``TransactionConflict``, ``None`` ...), or None."""
    cause = exc.__cause__
    response = getattr(cause, "response", None)
    if cause is None or _code(cause) != "TransactionCanceledException":
        return None
    reasons = response.get("CancellationReasons") if isinstance(response, dict) else None
    return [str((r or {}).get("Code") or "None") for r in reasons or []]


def _said(exc: BaseException) -> str:
    """The exception's own words, with any URL credentials masked."""
    text = str(exc).strip()
    text = _URL.sub(lambda m: redact(m.group(0)), text)[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def call(
    clients: ClientFactory,
    service: str,
    op: str,
    *,
    read_body: bool = False,
    **params: Any,
) -> dict[str, Any]:
    """One AWS request with botocore's retries, under the deadline; our errors out.

    The choke point every request of the library goes through. It holds one of
    the current operation's permits (``tasks.permit``) while in flight; the
    deadline starts once the permit is held. With ``read_body`` the streaming
    ``Body`` is replaced by its bytes.
    """
    limits = clients.limits
    # asyncio.timeout(delay) fixes its moment when made: made unarmed and armed once
    # the permit is held, so time queued behind the operation's other requests never
    # counts against request_timeout (a bulk call's last request would time out)
    deadline = asyncio.timeout(None)
    client: Any = None
    try:
        async with permit(), deadline:
            deadline.reschedule(asyncio.get_running_loop().time() + limits.request_timeout)
            for attempt in range(limits.max_attempts):
                try:
                    client = await clients.client(service)
                    resp: dict[str, Any] = await hot.send(client, op, params)
                    if read_body:
                        resp["Body"] = await _read(resp)
                    return resp
                except Exception as exc:
                    # a truncated answer; or DynamoDB's TransactionConflict (a write to an
                    # item a transaction held: nothing was written), which botocore does
                    # not retry: sent again
                    again = isinstance(exc, _truncated_types()) or _code(exc) == _TX_CONFLICT
                    if not again or attempt + 1 >= limits.max_attempts or single_attempt():
                        raise
                    await backoff(attempt)  # the one backoff (core.retry): full jitter
            raise AssertionError("unreachable")  # pragma: no cover
    except TimeoutError as exc:
        if deadline.expired():
            where = f"{service}.{op} on {describe(service, params)}"
            raise EndpointTimeoutError(
                f"{where} via {clients.endpoint_for(service)} took longer "
                f"than request_timeout={limits.request_timeout}s: check the endpoint, or raise "
                "request_timeout / read_timeout"
            ) from exc
        raise translate(exc, clients, service, op, params) from exc
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        if client is not None and clients.was_closed(client):
            raise ClosedError() from exc  # not the endpoint's fault: say what happened
        raise translate(exc, clients, service, op, params) from exc
    finally:  # an attempt cut off mid-flight (a cancel, the deadline) is over too
        abandon_attempt("TimeoutError" if deadline.expired() else "CancelledError")


def _truncated_types() -> tuple[type[BaseException], ...]:
    from aiohttp import ClientPayloadError
    from botocore.exceptions import IncompleteReadError, ResponseStreamingError

    return (ClientPayloadError, IncompleteReadError, ResponseStreamingError, _Truncated)


class Upload(io.RawIOBase):
    """A large body to send, read from the caller's bytes in place. Given ``bytes``,
    botocore wraps them in a ``BytesIO`` whose buffer aiohttp then exports, which
    copies them whole (+100 MB for a 100 MB value); a file-like object of ours is read
    in chunks instead (and sought back to its start when botocore retries)."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self._view = memoryview(data)
        self._pos = 0

    def __len__(self) -> int:
        return len(self._view)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._view)}[whence]
        self._pos = max(0, min(base + offset, len(self._view)))
        return self._pos

    def readinto(self, buffer: Any) -> int:
        chunk = self._view[self._pos : self._pos + len(buffer)]
        n = len(chunk)
        memoryview(buffer).cast("B")[:n] = chunk
        self._pos += n
        return n


LARGE_BODY = 1024 * 1024
"""Bodies at least this large are read chunk by chunk into one buffer of their length:
``read()`` would hold every chunk and their join at once (twice the body)."""


async def _read(resp: dict[str, Any]) -> bytes:
    length = resp.get("ContentLength")
    stream = resp["Body"]
    # the body itself, not what entering it returns (aiobotocore 2 gives the aiohttp
    # response there, which has no iter_chunks)
    async with stream:
        if length is None or length < LARGE_BODY:
            body: bytes = await stream.read()
        else:
            buf = bytearray(length)
            at = 0
            async for chunk in stream.iter_chunks(LARGE_BODY):
                end = at + len(chunk)
                if end > length:
                    raise _Truncated(f"more than the {length} bytes announced")
                buf[at:end] = chunk
                at = end
            if at != length:
                raise _Truncated(f"{at} of {length} bytes")
            # bytes-like and never changed after this: a bytes() of it would copy it all
            return cast(bytes, buf)
    if length is not None and len(body) != length:
        raise _Truncated(f"{len(body)} of {length} bytes")
    return body
