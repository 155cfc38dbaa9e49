"""The hot requests' short path through the SDK: DynamoDB's item reads and writes sent
from a template the client's own first request of that operation left behind.

botocore spends most of a small request's CPU before the request exists: the events
that may rewrite parameters, the validation of every parameter against the model, the
serializer's walk of the shapes, the endpoint rules evaluated again, the user-agent
string built again (a generator called about a thousand times a put). For DynamoDB's
JSON protocol none of it changes between two requests of one operation on one client
but the body, so the first request of each operation goes the whole way, and a handler
on ``before-call`` keeps what it produced (URL, headers, user agent, the signing
context); later ones are that template with their own JSON body, handed to the client's
own ``_make_request``. From there on nothing is skipped: botocore's signer (with the
client's credentials, refreshing ones included), its retry policy and ``needs-retry``
events, aiobotocore's HTTP session, the response parser, and the error classes the
client raises, which the door translates as before.

What differs: a parameter botocore would refuse before sending (a wrong type) is
refused by DynamoDB instead (a ``ValidationException``); the library's own checks stay
in front of both. Operations outside :data:`HOT` (every S3 request: its checksums and
headers are built per request) take the whole path.
"""

from __future__ import annotations

import base64
import json
import weakref
from dataclasses import dataclass
from typing import Any

__all__ = ["HOT", "Templates", "send"]

HOT = frozenset({"GetItem", "UpdateItem", "PutItem", "DeleteItem", "BatchGetItem", "Query"})
"""DynamoDB operations sent from a template once their first request made one."""


@dataclass(frozen=True)
class _Template:
    model: Any
    """The operation's botocore model."""
    request: dict[str, Any]
    """The first request's dict, its body, headers and context aside."""
    headers: dict[str, str]
    context: dict[str, Any]


class Templates:
    """The templates of one client (:func:`attach` makes them and keeps them on it)."""

    def __init__(self) -> None:
        self.by_operation: dict[str, _Template] = {}

    def capture(
        self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any
    ) -> None:
        """``before-call.dynamodb``: keep the request the full path produced."""
        if model.name not in HOT or model.name in self.by_operation:
            return
        request = {k: v for k, v in params.items() if k not in ("body", "headers", "context")}
        headers = {k: v for k, v in params["headers"].items() if k.lower() != "content-length"}
        self.by_operation[model.name] = _Template(model, request, headers, dict(context))


_TEMPLATES: weakref.WeakKeyDictionary[Any, Templates] = weakref.WeakKeyDictionary()


def attach(client: Any, service: str) -> None:
    """Let ``client`` keep templates of its hot requests (DynamoDB only)."""
    if service != "dynamodb":
        return
    templates = _TEMPLATES[client] = Templates()
    client.meta.events.register("before-call.dynamodb", templates.capture)


def _blob(value: Any) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode()
    raise TypeError(f"a parameter of type {type(value).__name__} is not JSON")


async def send(client: Any, op: str, params: dict[str, Any]) -> dict[str, Any]:
    """``client.<op>(**params)``: from a template when the client has one for it.

    Cost: the request itself; CPU of the signing, the send and the parse only."""
    templates = _TEMPLATES.get(client)
    name = client.meta.method_to_api_mapping.get(op) if templates is not None else None
    template = templates.by_operation.get(name) if templates is not None and name else None
    if template is None:
        out: dict[str, Any] = await getattr(client, op)(**params)
        return out
    context = dict(template.context)
    request = {
        **template.request,
        "headers": dict(template.headers),
        "body": json.dumps(params, default=_blob, separators=(",", ":")).encode(),
        "context": context,
    }
    http, parsed = await client._make_request(template.model, request, context)
    if http.status_code >= 300:
        code = context.get("error_code_override") or parsed.get("Error", {}).get("Code")
        raise client.exceptions.from_code(code)(parsed, template.model.name)
    result: dict[str, Any] = parsed
    return result
