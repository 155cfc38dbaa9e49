"""The hot requests' short path through the SDK: DynamoDB's item reads and writes, and
S3's object PUTs and GETs, sent from a template the client's own first request of that
operation left behind.

botocore spends most of a small request's CPU before the request exists: the events
that may rewrite parameters, the validation of every parameter against the model, the
serializer's walk of the shapes, the endpoint rules evaluated again, the user-agent
string built again (a generator called about a thousand times a put). For DynamoDB's
JSON protocol none of it changes between two requests of one operation on one client
but the body, so the first request of each operation goes the whole way, and a handler
on ``before-call`` keeps what it produced (URL, headers, user agent, the signing
context); later ones are that template with their own JSON body, handed to the attempt
loop of :mod:`langgraph_s3.aws.exchange`. An S3 object request differs by its key (the
URL's end, quoted as botocore quotes a greedy label), its body and its condition headers
(``If-None-Match``, ``If-Match``, ``x-amz-tagging``, ``Range``): one template per
operation and bucket, and a request with any other parameter, or a body to stream, goes
the whole way. The loop keeps what matters of botocore's: its signer (with the client's
credentials, refreshing ones included), its retry policy and ``needs-retry`` events,
aiobotocore's HTTP session, the response parser, ``after-call`` (the retry quota is given
back there), and the error classes the client raises, which the door translates as
before.

What the template path does itself, as the skipped ``before-call`` handlers would: a
``str`` given for a binary value is sent as its UTF-8 bytes, base64'd (botocore's
serializer does so); in a Lambda, each request carries the invocation's
``X-Amzn-Trace-Id`` (botocore's recursion-detection header: X-Ray and AWS's loop
detection see every request). What differs: a parameter botocore would refuse before
sending (a wrong type) is refused by DynamoDB instead (a ``ValidationException``); the
library's own checks stay in front of both. A client given a handler of an event the
path skips (``ClientFactory.add_hook``: :data:`SKIPPED`) sends everything the whole
way (:func:`detach`), so that the handler sees every request; and while botocore's
history recorder is on (the AWS CLI's ``--debug``), every request goes the whole way.
Operations outside :data:`HOT` and :data:`HOT_S3` take the whole path, and so does every
S3 request of a client that would add a checksum to it (the library's clients add one
only where S3 requires it, which PutObject and GetObject do not).
"""

from __future__ import annotations

import base64
import io
import json
import os
import weakref
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from langgraph_s3.aws import exchange

__all__ = [
    "CONTINUE_FROM",
    "HOT",
    "HOT_S3",
    "SKIPPED",
    "Templates",
    "attach",
    "continue_for_large_bodies",
    "detach",
    "send",
    "skips",
]

HOT = frozenset({"GetItem", "UpdateItem", "PutItem", "DeleteItem", "BatchGetItem", "Query"})
"""DynamoDB operations sent from a template once their first request made one."""
HOT_S3 = frozenset({"PutObject", "GetObject"})
"""S3 operations sent from a template (per bucket) once their first request made one."""
_S3_HEADERS = {
    "IfNoneMatch": "If-None-Match",
    "IfMatch": "If-Match",
    "Tagging": "x-amz-tagging",
    "Range": "Range",
}
"""The parameters an S3 template takes per request, and the header each becomes."""
CONTINUE_FROM = 1024 * 1024
"""A PutObject body at least this large asks S3 for ``100 Continue`` before it goes
(botocore asks for every body it sends from a file, which it makes of every body): a
request S3 refuses (another region, a bad signature) then costs no upload. A smaller one
goes with its headers: waiting for ``100 Continue`` is one round trip more on every PUT,
and a condition refused before the body came makes aiohttp drop the connection."""
_S3_PARAMS = frozenset({"Bucket", "Key", "Body", *_S3_HEADERS})
_S3_SAME = frozenset({"user-agent"})
"""The headers an S3 template may keep: the same for every request of a client."""
SKIPPED = (
    "provide-client-params",
    "before-parameter-build",
    "before-call",
    "request-created",
    "choose-signer",
    "before-sign",
)
"""The events a templated request does not emit (:mod:`exchange` does what botocore's
own handlers of the last three do)."""
_TRACE = "X-Amzn-Trace-Id"
_MARK = "langgraph_s3.template"
"""Where an S3 template is noted in the context of the call that made it: a call
redirected to the bucket's region drops it (:meth:`Templates.made_by_redirected`)."""


@dataclass
class _Template:
    model: Any
    """The operation's botocore model."""
    request: dict[str, Any]
    """The first request's dict, its body, headers and context aside."""
    headers: dict[str, str]
    context: dict[str, Any]
    prefix: str = ""
    """An S3 template's URL before the key."""
    plan: exchange.Plan | None = None
    """How its requests are made (:func:`exchange.plan`, at its first send)."""
    features: frozenset[str] = frozenset()
    """The feature ids the call that made it had noted by ``before-call`` (the
    endpoint's, the configuration's: the same for every call of the operation; not
    those a call notes later, a credentials refresh's or a redirect's)."""


class Templates:
    """The templates of one client (:func:`attach` makes them and keeps them on it)."""

    def __init__(self) -> None:
        self.by_operation: dict[str, _Template] = {}
        self.by_object: dict[tuple[str, str], _Template] = {}
        """S3's, by operation and bucket."""
        self.sent = 0
        """Requests sent from a template (the others went the whole way)."""
        self.agent: _Agent | None = None
        """The client's user agent handler (:func:`_user_agent_once`), if any."""

    def capture(
        self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any
    ) -> None:
        """``before-call.dynamodb``: keep the request the full path produced."""
        if model.name not in HOT or model.name in self.by_operation:
            return
        request = {k: v for k, v in params.items() if k not in ("body", "headers", "context")}
        per_request = ("content-length", _TRACE.lower())
        headers = {k: v for k, v in params["headers"].items() if k.lower() not in per_request}
        template = _Template(model, request, headers, dict(context), features=_call_features())
        self.by_operation[model.name] = template

    def made_by_redirected(self, context: dict[str, Any], **_: Any) -> None:
        """``after-call.s3``: a template made by a call S3's redirector then sent to the
        bucket's region holds the first region's URL and signing: dropped (the next
        request goes the whole way, where the redirector knows the region)."""
        template = context.get(_MARK)
        if template is not None and (context.get("s3_redirect") or {}).get("redirected"):
            for where, kept in list(self.by_object.items()):
                if kept is template:
                    del self.by_object[where]

    def capture_s3(
        self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any
    ) -> None:
        """``before-call.s3``: keep an object request the full path produced, when its URL
        ends with its key as botocore quotes it and nothing in it depends on its body."""
        given = context.get("input_params") or {}
        bucket, key = given.get("Bucket"), given.get("Key")
        if model.name not in HOT_S3 or not isinstance(bucket, str) or not isinstance(key, str):
            return
        if (model.name, bucket) in self.by_object or params.get("query_string"):
            return
        redirect = context.get("s3_redirect") or {}
        if not (redirect.get("params") or {"Key": key}).keys() <= _S3_PARAMS:
            return  # a caller's own parameters (a content type, metadata, SSE-C): not ours
        if redirect.get("redirected") or (context.get("checksum") or {}).get("request_algorithm"):
            return  # another region's endpoint, or a checksum of the body: the whole way
        quoted = _quote_key(key)
        url, auth = str(params.get("url", "")), params.get("auth_path")
        if not url.endswith("/" + quoted) or not (auth is None or auth.endswith("/" + quoted)):
            return
        request = {k: v for k, v in params.items() if k not in ("body", "headers", "context")}
        if auth is not None:  # HmacV1 signs this path: the key's end replaced per request
            request["auth_path"] = auth[: len(auth) - len(quoted)]
        per_request = {"content-length", _TRACE.lower(), *(h.lower() for h in _S3_HEADERS.values())}
        headers = {k: v for k, v in params["headers"].items() if k.lower() not in per_request}
        if not {h.lower() for h in headers} <= _S3_SAME:
            return  # a header that may differ from request to request: the whole way
        ctx = {k: v for k, v in context.items() if k not in ("input_params", "s3_redirect")}
        prefix = url[: len(url) - len(quoted)]
        template = _Template(model, request, headers, ctx, prefix, features=_call_features())
        self.by_object[(model.name, bucket)] = template
        context[_MARK] = template  # the call's own context: redirected, it is dropped


_TEMPLATES: weakref.WeakKeyDictionary[Any, Templates] = weakref.WeakKeyDictionary()


def attach(client: Any, service: str, *, objects: bool = True) -> None:
    """Let ``client`` keep templates of its hot requests (DynamoDB's, and S3's unless
    ``objects`` is False: a session passed in may carry handlers of its own that every
    object request must meet), and build its user agent once per set of features."""
    agent = _user_agent_once(client)
    if service == "dynamodb":
        templates = _TEMPLATES[client] = Templates()
        client.meta.events.register("before-call.dynamodb", templates.capture)
    elif service == "s3" and objects:
        templates = _TEMPLATES[client] = Templates()
        client.meta.events.register("before-call.s3", templates.capture_s3)
        client.meta.events.register("after-call.s3", templates.made_by_redirected)
    else:
        return
    templates.agent = agent


def continue_for_large_bodies(model: Any, params: dict[str, Any], **_: Any) -> None:
    """``before-call.s3``, after botocore's own handler that adds ``Expect`` to every PUT
    and before the template's capture (registered before :func:`attach`, so a template
    never carries it), on every S3 client whatever its hooks: keep
    ``Expect: 100-continue`` on PutObject bodies from :data:`CONTINUE_FROM` on only."""
    headers = params.get("headers")
    if model.name != "PutObject" or not headers or "Expect" not in headers:
        return
    from botocore.utils import determine_content_length

    size = determine_content_length(params.get("body"))
    if size is not None and size < CONTINUE_FROM:
        del headers["Expect"]


class _Agent:
    """A client's ``User-Agent``, built once per set of feature ids (the client's and
    the call's): ``request-created``'s handler in botocore's stead, and the string a
    templated request carries."""

    def __init__(self, creator: Any) -> None:
        self._creator = creator
        self._built: dict[tuple[frozenset[str], frozenset[str]], str] = {}

    def for_features(self, features: frozenset[str]) -> str:
        """The string for a call that noted ``features`` (with the client's own)."""
        client = frozenset(getattr(self._creator, "_client_features", None) or ())
        agent = self._built.get((client, features))
        if agent is None:
            from botocore.context import get_context, start_as_current_context

            with start_as_current_context():  # a copy: the caller's context is untouched
                ctx = get_context()
                if ctx is not None:
                    ctx.features.clear()
                    ctx.features.update(features)
                agent = self._built[(client, features)] = self._creator.to_string()
        return agent

    def __call__(self, request: Any, **_: Any) -> None:
        """``request-created``: as botocore's handler, from the current call's ids."""
        from botocore.context import get_context

        ctx = get_context()
        agent = self.for_features(frozenset(ctx.features) if ctx is not None else frozenset())
        if request.headers.get("User-Agent"):
            request.headers.replace_header("User-Agent", agent)


def _call_features() -> frozenset[str]:
    """The feature ids the current botocore call has noted so far."""
    from botocore.context import get_context

    ctx = get_context()
    return frozenset(ctx.features) if ctx is not None else frozenset()


def _user_agent_once(client: Any) -> _Agent | None:
    """botocore builds the ``User-Agent`` string again at every request's
    ``request-created`` (about a tenth of a templated request's CPU), from the client's
    configuration and the feature ids its client and the current call noted: the same
    ids give the same string, so it is built once per set of them and put in as
    botocore's handler puts it. A botocore without that handler is left as it is."""
    creator = getattr(client, "_user_agent_creator", None)
    rebuild = getattr(creator, "rebuild_and_replace_user_agent_handler", None)
    if creator is None or rebuild is None or not hasattr(creator, "to_string"):
        return None
    agent = _Agent(creator)
    event = f"request-created.{client.meta.service_model.service_id.hyphenize()}"
    client.meta.events.unregister(event, rebuild)
    client.meta.events.register_last(event, agent)
    return agent


def detach(client: Any) -> None:
    """Send everything ``client`` sends the whole way from now on."""
    _TEMPLATES.pop(client, None)


def skips(event: str) -> bool:
    """Whether a handler of ``event`` would miss templated requests."""
    parts = event.split(".")
    return parts[0] in SKIPPED and (len(parts) < 2 or parts[1] in ("dynamodb", "s3", "*"))


def _quote_key(key: str) -> str:
    """An S3 key as botocore puts it in a URL path (a greedy label: ``/`` and ``~`` kept)."""
    return quote(key, safe="/~")


def _b64(value: Any) -> str:
    raw = value.encode() if isinstance(value, str) else bytes(value)
    return base64.b64encode(raw).decode()


def _wire(value: Any) -> Any:
    """``value`` as botocore's JSON serializer renders it: binary values (``B``, the
    members of ``BS``, bytes anywhere) base64'd, a ``str`` given for one by its UTF-8."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k == "B" and isinstance(v, str | bytes | bytearray | memoryview):
                out[k] = _b64(v)
            elif k == "BS" and isinstance(v, list | tuple):
                out[k] = [_b64(x) if isinstance(x, str) else _wire(x) for x in v]
            else:
                out[k] = _wire(v)
        return out
    if isinstance(value, list | tuple):
        return [_wire(v) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return _b64(value)
    return value


async def send(client: Any, op: str, params: dict[str, Any]) -> dict[str, Any]:
    """``client.<op>(**params)``: from a template when the client has one for it.

    Cost: the request itself; CPU of the signing, the send and the parse only."""
    templates = _TEMPLATES.get(client)
    name = client.meta.method_to_api_mapping.get(op) if templates is not None else None
    template = _template(templates, name, params) if templates is not None and name else None
    if template is None or templates is None or _recording():
        out: dict[str, Any] = await getattr(client, op)(**params)
        return out
    context = dict(template.context)
    headers = dict(template.headers)
    trace = os.environ.get("_X_AMZN_TRACE_ID")
    if trace and "AWS_LAMBDA_FUNCTION_NAME" in os.environ:  # as botocore's before-call does
        headers[_TRACE] = quote(trace, safe="-=;:+&[]{}\"',")
    templates.sent += 1
    if template.prefix:
        request = _object_request(template, params, headers, context)
    else:
        request = {
            **template.request,
            "headers": headers,
            "body": json.dumps(_wire(params), separators=(",", ":")).encode(),
            "context": context,
        }
    if template.plan is None or not template.plan.current(client):
        agent = templates.agent
        template.plan = await exchange.plan(
            client,
            template.model,
            context,
            agent,
            agent.for_features(template.features) if agent is not None else None,
        )
    http, parsed = await exchange.make_request(client, template.model, request, template.plan)
    if template.prefix and (context.get("s3_redirect") or {}).get("redirected"):
        templates.by_object.pop((template.model.name, params["Bucket"]), None)  # another region
    if http.status_code >= 300:
        code = context.get("error_code_override") or parsed.get("Error", {}).get("Code")
        raise client.exceptions.from_code(code)(parsed, template.model.name)
    result: dict[str, Any] = parsed
    return result


def _recording() -> bool:
    """Whether botocore's history recorder is on (the AWS CLI's ``--debug``): it is fed
    by the whole path only."""
    from botocore.history import get_global_history_recorder

    return bool(getattr(get_global_history_recorder(), "_enabled", False))


def _template(templates: Templates, name: str, params: dict[str, Any]) -> _Template | None:
    """The template ``params`` can be sent from, if any."""
    if name not in HOT_S3:
        return templates.by_operation.get(name)
    body = params.get("Body", b"")
    if not params.keys() <= _S3_PARAMS or not isinstance(body, bytes):
        return None  # another parameter, or a body to stream: the whole way
    if len(body) >= CONTINUE_FROM:
        return None  # a large body asks for 100 Continue first: the whole way
    if not isinstance(params.get("Key"), str) or (name == "GetObject" and "Body" in params):
        return None
    return templates.by_object.get((name, params.get("Bucket", "")))


def _object_request(
    template: _Template, params: dict[str, Any], headers: dict[str, str], context: dict[str, Any]
) -> dict[str, Any]:
    """An S3 object request from ``template``: its key in the URL, its condition
    headers, its body as the file botocore makes of it (no ``Expect``: a templated body is
    under :data:`CONTINUE_FROM`); the context botocore's handlers fill per request
    (the redirector's, the input parameters) filled here."""
    key = params["Key"]
    quoted = _quote_key(key)
    for param, header in _S3_HEADERS.items():
        if param in params:
            headers[header] = str(params[param])
    context["input_params"] = {"Bucket": params["Bucket"], "Key": key}
    context["s3_redirect"] = {"redirected": False, "bucket": params["Bucket"], "params": params}
    body: Any = io.BytesIO(params["Body"]) if template.model.name == "PutObject" else b""
    auth = template.request.get("auth_path")
    return {
        **template.request,
        **({"auth_path": auth + quoted} if auth is not None else {}),
        "url": template.prefix + quoted,
        "url_path": "/" + quoted,
        "headers": headers,
        "body": body,
        "context": context,
    }
