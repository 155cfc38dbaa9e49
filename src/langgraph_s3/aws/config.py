"""What a saver or store is told: connection strings, the target, limits, and names
checked before any request (no client, no I/O here)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlparse, urlsplit, urlunsplit

from langgraph_s3.core.keys import Layout
from langgraph_s3.errors import ConfigurationError, InvalidIdError

DEFAULT_MAX_CONNECTIONS = 64


@dataclass(frozen=True)
class Limits:
    """How long any one request may hold a caller.

    The defaults suit Lambda: a stalled endpoint fails a call within
    ``request_timeout`` seconds (25), never botocore's ~5 minutes.
    """

    connect_timeout: float = 3.0
    """Seconds to open a TCP/TLS connection."""
    read_timeout: float = 10.0
    """Seconds to wait for the next bytes of an answer."""
    max_attempts: int = 5
    """Attempts per request, the first included (botocore's standard retry mode)."""
    request_timeout: float = 25.0
    """Seconds one request may take in all, its retries and body included."""
    max_conflicts: int = 64
    """Rounds of a compare-and-swap (read, decide, conditional write) before a
    ConflictError: how long a call keeps going under writers racing it (retry.cas)."""

    def __post_init__(self) -> None:
        for name in ("connect_timeout", "read_timeout", "request_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ConfigurationError(
                    f"{name} must be a positive number of seconds, got {value!r}"
                )
        for name in ("max_attempts", "max_conflicts"):
            count = getattr(self, name)
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ConfigurationError(f"{name} must be an integer >= 1, got {count!r}")


LIMIT_NAMES = (
    "connect_timeout",
    "read_timeout",
    "max_attempts",
    "request_timeout",
    "max_conflicts",
)
COUNT_LIMITS = ("max_attempts", "max_conflicts")


@dataclass(frozen=True)
class Target:
    """Where the data lives: bucket, key prefix, manifest table (or ``manifest="s3"``:
    the manifest in the bucket, no table)."""

    bucket: str
    prefix: str = ""
    table: str | None = None
    region: str | None = None
    endpoint_url: str | None = None
    manifest: str = "dynamodb"


MANIFESTS = ("dynamodb", "s3")
"""Where a deployment's manifest lives: a DynamoDB table (``table=``, the default), or
its own bucket, under ``{prefix}/manifest/`` (``manifest=s3``: no DynamoDB at all)."""


EXPRESS_SUFFIX = "--x-s3"
"""An S3 Express One Zone directory bucket's name ends so."""


def check_manifest_kind(kind: object, table: str | None, bucket: str = "") -> str:
    """``manifest=``'s value, checked beside ``table=`` (and the bucket: an S3 Express
    One Zone directory bucket cannot hold the manifest yet)."""
    if kind not in MANIFESTS:
        raise ConfigurationError(
            f"manifest={kind!r} is not a manifest kind: use manifest=dynamodb (a DynamoDB "
            "table, the default) or manifest=s3 (in the bucket, no DynamoDB)"
        )
    if kind == "s3" and table is not None:
        raise ConfigurationError(
            f"manifest=s3 keeps the manifest in the bucket and takes no table, got "
            f"table={table!r}: drop one of them"
        )
    if kind == "s3" and bucket.endswith(EXPRESS_SUFFIX):
        raise ConfigurationError(
            f"bucket {bucket!r} is an S3 Express One Zone directory bucket: manifest=s3 "
            "is not supported there yet (its listings are not sorted and take no "
            "StartAfter, which finding an item's newest version relies on); keep the "
            "manifest in DynamoDB (drop manifest=s3), or use a general purpose bucket"
        )
    return str(kind)


_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_TABLE = re.compile(r"[A-Za-z0-9_.-]{3,255}")
_REGION = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")  # AWS's, and S3-compatibles' ("auto")


def redact(url: str) -> str:
    """A URL safe to print: no user, password or query values."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
    except ValueError:
        return "<unparseable URL>"
    if parts.username is not None or parts.password is not None:
        host = f"***@{host}"
    query = "&".join(
        f"{p.split('=', 1)[0]}=***" if "=" in p else p for p in parts.query.split("&") if p
    )
    return urlunsplit((parts.scheme, host, parts.path, query, ""))


def check_bucket_name(bucket: object) -> str:
    """S3's bucket naming rules, checked before any request."""
    if not isinstance(bucket, str) or not _BUCKET.fullmatch(bucket):
        shown = repr(bucket) if isinstance(bucket, str) and "@" not in bucket else "the name given"
        raise ConfigurationError(
            f"bucket name {shown} is not a valid S3 bucket name: use 3-63 lowercase letters, "
            "digits, '.' or '-', starting and ending with a letter or digit"
        )
    if ".." in bucket or ".-" in bucket or "-." in bucket:
        raise ConfigurationError(f"bucket name {bucket!r} has '..', '.-' or '-.': S3 refuses it")
    try:
        ipaddress.IPv4Address(bucket)
    except ValueError:
        pass
    else:
        raise ConfigurationError(f"bucket name {bucket!r} looks like an IP address: S3 refuses it")
    return bucket


def check_table_name(table: object) -> str:
    if not isinstance(table, str) or not _TABLE.fullmatch(table):
        raise ConfigurationError(
            f"table name {table!r} is not a valid DynamoDB table name: use 3-255 letters, "
            "digits, '_', '-' or '.'"
        )
    return table


def check_region(region: object) -> str:
    """``region`` when it is a region name (AWS's ``eu-west-1``, an S3-compatible's
    ``auto``); ConfigurationError before any request otherwise."""
    if not _REGION.fullmatch(str(region)):
        raise ConfigurationError(f"region {region!r} is not a region name like 'eu-west-1'")
    return str(region)


def check_endpoint_url(url: object) -> str:
    if not isinstance(url, str) or not url:
        raise ConfigurationError("endpoint_url must be a non-empty URL such as https://host:port")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise ConfigurationError(
            f"endpoint_url {redact(url)!r} is not a URL: use http(s)://host[:port]"
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"endpoint_url {redact(url)!r} is not a URL: use http(s)://host[:port]"
        )
    if parts.username is not None or parts.password is not None:
        raise ConfigurationError(
            f"endpoint_url {redact(url)!r} carries a user or password: give credentials "
            "through the AWS environment (or session=), never in the URL"
        )
    return url


SUBJECT_PARAMS = ("subjects", "subject_label", "kms_key", "subject_key_seconds", "receipts")
"""A deployment's subjects (``subjects=user_id&subject_label=1&kms_key=alias/k``): whom
its threads belong to (a metadata key: the saver's), whom its store namespaces do (a
label's index), the KMS key wrapping their keys, how long a process keeps one unwrapped,
where forgetting receipts are kept (``s3://BUCKET/PREFIX``, percent-encoded in a URL)."""


def receipts_location(url: str | None) -> tuple[str, str] | None:
    """``s3://BUCKET[/PREFIX]`` as (bucket, prefix); None for None.

    Raises:
        ConfigurationError: not such a URL, or a bucket name S3 refuses.
    """
    if url is None:
        return None
    parsed = urlparse(url) if isinstance(url, str) else None
    if (
        parsed is None
        or parsed.scheme != "s3"
        or not parsed.netloc
        or parsed.query
        or "#" in str(url)
    ):
        raise ConfigurationError(
            f"receipts must look like 's3://BUCKET/PREFIX' (where forgetting receipts are "
            f"kept), got {str(url)[:80]!r}"
        )
    prefix = parsed.path.strip("/")
    try:
        Layout(prefix)  # a prefix S3 keys may start with
    except InvalidIdError as exc:
        raise ConfigurationError(f"receipts={str(url)[:80]!r}: {exc}") from None
    return check_bucket_name(parsed.netloc), prefix


def _subject_options(one: Callable[[str], str | None]) -> dict[str, Any]:
    """The subjects' parameters given (``SUBJECT_PARAMS``), checked."""
    out: dict[str, Any] = {}
    for name in SUBJECT_PARAMS:
        if (raw := one(name)) is not None:
            try:
                if name == "subject_key_seconds":
                    out[name] = float(raw)
                elif name == "subject_label":
                    out[name] = int(raw)
                else:
                    out[name] = raw
            except ValueError:
                raise ConfigurationError(
                    f"connection string parameter {name}={raw!r} is not a number"
                ) from None
    return out


def parse_conn_string(conn_string: str) -> tuple[Target, dict[str, Any]]:
    """Parse ``s3://BUCKET/PREFIX?table=T&region=R&endpoint_url=URL&read_timeout=S...``.

    Returns the target and the limits given (``connect_timeout``,
    ``read_timeout``, ``request_timeout`` in seconds; ``max_attempts``, ``max_conflicts``).
    """
    if not isinstance(conn_string, str):
        raise ConfigurationError(
            f"connection string must be a str, got {type(conn_string).__name__}"
        )
    try:
        parsed = urlparse(conn_string)
        netloc_has_secret = "@" in parsed.netloc
    except ValueError:
        parsed, netloc_has_secret = None, False
    if parsed is None or parsed.scheme != "s3" or not parsed.netloc:
        raise ConfigurationError(
            f"connection string {redact(conn_string)!r} must look like "
            "'s3://BUCKET/PREFIX?table=TABLE'"
        )
    if parsed.fragment or conn_string.rstrip().endswith("#"):
        raise ConfigurationError(
            "connection string has a '#': everything after it would be lost; "
            "percent-encode it (%23) in a prefix"
        )
    if netloc_has_secret or ":" in parsed.netloc:
        raise ConfigurationError(
            "connection string: the part after s3:// must be a bare bucket name (no user, "
            "password or port); pass credentials through the AWS environment and an endpoint "
            "as endpoint_url="
        )
    query = parse_qs(parsed.query, keep_blank_values=True)
    allowed = {"table", "manifest", "region", "endpoint_url", *LIMIT_NAMES, *SUBJECT_PARAMS}
    unknown = set(query) - allowed
    if unknown:
        raise ConfigurationError(
            f"unknown connection string parameter(s) {sorted(unknown)}; use "
            + ", ".join(f"{n}=" for n in sorted(allowed))
        )
    for name, values in query.items():
        if any(not v.strip() for v in values):
            raise ConfigurationError(
                f"connection string parameter {name}= is blank: give it a value or leave it out"
            )
        if len(values) > 1:
            raise ConfigurationError(f"connection string parameter {name}= is given twice")

    def one(name: str) -> str | None:
        values = query.get(name)
        return values[0] if values else None

    limits: dict[str, Any] = {}
    for name in LIMIT_NAMES:
        raw = one(name)
        if raw is None:
            continue
        try:
            limits[name] = int(raw) if name in COUNT_LIMITS else float(raw)
        except ValueError:
            raise ConfigurationError(
                f"connection string parameter {name}={raw!r} is not a number"
            ) from None
    Limits(**limits)  # validate now, with the connection string's names
    limits.update(_subject_options(one))
    bucket = check_bucket_name(parsed.netloc)
    table = one("table")  # checked by the saver (a store refuses any table first)
    region = one("region")
    if region is not None and not _REGION.fullmatch(region):
        raise ConfigurationError(f"region {region!r} is not a region name like 'eu-west-1'")
    endpoint = one("endpoint_url")
    if endpoint is not None:
        check_endpoint_url(endpoint)
    kind = check_manifest_kind(one("manifest") or "dynamodb", table)
    target = Target(
        bucket=bucket,
        prefix=parsed.path.strip("/"),
        table=table,
        region=region,
        endpoint_url=endpoint,
        manifest=kind,
    )
    return target, limits


def conn_kwargs(
    conn_string: str, overrides: dict[str, Any], *, accepts: Collection[str]
) -> dict[str, Any]:
    """Constructor arguments from a connection string; explicit keywords win.

    ``accepts`` names the query parameters the class takes (a store has no table).
    """
    t, limits = parse_conn_string(conn_string)
    if t.table and "table" not in accepts:  # pragma: no cover - every class takes one
        raise ConfigurationError("this class takes no table: drop '?table=' from its URL")
    out: dict[str, Any] = {"bucket": t.bucket, "prefix": t.prefix}
    if t.table is not None:
        out["table"] = t.table
    if t.manifest != "dynamodb":
        out["manifest"] = t.manifest
    if t.region:
        out["region"] = t.region
    if t.endpoint_url:
        out["endpoint_url"] = t.endpoint_url
    refused = [n for n in SUBJECT_PARAMS if n in limits and n not in accepts]
    if refused:
        raise ConfigurationError(
            f"connection string parameter(s) {refused} are the saver's: a store's subjects "
            "are subject_label= (a namespace label's index), kms_key= and table="
        )
    out.update(limits)
    out.update(overrides)
    return out
