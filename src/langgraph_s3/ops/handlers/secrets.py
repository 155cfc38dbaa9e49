"""Environment variables read at a Lambda's cold start from Secrets Manager or SSM
Parameter Store: a model's API key never sits in the function's configuration.

The terraform example sets ``LANGGRAPH_S3_SECRETS`` to a JSON object of names and
ARNs, ``{"OPENAI_API_KEY": "arn:aws:secretsmanager:us-east-1:123456789012:secret:openai-AbCdEf"}``
(and grants the role those ARNs and no others); :class:`~.lambda_app.LambdaApp` calls
:func:`load` in the init phase, before it imports the graph, whose module may build its
model client at import. An ARN ending in ``#FIELD`` reads that field of a JSON secret.
Every name is read before any is set: a secret that cannot be read fails the cold start
naming it and what to check, and sets nothing.

Cost: one ``GetSecretValue`` or ``GetParameter`` per name, at init only (a client per
service and region, from botocore's own session: the function's role, its region).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import MutableMapping
from typing import Any

from langgraph_s3.errors import ConfigurationError

ENV_SECRETS = "LANGGRAPH_S3_SECRETS"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FIX = "add it to the terraform example's secrets (or the module's secret_arns)"


def load(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Read every secret ``LANGGRAPH_S3_SECRETS`` names into ``environ`` (the process's
    environment by default); the names set, sorted. Nothing to do without it."""
    env = os.environ if environ is None else environ
    raw = env.get(ENV_SECRETS)
    if not raw:
        return []
    try:
        wanted = json.loads(raw)
    except ValueError:
        wanted = None
    if not isinstance(wanted, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in wanted.items()
    ):
        raise ConfigurationError(
            f"{ENV_SECRETS} must be a JSON object of environment variable names and "
            'secret or parameter ARNs: {"OPENAI_API_KEY": "arn:aws:secretsmanager:..."}'
        )
    bad = [name for name in wanted if not _NAME.fullmatch(name)]
    if bad:  # before any read: a name the environment refuses would stop halfway
        raise ConfigurationError(
            f"{ENV_SECRETS}: {', '.join(map(repr, bad))} cannot be an environment "
            "variable's name (letters, digits and _, not starting with a digit)"
        )
    clients: dict[tuple[str, str], Any] = {}
    values = {name: read(arn, clients, name=name) for name, arn in wanted.items()}
    held = [name for name, value in values.items() if "\x00" in value]
    if held:
        raise ConfigurationError(f"{', '.join(held)}: the secret holds a NUL character")
    env.update(values)
    return sorted(values)


def read(arn: str, clients: dict[tuple[str, str], Any] | None = None, *, name: str = "") -> str:
    """The text of one Secrets Manager secret or SSM parameter, by ARN (``#FIELD``: that
    field of its JSON). ``clients`` caches a client per service and region."""
    base, _, field = arn.partition("#")
    parts = base.split(":", 5)
    what = f"{name} ({arn})" if name else arn
    if len(parts) < 6 or parts[0] != "arn" or parts[2] not in ("secretsmanager", "ssm"):
        raise ConfigurationError(
            f"{what} is not a Secrets Manager secret or SSM parameter ARN "
            "(arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME, "
            "arn:aws:ssm:REGION:ACCOUNT:parameter/NAME)"
        )
    service, region = parts[2], parts[3]
    cache = {} if clients is None else clients
    client = cache.get((service, region))
    if client is None:
        import botocore.session
        from botocore.config import Config

        # bounded: Lambda's init phase lasts 10 s, and a slow endpoint must not eat it
        bounded = Config(
            connect_timeout=3, read_timeout=5, retries={"mode": "standard", "max_attempts": 3}
        )
        from botocore.exceptions import UnknownServiceError

        try:
            client = cache[(service, region)] = botocore.session.get_session().create_client(
                service, region_name=region, config=bounded
            )
        except UnknownServiceError:  # a zip trimmed of its model (an older lambda build)
            raise ConfigurationError(
                f"{what}: this deployment has no SDK model for {service}: build it again "
                f"with `langgraph-s3 lambda build` (or add --keep-service {service})"
            ) from None
    text = _fetch(client, service, base, what)
    if not field:
        return text
    try:
        fields = json.loads(text)
    except ValueError:
        fields = None
    if not isinstance(fields, dict) or field not in fields:
        held = sorted(fields) if isinstance(fields, dict) else "it is not a JSON object"
        raise ConfigurationError(f"{what}: the secret has no field {field!r} ({held})")
    value = fields[field]
    return value if isinstance(value, str) else json.dumps(value)


def _fetch(client: Any, service: str, base: str, what: str) -> str:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        if service == "secretsmanager":
            answer = client.get_secret_value(SecretId=base)
            if "SecretString" not in answer:
                raise ConfigurationError(f"{what} holds binary data, not text")
            return str(answer["SecretString"])
        got = client.get_parameter(Name=base, WithDecryption=True)
        return str(got["Parameter"]["Value"])
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in ("AccessDeniedException", "AccessDenied"):
            denied = f"{what}: the function's role may not read it: {_FIX}"
            raise ConfigurationError(denied) from None
        if code in ("ResourceNotFoundException", "ParameterNotFound"):
            raise ConfigurationError(f"{what} does not exist: create it, or fix the ARN") from None
        raise ConfigurationError(f"{what} could not be read: {code or exc}") from None
    except BotoCoreError as exc:  # no credentials, no endpoint
        raise ConfigurationError(f"{what} could not be read: {exc}") from None
