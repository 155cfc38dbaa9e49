"""The attempt loop of a templated request (``aws/hot.py``): botocore's endpoint loop,
with the stages that do nothing for a hot request done in place.

botocore's ``Endpoint._send_request`` emits ``request-created`` (whose handlers sign the
request, put in the user agent and the retry headers), and the signer emits
``choose-signer`` and ``before-sign``; then ``before-send``, the send, ``before-parse``,
the parse, ``response-received`` and ``needs-retry``, once per attempt; the client then
emits ``after-call`` or ``after-call-error``.

Here, per attempt: the request object made as botocore makes it; the signature from
botocore's own signer classes and the client's own credentials (refreshing ones
included, through ``get_auth_instance``), for the region and signing name in the
request's context (a region redirect moves them), with the signature version
``choose-signer`` gave the template's first request; the user agent and the retry
headers as their handlers put them; then every other event as botocore emits it:
``before-send`` (the request accounting and the traces hang there), aiohttp through the
client's HTTP session, ``before-parse``, the client's parser, ``response-received``,
``needs-retry`` through the endpoint's own method (botocore's retry policy, its quota and
backoff, S3's region redirector, the library's handlers), ``after-call`` or
``after-call-error`` (the retry quota is given back there).

What is done in place is what botocore's own handlers of those three events do, and only
while they are the only ones (:class:`Plan`): a handler of anyone else's on one of them,
or a signature version other than SigV4, makes the template's requests emit the events
and sign through ``RequestSigner.sign`` as botocore does; a plan is made again whenever
the client's handlers change. ``ClientFactory.add_hook`` on one of them turns the
templates off (``hot.SKIPPED``).

The stages done in place cost little (a few hundredths of a millisecond): a templated
request's CPU is the signer's, aiohttp's and the parser's (``bench/cpu.py`` prints the
attempt loop's share).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Plan", "make_request", "plan"]

_SIGV4 = frozenset({"v4", "s3v4"})
"""The signature versions signed in place (any other goes through ``RequestSigner.sign``)."""
_S3_BEFORE_SIGN = frozenset(
    {"remove_arn_from_signing_path", "_set_extra_headers_for_unsigned_request"}
)
"""botocore's ``before-sign.s3`` handlers that do nothing for a SigV4 request on a
bucket named by name (not an ARN); S3 Express's identity resolver is the third, doing
nothing unless the signature version is ``v4-s3express``."""

_CHOOSE_SIGNER = frozenset(
    {
        "_default_s3_presign_to_sigv2",
        "set_operation_specific_signer",
        "_set_auth_scheme_preference_signer",
    }
)
"""botocore's ``choose-signer`` handlers: they answer from the request context and the
client's configuration, the same for every request of one template."""


@dataclass(frozen=True)
class Plan:
    """How one template's requests are made, found once at its first send."""

    version: str | None
    """The SigV4 version to sign with in place; None: ``RequestSigner.sign``, whole."""
    created_in_place: bool
    """``request-created`` holds only botocore's signer, the user agent's handler and
    ``add_retry_headers``: done in place. Otherwise the event is emitted."""
    agent: Any
    """The user agent's ``request-created`` handler, called in place (None: none)."""
    noted: dict[str, Any]
    """What ``choose-signer`` put in the context (``payload_signing_enabled`` for an
    operation whose body goes unsigned), put in each request's context."""
    handlers: Any
    """The client's emitter's handler cache when the plan was made: botocore makes a new
    one at every ``register`` and ``unregister``, so a handler added or removed since,
    by any means, makes the plan stale (:func:`current`)."""

    user_agent: str | None = None
    """The ``User-Agent`` of the template's first request, when its handler noted it
    (else the handler builds one per request)."""

    def current(self, client: Any) -> bool:
        """Whether no handler of the client changed since the plan was made."""
        return _cache_of(client) is self.handlers


def _cache_of(client: Any) -> Any:
    """The handler lookup cache of ``client``'s emitter (a new object at each change of
    its handlers), or a fresh object (never current) when it has none."""
    emitter = getattr(client.meta.events, "_emitter", client.meta.events)
    cache = getattr(emitter, "_lookup_cache", None)
    return cache if cache is not None else object()


def _handlers(client: Any, event: str) -> list[Any] | None:
    """The handlers ``event`` would call, or None when the emitter is not botocore's
    (then every event is emitted)."""
    emitter = getattr(client.meta.events, "_emitter", client.meta.events)
    tree = getattr(emitter, "_handlers", None)
    search = getattr(tree, "prefix_search", None)
    if search is None:
        return None
    return list(search(event))


async def plan(
    client: Any, model: Any, context: dict[str, Any], agent: Any, user_agent: str | None = None
) -> Plan:
    """The plan of a template whose request context is ``context``: asks
    ``choose-signer`` once (its handlers answer from the context and the client's
    configuration, the same for every request of the template)."""
    from botocore.handlers import add_retry_headers

    signer = client._request_signer
    service = model.service_model.service_id.hyphenize()
    signing = context.get("signing") or {}
    handlers = _cache_of(client)
    created = _handlers(client, f"request-created.{service}.{model.name}")
    known_created = {signer.handler, agent, add_retry_headers}
    created_in_place = created is not None and all(h in known_created for h in created)
    chooses = _handlers(client, f"choose-signer.{service}.{model.name}")
    known_choice = chooses is not None and all(
        getattr(h, "__name__", "") in _CHOOSE_SIGNER for h in chooses
    )
    before_sign = _handlers(client, f"before-sign.{service}.{model.name}")
    quiet = before_sign is not None and all(
        getattr(h, "__name__", "") in _S3_BEFORE_SIGN
        or getattr(h, "__name__", "") == "resolve_s3express_identity"
        for h in before_sign
    )
    version: str | None = None
    noted: dict[str, Any] = {}
    if (
        known_choice
        and quiet
        and created_in_place
        and not signing.get("request_credentials")
        and signing.get("identity_cache") is None
        and not str(context.get("input_params", {}).get("Bucket", "")).startswith("arn:")
    ):  # botocore's own handlers alone: asked once, for every request of the template
        chosen = dict(context)  # choose-signer's handlers may note things in the context
        version = await signer._choose_signer(model.name, "standard", chosen)
        noted = {k: v for k, v in chosen.items() if k not in context or context[k] is not v}
        if version not in _SIGV4:
            version = None
    return Plan(version, created_in_place, agent, noted, handlers, user_agent)


async def make_request(
    client: Any, model: Any, request_dict: dict[str, Any], how: Plan
) -> tuple[Any, dict[str, Any]]:
    """``client._make_request(model, request_dict, context)``, planned: every attempt
    the retry policy allows, then the answer (an HTTP response, its parsed dict) or
    the last attempt's exception. A status of 300 or more is returned, as botocore's
    endpoint returns it (the caller raises the client's error class)."""
    endpoint = client._endpoint
    context = request_dict["context"]
    service = model.service_model.service_id.hyphenize()
    emit = client.meta.events.emit
    try:
        attempts = 1
        endpoint._update_retries_context(context, attempts)
        request = await _create(client, model, request_dict, how, service)
        answer, error = await _attempt(client, request, model, context, how, service)
        while await endpoint._needs_retry(attempts, model, request_dict, answer, error):
            attempts += 1
            endpoint._update_retries_context(context, attempts, answer)
            request.reset_stream()  # a body to send again from its start
            request = await _create(client, model, request_dict, how, service)
            answer, error = await _attempt(client, request, model, context, how, service)
        if error is not None:
            raise error
    except Exception as e:
        await emit(f"after-call-error.{service}.{model.name}", exception=e, context=context)
        raise
    http, parsed = answer
    if "ResponseMetadata" in parsed:
        parsed["ResponseMetadata"]["RetryAttempts"] = attempts - 1
    await emit(
        f"after-call.{service}.{model.name}",
        http_response=http,
        parsed=parsed,
        model=model,
        context=context,
    )
    return http, parsed


async def _create(
    client: Any, model: Any, request_dict: dict[str, Any], how: Plan, service: str
) -> Any:
    """One attempt's request, signed, as ``Endpoint.create_request`` makes it."""
    from botocore.awsrequest import create_request_object
    from botocore.handlers import add_retry_headers

    request = create_request_object(request_dict)
    request.stream_output = model.has_streaming_output or model.has_event_stream_output
    signer = client._request_signer
    if not how.created_in_place:
        await client.meta.events.emit(
            f"request-created.{service}.{model.name}", request=request, operation_name=model.name
        )
        return client._endpoint.prepare_request(request)
    if how.version is None:
        await signer.sign(model.name, request)
    else:
        request.context.update(how.noted)
        signing = request.context.get("signing") or {}  # per attempt: a redirect moves it
        auth = await signer.get_auth_instance(
            signing_name=signing.get("signing_name") or signer._signing_name,
            region_name=signing.get("region") or signer._region_name,
            signature_version=how.version,
        )
        auth.add_auth(request)
    if how.user_agent is not None:
        if request.headers.get("User-Agent"):  # as botocore's handler replaces it
            request.headers.replace_header("User-Agent", how.user_agent)
    elif how.agent is not None:
        how.agent(request)
    add_retry_headers(request)
    return client._endpoint.prepare_request(request)


async def _attempt(
    client: Any, request: Any, model: Any, context: dict[str, Any], how: Plan, service: str
) -> tuple[Any, Any]:
    """One attempt, as ``Endpoint._get_response`` makes it: ``((http, parsed), None)``,
    or ``(None, exception)`` when nothing came back."""
    from aiobotocore.endpoint import convert_to_response_dict
    from botocore.hooks import first_non_none_response

    try:
        from aiobotocore.endpoint import handle_checksum_body
    except ImportError:  # pragma: no cover - an aiobotocore without response checksums
        handle_checksum_body = None

    endpoint, emit = client._endpoint, client.meta.events.emit
    name = model.name
    try:
        sent = await emit(f"before-send.{service}.{name}", request=request)
        http = first_non_none_response(sent)
        if http is None:
            http = await endpoint._send(request)
    except Exception as e:  # what botocore's loop hands needs-retry: a reset, a timeout
        await emit(
            f"response-received.{service}.{name}",
            response_dict=None,
            parsed_response=None,
            context=context,
            exception=e,
        )
        return None, e
    response = await convert_to_response_dict(http, model)
    if handle_checksum_body is not None:
        await handle_checksum_body(http, response, context, model)
    customized: dict[str, Any] = {}
    await emit(
        f"before-parse.{service}.{name}",
        operation_model=model,
        response_dict=response,
        customized_response_dict=customized,
    )
    parser = endpoint._response_parser_factory.create_parser(model.service_model.resolved_protocol)
    parsed = await parser.parse(response, model.output_shape)
    parsed.update(customized)
    if http.status_code >= 300:
        await endpoint._add_modeled_error_fields(response, parsed, model, parser)
    await emit(  # with the answer converted again, as botocore's loop hands it
        f"response-received.{service}.{name}",
        response_dict=await convert_to_response_dict(http, model),
        parsed_response=parsed,
        context=context,
        exception=None,
    )
    return (http, parsed), None
