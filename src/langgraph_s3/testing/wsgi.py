"""WSGI plumbing the strict test server's rules share: a request's signature, its S3
path, its body taken and put back, an answer captured and sent."""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

CREDENTIAL = re.compile(r"Credential=([^/\s,&]+)/\d{8}/([^/\s,&]+)/([^/\s,&]+)/aws4_request")
"""A SigV4 credential scope: access key, region, service."""


@dataclass(frozen=True, slots=True)
class Signed:
    """Who signed a request, for which region and service (SigV4's credential scope)."""

    access_key: str
    region: str
    service: str


def signed_by(environ: dict[str, Any]) -> Signed | None:
    """The credential scope of a SigV4 request (header or presigned URL); None unsigned."""
    found = CREDENTIAL.search(str(environ.get("HTTP_AUTHORIZATION") or ""))
    if found is None:
        found = CREDENTIAL.search(unquote(str(environ.get("QUERY_STRING") or "")))
    return None if found is None else Signed(*found.groups())


def s3_path(environ: dict[str, Any]) -> tuple[str, bytes] | None:
    """Bucket and key (its UTF-8 bytes; empty for the bucket itself) of a path-style
    S3 request. PATH_INFO is percent-decoded and each byte is one latin-1 character
    (PEP 3333): encoding it back as latin-1 gives the key's UTF-8 bytes."""
    path = str(environ.get("PATH_INFO") or "").encode("latin-1", "replace")
    bucket, _, key = path[1:].partition(b"/")
    if not bucket:
        return None
    return bucket.decode("utf-8", "replace"), key


def text_of(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def take_body(environ: dict[str, Any]) -> bytes:
    """Read the request's body, and put it back for the app behind to read."""
    stream = environ["wsgi.input"]
    length = environ.get("CONTENT_LENGTH")
    if length:
        data = bytes(stream.read(int(length)))
    elif environ.get("wsgi.input_terminated"):
        data = bytes(stream.read())
    else:
        data = b""
    put_body(environ, data)
    return data


def put_body(environ: dict[str, Any], data: bytes) -> None:
    environ["wsgi.input"] = io.BytesIO(data)
    environ["CONTENT_LENGTH"] = str(len(data))


def capture(app: Any, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
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


def send(
    start_response: Any, status: str, headers: list[tuple[str, str]], body: bytes
) -> list[bytes]:
    kept = [(k, v) for k, v in headers if k.lower() != "content-length"]
    start_response(status, [*kept, ("Content-Length", str(len(body)))])
    return [body]


def moto_account(signed: Signed) -> str:
    from moto.iam.models import get_account_id_from

    return str(get_account_id_from(signed.access_key))


def atomic_writes(app: Any) -> Any:
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
            or "HTTP_X_AMZ_COPY_SOURCE_IF_MATCH" in environ
        )
        if not serialize:
            return app(environ, start_response)
        # the body is read before the lock: a client that stops mid-upload (a Lambda
        # frozen with a request half sent) holds up no one else, as on AWS
        length = str(environ.get("CONTENT_LENGTH") or "")
        if length.isdigit():
            environ["wsgi.input"] = io.BytesIO(environ["wsgi.input"].read(int(length)))
        with lock:
            return list(app(environ, start_response))

    return wrapped


class Served:
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
