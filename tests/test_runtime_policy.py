"""The agent's runtime policy (``ops.iam.RUNTIME_ACTIONS``, what the terraform module
grants an agent) on a moto server that enforces IAM actions: a deployment's runtime
works with no Scan, and a call that needs one fails with the library's error naming
the role it needs, not a bare AccessDenied. (moto evaluates no condition: the
``dynamodb:LeadingKeys`` side is tested in ``tests/unit/test_leading_keys.py`` and
``tests/test_terraform.py``.)"""

from __future__ import annotations

from typing import Any

import pytest

from helpers import agent_user, cfg, moto_process
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.errors import AccessDeniedError
from langgraph_s3.ops.deploy.iam import RUNTIME_ACTIONS, WHOLE_TABLE_ACTIONS
from langgraph_s3.testing import unique_names
from langgraph_s3.testing.graphs import chat_graph

SCAN_DENIED = r"(?s)dynamodb\.scan on table .* a Scan reads every deployment's items.* operator's"


def session_of(creds: dict[str, str]) -> Any:
    from aiobotocore.session import get_session

    session = get_session()
    session.set_credentials(creds["AWS_ACCESS_KEY_ID"], creds["AWS_SECRET_ACCESS_KEY"])
    return session


async def test_a_deployments_runtime_needs_no_scan() -> None:
    assert "dynamodb:Scan" not in RUNTIME_ACTIONS
    assert frozenset({"dynamodb:Scan"}) == WHOLE_TABLE_ACTIONS
    with moto_process(INITIAL_NO_AUTH_ACTION_COUNT="60") as url:
        names = unique_names()
        async with AsyncS3Saver(endpoint_url=url, **names) as admin:
            await admin.setup()  # its marker: the run index is whole (a new table)
            actions = [*sorted(RUNTIME_ACTIONS), "s3:HeadBucket"]  # HeadBucket: moto's name
            creds = await agent_user(
                admin, [{"Effect": "Allow", "Action": actions, "Resource": "*"}]
            )
        async with AsyncS3Saver(endpoint_url=url, session=session_of(creds), **names) as agent:
            graph = chat_graph().compile(checkpointer=agent)
            run = {"configurable": {"thread_id": "chat", "run_id": "run-1"}}
            await graph.ainvoke({"messages": [("user", "hello")]}, run)
            assert len([t async for t in agent.alist(cfg("chat"))]) > 1
            await agent.acopy_thread("chat", "copy")
            await agent.aprune(["copy"], strategy="keep_latest")
            assert (await agent.adelete_for_runs(["run-1"])).checkpoints > 0  # Queries
            await agent.adelete_thread("copy")

            with pytest.raises(AccessDeniedError, match=SCAN_DENIED):
                [t async for t in agent.alist(None)]
            with pytest.raises(AccessDeniedError, match=SCAN_DENIED):
                [t async for t in agent.alist_threads()]
