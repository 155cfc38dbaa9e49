"""The doctor's checks of a manifest kept in the bucket (``manifest="s3"``), in place of
the table's: the manifest is there, and racing create-only PUTs leave one winner (the
sequential conditions are probed for every deployment, ``doctor.py``)."""

from __future__ import annotations

import contextlib
import hashlib
from datetime import timedelta
from urllib.parse import quote

from langgraph_s3.aws.clients import ClientFactory
from langgraph_s3.aws.probes import RACERS, check_racing_creates
from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.errors import ConditionsIgnoredError
from langgraph_s3.manifest.objects import ObjectTable

__all__ = ["object_manifest_checks", "signature_window"]

LATE_SECONDS = 20 * 60
"""How long before now the probe's PUT is signed: past S3's 15 minutes."""

Line = tuple[str, bool, str, str]
"""(name, passed, detail, fix): one line of the doctor's answer."""


async def signature_window(clients: ClientFactory, bucket: str, key: str) -> Line:
    """Whether the store refuses a PUT signed 20 minutes ago, as S3 does (403
    RequestTimeTooSkewed): the fence of a frozen writer relies on it
    (``core/fence.py``). One PUT, signed by hand at that time; one DELETE if it landed."""
    import aiohttp
    from botocore import auth
    from botocore.awsrequest import AWSRequest

    name = "signature window: a PUT signed 20 minutes ago"
    creds = await clients.session.get_credentials()
    if creds is None:
        return (name, False, "no credentials", "set AWS credentials")
    frozen = await creds.get_frozen_credentials()
    endpoint = clients.endpoint_for("s3").rstrip("/")
    region = clients.region or "us-east-1"
    url = f"{endpoint}/{bucket}/{quote(key)}"
    if endpoint.startswith("https://s3.") and endpoint.endswith(".amazonaws.com"):
        url = f"https://{bucket}.s3.{region}.amazonaws.com/{quote(key)}"
    request = AWSRequest(method="PUT", url=url, data=b"late")
    request.headers["x-amz-content-sha256"] = hashlib.sha256(b"late").hexdigest()
    real = auth.get_current_datetime
    late = real() - timedelta(seconds=LATE_SECONDS)
    auth.get_current_datetime = lambda: late
    try:  # signing is synchronous: nothing else runs meanwhile
        auth.S3SigV4Auth(frozen, "s3", region).add_auth(request)
    finally:
        auth.get_current_datetime = real
    prepared = request.prepare()
    async with (
        aiohttp.ClientSession() as http,
        http.put(prepared.url, data=prepared.body, headers=dict(prepared.headers)) as resp,
    ):
        status, text = resp.status, await resp.text()
    if status == 403 and "RequestTimeTooSkewed" in text:
        return (name, True, "refused (403 RequestTimeTooSkewed), as S3 does", "")
    if 200 <= status < 300:
        await clients_delete(clients, bucket, key)
        return (
            name,
            False,
            "accepted: a writer frozen with a request signed long ago could still land it",
            "use a store that refuses requests signed more than 15 minutes ago (S3 does): "
            "the bucket's manifest relies on it",
        )
    return (name, False, f"answered {status}: {text[:120]}", "")


async def clients_delete(clients: ClientFactory, bucket: str, key: str) -> None:
    client = await clients.client("s3")
    with contextlib.suppress(Exception):
        await client.delete_object(Bucket=bucket, Key=key)


async def object_manifest_checks(
    table: ObjectTable, objects: ObjectStorePort, root: str
) -> list[Line]:
    """The manifest's marker (1 GET) and the racing-creates probe (9 requests)."""
    out: list[Line] = []
    try:
        there = await table.exists()
        fix = "" if there else "run `langgraph-s3 setup` (or setup()) with ?manifest=s3"
        out.append(("manifest", there, f"{table.name} (in the bucket, no table)", fix))
    except Exception as exc:
        out.append(("manifest", False, f"{type(exc).__name__}: {exc}"[:200], ""))
    try:
        await check_racing_creates(objects, root)
        detail = f"{RACERS} racing If-None-Match PUTs of one key: exactly one won"
        out.append(("conditional PUT: racing creates", True, detail, ""))
    except ConditionsIgnoredError as exc:
        out.append(("conditional PUT: racing creates", False, exc.problem, exc.FIX))
    except Exception as exc:
        out.append(("conditional PUT: racing creates", False, f"{type(exc).__name__}: {exc}", ""))
    return out
