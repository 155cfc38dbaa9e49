"""A moto server on loopback for offline runs (the demo, tests, benchmarks).

Needs ``moto[server]`` (the ``demo`` or ``testing`` extra); imports it only
when a server is started. :class:`TcpRelay` (standard library only) sits in
front of any endpoint and counts the TCP connections clients open through it.

On loopback a request takes a millisecond or two, so how many of them a call
makes one after another hardly shows in its time. ``moto_server(latency=...)``
adds a fixed delay per request (:data:`BENCH_LATENCY`: 20 ms per S3 request,
6 ms per DynamoDB request), and ``server.recording()`` logs when each request
arrived and when its answer left: :func:`critical_path` of that log is the
number of round trips the server saw, the figure
:attr:`~langgraph_s3.RequestStats.round_trips` counts on the client side.

The server is strict by default (``moto_server(strict=True)``): where moto answers
otherwise than AWS, it answers as AWS does (keys over 1,024 bytes, 409
ConditionalRequestConflict, 204 for a conditional DELETE of a missing key, SSE-KMS
ETags that are no MD5, DynamoDB's 400 KB on every update); ``server.conflict_next()``
arms 409s for a test. ``ignore_conditions=`` emulates stores that ignore conditions.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import html
import io
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypedDict
from urllib.parse import parse_qs, unquote, unquote_to_bytes, urlparse
from xml.etree import ElementTree
from xml.sax.saxutils import escape as xml_escape

DUMMY_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


@dataclass(frozen=True)
class Latency:
    """Seconds our moto server waits before handling each request, per service.

    The wait happens in the request's own thread, before the request is
    handled and outside the lock that makes writes atomic (``_atomic_writes``),
    so requests in flight together wait together, as on a real network.
    """

    s3: float = 0.0
    dynamodb: float = 0.0

    def __post_init__(self) -> None:
        for name in ("s3", "dynamodb"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"latency {name}= must be a number of seconds >= 0, got {value!r}")

    @classmethod
    def of(cls, value: float | Latency | None) -> Latency:
        """``None`` is no latency; a number is the same latency for both services."""
        if value is None:
            return cls()
        if isinstance(value, Latency):
            return value
        return cls(s3=value, dynamodb=value)


BENCH_LATENCY = Latency(s3=0.020, dynamodb=0.006)
"""The benchmarks' standard: 20 ms per S3 request, 6 ms per DynamoDB request."""


@dataclass(frozen=True, slots=True)
class ServedRequest:
    """One request as our moto server saw it; times are ``time.perf_counter()`` seconds."""

    service: str
    """``"s3"`` or ``"dynamodb"``."""
    operation: str
    """The DynamoDB operation (``"GetItem"``), or the S3 request's HTTP method."""
    start: float
    """When it arrived (before the injected latency)."""
    end: float
    """When its answer had been sent."""
    received: int = 0
    """Bytes of its body (what the client uploaded)."""


def critical_path(requests: Iterable[ServedRequest]) -> int:
    """The longest chain of requests, each starting after the previous one ended.

    That is the number of round trips the requests cost, at one latency per
    request: requests in flight together count once.
    """
    by_start = sorted(requests, key=lambda r: r.start)
    by_end = sorted(range(len(by_start)), key=lambda i: by_start[i].end)
    depth = [0] * len(by_start)
    ended = longest = j = 0  # ended: the greatest depth among the requests ended so far
    for i, request in enumerate(by_start):
        while j < len(by_end) and by_start[by_end[j]].end < request.start:
            ended = max(ended, depth[by_end[j]])  # started earlier: its depth is known
            j += 1
        depth[i] = ended + 1
        longest = max(longest, depth[i])
    return longest


class _Control:
    """What a running server's requests wait for, and the logs they go to."""

    def __init__(self, latency: Latency, strict: _Strict | None = None) -> None:
        self.latency = latency
        self.strict = strict
        """Strict mode's state; None when the server is not strict."""
        self.lock = threading.Condition()
        self.logs: list[list[ServedRequest]] = []
        self.unlogged = 0
        """Requests started while a log was open and not logged yet."""

    def started(self) -> bool:
        """A request arrived: whether it is to be logged."""
        with self.lock:
            if self.logs:
                self.unlogged += 1
            return bool(self.logs)

    def record(self, request: ServedRequest) -> None:
        with self.lock:
            for log in self.logs:
                log.append(request)
            self.unlogged -= 1
            self.lock.notify_all()

    def settle(self, timeout: float) -> None:
        """Wait until the requests started so far are logged: the server logs a
        request just after its answer's last byte, when the client may already
        have it."""
        with self.lock:
            self.lock.wait_for(lambda: self.unlogged <= 0, timeout)


@dataclass(frozen=True)
class MotoServer:
    url: str
    """``http://127.0.0.1:PORT``: pass as ``endpoint_url=``."""
    owned: bool
    """True when we started it (and may reset it)."""
    _control: _Control | None = field(default=None, repr=False, compare=False)

    def reset(self) -> None:
        """Wipe every bucket and table (moto only), and disarm ``conflict_next``."""
        if self.owned:
            req = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")
            with urllib.request.urlopen(req, timeout=10):
                pass
        strict = self._control.strict if self._control is not None else None
        if strict is not None:
            with strict.lock:
                strict.plans.clear()

    @property
    def strict(self) -> bool:
        """Whether it answers as AWS does where moto alone would not (see
        :func:`moto_server`); an outside endpoint is what it is: False."""
        return self._control is not None and self._control.strict is not None

    def conflict_next(self, match: str, n: int = 1) -> ConflictPlan:
        """Make the next ``n`` conditional writes (PUT with ``If-None-Match`` or
        ``If-Match``, DELETE with ``If-Match``) of keys whose ``bucket/key`` contains
        ``match`` answer 409 ConditionalRequestConflict, as S3 does while a conflicting
        write is in progress. The plan counts what it answered (``answered``)."""
        control = self._require_control()
        if control.strict is None:
            raise RuntimeError(f"{self.url} is not strict: start it with moto_server(strict=True)")
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n!r}")
        plan = ConflictPlan(match, n)
        with control.strict.lock:
            control.strict.plans.append(plan)
        return plan

    @property
    def latency(self) -> Latency:
        """The latency injected into each request now (none for an outside endpoint)."""
        return self._control.latency if self._control is not None else Latency()

    def _require_control(self) -> _Control:
        if self._control is None:
            raise RuntimeError(
                f"{self.url} is not a moto server started here: it has no latency to set "
                "and no request log"
            )
        return self._control

    def set_latency(self, latency: float | Latency | None) -> Latency:
        """Inject ``latency`` from the next request on; returns the previous one."""
        control = self._require_control()
        previous, control.latency = control.latency, Latency.of(latency)
        return previous

    @contextmanager
    def delayed(self, latency: float | Latency | None) -> Iterator[Latency]:
        """``with server.delayed(0.1):`` each request waits 0.1 s; restored after."""
        previous = self.set_latency(latency)
        try:
            yield self.latency
        finally:
            self.set_latency(previous)

    @contextmanager
    def recording(self) -> Iterator[list[ServedRequest]]:
        """``with server.recording() as log:`` every request answered inside the
        block is appended to ``log`` (in the order their answers left).
        ``critical_path(log)`` is the server's count of round trips."""
        control = self._require_control()
        log: list[ServedRequest] = []
        with control.lock:
            control.logs.append(log)
        try:
            yield log
        finally:
            control.settle(timeout=2.0)
            with control.lock:
                control.logs.remove(log)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def use_dummy_credentials() -> None:
    """Set dummy AWS credentials and region where none are configured."""
    for key, value in DUMMY_ENV.items():
        os.environ.setdefault(key, value)


def _atomic_writes(app: Any) -> Any:
    """moto checks a write's condition and then applies it without a lock, so two
    concurrent conditional writes can both pass, and a DynamoDB read can see an item
    half-made. S3 and DynamoDB allow neither: serializing conditional S3 writes, S3
    deletes and DynamoDB requests gives the tests the atomicity AWS guarantees (moto is bound by one
    interpreter lock anyway, so throughput barely changes)."""
    lock = threading.Lock()

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        method = environ.get("REQUEST_METHOD")
        serialize = (
            bool(environ.get("HTTP_X_AMZ_TARGET"))  # DynamoDB
            or method in ("POST", "DELETE")  # S3 deletes
            or "HTTP_IF_MATCH" in environ
            or "HTTP_IF_NONE_MATCH" in environ
        )
        if not serialize:
            return app(environ, start_response)
        with lock:
            return list(app(environ, start_response))

    return wrapped


class _Served:
    """A response body that logs its request once the server has it all to send.

    The end is stamped just before the last chunk goes out, not after: a server thread
    descheduled after writing it (a loaded machine) would otherwise stamp an end later
    than the start of the request the client sent on receiving it, and the server's
    critical path would miss a round trip. (werkzeug calls ``close()`` only after
    waiting up to 10 ms for stray request bytes: later still.)
    """

    def __init__(self, body: Iterable[bytes], done: Callable[[], None]) -> None:
        self.body, self.done = body, done
        self.logged = False

    def __iter__(self) -> Iterator[bytes]:
        held: bytes | None = None
        for chunk in self.body:
            if held is not None:
                yield held
            held = chunk
        self._log()
        if held is not None:
            yield held

    def _log(self) -> None:
        if not self.logged:
            self.logged = True
            self.done()

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            self._log()  # a body not sent in full ends here


def _latency_and_log(app: Any, control: _Control) -> Any:
    """Wait the injected latency before each request (in its own thread, outside
    ``_atomic_writes``'s lock) and log it to any recording in progress."""

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        if str(environ.get("PATH_INFO", "")).startswith("/moto-api"):
            return app(environ, start_response)  # reset and the like: not a request of ours
        start = time.perf_counter()
        logged = control.started()
        target = str(environ.get("HTTP_X_AMZ_TARGET") or "")
        latency = control.latency
        wait = latency.dynamodb if target else latency.s3
        if wait > 0:
            time.sleep(wait)
        if not logged:
            return app(environ, start_response)
        service, operation = (
            ("dynamodb", target.rpartition(".")[2])
            if target
            else ("s3", str(environ.get("REQUEST_METHOD")))
        )

        try:
            size = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            size = 0

        def done() -> None:
            control.record(ServedRequest(service, operation, start, time.perf_counter(), size))

        try:
            body = app(environ, start_response)
        except BaseException:
            done()
            raise
        return _Served(body, done)

    return wrapped


# ------------------------------------------------------------------ strict mode
MAX_KEY_BYTES = 1024
"""S3's limit on an object key: 1,024 bytes of UTF-8."""
MAX_ITEM_BYTES = 400 * 1024
"""DynamoDB's limit on an item: 400 KB, attribute names included."""
_KMS = ("aws:kms", "aws:kms:dsse")
_NO_ETAG = '"strict-mode-no-such-etag"'
"""What a condition on an SSE-KMS object becomes when it names none of its ETags."""
_S3_XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"
_CREDENTIAL = re.compile(r"Credential=([^/\s,&]+)/\d{8}/([^/\s,&]+)/([^/\s,&]+)/aws4_request")
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


class _Strict:
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


@dataclass(frozen=True, slots=True)
class _Signed:
    """Who signed a request, for which region and service (SigV4's credential scope)."""

    access_key: str
    region: str
    service: str


def _signed(environ: dict[str, Any]) -> _Signed | None:
    """The credential scope of a SigV4 request (header or presigned URL); None unsigned."""
    found = _CREDENTIAL.search(str(environ.get("HTTP_AUTHORIZATION") or ""))
    if found is None:
        found = _CREDENTIAL.search(unquote(str(environ.get("QUERY_STRING") or "")))
    return None if found is None else _Signed(*found.groups())


def _s3_path(environ: dict[str, Any]) -> tuple[str, bytes] | None:
    """Bucket and key (its UTF-8 bytes; empty for the bucket itself) of a path-style
    S3 request. PATH_INFO is percent-decoded and each byte is one latin-1 character
    (PEP 3333): encoding it back as latin-1 gives the key's UTF-8 bytes."""
    path = str(environ.get("PATH_INFO") or "").encode("latin-1", "replace")
    bucket, _, key = path[1:].partition(b"/")
    if not bucket:
        return None
    return bucket.decode("utf-8", "replace"), key


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _s3_error(
    start_response: Any, environ: dict[str, Any], status: str, code: str, message: str, **extra: Any
) -> list[bytes]:
    """An S3 error answer, as AWS writes it (``<Error><Code>...``)."""
    request_id = uuid.uuid4().hex[:16].upper()
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


def _take_body(environ: dict[str, Any]) -> bytes:
    """Read the request's body, and put it back for the app behind to read."""
    stream = environ["wsgi.input"]
    length = environ.get("CONTENT_LENGTH")
    if length:
        data = bytes(stream.read(int(length)))
    elif environ.get("wsgi.input_terminated"):
        data = bytes(stream.read())
    else:
        data = b""
    _put_body(environ, data)
    return data


def _put_body(environ: dict[str, Any], data: bytes) -> None:
    environ["wsgi.input"] = io.BytesIO(data)
    environ["CONTENT_LENGTH"] = str(len(data))


def _capture(app: Any, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    """Run the app to the end of its answer: status, headers, body."""
    got: list[Any] = []
    chunks: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        got[:] = [status, list(headers)]
        return chunks.append

    body = app(environ, start_response)
    try:
        chunks.extend(body)
    finally:
        close = getattr(body, "close", None)
        if close is not None:
            close()
    return got[0], got[1], b"".join(chunks)


def _send(
    start_response: Any, status: str, headers: list[tuple[str, str]], body: bytes
) -> list[bytes]:
    kept = [(k, v) for k, v in headers if k.lower() != "content-length"]
    start_response(status, [*kept, ("Content-Length", str(len(body)))])
    return [body]


def kms_etag(etag: str) -> str:
    """The ETag strict mode shows for an SSE-KMS object: like AWS's, not the MD5 of the
    body; a function of moto's (the MD5), so the same object always shows the same."""
    real = etag.strip().strip('"')
    return '"' + hashlib.md5(f"sse-kms/{real}".encode(), usedforsecurity=False).hexdigest() + '"'


def _moto_account(signed: _Signed) -> str:
    from moto.iam.models import get_account_id_from

    return str(get_account_id_from(signed.access_key))


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


def _kms_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Response headers with the ETag of an SSE-KMS object (its headers say so) shown
    as ``kms_etag``."""
    kms = any(k.lower() == "x-amz-server-side-encryption" and v in _KMS for k, v in headers)
    if not kms:
        return headers
    return [(k, kms_etag(v) if k.lower() == "etag" else v) for k, v in headers]


def _shown_etag(raw: bytes) -> bytes:
    """An XML ``<ETag>`` text, shown as ``kms_etag`` (escaped as it was)."""
    etag = kms_etag(html.unescape(_text(raw)))
    return (xml_escape(etag, {'"': "&quot;"}) if b"&quot;" in raw else etag).encode()


def _kms_listing(body: bytes, account: str, bucket: str) -> bytes:
    """A ListObjects(V2) answer with each SSE-KMS object's ``<ETag>`` as ``kms_etag``."""
    url_encoded = b"<EncodingType>url</EncodingType>" in body

    def one(match: re.Match[bytes]) -> bytes:
        block = match.group(0)
        key_m, etag_m = _TAG_TEXT[b"Key"].search(block), _TAG_TEXT[b"ETag"].search(block)
        if key_m is None or etag_m is None:
            return block
        key = html.unescape(_text(key_m.group(1)))
        if _is_kms(_moto_object(account, bucket, unquote(key) if url_encoded else key)):
            start, end = etag_m.span(1)
            return block[:start] + _shown_etag(etag_m.group(1)) + block[end:]
        return block

    return _CONTENTS.sub(one, body)


def _strict_front(app: Any, strict: _Strict) -> Any:
    """Strict mode, in front of ``_atomic_writes``: what AWS refuses before looking at
    any object (keys over 1,024 bytes, in a path, a copy source or a DeleteObjects
    body), and 409 ConditionalRequestConflict for a conditional write or delete of a
    key while another is in flight (tracked here, before the lock that serializes them)
    or armed by :meth:`MotoServer.conflict_next`."""

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        if str(environ.get("PATH_INFO", "")).startswith("/moto-api"):
            return app(environ, start_response)
        signed = _signed(environ)
        where = _s3_path(environ) if signed is not None and signed.service == "s3" else None
        if where is None:
            return app(environ, start_response)
        bucket, key = where
        method = str(environ.get("REQUEST_METHOD"))
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
        name = f"{bucket}/{_text(key)}"
        if not strict.admit(name):
            return _s3_error(
                start_response,
                environ,
                "409 Conflict",
                "ConditionalRequestConflict",
                "A conflicting conditional operation is currently in progress against this "
                "resource. Please try again.",
                Key=_text(key),
                BucketName=bucket,
            )
        try:
            return list(app(environ, start_response))
        finally:
            strict.done(name)

    return wrapped


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _delete_objects(app: Any, environ: dict[str, Any], start_response: Any) -> Any:
    """DeleteObjects: a key over 1,024 bytes comes back in an ``<Error>`` of its own
    (AWS deletes the others); moto sees the rest."""
    body = _take_body(environ)
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
        return _send(
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
    _put_body(environ, f'<Delete xmlns="{_S3_XMLNS}">{"".join(parts)}</Delete>'.encode())
    for header in [
        h for h in environ if h == "HTTP_CONTENT_MD5" or h.startswith("HTTP_X_AMZ_CHECKSUM")
    ]:
        del environ[header]  # they were the old body's
    status, headers, answer = _capture(app, environ)
    if status.startswith("200") and b"</DeleteResult>" in answer:
        answer = answer.replace(b"</DeleteResult>", errors + b"</DeleteResult>")
    return _send(start_response, status, headers, answer)


def _strict_behind(app: Any) -> Any:
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
        signed = _signed(environ)
        if signed is not None and signed.service == "dynamodb":
            return _item_size_limit(app, environ, start_response, signed)
        where = _s3_path(environ) if signed is not None and signed.service == "s3" else None
        if signed is None or where is None:
            return app(environ, start_response)
        account = _moto_account(signed)
        bucket, raw_key = where
        key = _text(raw_key)
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
            src_bucket, _, src_key = unquote(source.partition("?")[0].lstrip("/")).partition("/")
            for header in (
                "HTTP_X_AMZ_COPY_SOURCE_IF_MATCH",
                "HTTP_X_AMZ_COPY_SOURCE_IF_NONE_MATCH",
            ):
                if header in environ:
                    obj = _moto_object(account, src_bucket, src_key)
                    environ[header] = _condition(str(environ[header]), obj)
        if key and method == "PUT" and source:  # CopyObject: its result names the ETag
            status, headers, body = _capture(app, environ)
            if status.startswith("200") and _is_kms(_moto_object(account, bucket, key)):
                headers = [(k, kms_etag(v) if k.lower() == "etag" else v) for k, v in headers]
                found = _TAG_TEXT[b"ETag"].search(body)
                if found is not None:
                    start, end = found.span(1)
                    body = body[:start] + _shown_etag(found.group(1)) + body[end:]
            return _send(start_response, status, headers, body)
        if key and method == "DELETE" and "HTTP_IF_MATCH" in environ:
            status, headers, body = _capture(app, environ)
            if status.startswith("404") and b"<Code>NoSuchKey</Code>" in body:
                return _send(start_response, "204 No Content", [], b"")  # AWS: nothing to match
            return _send(start_response, status, headers, body)
        if not key and method == "GET":
            status, headers, body = _capture(app, environ)
            if status.startswith("200") and b"<ListBucketResult" in body[:400]:
                body = _kms_listing(body, account, bucket)
            return _send(start_response, status, headers, body)
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
    status, headers, body = _capture(app, environ)
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
    return _send(start_response, status, headers, body)


def _item_size_limit(
    app: Any, environ: dict[str, Any], start_response: Any, signed: _Signed
) -> Any:
    """UpdateItem and TransactWriteItems' updates: an item grown over 400 KB is put back
    as it was, and the request answers DynamoDB's ValidationException. (moto checks
    PutItem, BatchWriteItem, transactions' puts and SET itself, not ``ADD`` to a set.)
    A failed UpdateItem of a missing item leaves none (moto leaves its key behind)."""
    operation = str(environ.get("HTTP_X_AMZ_TARGET") or "").rpartition(".")[2]
    if operation not in ("UpdateItem", "TransactWriteItems"):
        return app(environ, start_response)
    try:
        request = json.loads(_take_body(environ) or b"{}")
        updates = (
            [request]
            if operation == "UpdateItem"
            else [t["Update"] for t in request.get("TransactItems", []) if "Update" in t]
        )
        touched = [_item_snapshot(signed, u["TableName"], u["Key"]) for u in updates]
    except Exception:  # malformed, or a table moto has not: moto answers
        return app(environ, start_response)
    status, headers, body = _capture(app, environ)
    if operation == "UpdateItem" and not status.startswith("200"):
        for t in touched:  # moto creates a missing item before a failing update of it
            t.restore()
    elif status.startswith("200") and any(t.grown() for t in touched):
        for t in touched:
            t.restore()
        error = {
            "__type": "com.amazonaws.dynamodb.v20120810#ValidationException",
            "message": "Item size to update has exceeded the maximum allowed size",
        }
        return _send(
            start_response,
            "400 Bad Request",
            [("Content-Type", "application/x-amz-json-1.0")],
            json.dumps(error).encode(),
        )
    return _send(start_response, status, headers, body)


class _ItemSnapshot:
    """An item as it was before an update (a deep copy), to put back."""

    def __init__(self, table: Any, key: dict[str, Any]) -> None:
        from moto.dynamodb.models.dynamo_type import DynamoType

        self.table = table
        self.hash = DynamoType(key[table.hash_key_attr])
        self.range = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
        item = table.get_item(self.hash, self.range)
        self.item = copy.deepcopy(item) if item is not None else None
        shard = getattr(table, "stream_shard", None)
        self.stream = len(shard.items) if shard is not None else 0

    def grown(self) -> bool:
        item = self.table.get_item(self.hash, self.range)
        return item is not None and int(item.size()) > MAX_ITEM_BYTES

    def restore(self) -> None:
        items = self.table.items
        if self.range is None:
            if self.item is None:
                items.pop(self.hash, None)
            else:
                items[self.hash] = self.item
        elif self.item is None:
            items[self.hash].pop(self.range, None)
        else:
            items[self.hash][self.range] = self.item
        shard = getattr(self.table, "stream_shard", None)
        if shard is not None:
            del shard.items[self.stream :]  # the stream never saw the update


def _item_snapshot(signed: _Signed, table_name: str, key: dict[str, Any]) -> _ItemSnapshot:
    from moto.dynamodb.models import dynamodb_backends

    table = dynamodb_backends[_moto_account(signed)][signed.region].get_table(table_name)
    return _ItemSnapshot(table, key)


def _ignoring(app: Any, ignore: frozenset[str]) -> Any:
    """A store that ignores conditions (``moto_server(ignore_conditions=...)``): the
    condition headers of object PUTs or DELETEs are dropped before anything else sees
    them, as Google Cloud Storage's XML API does for PUTs and MinIO for DELETEs."""
    dropped: dict[str, set[str]] = {}
    for name in ignore:
        method, headers = IGNORABLE[name]
        dropped.setdefault(method, set()).update(headers)

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        headers = dropped.get(str(environ.get("REQUEST_METHOD")), set())
        signed = _signed(environ) if headers else None
        where = _s3_path(environ) if signed is not None and signed.service == "s3" else None
        if where is not None and where[1]:
            for header in headers:
                environ.pop(header, None)
        return app(environ, start_response)

    return wrapped


@contextmanager
def moto_server(
    port: int | None = None,
    *,
    latency: float | Latency | None = None,
    strict: bool = True,
    ignore_conditions: str | Iterable[str] = (),
) -> Iterator[MotoServer]:
    """Start a moto server (S3, DynamoDB, ...) on a free loopback port, with atomic
    conditional writes (see ``_atomic_writes``).

    ``latency``: seconds each request waits before it is handled (a
    :class:`Latency` gives S3 and DynamoDB their own); change it later with
    ``server.set_latency()`` or ``with server.delayed(...)``. Requests are
    logged inside ``with server.recording() as log:``.

    ``strict`` (the default) answers as AWS does where moto alone does not: object
    keys over 1,024 bytes of UTF-8 are refused (400 KeyTooLongError, per key in a
    DeleteObjects); a conditional write or delete of a key while another is in flight,
    or armed by ``server.conflict_next()``, answers 409 ConditionalRequestConflict; a
    conditional DELETE of a missing key answers 204; SSE-KMS objects' ETags are not
    the MD5 of their bodies (``kms_etag``), in every answer and in conditions; and an
    UpdateItem that grows an item over 400 KB (``ADD`` to a set, which moto lets
    through) is refused. ``strict=False`` is plain moto (plus ``_atomic_writes``).

    ``ignore_conditions``: any of ``"put"``, ``"put-if-match"``, ``"delete"``: emulate
    a store that ignores ``If-None-Match`` and ``If-Match`` on object PUTs (Google Cloud
    Storage's XML API), ``If-Match`` alone on PUTs, or ``If-Match`` on DELETEs (MinIO),
    by dropping those headers (see :data:`IGNORABLE`).
    """
    ignore = frozenset(
        [ignore_conditions] if isinstance(ignore_conditions, str) else ignore_conditions
    )
    if not ignore <= IGNORABLE.keys():
        raise ValueError(
            f"ignore_conditions= takes {sorted(IGNORABLE)}, got {sorted(ignore - IGNORABLE.keys())}"
        )
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    use_dummy_credentials()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = port or free_port()
    control = _Control(Latency.of(latency), _Strict() if strict else None)

    class _Dispatcher(DomainDispatcherApplication):
        """moto's dispatcher, remembering which backend serves a host: moto tries
        hundreds of URL patterns per request (~1.5 ms of CPU each time)."""

        def __init__(self) -> None:
            super().__init__(create_backend_app)
            self._hosts: dict[str | None, Any] = {}

        def get_backend_for_host(self, host: str | None) -> Any:
            try:
                return self._hosts[host]
            except KeyError:
                backend = self._hosts[host] = super().get_backend_for_host(host)
                return backend

    app: Any = _Dispatcher()
    if control.strict is not None:
        app = _strict_front(_atomic_writes(_strict_behind(app)), control.strict)
    else:
        app = _atomic_writes(app)
    if ignore:
        app = _ignoring(app, ignore)
    app = _latency_and_log(app, control)
    server = make_server("127.0.0.1", port, app, True, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, name="moto", daemon=True)
    thread.start()
    try:
        yield MotoServer(url=f"http://127.0.0.1:{port}", owned=True, _control=control)
    finally:
        server.shutdown()
        thread.join()


_MOTO_CHILD = """
import sys
from langgraph_s3.local import moto_server
with moto_server(int(sys.argv[1]), strict=sys.argv[2] == "strict"):
    print("ready", flush=True)
    sys.stdin.read()  # serve until the parent closes our stdin
"""


@contextmanager
def moto_process(*, strict: bool = True) -> Iterator[str]:
    """A moto server in a process of its own; yields its URL. Its CPU and memory are
    then not the caller's: what the caller measures (``tracemalloc``, process CPU) is
    the client's alone, and its work runs beside the caller's instead of under its GIL.
    ``strict``: as in :func:`moto_server`."""
    port = free_port()
    child = subprocess.Popen(
        [sys.executable, "-c", _MOTO_CHILD, str(port), "strict" if strict else "lenient"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError(f"moto did not start (exit {child.poll()})")
        yield f"http://127.0.0.1:{port}"
    finally:
        assert child.stdin is not None
        child.stdin.close()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(10)


@contextmanager
def endpoint_or_moto(
    *, latency: float | Latency | None = None, strict: bool = True
) -> Iterator[MotoServer]:
    """The endpoint in ``AWS_ENDPOINT_URL`` if set, else a fresh moto server
    (with ``latency`` and ``strict``, see :func:`moto_server`; an outside endpoint
    has its own)."""
    external = os.environ.get("AWS_ENDPOINT_URL")
    if external:
        yield MotoServer(url=external, owned=False)
        return
    with moto_server(latency=latency, strict=strict) as server:
        yield server


class Names(TypedDict):
    bucket: str
    table: str


def unique_names() -> Names:
    """A bucket and table name no other test uses."""
    suffix = uuid.uuid4().hex[:12]
    return {"bucket": f"lgs3-test-{suffix}", "table": f"lgs3-test-{suffix}"}


class TcpRelay:
    """A loopback relay that counts the TCP connections clients open through it.

    Listens on ``127.0.0.1`` (a free port) and forwards to ``target``
    (``http://host:port`` or ``(host, port)``). Point a client's
    ``endpoint_url`` at :attr:`url` and read :attr:`accepted` before and
    after a call: the difference is how many NEW connections it opened, 0
    when it reused pooled keep-alive connections.

        with TcpRelay(server.url) as relay:
            saver = AsyncS3Saver(..., endpoint_url=relay.url)
            before = relay.accepted
            ...
            new_connections = relay.accepted - before

    moto's server (werkzeug) answers every request with ``Connection: close``,
    so behind it a plain byte relay would count requests, not the client's
    connection reuse. With ``keep_alive=True`` (the default) the relay speaks
    just enough HTTP/1.1 to keep the client's side open: it forwards each
    request over a new upstream connection, streams bodies as they come
    (``Content-Length`` or chunked, ``100 Continue`` passed through) and drops
    the upstream ``Connection: close`` header when the response is
    length-delimited. ``keep_alive=False`` forwards raw bytes both ways, for
    any TCP protocol.

    Standard library only: an asyncio loop on a daemon thread of its own, so it
    works beside any event loop of the caller. Counters are safe to read from
    any thread.
    """

    def __init__(
        self,
        target: str | tuple[str, int],
        *,
        keep_alive: bool = True,
        host: str = "127.0.0.1",
    ) -> None:
        if isinstance(target, str):
            parsed = urlparse(target if "//" in target else f"//{target}")
            if parsed.hostname is None or parsed.port is None:
                raise ValueError(f"target {target!r} needs a host and a port")
            target = (parsed.hostname, parsed.port)
        self.target = target
        self.keep_alive = keep_alive
        self.host = host
        self.port = 0
        self._lock = threading.Lock()
        self._accepted = 0
        self._open = 0
        self._requests = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------- counters
    @property
    def accepted(self) -> int:
        """Client connections accepted since start (or the last :meth:`reset`)."""
        with self._lock:
            return self._accepted

    @property
    def open(self) -> int:
        """Client connections open right now."""
        with self._lock:
            return self._open

    @property
    def requests(self) -> int:
        """HTTP requests relayed since start or :meth:`reset` (``keep_alive`` mode)."""
        with self._lock:
            return self._requests

    def reset(self) -> None:
        """Set :attr:`accepted` and :attr:`requests` to zero (open connections stay)."""
        with self._lock:
            self._accepted = 0
            self._requests = 0

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: pass as ``endpoint_url=``."""
        if not self.port:
            raise RuntimeError("the relay is not started")
        return f"http://{self.host}:{self.port}"

    # ------------------------------------------------------------ lifecycle
    def start(self) -> TcpRelay:
        if self._thread is not None:
            raise RuntimeError("the relay is already started")
        loop = asyncio.new_event_loop()
        started = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            asyncio.set_event_loop(loop)
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._handle, self.host, 0, limit=_HEAD_LIMIT)
                )
                self.port = int(self._server.sockets[0].getsockname()[1])
            except BaseException as exc:
                failure.append(exc)
                started.set()
                loop.close()
                return
            started.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=serve, name="langgraph-s3-relay", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            self._thread.join()
            self._loop = self._thread = None
            raise failure[0]
        return self

    def stop(self) -> None:
        """Close the listener and every relayed connection; wait for the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)

        with suppress(RuntimeError, TimeoutError):  # the loop already stopped
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        self._loop = self._thread = self._server = None

    def __enter__(self) -> TcpRelay:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -------------------------------------------------------------- relaying
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        with self._lock:
            self._accepted += 1
            self._open += 1
        try:
            if self.keep_alive:
                await self._serve_http(reader, writer)
            else:
                up_reader, upstream = await asyncio.open_connection(*self.target)
                try:
                    await asyncio.gather(_pump(reader, upstream), _pump(up_reader, writer))
                finally:
                    await _close(upstream)
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # a broken or malformed connection: drop it
        except asyncio.CancelledError:
            pass  # stop()
        finally:
            with self._lock:
                self._open -= 1
            self._tasks.discard(task)
            await _close(writer)

    async def _serve_http(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Requests on one client connection, each over a new upstream connection."""
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                return  # the client closed its idle connection
            with self._lock:
                self._requests += 1
            method, req_headers = _parse_head(head)
            up_reader, upstream = await asyncio.open_connection(*self.target, limit=_HEAD_LIMIT)
            try:
                upstream.write(head)
                sending = asyncio.ensure_future(_copy_body(reader, upstream, req_headers))
                try:
                    keep = await _relay_response(up_reader, writer, method)
                finally:
                    if not sending.done():  # answered before the body was read: drop it
                        await asyncio.wait({sending}, timeout=1.0)
                    if not sending.done():
                        sending.cancel()
                        keep = False
                if sending.cancelled() or sending.exception() is not None:
                    return
            finally:
                await _close(upstream)
            if not keep or "close" in req_headers.get("connection", "").lower():
                return


_HEAD_LIMIT = 1 << 20


def _parse_head(head: bytes) -> tuple[str, dict[str, str]]:
    """First token of the start line (method, or HTTP version), lowercased headers."""
    lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return lines[0].split(" ", 1)[0].upper(), headers


async def _copy_body(
    src: asyncio.StreamReader,
    dst: asyncio.StreamWriter,
    headers: dict[str, str],
    *,
    until_eof: bool = False,
) -> None:
    """Copy one message body, framed by chunked encoding or Content-Length."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            line = await src.readuntil(b"\r\n")
            dst.write(line)
            size = int(line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while (trailer := await src.readuntil(b"\r\n")) != b"\r\n":
                    dst.write(trailer)
                dst.write(b"\r\n")
                break
            dst.write(await src.readexactly(size + 2))
            await dst.drain()
    elif "content-length" in headers:
        left = int(headers["content-length"].split(",")[0])
        while left > 0:
            data = await src.read(min(left, 65536))
            if not data:
                raise asyncio.IncompleteReadError(b"", left)
            dst.write(data)
            left -= len(data)
            await dst.drain()
    elif until_eof:
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
    await dst.drain()


async def _relay_response(
    src: asyncio.StreamReader, dst: asyncio.StreamWriter, method: str
) -> bool:
    """Relay one response; True when the client connection may stay open."""
    head = await src.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    while 100 <= status < 200 and status != 101:  # 100 Continue: pass it on
        dst.write(head)
        await dst.drain()
        head = await src.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
    _, headers = _parse_head(head)
    no_body = method == "HEAD" or status in (204, 304)
    framed = (
        no_body
        or "content-length" in headers
        or "chunked" in headers.get("transfer-encoding", "").lower()
    )
    if framed:
        lines = head[:-4].split(b"\r\n")
        kept = [ln for ln in lines[1:] if not ln.lower().startswith(b"connection:")]
        head = b"\r\n".join([lines[0], *kept, b"Connection: keep-alive"]) + b"\r\n\r\n"
    dst.write(head)
    if not no_body:
        await _copy_body(src, dst, headers, until_eof=not framed)
    await dst.drain()
    return framed


async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copy bytes until EOF, then half-close ``dst``."""
    with suppress(OSError):
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
    if dst.can_write_eof() and not dst.is_closing():
        with suppress(OSError):
            dst.write_eof()


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with suppress(OSError, asyncio.CancelledError):
        await writer.wait_closed()


@contextmanager
def tcp_relay(target: str | tuple[str, int], *, keep_alive: bool = True) -> Iterator[TcpRelay]:
    """``with tcp_relay(server.url) as relay:`` a started :class:`TcpRelay`."""
    with TcpRelay(target, keep_alive=keep_alive) as relay:
        yield relay
