"""``langgraph-s3 doctor``: checks a deployment for real, against its endpoint.

Each check is one line: what was checked, whether it holds, and the fix when it does
not. The probes are harmless: scratch objects under ``{prefix}/doctor/`` and a
scratch manifest item under this deployment's key, all removed at the end, and a GetItem
of a manifest key no deployment has (whether the role reaches beyond its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from langgraph_s3.aws import door as aws
from langgraph_s3.aws.clients import ClientFactory
from langgraph_s3.aws.probes import CONDITIONS, store_name
from langgraph_s3.core.clock import wall_clock
from langgraph_s3.errors import ConditionsIgnoredError
from langgraph_s3.manifest.schema import TTL_ATTRIBUTE
from langgraph_s3.ops.tools.doctor_objects import object_manifest_checks, signature_window
from langgraph_s3.store.format import TTL_CLASSES_DAYS

OK, FAIL, WARN, INFO = "ok", "fail", "warn", "info"
"""A check's status: ``fail`` breaks the deployment (the library cannot work), ``warn``
is hardening it lacks (encryption, public access, PITR, lifecycle rules: what the
terraform module adds to what ``setup()`` makes), ``info`` is not checked or optional."""
DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "Forbidden", "403"}


@dataclass(frozen=True, slots=True)
class Check:
    """One line of the doctor's answer."""

    name: str
    status: str
    detail: str = ""
    fix: str = ""


def _code(exc: BaseException) -> str:
    """AWS's error code for an answer (``S3PersistenceError.code``), else what went wrong
    underneath the library's error (``NoCredentialsError``, ``EndpointConnectionError``)."""
    code = str(getattr(exc, "code", "") or "")
    if code:
        return code
    cause = exc.__cause__ if exc.__cause__ is not None else exc
    return type(cause).__name__


def _answered(exc: BaseException) -> bool:
    """Whether the endpoint answered (with an error), rather than not at all."""
    return bool(getattr(exc, "code", ""))


class _Door:
    """A service's requests, each through the one door (``aws.call``): deadline,
    permits, retries and the library's errors, as every other request has them."""

    def __init__(self, clients: ClientFactory, service: str) -> None:
        self.clients, self.service = clients, service

    def __getattr__(self, op: str) -> Callable[..., Awaitable[dict[str, Any]]]:
        def request(**params: Any) -> Awaitable[dict[str, Any]]:
            read = op == "get_object"  # its body read whole: no stream left open
            return aws.call(self.clients, self.service, op, read_body=read, **params)

        return request


async def diagnose(saver: Any) -> list[Check]:
    """Every check, in order; the probes clean up after themselves."""
    t = saver.target
    root = saver.layout.root
    out: list[Check] = []
    s3, ddb = _Door(saver.clients, "s3"), _Door(saver.clients, "dynamodb")
    where = str(saver.clients.endpoint_for("s3") or "AWS")
    objects = getattr(getattr(saver, "_w", None), "object_table", None)  # manifest=s3

    # -- reachability and latency (one round trip each)
    probes: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("S3", lambda: s3.list_objects_v2(Bucket=t.bucket, MaxKeys=1, Prefix=root)),
        ("DynamoDB", lambda: ddb.describe_table(TableName=t.table)),
    ][: 1 if objects else 2]
    signed_ok = False  # S3 took a signed request: the credentials work there
    for service, probe in probes:
        start = time.perf_counter()
        try:
            await probe()
            signed_ok = signed_ok or service == "S3"
            ms = (time.perf_counter() - start) * 1000
            out.append(Check(f"{service} reachable", OK, f"one round trip: {ms:.0f} ms ({where})"))
        except Exception as exc:
            ms = (time.perf_counter() - start) * 1000
            code = _code(exc)
            reachable = _answered(exc)  # it answered, with an error
            out.append(
                Check(
                    f"{service} reachable",
                    OK if reachable else FAIL,
                    f"answered {code} in {ms:.0f} ms" if reachable else f"{code}: {exc}"[:200],
                    "" if reachable else f"check the endpoint ({where}) and the network",
                )
            )

    # -- credentials
    try:
        who = await _Door(saver.clients, "sts").get_caller_identity()
        out.append(Check("credentials", OK, f"{who.get('Arn')} (account {who.get('Account')})"))
    except Exception as exc:
        if signed_ok:  # an S3-compatible store serves no STS: S3's answer is proof enough
            said = f"STS answered {_code(exc)} ({where}); S3 took the signed listing above"
            out.append(Check("credentials", INFO, f"not checked: {said}"))
        else:
            fix = "set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a role"
            out.append(Check("credentials", FAIL, _code(exc), fix))

    # -- the bucket
    out += await _bucket(s3, t.bucket, where)
    # -- the table (or the manifest in the bucket)
    if objects is None:
        out += await _table(ddb, t.table)
    else:
        lines = await object_manifest_checks(objects, saver.raw_objects, root)
        lines.append(await signature_window(saver.clients, t.bucket, f"{root}doctor/late"))
        out += [Check(name, OK if ok else FAIL, detail, fix) for name, ok, detail, fix in lines]
    # -- what the library does at run time, probed
    out += await _probe_s3(s3, t.bucket, f"{root}doctor/{secrets.token_hex(16)}")
    out += await _probe_conditions(s3, t.bucket, f"{root}doctor/{secrets.token_hex(16)}", where)
    if objects is None:
        out += await _probe_table(ddb, t.table, saver.manifest.deployment)
    # -- lifecycle rules
    out += await _lifecycle(s3, t.bucket)
    return out


async def _bucket(s3: Any, bucket: str, where: str) -> list[Check]:
    out: list[Check] = []
    try:
        await s3.head_bucket(Bucket=bucket)
    except Exception as exc:
        fix = "apply the terraform module, or run setup() once"
        return [Check(f"bucket {bucket}", FAIL, _code(exc), fix)]
    try:
        loc = await s3.get_bucket_location(Bucket=bucket)
        region = loc.get("LocationConstraint") or "us-east-1"
        out.append(Check(f"bucket {bucket}", OK, f"exists, in {region}"))
    except Exception as exc:
        out.append(Check(f"bucket {bucket}", OK, f"exists (region not readable: {_code(exc)})"))
    try:
        enc = await s3.get_bucket_encryption(Bucket=bucket)
        rules = enc["ServerSideEncryptionConfiguration"]["Rules"]
        algo = rules[0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"]
        out.append(Check("bucket encryption", OK, algo))
    except Exception as exc:
        out.append(
            Check(
                "bucket encryption",
                WARN,
                _code(exc),
                "set default encryption: apply the terraform module (setup() makes only the "
                "bucket and the table)",
            )
        )
    try:
        pab = (await s3.get_public_access_block(Bucket=bucket))["PublicAccessBlockConfiguration"]
        keys = ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets")
        blocked = all(pab.get(k) for k in keys)
        out.append(
            Check(
                "public access block",
                OK if blocked else WARN,
                "all four settings on" if blocked else f"{pab}",
                "" if blocked else "turn on all four public access block settings",
            )
        )
    except Exception as exc:
        out.append(
            Check("public access block", WARN, _code(exc), "block public access (the module does)")
        )
    if where.startswith("http://"):
        out.append(Check("TLS-only bucket policy", INFO, "not checked over http:// (an emulator)"))
    else:
        try:
            policy = (await s3.get_bucket_policy(Bucket=bucket))["Policy"]
            tls = "aws:SecureTransport" in policy
            out.append(
                Check(
                    "TLS-only bucket policy",
                    OK if tls else WARN,
                    "denies plain http" if tls else "no aws:SecureTransport condition",
                    "" if tls else "deny requests with aws:SecureTransport false (the module does)",
                )
            )
        except Exception as exc:
            out.append(Check("TLS-only bucket policy", WARN, _code(exc), "add the TLS-only policy"))
    return out


async def _table(ddb: Any, table: str) -> list[Check]:
    try:
        desc = (await ddb.describe_table(TableName=table))["Table"]
    except Exception as exc:
        fix = "apply the terraform module, or run setup() once"
        return [Check(f"table {table}", FAIL, _code(exc), fix)]
    keys = {k["AttributeName"]: k["KeyType"] for k in desc.get("KeySchema", [])}
    right = keys == {"pk": "HASH", "sk": "RANGE"}
    out = [
        Check(
            f"table {table}",
            OK if right else FAIL,
            f"{desc.get('TableStatus')}, key pk/sk" if right else f"key schema {keys}",
            "" if right else "the manifest needs pk (HASH) and sk (RANGE), both strings",
        )
    ]
    try:
        ttl = (await ddb.describe_time_to_live(TableName=table))["TimeToLiveDescription"]
        on = ttl.get("TimeToLiveStatus") in ("ENABLED", "ENABLING")
        attr = ttl.get("AttributeName")
        good = on and attr == TTL_ATTRIBUTE
        out.append(
            Check(
                "table TTL",
                OK if good else FAIL,
                f"{ttl.get('TimeToLiveStatus')} on {attr!r}",
                "" if good else f"enable TTL on {TTL_ATTRIBUTE!r} (thread expiry and tombstones)",
            )
        )
    except Exception as exc:
        out.append(Check("table TTL", FAIL, _code(exc), f"enable TTL on {TTL_ATTRIBUTE!r}"))
    try:
        pitr = (await ddb.describe_continuous_backups(TableName=table))[
            "ContinuousBackupsDescription"
        ]
        status = pitr.get("PointInTimeRecoveryDescription", {}).get("PointInTimeRecoveryStatus")
        out.append(
            Check(
                "point-in-time recovery",
                OK if status == "ENABLED" else WARN,
                str(status),
                ""
                if status == "ENABLED"
                else "enable PITR (the manifest says what exists): apply the terraform module",
            )
        )
    except Exception as exc:
        out.append(Check("point-in-time recovery", WARN, _code(exc), "enable PITR"))
    return out


async def _probe(out: list[Check], action: str, call: Any) -> bool:
    try:
        await call()
        out.append(Check(f"allowed: {action}", OK))
        return True
    except Exception as exc:
        code = _code(exc)
        denied = code in DENIED
        out.append(
            Check(
                f"allowed: {action}",
                FAIL,
                "denied" if denied else code,
                f"grant {action} (the module's policy does)" if denied else "",
            )
        )
        return False


async def _cleanup(call: Callable[[], Awaitable[Any]]) -> None:
    """Remove a probe whatever happened (an interrupt, a denied delete): best effort."""
    with contextlib.suppress(Exception):
        await asyncio.shield(call())


async def _probe_s3(s3: Any, bucket: str, key: str) -> list[Check]:
    out: list[Check] = []
    try:
        return await _probe_s3_steps(s3, bucket, key, out)
    finally:
        await _cleanup(lambda: s3.delete_object(Bucket=bucket, Key=key))


async def _probe_s3_steps(s3: Any, bucket: str, key: str, out: list[Check]) -> list[Check]:
    if await _probe(out, "s3:PutObject", lambda: s3.put_object(Bucket=bucket, Key=key, Body=b"x")):
        await _probe(out, "s3:GetObject", lambda: s3.get_object(Bucket=bucket, Key=key))
        await _probe(
            out,
            "s3:PutObjectTagging",
            lambda: s3.put_object_tagging(
                Bucket=bucket, Key=key, Tagging={"TagSet": [{"Key": "lgs3-ttl", "Value": "1d"}]}
            ),
        )
        await _probe(
            out, "s3:GetObjectTagging", lambda: s3.get_object_tagging(Bucket=bucket, Key=key)
        )
    await _probe(
        out, "s3:ListBucket", lambda: s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
    )
    await _probe(out, "s3:DeleteObject", lambda: s3.delete_object(Bucket=bucket, Key=key))
    return out


_STALE = '"00000000000000000000000000000000"'
"""An ``If-Match`` ETag the probe's object never has."""
_REFUSED = {"PreconditionFailed", "412"}
_BUSY = {"ConditionalRequestConflict", "409"}


async def _probe_conditions(s3: Any, bucket: str, key: str, where: str) -> list[Check]:
    """That the endpoint honours the conditions the library relies on, as ``setup()``
    checks them (``objects.check_conditions``): 5 requests on a scratch object."""
    out: list[Check] = []
    try:
        return await _probe_conditions_steps(s3, bucket, key, where, out)
    finally:
        await _cleanup(lambda: s3.delete_object(Bucket=bucket, Key=key))


async def _probe_conditions_steps(
    s3: Any, bucket: str, key: str, where: str, out: list[Check]
) -> list[Check]:
    try:
        first = await s3.put_object(Bucket=bucket, Key=key, Body=b"1", IfNoneMatch="*")
    except Exception as exc:
        fix = "grant s3:PutObject (the module's policy does)" if _code(exc) in DENIED else ""
        return [Check("conditional writes", FAIL, _code(exc), fix)]
    server = str(first.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("server", ""))
    store = store_name(where, server)
    put, delete = "s3:PutObject", "s3:DeleteObject and s3:GetObject (If-Match needs both)"
    steps: list[tuple[str, str, str, Callable[[], Awaitable[Any]]]] = [
        (
            "conditional PUT: If-None-Match",
            "If-None-Match on writes",
            put,
            lambda: s3.put_object(Bucket=bucket, Key=key, Body=b"2", IfNoneMatch="*"),
        ),
        (
            "conditional PUT: If-Match",
            "If-Match on writes",
            put,
            lambda: s3.put_object(Bucket=bucket, Key=key, Body=b"3", IfMatch=_STALE),
        ),
        (
            "conditional DELETE: If-Match (the store's TTL sweep)",
            "If-Match on DELETE",
            delete,
            lambda: s3.delete_object(Bucket=bucket, Key=key, IfMatch=_STALE),
        ),
    ]
    for name, condition, action, call in steps:
        ignored = ConditionsIgnoredError(store, condition, CONDITIONS[condition])
        out.append(await _refused(name, call, ignored, action))
    return out


async def _refused(
    name: str, call: Callable[[], Awaitable[Any]], ignored: ConditionsIgnoredError, action: str
) -> Check:
    """One condition: it holds when the call fails with 412 (a 409 is sent again)."""
    for _ in range(5):
        try:
            await call()
        except Exception as exc:
            code = _code(exc)
            if code in _REFUSED:
                return Check(name, OK, "a stale condition answers 412")
            if code in _BUSY:
                await asyncio.sleep(0.1)
                continue
            if code in DENIED:
                return Check(name, FAIL, "denied", f"grant {action} (the module's policy does)")
            return Check(name, FAIL, code)
        return Check(name, FAIL, ignored.problem, ignored.FIX)
    return Check(name, FAIL, "409 ConditionalRequestConflict 5 times", "run the doctor again")


def probe_key(deployment: str) -> str:
    """The partition key of the doctor's scratch item: one of the deployment's own."""
    return f"{deployment}~doctor~{secrets.token_hex(16)}"


def foreign_key(deployment: str) -> str:
    """A partition key beside the deployment's, outside its ``iam.leading_keys`` and of
    no deployment at all (``~d`` is no ``keys.encode`` output): a GetItem of it reads
    nothing, and is allowed only to a role that may reach other deployments' items."""
    return f"{deployment.removesuffix('/')}~doctor/{secrets.token_hex(16)}"


async def _probe_table(ddb: Any, table: str, deployment: str) -> list[Check]:
    out: list[Check] = []
    key = {"pk": {"S": probe_key(deployment)}, "sk": {"S": "~"}}
    try:
        return await _probe_table_steps(ddb, table, key, out, deployment)
    finally:
        await _cleanup(lambda: ddb.delete_item(TableName=table, Key=key))


async def _probe_table_steps(
    ddb: Any, table: str, key: dict[str, Any], out: list[Check], deployment: str
) -> list[Check]:
    # with an expiry, so DynamoDB removes the probe item even if nothing else can
    item = {**key, TTL_ATTRIBUTE: {"N": str(int(wall_clock()) + 3600)}}
    await _probe(out, "dynamodb:PutItem", lambda: ddb.put_item(TableName=table, Item=item))
    await _probe(out, "dynamodb:GetItem", lambda: ddb.get_item(TableName=table, Key=key))
    await _probe(
        out,
        "dynamodb:BatchGetItem",
        lambda: ddb.batch_get_item(RequestItems={table: {"Keys": [key]}}),
    )
    await _probe(
        out,
        "dynamodb:UpdateItem",
        lambda: ddb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET probe = :p",
            ExpressionAttributeValues={":p": {"S": "doctor"}},
        ),
    )
    await _probe(
        out,
        "dynamodb:Query",
        lambda: ddb.query(
            TableName=table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": key["pk"]},
        ),
    )
    await _probe(out, "dynamodb:DeleteItem", lambda: ddb.delete_item(TableName=table, Key=key))
    outside = {"pk": {"S": foreign_key(deployment)}, "sk": {"S": "~"}}
    got = await _outcome(lambda: ddb.get_item(TableName=table, Key=outside))
    scan = await _outcome(lambda: ddb.scan(TableName=table, Limit=1))
    return [*out, _scan_check(scan), _reach_check(got, scan)]


async def _outcome(call: Callable[[], Awaitable[Any]]) -> str:
    """``allowed``, ``denied``, or the code of another refusal."""
    try:
        await call()
    except Exception as exc:
        return "denied" if _code(exc) in DENIED else _code(exc)
    return "allowed"


def _scan_check(scan: str) -> Check:
    """A Scan is no call of an agent's: denied, it is a note, not a failure."""
    if scan == "allowed":
        return Check("allowed: dynamodb:Scan", OK, "whole-table listings and sweeps work")
    return Check(
        "allowed: dynamodb:Scan",
        INFO,
        f"{scan}: an agent needs none; listing every thread, the TTL sweep and setup()'s "
        "backfills need a role that may Scan (an operator's, the archiver's)",
    )


def _reach_check(got: str, scan: str) -> Check:
    """Whether this role reaches other deployments' items in the table (⚠ when it does)."""
    name = "other deployments' items"
    tries = (("a GetItem of another key", got), ("a Scan", scan))
    reached = [what for what, outcome in tries if outcome == "allowed"]
    if reached:
        return Check(
            name,
            WARN,
            f"reachable: allowed {' and '.join(reached)}",
            "for an agent's role, allow DynamoDB only on the deployment's partition keys "
            "(dynamodb:LeadingKeys) and no Scan, as the terraform module's agent policy does; "
            "an operator's or the archiver's role reaches every deployment by design",
        )
    if (got, scan) == ("denied", "denied"):
        return Check(name, OK, "out of reach: limited to the deployment's partition keys")
    return Check(name, INFO, f"not checked: GetItem {got}, Scan {scan}")


async def _lifecycle(s3: Any, bucket: str) -> list[Check]:
    try:
        rules = (await s3.get_bucket_lifecycle_configuration(Bucket=bucket))["Rules"]
    except Exception as exc:
        code = _code(exc)
        said = "none" if "NoSuchLifecycle" in code else code
        fix = "apply the terraform module (the store's TTL classes and the packs' transitions)"
        fix += ", or at least AsyncS3Store.setup() (the TTL classes)"
        return [Check("lifecycle rules", WARN, said, fix)]
    ids = {r.get("ID") for r in rules}
    missing = [d for d in TTL_CLASSES_DAYS if f"langgraph-s3-ttl-{d}d" not in ids]
    out = [
        Check(
            "lifecycle: store TTL classes",
            WARN if missing else OK,
            f"missing {len(missing)} of {len(TTL_CLASSES_DAYS)}" if missing else "all present",
            "run AsyncS3Store.setup() or apply the module" if missing else "",
        )
    ]
    packs = "langgraph-s3-archive-packs" in ids
    out.append(
        Check(
            "lifecycle: archive packs",
            OK if packs else INFO,
            "packs move to colder classes" if packs else "no transition rule for packs/",
            "" if packs else "apply the module to move archive packs (optional)",
        )
    )
    return out
