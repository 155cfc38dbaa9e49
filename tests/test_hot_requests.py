"""The hot requests (``aws/hot.py``: DynamoDB's item requests, S3's object PUTs and GETs)
go from a template after their first request, and answer, fail, retry and count exactly
as the SDK's whole path does: the same parsed answers (binary values included), the same
requests on the wire, the same error classes and our errors from the door, botocore's
retries through a fault proxy, the same request accounting."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import pytest
from aiobotocore.session import get_session

from faults import FaultPlan, fault_proxy
from langgraph_s3.aws import door, hot
from langgraph_s3.aws.clients import ClientFactory
from langgraph_s3.aws.config import Limits
from langgraph_s3.aws.s3 import ObjectStore
from langgraph_s3.core.put_mode import CREATE, Update
from langgraph_s3.errors import ConditionFailedError
from langgraph_s3.manifest import ATTRIBUTES, KEY_SCHEMA
from langgraph_s3.testing import unique_names
from langgraph_s3.testing.moto import MotoServer

pytestmark = pytest.mark.integration


def key(name: str) -> dict[str, Any]:
    return {"pk": {"S": name}, "sk": {"S": "~"}}


async def make_table(clients: ClientFactory, table: str) -> None:
    await door.call(
        clients,
        "dynamodb",
        "create_table",
        TableName=table,
        KeySchema=KEY_SCHEMA,
        AttributeDefinitions=ATTRIBUTES,
        BillingMode="PAY_PER_REQUEST",
    )


async def new_table(url: str) -> str:
    """A new manifest table on the server at ``url``, made by clients of its own."""
    table = unique_names()["table"]
    setup = ClientFactory(endpoint_url=url)
    try:
        await make_table(setup, table)
    finally:
        await setup.aclose()
    return table


async def test_a_templated_request_answers_as_the_whole_path(s3_fresh: MotoServer) -> None:
    table = unique_names()["table"]
    clients = ClientFactory(endpoint_url=s3_fresh.url)
    try:
        await make_table(clients, table)
        item = {**key("a"), "b": {"B": b"\x00\xffbytes"}, "n": {"N": "12"}, "s": {"SS": ["x", "y"]}}
        for _ in range(2):  # the first makes the template, the second uses it
            await door.call(clients, "dynamodb", "put_item", TableName=table, Item=item)
        client = await clients.client("dynamodb")
        assert {"PutItem"} <= set(hot._TEMPLATES[client].by_operation)
        whole = await client.get_item(TableName=table, Key=key("a"), ConsistentRead=True)
        got = [
            await door.call(
                clients, "dynamodb", "get_item", TableName=table, Key=key("a"), ConsistentRead=True
            )
            for _ in range(2)
        ]
        assert "GetItem" in hot._TEMPLATES[client].by_operation
        for answer in got:
            assert answer["Item"] == whole["Item"] == item  # bytes come back as bytes
        update = {
            "TableName": table,
            "Key": key("a"),
            "UpdateExpression": "ADD n :one",
            "ConditionExpression": "attribute_exists(pk)",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
            "ReturnValues": "ALL_NEW",
        }
        await door.call(clients, "dynamodb", "update_item", **update)
        again = await door.call(clients, "dynamodb", "update_item", **update)
        assert again["Attributes"]["n"] == {"N": "14"}
        refused = {**update, "Key": key("none")}
        for _ in range(2):  # the whole path, then the template: the same error
            with pytest.raises(ConditionFailedError) as caught:
                await door.call(clients, "dynamodb", "update_item", **refused)
            cause = caught.value.__cause__
            assert type(cause).__name__ == "ConditionalCheckFailedException"
            assert isinstance(cause, client.exceptions.ConditionalCheckFailedException)
        assert clients.stats.requests["dynamodb.UpdateItem"] == 4
    finally:
        await clients.aclose()


async def test_a_templated_request_is_retried_as_botocore_retries(s3_fresh: MotoServer) -> None:
    table = await new_table(s3_fresh.url)
    plan = FaultPlan(every=2, cycle=("503", "reset"))
    with fault_proxy(s3_fresh.url, plan) as url:
        clients = ClientFactory(endpoint_url=url, limits=Limits(max_attempts=6))
        retried: list[int] = []
        clients.add_hook("needs-retry.dynamodb", lambda **kw: retried.append(kw["attempts"]))
        try:
            for i in range(8):
                item = {**key(f"k{i}"), "v": {"N": str(i)}}
                await door.call(clients, "dynamodb", "put_item", TableName=table, Item=item)
            client = await clients.client("dynamodb")
            assert "PutItem" in hot._TEMPLATES[client].by_operation
            got = await door.call(
                clients, "dynamodb", "get_item", TableName=table, Key=key("k7"), ConsistentRead=True
            )
            assert got["Item"]["v"] == {"N": "7"}
        finally:
            await clients.aclose()
    assert plan.injected["503"] + plan.injected["reset"] >= 4  # faults met the templates too
    assert max(retried) > 1  # botocore retried them
    assert clients.stats.retries > 0


async def test_in_a_lambda_each_request_carries_its_invocations_trace(
    s3_fresh: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """botocore's recursion-detection header (``X-Amzn-Trace-Id`` from
    ``_X_AMZN_TRACE_ID``) is set on every templated request too: X-Ray and AWS's loop
    detection see each invocation's DynamoDB requests, not the first one's alone."""
    table = unique_names()["table"]
    clients = ClientFactory(endpoint_url=s3_fresh.url)
    seen: list[str | None] = []

    def record(request: Any, event_name: str, **kw: Any) -> None:
        if "PutItem" in event_name:
            header = request.headers.get("X-Amzn-Trace-Id")
            seen.append(header.decode() if isinstance(header, bytes) else header)

    clients.add_hook("before-send", record)
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "agent")
    try:
        await make_table(clients, table)
        for n in range(3):  # three invocations of one warm Lambda, each its own trace
            monkeypatch.setenv("_X_AMZN_TRACE_ID", f"Root=1-0000000{n}-abc;Parent=x")
            await door.call(clients, "dynamodb", "put_item", TableName=table, Item=key("a"))
        client = await clients.client("dynamodb")
        assert "PutItem" in hot._TEMPLATES[client].by_operation
    finally:
        await clients.aclose()
    assert seen == [f"Root=1-0000000{n}-abc;Parent=x" for n in range(3)]


async def hooked_gets(
    url: str, events: list[str], gets: int, *, refused: bool = False
) -> tuple[dict[str, int], int | None]:
    """``gets`` GetItems (and one of a missing table when ``refused``) after a template
    was made, with a counting hook ``add_hook`` put on each of ``events``: the counts,
    and how many went from a template (None: the templates were turned off)."""
    table = unique_names()["table"]
    clients = ClientFactory(endpoint_url=url)
    counts: dict[str, int] = {}

    def counter(name: str) -> Any:
        def count(**kw: Any) -> None:
            counts[name] = counts.get(name, 0) + 1

        return count

    try:
        await make_table(clients, table)
        for _ in range(2):  # a template is made now
            await door.call(clients, "dynamodb", "get_item", TableName=table, Key=key("a"))
        for event in events:
            clients.add_hook(event, counter(event.split(".")[0]))
        client = await clients.client("dynamodb")
        before = hot._TEMPLATES[client].sent if client in hot._TEMPLATES else 0
        for _ in range(gets):
            await door.call(clients, "dynamodb", "get_item", TableName=table, Key=key("a"))
        if refused:
            with pytest.raises(Exception, match="does not exist"):
                await door.call(clients, "dynamodb", "get_item", TableName="nope", Key=key("a"))
        templates = hot._TEMPLATES.get(client)
        return counts, (templates.sent - before if templates is not None else None)
    finally:
        await clients.aclose()


async def test_a_hook_on_a_skipped_event_sees_every_request(s3_fresh: MotoServer) -> None:
    """A handler ``add_hook`` registers on an event templated requests skip turns the
    templates off, for the clients made before and after it."""
    events = [f"{event}.dynamodb.GetItem" for event in hot.SKIPPED]
    counts, templated = await hooked_gets(s3_fresh.url, events, 3)
    assert counts == dict.fromkeys(hot.SKIPPED, 3) and templated is None
    assert hot.skips("before-call") and hot.skips("request-created.dynamodb.GetItem")
    assert hot.skips("before-call.s3.PutObject") and not hot.skips("before-call.sts")
    assert not hot.skips("before-send") and not hot.skips("after-call.dynamodb.GetItem")


EMITTED = ("before-send", "before-parse", "response-received", "needs-retry", "after-call")
"""The events every templated request emits, as the whole path does."""


async def test_a_hook_on_an_emitted_event_keeps_the_templates(s3_fresh: MotoServer) -> None:
    """A handler of an event the attempt loop emits sees each templated request once,
    and leaves the templates on; a refused request is answered, so it is seen by
    ``after-call``, not ``after-call-error``, as botocore's client emits them."""
    events = [f"{event}.dynamodb" for event in (*EMITTED, "after-call-error")]
    counts, templated = await hooked_gets(s3_fresh.url, events, 3, refused=True)
    assert templated == 4
    assert counts == dict.fromkeys(EMITTED, 4), counts


async def test_a_handler_added_on_the_clients_own_emitter_is_met(s3_fresh: MotoServer) -> None:
    """A handler registered straight on a client's emitter after its templates were
    planned, on an event the attempt loop does in place (``request-created``,
    ``choose-signer``, ``before-sign``), is called for every later request: the plan is
    made again when the client's handlers change."""
    table = unique_names()["table"]
    clients = ClientFactory(endpoint_url=s3_fresh.url)
    counts: dict[str, int] = {}
    try:
        await make_table(clients, table)
        for _ in range(3):  # the template, then a plan
            await door.call(clients, "dynamodb", "get_item", TableName=table, Key=key("a"))
        client = await clients.client("dynamodb")
        before = hot._TEMPLATES[client].sent
        for event in ("request-created", "choose-signer", "before-sign"):

            def count(event: str = event, **kw: Any) -> None:
                counts[event] = counts.get(event, 0) + 1

            client.meta.events.register(f"{event}.dynamodb.GetItem", count)
        for _ in range(2):
            got = await door.call(clients, "dynamodb", "get_item", TableName=table, Key=key("a"))
            assert "Item" not in got
        assert hot._TEMPLATES[client].sent == before + 2
    finally:
        await clients.aclose()
    assert counts == {"request-created": 2, "choose-signer": 2, "before-sign": 2}, counts


def _quota(client: Any) -> Any:
    """The client's retry quota (botocore's standard mode keeps it on its handlers)."""
    emitter = client.meta.events._emitter
    for handler in emitter._handlers.prefix_search("after-call.dynamodb.GetItem"):
        owner = getattr(handler, "__self__", None)
        if owner is not None and hasattr(owner, "_quota"):
            return owner._quota
    raise AssertionError("no retry quota on the client")


async def test_a_templated_request_gives_back_the_retry_quota(s3_fresh: MotoServer) -> None:
    """botocore's standard retry mode takes quota for each retry and gives it back when
    a request succeeds (its ``after-call`` handler): templated requests give it back
    too, so a long-lived client that met faults keeps its retries."""
    table = await new_table(s3_fresh.url)
    plan = FaultPlan(every=2, cycle=("503",))
    with fault_proxy(s3_fresh.url, plan) as url:
        clients = ClientFactory(endpoint_url=url, limits=Limits(max_attempts=6))
        try:
            await door.call(clients, "dynamodb", "get_item", TableName=table, Key=key("a"))
            client = await clients.client("dynamodb")
            quota = _quota(client)
            full = quota.available_capacity
            for _ in range(40):
                await door.call(clients, "dynamodb", "get_item", TableName=table, Key=key("a"))
            assert hot._TEMPLATES[client].sent >= 40
            after_faults = quota.available_capacity
        finally:
            await clients.aclose()
    assert plan.injected["503"] >= 20
    assert clients.stats.retries >= 20
    # 20 retries took 100 units; each success after its retry gave its 5 back
    assert after_faults == full, (after_faults, full)


def _signature_of(request: Any, secret: str | None = None) -> tuple[str, str]:
    """The signature in ``request``'s Authorization header, and the one botocore's
    SigV4 signer computes for its method, URL, signed headers and body at its date."""
    from botocore.auth import S3SigV4Auth, SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    def text(v: Any) -> str:
        return v.decode() if isinstance(v, bytes) else str(v)

    header = text(request.headers["Authorization"])
    fields = dict(p.strip().split("=", 1) for p in header.split(" ", 1)[1].split(","))
    access, _, region, service, _ = fields["Credential"].split("/")
    signed = fields["SignedHeaders"].split(";")
    headers = {k: text(v) for k, v in request.headers.items() if k.lower() in signed}
    body = request.body.getvalue() if hasattr(request.body, "getvalue") else request.body
    again = AWSRequest(method=request.method, url=request.url, headers=headers, data=body)
    again.context["timestamp"] = headers["X-Amz-Date"]
    cls = S3SigV4Auth if service == "s3" else SigV4Auth
    secret = secret or os.environ["AWS_SECRET_ACCESS_KEY"]
    auth = cls(Credentials(access, secret), service, region)
    canonical = auth.canonical_request(again)
    return fields["Signature"], auth.signature(auth.string_to_sign(again, canonical), again)


async def test_each_templated_request_carries_botocores_signature(s3_fresh: MotoServer) -> None:
    """Signed in place, each templated request (DynamoDB's and S3's, each key its own
    path) carries the signature botocore's signer gives its URL, headers and body."""
    clients = ClientFactory(endpoint_url=s3_fresh.url)
    names = unique_names()
    signatures: list[tuple[str, str, str]] = []

    def record(request: Any, event_name: str, **kw: Any) -> None:
        signatures.append((event_name.split(".")[-1], *_signature_of(request)))

    clients.add_hook("before-send", record)
    try:
        await make_table(clients, names["table"])
        objects = ObjectStore(clients, names["bucket"], concurrency=4, cache_bytes=0)
        await objects.create_bucket()
        for k in KEYS:
            await objects.put(k, b"body of " + k.encode())
            assert await objects.get(k) == b"body of " + k.encode()
            item = {**key(k), "v": {"B": b"\x00" + k.encode()}}
            await door.call(clients, "dynamodb", "put_item", TableName=names["table"], Item=item)
        sent = [hot._TEMPLATES[await clients.client(s)].sent for s in ("s3", "dynamodb")]
    finally:
        await clients.aclose()
    assert sent[0] >= 2 * (len(KEYS) - 1) and sent[1] >= len(KEYS) - 1, sent
    ops = {op for op, _, _ in signatures}
    assert {"PutObject", "GetObject", "PutItem"} <= ops, ops
    wrong = [(op, got, want) for op, got, want in signatures if got != want]
    assert not wrong, wrong


@pytest.mark.parametrize("blob", ["aGVsbG8=", "hello!"])
async def test_a_text_binary_value_is_stored_as_the_whole_path_stores_it(
    s3_fresh: MotoServer, blob: str
) -> None:
    """A ``str`` given for a binary value is its UTF-8 bytes, as botocore's serializer
    makes it, whether the request goes the whole way or from the template."""
    table = unique_names()["table"]
    clients = ClientFactory(endpoint_url=s3_fresh.url)
    try:
        await make_table(clients, table)
        item = {**key("a"), "b": {"B": blob}, "s": {"BS": [blob, b"raw"]}}
        stored = []
        for _ in range(2):  # the whole path, then the template
            await door.call(clients, "dynamodb", "put_item", TableName=table, Item=item)
            got = await door.call(
                clients, "dynamodb", "get_item", TableName=table, Key=key("a"), ConsistentRead=True
            )
            stored.append(got["Item"])
    finally:
        await clients.aclose()
    for got in stored:
        assert got["b"] == {"B": blob.encode()}
        assert sorted(got["s"]["BS"]) == sorted([blob.encode(), b"raw"])


KEYS = ["plain/key", "a/b c~d+\u00e9", "odd!*'()&=;:@,$ key", "x" * 900]
"""Keys quoted in every way a URL path quotes them (and a long one)."""


async def objects_sequence(objects: ObjectStore) -> list[Any]:
    """Every kind of object request the library sends, answered and refused."""
    out: list[Any] = []
    for k in KEYS:
        etag = await objects.put(k, b"first " + k.encode(), mode=CREATE)
        out += [etag, await objects.put(k, b"again", mode=CREATE)]  # 412: None
        out += [await objects.get(k), await objects.get_with_etag(k)]
        out += [await objects.put(k, b"second", mode=Update(etag))]
        out += [await objects.put(k, b"lost", mode=Update(etag))]  # 412: None
        out += [await objects.get_range(k, 1, 3), await objects.put(k, b"plain")]
        out += [await objects.put(k, b"tagged", tagging="kind=x")]
    out += [await objects.get("missing"), await objects.get_range("missing", 0, 2)]
    return out


async def test_object_requests_from_a_template_are_the_whole_paths(s3_fresh: MotoServer) -> None:
    """PUTs and GETs of objects sent from a template reach S3 as the whole path sends
    them (method, URL, headers but the date, the signature and the invocation id, body)
    and answer alike, conditions refused and keys missing included."""
    wires: list[list[tuple[Any, ...]]] = []
    answers = []
    for templated in (True, False):
        clients = ClientFactory(endpoint_url=s3_fresh.url)
        bucket = unique_names()["bucket"]
        wire: list[tuple[Any, ...]] = []

        def record(request: Any, wire: list[tuple[Any, ...]] = wire, **kw: Any) -> None:
            varying = {"x-amz-date", "authorization", "amz-sdk-invocation-id", "user-agent"}
            headers = {k: v for k, v in request.headers.items() if k.lower() not in varying}
            body = request.body.getvalue() if hasattr(request.body, "getvalue") else request.body
            wire.append((request.method, request.url, sorted(headers.items()), body))

        clients.add_hook("before-send.s3", record)
        if not templated:
            clients.add_hook("before-call.s3", lambda **kw: None)  # the whole way, always
        try:
            objects = ObjectStore(clients, bucket, concurrency=4, cache_bytes=0)
            await objects.create_bucket()
            wire.clear()
            answers.append(await objects_sequence(objects))
            client = await clients.client("s3")
            templates = hot._TEMPLATES.get(client)
            if templated:
                assert templates is not None and templates.sent >= 7 * len(KEYS)
            else:
                assert templates is None
        finally:
            await clients.aclose()
        wires.append([tuple(str(x).replace(bucket, "B") for x in r) for r in wire])
    assert answers[0] == answers[1]
    assert answers[0][1] is None and answers[0][5] is None and answers[0][-2:] == [None, None]
    assert wires[0] == wires[1]
    # a small body goes with its headers, not after a wait for 100 Continue
    puts = [r for r in wires[0] if r[0] == "PUT"]
    assert len(puts) >= 6 * len(KEYS) and not any("Expect" in r[2] for r in puts), puts[:1]


async def test_an_object_request_from_a_template_is_retried_and_resent_whole(
    s3_fresh: MotoServer,
) -> None:
    """Through a proxy failing every other request, templated PUTs are retried by
    botocore with their whole body (the file botocore makes of it, rewound), and each
    object holds what was put."""
    setup = ClientFactory(endpoint_url=s3_fresh.url)
    bucket = unique_names()["bucket"]
    try:
        await ObjectStore(setup, bucket, concurrency=4, cache_bytes=0).create_bucket()
    finally:
        await setup.aclose()
    plan = FaultPlan(every=2, cycle=("503", "reset"))
    with fault_proxy(s3_fresh.url, plan) as url:
        clients = ClientFactory(endpoint_url=url, limits=Limits(max_attempts=6))
        try:
            objects = ObjectStore(clients, bucket, concurrency=4, cache_bytes=0)
            bodies = {f"k{i}": bytes([i]) * (100 + i) for i in range(8)}
            for k, body in bodies.items():
                await objects.put(k, body)
            got = {k: await objects.get(k) for k in bodies}
            templates = hot._TEMPLATES[await clients.client("s3")]
            assert templates.sent >= 12
        finally:
            await clients.aclose()
    assert got == bodies
    assert plan.injected["503"] + plan.injected["reset"] >= 4
    assert clients.stats.retries > 0


async def test_a_large_body_goes_the_whole_way(s3_fresh: MotoServer) -> None:
    """A body read in place (``door.Upload``, from ``LARGE_BODY`` on) is never templated."""
    clients = ClientFactory(endpoint_url=s3_fresh.url)
    bucket = unique_names()["bucket"]
    expects: dict[str, bytes | None] = {}

    def record(request: Any, **kw: Any) -> None:
        if request.method == "PUT":
            expects[request.url.rsplit("/", 1)[-1]] = request.headers.get("Expect")

    clients.add_hook("before-send.s3", record)
    try:
        objects = ObjectStore(clients, bucket, concurrency=4, cache_bytes=0)
        await objects.create_bucket()
        await objects.put("large-first", b"z" * door.LARGE_BODY)  # makes no template
        await objects.put("small", b"x")  # the templates
        assert await objects.get("small") == b"x"
        templates = hot._TEMPLATES[await clients.client("s3")]
        before = templates.sent
        large = b"y" * door.LARGE_BODY
        await objects.put("large", large)
        assert templates.sent == before
        assert await objects.get("large") == large
        assert templates.sent == before + 1
        await objects.put("small-again", b"x")
        assert templates.sent == before + 2
        # a large body waits for S3's 100 Continue before it goes; a small one does not
        assert hot.CONTINUE_FROM <= door.LARGE_BODY
        assert expects["large-first"] == expects["large"] == b"100-continue", expects
        assert expects["small"] is None and expects["small-again"] is None, expects
    finally:
        await clients.aclose()


async def test_a_template_is_made_only_of_the_librarys_own_requests(s3_fresh: MotoServer) -> None:
    """A caller's own PUT or GET through the library's clients (a content type, metadata,
    a condition of its own) makes no template: the library's later requests carry none
    of its headers. Each templated request is signed for its own key's path (the
    ``auth_path`` HmacV1 signs), and a session passed in sends object requests whole."""
    clients = ClientFactory(endpoint_url=s3_fresh.url)
    bucket = unique_names()["bucket"]
    signed: list[tuple[str, str, str]] = []

    def record(request: Any, **kw: Any) -> None:
        signed.append((request.url, *_signature_of(request)))

    clients.add_hook("before-send.s3", record)
    try:
        objects = ObjectStore(clients, bucket, concurrency=4, cache_bytes=0)
        await objects.create_bucket()
        mine = {"ContentType": "application/json", "Metadata": {"owner": "alice"}}
        await door.call(
            clients, "s3", "put_object", Bucket=bucket, Key="theirs", Body=b"{}", **mine
        )
        for key in ("a/one", "b two"):
            await objects.put(key, b"x")
        templates = hot._TEMPLATES[await clients.client("s3")]
        assert templates.sent == 1, signed  # the first of the library's made the template
        for key in ("a/one", "b two"):
            head = await door.call(clients, "s3", "head_object", Bucket=bucket, Key=key)
            assert head["ContentType"] != "application/json" and head["Metadata"] == {}
        url, got, want = signed[-3]  # the templated PUT of "b two" (two HEADs after it)
        assert url.endswith("/b%20two") and got == want, (url, got, want)
    finally:
        await clients.aclose()
    theirs = ClientFactory(endpoint_url=s3_fresh.url, session=get_session())
    try:
        objects = ObjectStore(theirs, bucket, concurrency=4, cache_bytes=0)
        for key in ("c", "d"):
            await objects.put(key, b"y")
        assert hot._TEMPLATES.get(await theirs.client("s3")) is None
        assert await objects.get("d") == b"y"
    finally:
        await theirs.aclose()


async def test_the_user_agent_built_once_is_botocores(s3_fresh: MotoServer) -> None:
    """The ``User-Agent`` of each request is the one botocore's own handler builds (a
    client whose templates are off keeps that handler), while the library's clients
    build it once per set of feature ids, and a templated request carries its template's
    (with the feature ids its operation's call notes, DynamoDB's account-id mode)."""
    agents: list[list[str]] = []
    for templated in (True, False):
        clients = ClientFactory(endpoint_url=s3_fresh.url)
        seen: list[str] = []

        def record(request: Any, seen: list[str] = seen, **kw: Any) -> None:
            agent = request.headers.get("User-Agent")
            seen.append(agent.decode() if isinstance(agent, bytes) else str(agent))

        clients.add_hook("before-send", record)
        if not templated:
            clients.add_hook("before-call", lambda **kw: None)  # botocore's way, whole
        names = unique_names()
        bucket, table = names["bucket"], names["table"]
        try:
            await door.call(clients, "s3", "create_bucket", Bucket=bucket)
            await make_table(clients, table)
            for _ in range(2):  # the second of each hot one goes from its template
                await door.call(clients, "s3", "list_objects_v2", Bucket=bucket)
                await door.call(clients, "s3", "head_bucket", Bucket=bucket)
                await door.call(clients, "s3", "put_object", Bucket=bucket, Key="k", Body=b"x")
                await door.call(clients, "s3", "get_object", Bucket=bucket, Key="k")
                await door.call(clients, "dynamodb", "put_item", TableName=table, Item=key("a"))
                await door.call(clients, "dynamodb", "get_item", TableName=table, Key=key("a"))
            await door.call(clients, "dynamodb", "list_tables")
            # a call that notes a feature after its request is made (its checksum's)
            gone = {"Objects": [{"Key": "k"}]}
            await door.call(clients, "s3", "delete_objects", Bucket=bucket, Delete=gone)
            templates = [hot._TEMPLATES.get(await clients.client(s)) for s in ("s3", "dynamodb")]
            if templated:
                assert [t.sent for t in templates if t is not None] == [2, 2]
                made = [
                    t
                    for ts in templates
                    if ts is not None
                    for t in (*ts.by_operation.values(), *ts.by_object.values())
                ]
                # each sends the agent of the features its call noted by before-call
                handlers = [ts.agent for ts in templates if ts is not None]
                assert len(made) == 4 and all(a is not None for a in handlers)
                assert all(
                    any(a.for_features(t.features) in seen for a in handlers if a) for t in made
                ), made
        finally:
            await clients.aclose()
        assert len(seen) == 16 and all(a.startswith("aiobotocore/") for a in seen), seen
        agents.append(seen)
    assert agents[0] == agents[1]


async def test_templated_requests_sign_with_credentials_as_they_refresh(
    s3_fresh: MotoServer,
) -> None:
    """A session's refreshing credentials are asked for at each templated request, as
    botocore's signer asks: each request is signed with the keys current when it went."""
    from datetime import UTC, datetime, timedelta

    from aiobotocore.credentials import AioRefreshableCredentials

    issued: list[str] = []

    async def refresh() -> dict[str, str]:
        issued.append(f"AKIDREFRESH{len(issued):04d}")
        soon = datetime.now(UTC) + timedelta(seconds=60)  # inside the mandatory window
        return {
            "access_key": issued[-1],
            "secret_key": "refreshed-secret",
            "token": "token",
            "expiry_time": soon.isoformat(),
        }

    session = get_session()
    session._credentials = AioRefreshableCredentials.create_from_metadata(
        await refresh(), refresh, "test"
    )
    clients = ClientFactory(endpoint_url=s3_fresh.url, session=session)
    table = unique_names()["table"]
    signed: list[tuple[str, str, str]] = []

    def record(request: Any, **kw: Any) -> None:
        header = request.headers["Authorization"]
        header = header.decode() if isinstance(header, bytes) else header
        access = header.split("Credential=", 1)[1].split("/", 1)[0]
        signed.append((access, *_signature_of(request, "refreshed-secret")))

    clients.add_hook("before-send.dynamodb", record)
    try:
        await make_table(clients, table)
        for i in range(4):
            await door.call(clients, "dynamodb", "put_item", TableName=table, Item=key(f"k{i}"))
        templates = hot._TEMPLATES[await clients.client("dynamodb")]
        assert templates.sent >= 3
    finally:
        await clients.aclose()
    keys = [access for access, _, _ in signed]
    assert len(set(keys)) == len(keys) == 5, keys  # a refresh before each request
    assert all(got == want for _, got, want in signed), signed


async def test_a_templated_request_that_fails_emits_after_call_error(
    s3_fresh: MotoServer,
) -> None:
    """A templated request whose last attempt raised (a reset connection, no attempt
    left) emits ``after-call-error`` with its exception, as the client does."""
    table = await new_table(s3_fresh.url)
    errors: list[str] = []
    plan = FaultPlan(every=2, cycle=("reset",))
    with fault_proxy(s3_fresh.url, plan) as url:
        clients = ClientFactory(endpoint_url=url, limits=Limits(max_attempts=1))
        clients.add_hook(
            "after-call-error.dynamodb",
            lambda exception, **kw: errors.append(type(exception).__name__),
        )
        try:
            client = await clients.client("dynamodb")
            params = {"TableName": table, "Key": key("a")}
            await hot.send(client, "get_item", params)  # the whole way: the template
            before = hot._TEMPLATES[client].sent
            with pytest.raises(Exception) as caught:
                await hot.send(client, "get_item", params)  # the proxy resets this one
            assert hot._TEMPLATES[client].sent == before + 1
        finally:
            await clients.aclose()
    assert plan.injected["reset"] == 1
    assert errors == [type(caught.value).__name__], (errors, caught.value)


@contextlib.contextmanager
def bucket_elsewhere(moved_first: str) -> Iterator[tuple[str, list[tuple[str, str, str]]]]:
    """A stand-in for S3 with bucket ``bkt`` in eu-west-1: the first PUT of the key
    ``moved_first`` answers S3's 301 with the bucket's region, every other PUT 200.
    Yields its URL and the PUTs it saw (path, the signature's region, body)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[tuple[str, str, str]] = []
    moved = b"<Error><Code>PermanentRedirect</Code><Message>m</Message></Error>"

    class Bucket(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_PUT(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            scope = self.headers["Authorization"].split("Credential=")[1].split(",")[0]
            seen.append((self.path, scope.split("/")[2], body.decode()))
            first = (
                self.path == f"/bkt/{moved_first}" and [p for p, *_ in seen].count(self.path) == 1
            )
            self.send_response(301 if first else 200)
            answer = moved if first else b""
            self.send_header("x-amz-bucket-region", "eu-west-1")
            self.send_header("ETag", '"e"')
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Bucket)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()


async def test_a_templated_request_redirected_to_another_region_is_signed_for_it() -> None:
    """A bucket in another region answers a templated PUT with S3's 301 and its region:
    botocore's redirector sends it again, signed for that region (each attempt reads
    the request's signing context, which the redirector moved), and the template is
    dropped so that later requests go the whole way, as the redirector expects."""
    signatures: list[tuple[str, str]] = []
    with bucket_elsewhere("k2") as (url, seen):
        clients = ClientFactory(endpoint_url=url)
        clients.add_hook(
            "before-send.s3", lambda request, **kw: signatures.append(_signature_of(request))
        )
        try:
            objects = ObjectStore(clients, "bkt", concurrency=4, cache_bytes=0)
            await objects.put("k1", b"one")  # the whole way: the template
            templates = hot._TEMPLATES[await clients.client("s3")]
            await objects.put("k2", b"two")  # templated: 301, then again for eu-west-1
            assert templates.sent == 1
            assert ("PutObject", "bkt") not in templates.by_object
            await objects.put("k3", b"three")  # the whole way, for the bucket's region
            assert templates.sent == 1
        finally:
            await clients.aclose()
    assert seen == [
        ("/bkt/k1", "us-east-1", "one"),
        ("/bkt/k2", "us-east-1", "two"),
        ("/bkt/k2", "eu-west-1", "two"),
        ("/bkt/k3", "eu-west-1", "three"),
    ], seen
    assert all(got == want for got, want in signatures), signatures


async def test_a_template_made_by_a_redirected_call_is_not_kept() -> None:
    """The call that would make the template is redirected to the bucket's region: its
    template (made before the 301 came) would send the next request to the first region
    again, so it is dropped; the redirector sends the next one to the right region."""
    with bucket_elsewhere("k1") as (url, seen):
        clients = ClientFactory(endpoint_url=url)
        try:
            objects = ObjectStore(clients, "bkt", concurrency=4, cache_bytes=0)
            await objects.put("k1", b"one")  # the whole way, redirected
            templates = hot._TEMPLATES[await clients.client("s3")]
            assert ("PutObject", "bkt") not in templates.by_object
            await objects.put("k2", b"two")
        finally:
            await clients.aclose()
    assert seen == [
        ("/bkt/k1", "us-east-1", "one"),
        ("/bkt/k1", "eu-west-1", "one"),
        ("/bkt/k2", "eu-west-1", "two"),  # no second 301
    ], seen


def test_a_user_agent_is_built_for_the_features_a_call_noted() -> None:
    """The user agent's handler builds botocore's string for a set of feature ids
    (the client's and the call's), in a context of its own: the caller's is untouched."""
    import asyncio

    from botocore.context import get_context, start_as_current_context

    clients = ClientFactory(endpoint_url="http://127.0.0.1:9")

    async def agents() -> tuple[str, str, set[str]]:
        client = await clients.client("dynamodb")
        agent = hot._TEMPLATES[client].agent
        assert agent is not None
        with start_as_current_context():
            ctx = get_context()
            assert ctx is not None
            ctx.features.add("Q")
            plain = agent.for_features(frozenset())
            noted = agent.for_features(frozenset({"Qx9"}))  # an id botocore has none of
            return plain, noted, set(ctx.features)

    try:
        plain, noted, kept = asyncio.run(agents())
    finally:
        asyncio.run(clients.aclose())
    assert kept == {"Q"}
    features = [part for part in noted.split() if part.startswith("m/")]
    assert features and "Qx9" in features[0].split("/")[1].split(",")
    assert "Qx9" not in plain and "Q" not in plain.split("m/")[-1].split(" ")[0].split(",")
