"""The strict test server's rules: where moto answers otherwise than AWS, the answer AWS
gives (keys over 1,024 bytes, 409 ConditionalRequestConflict, 204 for a conditional DELETE
of a missing key, SSE-KMS ETags that are no MD5, DynamoDB's 400 KB on every update,
lifecycle rules, KMS keys that are disabled) and stores that ignore conditions,
emulated."""

from __future__ import annotations

import hashlib
import html
import re
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, unquote, unquote_to_bytes
from xml.etree import ElementTree
from xml.sax.saxutils import escape as xml_escape

from langgraph_s3.testing.strict_dynamodb import item_size_limit
from langgraph_s3.testing.strict_kms import key_state
from langgraph_s3.testing.wsgi import (
    capture,
    moto_account,
    put_body,
    s3_path,
    send,
    signed_by,
    take_body,
    text_of,
)

MAX_KEY_BYTES = 1024
"""S3's limit on an object key: 1,024 bytes of UTF-8."""


_KMS = ("aws:kms", "aws:kms:dsse")


_NO_ETAG = '"strict-mode-no-such-etag"'
"""What a condition on an SSE-KMS object becomes when it names none of its ETags."""


_S3_XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"


_CONTENTS = re.compile(rb"<Contents>(.*?)</Contents>", re.S)


_TAG_TEXT = {
    name: re.compile(rb"<%s>(.*?)</%s>" % (name, name), re.S) for name in (b"Key", b"ETag")
}


IGNORABLE = {
    "put": ("PUT", ("HTTP_IF_NONE_MATCH", "HTTP_IF_MATCH")),
    "put-if-match": ("PUT", ("HTTP_IF_MATCH",)),
    "delete": ("DELETE", ("HTTP_IF_MATCH",)),
}
"""What ``moto_server(ignore_conditions=...)`` can make the server ignore: the method
and the condition headers dropped."""


@dataclass
class ConflictPlan:
    """Conditional writes armed to answer 409 (:meth:`MotoServer.conflict_next`)."""

    match: str
    """A substring of ``bucket/key``: the writes of matching keys answer 409."""
    left: int
    """How many more will."""
    answered: int = 0
    """How many did."""


class Strict:
    """Strict mode's state: the conditional writes in flight, and the armed 409s."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight: set[str] = set()
        self.plans: list[ConflictPlan] = []

    def admit(self, name: str) -> bool:
        """A conditional write of ``name`` (``bucket/key``) arrived: False when it is to
        answer 409 (armed, or another one of that key is in flight), else it is in flight."""
        with self.lock:
            for plan in self.plans:
                if plan.left > 0 and plan.match in name:
                    plan.left -= 1
                    plan.answered += 1
                    return False
            if name in self.in_flight:
                return False
            self.in_flight.add(name)
            return True

    def done(self, name: str) -> None:
        with self.lock:
            self.in_flight.discard(name)


def _s3_error(
    start_response: Any, environ: dict[str, Any], status: str, code: str, message: str, **extra: Any
) -> list[bytes]:
    """An S3 error answer, as AWS writes it (``<Error><Code>...``)."""
    request_id = secrets.token_hex(8).upper()
    fields = "".join(f"<{k}>{xml_escape(str(v))}</{k}>" for k, v in extra.items())
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{xml_escape(message)}</Message>{fields}"
        f"<RequestId>{request_id}</RequestId><HostId>strict-moto</HostId></Error>"
    ).encode()
    if environ.get("REQUEST_METHOD") == "HEAD":
        body = b""
    start_response(
        status,
        [
            ("Content-Type", "application/xml"),
            ("Content-Length", str(len(body))),
            ("x-amz-request-id", request_id),
        ],
    )
    return [body]


def _key_too_long(start_response: Any, environ: dict[str, Any], size: int) -> list[bytes]:
    return _s3_error(
        start_response,
        environ,
        "400 Bad Request",
        "KeyTooLongError",
        "Your key is too long",
        Size=size,
        MaxSizeAllowed=MAX_KEY_BYTES,
    )


def kms_etag(etag: str) -> str:
    """The ETag strict mode shows for an SSE-KMS object: like AWS's, not the MD5 of the
    body; a function of moto's (the MD5), so the same object always shows the same."""
    real = etag.strip().strip('"')
    return '"' + hashlib.md5(f"sse-kms/{real}".encode(), usedforsecurity=False).hexdigest() + '"'


def _moto_object(account: str, bucket: str, key: str) -> Any:
    """moto's current version of an object (None when there is none)."""
    from moto.s3.models import s3_backends

    try:
        found = s3_backends[account]["aws"].buckets.get(bucket)
        return None if found is None else found.keys.get(key)
    except Exception:  # a moto internal changed: strict mode then sees no object
        return None


def _is_kms(obj: Any) -> bool:
    return getattr(obj, "encryption", None) in _KMS


def _condition(value: str, obj: Any) -> str:
    """A condition's ETag as moto must see it: an SSE-KMS object shows ``kms_etag``, so
    that one stands for moto's, and any other (its MD5 included) matches nothing."""
    if not _is_kms(obj) or value.strip() == "*":
        return value
    shown = kms_etag(str(obj.etag)).strip('"')
    return str(obj.etag) if value.strip().strip('"') == shown else _NO_ETAG


def _copy_conditions(
    environ: dict[str, Any], start_response: Any, account: str, source: str
) -> list[bytes] | None:
    """A CopyObject's conditions on its source: the ETags given as moto must see them
    (SSE-KMS), and x-amz-copy-source-if-match, which moto ignores, answered as S3 does
    (412) when the source is there and is another version; None: let moto answer."""
    src_bucket, _, src_key = unquote(source.partition("?")[0].lstrip("/")).partition("/")
    obj = _moto_object(account, src_bucket, src_key)
    for header in ("HTTP_X_AMZ_COPY_SOURCE_IF_MATCH", "HTTP_X_AMZ_COPY_SOURCE_IF_NONE_MATCH"):
        if header in environ:
            environ[header] = _condition(str(environ[header]), obj)
    wanted = environ.get("HTTP_X_AMZ_COPY_SOURCE_IF_MATCH")
    if wanted is None or obj is None or _matches(str(wanted), obj):
        return None
    return _s3_error(
        start_response,
        environ,
        "412 Precondition Failed",
        "PreconditionFailed",
        "At least one of the pre-conditions you specified did not hold",
        Condition="x-amz-copy-source-If-Match",
    )


def _matches(wanted: str, obj: Any) -> bool:
    """Whether an If-Match list (``*`` or quoted ETags, comma separated; already put
    through :func:`_condition`) names ``obj``'s ETag."""
    etag = str(obj.etag).strip('"')
    return any(w.strip() == "*" or w.strip().strip('"') == etag for w in wanted.split(","))


def _kms_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Response headers with the ETag of an SSE-KMS object (its headers say so) shown
    as ``kms_etag``."""
    kms = any(k.lower() == "x-amz-server-side-encryption" and v in _KMS for k, v in headers)
    if not kms:
        return headers
    return [(k, kms_etag(v) if k.lower() == "etag" else v) for k, v in headers]


def _shown_etag(raw: bytes) -> bytes:
    """An XML ``<ETag>`` text, shown as ``kms_etag`` (escaped as it was)."""
    etag = kms_etag(html.unescape(text_of(raw)))
    return (xml_escape(etag, {'"': "&quot;"}) if b"&quot;" in raw else etag).encode()


def _kms_listing(body: bytes, account: str, bucket: str) -> bytes:
    """A ListObjects(V2) answer with each SSE-KMS object's ``<ETag>`` as ``kms_etag``."""
    url_encoded = b"<EncodingType>url</EncodingType>" in body

    def one(match: re.Match[bytes]) -> bytes:
        block = match.group(0)
        key_m, etag_m = _TAG_TEXT[b"Key"].search(block), _TAG_TEXT[b"ETag"].search(block)
        if key_m is None or etag_m is None:
            return block
        key = html.unescape(text_of(key_m.group(1)))
        if _is_kms(_moto_object(account, bucket, unquote(key) if url_encoded else key)):
            start, end = etag_m.span(1)
            return block[:start] + _shown_etag(etag_m.group(1)) + block[end:]
        return block

    return _CONTENTS.sub(one, body)


def strict_front(app: Any, strict: Strict) -> Any:
    """Strict mode, in front of ``_atomic_writes``: what AWS refuses before looking at
    any object (keys over 1,024 bytes, in a path, a copy source or a DeleteObjects
    body), and 409 ConditionalRequestConflict for a conditional write or delete of a
    key while another is in flight (tracked here, before the lock that serializes them)
    or armed by :meth:`MotoServer.conflict_next`."""

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        if str(environ.get("PATH_INFO", "")).startswith("/moto-api"):
            return app(environ, start_response)
        signed = signed_by(environ)
        where = s3_path(environ) if signed is not None and signed.service == "s3" else None
        if where is None:
            return app(environ, start_response)
        bucket, key = where
        method = str(environ.get("REQUEST_METHOD"))
        if _signed_too_long_ago(environ):
            return _s3_error(
                start_response,
                environ,
                "403 Forbidden",
                "RequestTimeTooSkewed",
                "The difference between the request time and the current time is too large.",
                MaxAllowedSkewMilliseconds=900000,
            )
        if len(key) > MAX_KEY_BYTES:
            return _key_too_long(start_response, environ, len(key))
        source = str(environ.get("HTTP_X_AMZ_COPY_SOURCE") or "")
        if key and source:
            source_key = unquote_to_bytes(source.partition("?")[0].lstrip("/")).partition(b"/")[2]
            if len(source_key) > MAX_KEY_BYTES:
                return _key_too_long(start_response, environ, len(source_key))
        if (
            not key
            and method == "POST"
            and "delete" in parse_qs(str(environ.get("QUERY_STRING") or ""), keep_blank_values=True)
        ):
            return _delete_objects(app, environ, start_response)
        conditional = key and (
            (method == "PUT" and ("HTTP_IF_MATCH" in environ or "HTTP_IF_NONE_MATCH" in environ))
            or (method == "DELETE" and "HTTP_IF_MATCH" in environ)
        )
        if not conditional:
            return app(environ, start_response)
        name = f"{bucket}/{text_of(key)}"
        if not strict.admit(name):
            return _s3_error(
                start_response,
                environ,
                "409 Conflict",
                "ConditionalRequestConflict",
                "A conflicting conditional operation is currently in progress against this "
                "resource. Please try again.",
                Key=text_of(key),
                BucketName=bucket,
            )
        try:
            return list(app(environ, start_response))
        finally:
            strict.done(name)

    return wrapped


def _signed_too_long_ago(environ: dict[str, Any]) -> bool:
    """Whether a request's ``X-Amz-Date`` is more than 15 minutes from now: S3 refuses
    it (what fences a writer frozen with a request signed long ago)."""
    stamp = str(environ.get("HTTP_X_AMZ_DATE") or "")
    try:
        signed = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return False
    return abs(time.time() - signed) > 900


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _delete_objects(app: Any, environ: dict[str, Any], start_response: Any) -> Any:
    """DeleteObjects: a key over 1,024 bytes comes back in an ``<Error>`` of its own
    (AWS deletes the others); moto sees the rest."""
    body = take_body(environ)
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        return app(environ, start_response)  # moto answers MalformedXML
    kept: list[ElementTree.Element] = []
    refused: list[str] = []
    for element in root:
        key = element.findtext(f"{{{_S3_XMLNS}}}Key") or element.findtext("Key") or ""
        if _local(element.tag) == "Object" and len(key.encode("utf-8", "replace")) > MAX_KEY_BYTES:
            refused.append(key)
        else:
            kept.append(element)
    if not refused:
        return app(environ, start_response)
    errors = "".join(
        f"<Error><Key>{xml_escape(k)}</Key><Code>KeyTooLongError</Code>"
        "<Message>Your key is too long</Message></Error>"
        for k in refused
    ).encode()
    if not any(_local(e.tag) == "Object" for e in kept):  # moto would answer MalformedXML
        result = f'<?xml version="1.0" encoding="UTF-8"?>\n<DeleteResult xmlns="{_S3_XMLNS}">'
        return send(
            start_response,
            "200 OK",
            [("Content-Type", "application/xml")],
            result.encode() + errors + b"</DeleteResult>",
        )
    parts = []
    for element in kept:
        name = _local(element.tag)
        inner = "".join(
            f"<{_local(c.tag)}>{xml_escape(c.text or '')}</{_local(c.tag)}>" for c in element
        )
        parts.append(f"<{name}>{inner or xml_escape(element.text or '')}</{name}>")
    put_body(environ, f'<Delete xmlns="{_S3_XMLNS}">{"".join(parts)}</Delete>'.encode())
    for header in [
        h for h in environ if h == "HTTP_CONTENT_MD5" or h.startswith("HTTP_X_AMZ_CHECKSUM")
    ]:
        del environ[header]  # they were the old body's
    status, headers, answer = capture(app, environ)
    if status.startswith("200") and b"</DeleteResult>" in answer:
        answer = answer.replace(b"</DeleteResult>", errors + b"</DeleteResult>")
    return send(start_response, status, headers, answer)


def strict_behind(app: Any) -> Any:
    """Strict mode, behind ``_atomic_writes`` (inside its lock for conditional writes and
    DynamoDB requests, so an object or item is read and written as one step): SSE-KMS
    ETags that are no MD5 (responses, listings, copies, conditions given them), 204 for
    a conditional DELETE of a missing key, and DynamoDB's 400 KB for the updates moto
    does not check (``ADD`` growing a set). Costs a dict lookup per S3 request, a parse
    of each listing and copy result, and a copy of each item an update touches."""

    minimum_sizes: dict[tuple[str, str], str] = {}
    """(account, bucket) -> the TransitionDefaultMinimumObjectSize its lifecycle
    configuration was last put with (moto keeps none and always answers the default)."""

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        if str(environ.get("PATH_INFO", "")).startswith("/moto-api"):
            if "reset" in str(environ.get("PATH_INFO", "")):
                minimum_sizes.clear()
            return app(environ, start_response)
        signed = signed_by(environ)
        if signed is not None and signed.service == "dynamodb":
            return item_size_limit(app, environ, start_response, signed)
        if signed is not None and signed.service == "kms":
            return key_state(app, environ, start_response, signed)
        where = s3_path(environ) if signed is not None and signed.service == "s3" else None
        if signed is None or where is None:
            return app(environ, start_response)
        account = moto_account(signed)
        bucket, raw_key = where
        key = text_of(raw_key)
        method = str(environ.get("REQUEST_METHOD"))
        if not key and "lifecycle" in str(environ.get("QUERY_STRING", "")).split("&"):
            return _lifecycle(app, environ, start_response, minimum_sizes, (account, bucket))
        if key:
            for header in ("HTTP_IF_MATCH", "HTTP_IF_NONE_MATCH"):
                if header in environ:
                    obj = _moto_object(account, bucket, key)
                    environ[header] = _condition(str(environ[header]), obj)
        source = str(environ.get("HTTP_X_AMZ_COPY_SOURCE") or "")
        if key and source:
            refused = _copy_conditions(environ, start_response, account, source)
            if refused is not None:
                return refused
        if key and method == "PUT" and source:  # CopyObject: its result names the ETag
            status, headers, body = capture(app, environ)
            if status.startswith("200") and _is_kms(_moto_object(account, bucket, key)):
                headers = [(k, kms_etag(v) if k.lower() == "etag" else v) for k, v in headers]
                found = _TAG_TEXT[b"ETag"].search(body)
                if found is not None:
                    start, end = found.span(1)
                    body = body[:start] + _shown_etag(found.group(1)) + body[end:]
            return send(start_response, status, headers, body)
        if key and method == "DELETE" and "HTTP_IF_MATCH" in environ:
            status, headers, body = capture(app, environ)
            if status.startswith("404") and b"<Code>NoSuchKey</Code>" in body:
                return send(start_response, "204 No Content", [], b"")  # AWS: nothing to match
            return send(start_response, status, headers, body)
        if not key and method == "GET":
            status, headers, body = capture(app, environ)
            if status.startswith("200") and b"<ListBucketResult" in body[:400]:
                body = _kms_listing(body, account, bucket)
            return send(start_response, status, headers, body)
        if not key:
            return app(environ, start_response)

        def kms_start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            return start_response(status, _kms_headers(headers), exc_info)

        return app(environ, kms_start)  # GET, HEAD, PUT: the body streams through

    return wrapped


_MINIMUM_SIZE = "x-amz-transition-default-minimum-object-size"


def _lifecycle(
    app: Any,
    environ: dict[str, Any],
    start_response: Any,
    sizes: dict[tuple[str, str], str],
    bucket: tuple[str, str],
) -> Any:
    """A bucket's lifecycle configuration keeps the TransitionDefaultMinimumObjectSize
    it was put with, as S3 does: a PUT without one resets it to the default."""
    method = str(environ.get("REQUEST_METHOD"))
    status, headers, body = capture(app, environ)
    if method == "PUT" and status.startswith("200"):
        given = environ.get("HTTP_" + _MINIMUM_SIZE.upper().replace("-", "_"))
        if given:
            sizes[bucket] = str(given)
        else:
            sizes.pop(bucket, None)
    elif method == "DELETE":
        sizes.pop(bucket, None)
    elif method == "GET" and status.startswith("200") and bucket in sizes:
        headers = [(k, v) for k, v in headers if k.lower() != _MINIMUM_SIZE]
        headers.append((_MINIMUM_SIZE, sizes[bucket]))
    return send(start_response, status, headers, body)


def ignoring_conditions(app: Any, ignore: frozenset[str]) -> Any:
    """A store that ignores conditions (``moto_server(ignore_conditions=...)``): the
    condition headers of object PUTs or DELETEs are dropped before anything else sees
    them, as Google Cloud Storage's XML API does for PUTs and MinIO for DELETEs."""
    dropped: dict[str, set[str]] = {}
    for name in ignore:
        method, headers = IGNORABLE[name]
        dropped.setdefault(method, set()).update(headers)

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        headers = dropped.get(str(environ.get("REQUEST_METHOD")), set())
        signed = signed_by(environ) if headers else None
        where = s3_path(environ) if signed is not None and signed.service == "s3" else None
        if where is not None and where[1]:
            for header in headers:
                environ.pop(header, None)
        return app(environ, start_response)

    return wrapped
