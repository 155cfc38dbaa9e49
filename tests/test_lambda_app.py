"""``LambdaApp`` (your graph behind a Lambda handler): the secrets it reads into the
environment at cold start, before the graph's module is imported, and its answer when
the run stops at an interrupt."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import botocore.session
import pytest

from langgraph_s3 import S3Saver
from langgraph_s3.errors import ConfigurationError
from langgraph_s3.ops.handlers import secrets
from langgraph_s3.ops.handlers.lambda_app import LambdaApp
from langgraph_s3.testing import MotoServer, unique_names

GRAPH = """
import os
from langgraph.graph import MessagesState, StateGraph
from langgraph.types import interrupt

KEY_AT_IMPORT = os.environ.get("MODEL_API_KEY")  # a model client built at import reads it


def ask(state: MessagesState) -> dict:
    city = interrupt("Which city?")
    return {"messages": [("ai", f"Sunny in {city}")]}


graph = StateGraph(MessagesState).add_node("ask", ask).add_edge("__start__", "ask")
"""


def client(server: MotoServer, service: str) -> Any:
    return botocore.session.get_session().create_client(
        service, region_name="us-east-1", endpoint_url=server.url
    )


@pytest.fixture
def made(s3_fresh: MotoServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A secret (plain and JSON), a SecureString parameter, on the moto server."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_fresh.url)
    sm, ssm = client(s3_fresh, "secretsmanager"), client(s3_fresh, "ssm")
    name = unique_names()["bucket"]
    plain = sm.create_secret(Name=f"{name}-openai", SecretString="sk-plain")["ARN"]
    fields = sm.create_secret(
        Name=f"{name}-keys", SecretString=json.dumps({"ANTHROPIC": "sk-ant", "N": 3})
    )["ARN"]
    ssm.put_parameter(Name=f"/{name}/tavily", Value="tv-secure", Type="SecureString")
    param = ssm.get_parameter(Name=f"/{name}/tavily")["Parameter"]["ARN"]
    return {"plain": plain, "fields": fields, "param": param, "name": name}


def test_secrets_are_read_into_the_environment_all_or_none(made: dict[str, str]) -> None:
    env = {
        secrets.ENV_SECRETS: json.dumps(
            {
                "OPENAI_API_KEY": made["plain"],
                "ANTHROPIC_API_KEY": f"{made['fields']}#ANTHROPIC",
                "COUNT": f"{made['fields']}#N",
                "TAVILY_API_KEY": made["param"],
            }
        )
    }
    assert secrets.load(env) == ["ANTHROPIC_API_KEY", "COUNT", "OPENAI_API_KEY", "TAVILY_API_KEY"]
    assert (env["OPENAI_API_KEY"], env["ANTHROPIC_API_KEY"], env["TAVILY_API_KEY"]) == (
        "sk-plain",
        "sk-ant",
        "tv-secure",
    )
    assert env["COUNT"] == "3"
    assert secrets.load({}) == []  # nothing asked, nothing read

    # one that cannot be read fails the cold start naming it, and sets none of the others
    missing = made["plain"].replace("-openai", "-gone")
    for arn, said in (
        (missing, "does not exist"),
        (f"{made['fields']}#NOPE", "has no field 'NOPE' (['ANTHROPIC', 'N'])"),
        ("arn:aws:s3:::bucket/key", "is not a Secrets Manager secret or SSM parameter ARN"),
    ):
        env = {secrets.ENV_SECRETS: json.dumps({"OPENAI_API_KEY": made["plain"], "X": arn})}
        with pytest.raises(ConfigurationError, match="X") as info:
            secrets.load(env)
        assert said in str(info.value) and "sk-" not in str(info.value)
        assert "OPENAI_API_KEY" not in env
    with pytest.raises(ConfigurationError, match="JSON object"):
        secrets.load({secrets.ENV_SECRETS: '["not", "a", "map"]'})
    # a name the environment would refuse is refused first, before any is read or set
    for name in ("BAD=NAME", "1ST", "", "NUL\u0000"):
        env = {
            secrets.ENV_SECRETS: json.dumps({"OPENAI_API_KEY": made["plain"], name: made["plain"]})
        }
        with pytest.raises(ConfigurationError, match="cannot be an environment variable"):
            secrets.load(env)
        assert "OPENAI_API_KEY" not in env


def app_on(server: MotoServer, tmp_path: Path) -> tuple[LambdaApp, str]:
    """An app on a set-up deployment, its graph in a module of a name of its own."""
    names = unique_names()
    url = f"s3://{names['bucket']}/lambda?table={names['table']}"
    with S3Saver.from_url(url, endpoint_url=server.url) as saver:
        saver.setup()
    module = f"agent_{names['bucket'].replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(GRAPH)
    app = LambdaApp(f"{module}.py:graph", url=url, root=str(tmp_path), extension=False)
    return app, module


def test_the_app_reads_its_secrets_before_the_graph_and_replies_with_an_interrupts_question(
    s3_fresh: MotoServer, made: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(secrets.ENV_SECRETS, json.dumps({"MODEL_API_KEY": made["plain"]}))
    monkeypatch.delenv("MODEL_API_KEY", raising=False)
    app, module = app_on(s3_fresh, tmp_path)
    try:
        assert sys.modules[module].KEY_AT_IMPORT == "sk-plain"
        asked = app.handler({"thread_id": "t", "message": "What's the weather?"})
        assert asked["reply"] == "Which city?", asked  # not the user's own message
        assert [i["value"] for i in asked["interrupts"]] == ["Which city?"]
        answered = app.handler({"thread_id": "t", "resume": "Paris"})
        assert answered["reply"] == "Sunny in Paris" and "interrupts" not in answered
    finally:
        app.runner.close()
        monkeypatch.delenv("MODEL_API_KEY", raising=False)
