"""The terraform module: offline checks, and a real apply against moto.

Skipped, with the reason printed, only where terraform or the AWS provider's
filesystem mirror is absent: nothing can be downloaded here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import moto_process
from langgraph_s3 import AsyncS3Saver, AsyncS3Store
from langgraph_s3.ops.deploy.iam import (
    OBJECT_MANIFEST_ACTIONS,
    RUNTIME_ACTIONS,
    actions_for,
    allows,
    leading_keys,
)
from langgraph_s3.store.facade import lifecycle_rules
from langgraph_s3.store.format import TTL_TAG
from langgraph_s3.testing.graphs import chat_graph

pytestmark = pytest.mark.deploy

ROOT = Path(__file__).resolve().parent.parent / "terraform"


def find_mirror() -> Path | None:
    """The folder holding registry.terraform.io/hashicorp/aws/<v>/<platform>/.

    Looked for where mirrors live (terraform's implied local mirror folders, /opt)
    before the whole filesystem, and only up to the first provider found: a walk of
    ``/`` takes half a minute on a busy machine.
    """
    env = os.environ.get("LANGGRAPH_S3_TF_MIRROR")
    if env:
        return Path(env)
    home = Path.home()
    likely = [
        home / ".terraform.d" / "plugins",
        home / ".local" / "share" / "terraform" / "plugins",
        Path("/usr/local/share/terraform/plugins"),
        Path("/usr/share/terraform/plugins"),
        Path("/opt"),
    ]
    for roots in ([str(p) for p in likely if p.is_dir()], ["/"]):
        if not roots:
            continue
        prune = ["(", "-path", "/proc", "-o", "-path", "/sys", ")", "-prune", "-o"]
        out = subprocess.run(
            ["find", *roots, *prune, "-name", "terraform-provider-aws_*", "-print", "-quit"],
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout.split()
        if out:  # .../registry.terraform.io/hashicorp/aws/<v>/<os_arch>/<binary>
            return Path(out[0]).parents[5]
    return None


@pytest.fixture(scope="module")
def tf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    binary = shutil.which("terraform")
    if binary is None:
        pytest.skip("terraform is not installed: terraform checks skipped")
    mirror = find_mirror()
    if mirror is None:
        pytest.skip("no AWS provider filesystem mirror on this machine: terraform checks skipped")
    work = tmp_path_factory.mktemp("tf")
    shutil.copytree(ROOT, work / "terraform", ignore=shutil.ignore_patterns(".terraform*"))
    rc = work / "terraformrc"
    rc.write_text(
        "provider_installation {\n  filesystem_mirror {\n"
        f'    path = "{mirror}"\n    include = ["registry.terraform.io/*/*"]\n  }}\n'
        '  direct {\n    exclude = ["registry.terraform.io/*/*"]\n  }\n}\n'
    )
    env = {
        **os.environ,
        "TF_CLI_CONFIG_FILE": str(rc),
        "CHECKPOINT_DISABLE": "1",
        "TF_IN_AUTOMATION": "1",
    }
    yield {"bin": binary, "env": env, "dir": work / "terraform"}


def run(tf: dict[str, Any], *args: str, cwd: Path | None = None, timeout: int = 600) -> str:
    proc = subprocess.run(
        [tf["bin"], *args],
        cwd=cwd or tf["dir"],
        env=tf["env"],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"terraform {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_fmt_validate_and_mocked_terraform_test(tf: dict[str, Any]) -> None:
    run(tf, "fmt", "-check", "-recursive")
    run(tf, "init", "-backend=false", "-input=false")
    run(tf, "validate")
    out = run(tf, "test")
    assert "34 passed, 0 failed" in out, out


KEY_CASES = [
    ("unit-bucket", "agents/prod"),
    ("my.bucket", ""),
    ("bkt", "app"),
    ("bkt", "app2"),
    ("b-k_t", "a.b~c d+e*f?g"),
    ("bkt", "ünï/cödé"),
    ("bkt", "p" * 121),  # encoded past 120 characters: "~~" and its SHA-256
    ("bkt", "é" * 20),  # 120 encoded characters: still readable
    ("bkt", "é" * 21),
]


def test_module_renders_the_librarys_leading_keys(tf: dict[str, Any]) -> None:
    """The module's dynamodb:LeadingKeys patterns are ops.iam.leading_keys's, for awkward
    buckets and prefixes: a terraform test written from the library's own answers."""
    runs = []
    for i, (bucket, prefix) in enumerate(KEY_CASES):
        want = json.dumps(list(leading_keys(bucket, prefix)))
        runs.append(
            f'run "keys_{i}" {{\n  command = apply\n  variables {{\n'
            f"    bucket_name = {json.dumps(bucket)}\n    prefix = {json.dumps(prefix)}\n"
            f'    table_name = "t"\n    index_metadata = ["user_id"]\n  }}\n'
            "  assert {\n    condition = alltrue([\n"
            "      for s in jsondecode(output.policy_json).Statement :\n"
            f'      s.Condition["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] == {want}\n'
            '      if contains(["Manifest", "ManifestIndexes"], s.Sid)\n    ])\n'
            f"    error_message = {json.dumps(f'{bucket}/{prefix}: not {want}')}\n  }}\n}}\n"
        )
    written = tf["dir"] / "tests" / "keys.tftest.hcl"  # removed after: fmt, the other test
    written.write_text('mock_provider "aws" {}\n\n' + "\n".join(runs))
    try:
        run(tf, "init", "-backend=false", "-input=false")
        out = run(tf, "test", "-filter=tests/keys.tftest.hcl")
    finally:
        written.unlink()
    assert f"{len(KEY_CASES)} passed, 0 failed" in out, out
    assert len({leading_keys(*c) for c in KEY_CASES}) == len(KEY_CASES)  # no two alike


@pytest.mark.parametrize("name", ["basic", "lambda"])
def test_example_validates(tf: dict[str, Any], name: str) -> None:
    example = tf["dir"] / "examples" / name
    run(tf, "init", "-backend=false", "-input=false", cwd=example)
    run(tf, "validate", cwd=example)


KMS_ACTIONS = {"kms:Decrypt", "kms:GenerateDataKey"}
"""Granted beside RUNTIME_ACTIONS only when the deployment names a KMS key."""


def policy_actions(main: str) -> set[str]:
    """Every action of the ``agent_policy`` local in main.tf: each statement's
    ``Action``, a literal list or string, or a ``local.NAME`` list defined there."""
    policy = main.split("agent_policy = {", 1)[1].split("\n  }\n", 1)[0]
    found: set[str] = set()
    values = re.findall(r'\bAction\s*=\s*(\[[^\]]*\]|local\.\w+|"[^"]*")', policy)
    assert len(values) == policy.count("Action"), policy  # each Action was understood
    for value in values:
        if value.startswith("local."):
            body = re.search(rf"^\s*{value[6:]}\s*=\s*(\[[^\]]*\])", main, re.M)
            assert body is not None, value
            value = body.group(1)
        found |= set(re.findall(r'"([^"]*)"', value))
    return found


def test_module_policy_lists_exactly_the_library_actions() -> None:
    main = (ROOT / "main.tf").read_text()
    # (both manifests' statements: a table's, or the bucket's versions for forgetting)
    assert policy_actions(main) == set(RUNTIME_ACTIONS) | KMS_ACTIONS | OBJECT_MANIFEST_ACTIONS
    # the check sees a broader grant: in a local list, or as a statement of its own
    broader = main.replace('"s3:GetObject",', '"s3:GetObject",\n    "s3:*",', 1)
    assert policy_actions(broader) - policy_actions(main) == {"s3:*"}
    extra = main.replace('Action    = ["s3:ListBucket"]', 'Action    = ["s3:ListBucket", "s3:*"]')
    assert policy_actions(extra) - policy_actions(main) == {"s3:*"}
    for rule in lifecycle_rules():  # the store's TTL classes are the module's
        assert rule["Filter"]["Tag"]["Value"].removesuffix("d") in main


MOTO_SERVER = r"""
import json, sys
from moto.core.responses import ActionResult
from moto.server import main
from moto.stepfunctions.responses import StepFunctionResponse

TYPES = {"Task", "Pass", "Map", "Parallel", "Choice", "Wait", "Succeed", "Fail"}


def check(scope, where, problems):
    states = scope.get("States") or {}
    if scope.get("StartAt") not in states:
        problems.append(f"{where}: StartAt names no state")
    for name, state in states.items():
        here = f"{where}/{name}"
        if state.get("Type") not in TYPES:
            problems.append(f"{here}: no such Type {state.get('Type')!r}")
        nexts = [state.get("Next"), state.get("Default")]
        nexts += [c.get("Next") for c in state.get("Catch", []) + state.get("Choices", [])]
        problems += [f"{here}: {n!r} names no state" for n in nexts if n and n not in states]
        if state.get("Type") not in {"Choice", "Succeed", "Fail"} and not (
            state.get("Next") or state.get("End")
        ):
            problems.append(f"{here}: neither Next nor End")
        for inner in [state.get("ItemProcessor"), *state.get("Branches", [])]:
            if inner:
                check(inner, here, problems)


def validate_state_machine_definition(self):
    try:
        problems = []
        check(json.loads(self._get_param("definition")), "", problems)
    except (ValueError, AttributeError, TypeError) as e:
        problems = [f"not a state machine: {e}"]
    diagnostics = [{"severity": "ERROR", "code": "INVALID", "message": m} for m in problems]
    return ActionResult({"result": "FAIL" if problems else "OK", "diagnostics": diagnostics})


def list_state_machine_versions(self):
    machine = self.stepfunction_backend.describe_state_machine(self._get_param("stateMachineArn"))
    versions = [
        {"stateMachineVersionArn": v.arn, "creationDate": v.creation_date}
        for _, v in sorted(machine.versions.items(), reverse=True)
    ]
    return ActionResult({"stateMachineVersions": versions})


StepFunctionResponse.validate_state_machine_definition = validate_state_machine_definition
StepFunctionResponse.list_state_machine_versions = list_state_machine_versions
main(sys.argv[1:])
"""
"""moto's server, plus the two Step Functions calls the AWS provider makes that moto
5.2.5 does not implement: ValidateStateMachineDefinition (on every definition it
plans) and ListStateMachineVersions (on every read). moto answers both with a 500,
which the provider retries for minutes. Here the validation is structural only
(JSON; each StartAt, Next, Default and Catch names a state of its scope; Next or
End), not AWS's: the definition's content is asserted by the tests themselves."""


@pytest.fixture(scope="module")
def moto_iam() -> Iterator[str]:
    """A moto server in its own process, with AWS managed policies loaded (MOTO_SERVER)."""
    with moto_process(MOTO_SERVER, MOTO_IAM_LOAD_MANAGED_POLICIES="true") as url:
        yield url


def check_archiver(url: str, other: dict[str, Any]) -> None:
    """The archiver as moto holds it after the apply (moto stores the state machine,
    the schedule, the queue and the alarms; it runs none of them)."""
    import boto3

    session = boto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )
    name = f"{other['name']}-archiver"
    sfn = session.client("stepfunctions", endpoint_url=url)
    machine = sfn.describe_state_machine(stateMachineArn=other["archiver_state_machine_arn"])
    assert (machine["name"], machine["type"]) == (name, "STANDARD")
    definition = json.loads(machine["definition"])
    assert definition["States"]["Shards"]["Parameters"] == {
        "segments.$": "States.ArrayRange(0, 15, 1)"  # 16 shards by default
    }
    archive = definition["States"]["Archive"]
    assert archive["ItemProcessor"]["ProcessorConfig"] == {
        "Mode": "DISTRIBUTED",
        "ExecutionType": "STANDARD",
    }
    assert (archive["MaxConcurrency"], archive["ToleratedFailurePercentage"]) == (8, 0)
    assert archive["ItemSelector"] == {"segment.$": "$$.Map.Item.Value", "total_segments": 16}
    shard = archive["ItemProcessor"]["States"]["ArchiveShard"]
    lam = session.client("lambda", endpoint_url=url)
    fn = lam.get_function(FunctionName=other["archiver_function_name"])["Configuration"]
    assert shard["Parameters"]["FunctionName"] == fn["FunctionArn"]
    assert shard["Retry"][0]["MaxAttempts"] == 3
    assert fn["Handler"] == "langgraph_s3.archiver.handler"
    assert fn["Environment"]["Variables"] == {
        "LANGGRAPH_S3_BUCKET": "tf-other-agents",
        "LANGGRAPH_S3_PREFIX": "langgraph",
        "LANGGRAPH_S3_TABLE": "tf-other-manifest",
        "LANGGRAPH_S3_PACK_AFTER_DAYS": "30",
        "LANGGRAPH_S3_INDEX_METADATA": "user_id",
    }
    # the ARN the module builds for its role's policy is the one the state machine got
    iam = session.client("iam", endpoint_url=url)
    run_policy = iam.get_role_policy(RoleName=f"{name}-sfn", PolicyName="run-the-archiver")
    grants = {
        a: st["Resource"] for st in run_policy["PolicyDocument"]["Statement"] for a in st["Action"]
    }
    assert grants["states:StartExecution"] == [machine["stateMachineArn"]]
    assert grants["states:DescribeExecution"] == [
        machine["stateMachineArn"].replace(":stateMachine:", ":execution:") + "/*"
    ]
    assert machine["roleArn"].endswith(f":role/{name}-sfn")

    events = session.client("events", endpoint_url=url)
    assert events.describe_rule(Name=name)["ScheduleExpression"] == "rate(1 day)"
    (target,) = events.list_targets_by_rule(Rule=name)["Targets"]
    assert target["Arn"] == machine["stateMachineArn"]
    assert target["RoleArn"].endswith(f":role/{name}-evt")

    sqs = session.client("sqs", endpoint_url=url)
    queue = sqs.get_queue_attributes(QueueUrl=other["archiver_dlq_url"], AttributeNames=["All"])
    assert queue["Attributes"]["QueueArn"].endswith(f":{name}-dlq")
    assert queue["Attributes"]["MessageRetentionPeriod"] == "1209600"
    assert queue["Attributes"]["SqsManagedSseEnabled"] == "true"

    cloudwatch = session.client("cloudwatch", endpoint_url=url)
    alarms = {
        a["MetricName"]: a for a in cloudwatch.describe_alarms(AlarmNamePrefix=name)["MetricAlarms"]
    }
    assert set(alarms) == {"ExecutionsFailed", "ApproximateNumberOfMessagesVisible"}
    assert alarms["ExecutionsFailed"]["Dimensions"] == [
        {"Name": "StateMachineArn", "Value": machine["stateMachineArn"]}
    ]
    assert alarms["ApproximateNumberOfMessagesVisible"]["Dimensions"] == [
        {"Name": "QueueName", "Value": f"{name}-dlq"}
    ]
    for alarm in alarms.values():
        assert alarm["Threshold"] == 1
        assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
        assert alarm["TreatMissingData"] == "notBreaching"

    # index_metadata = ["user_id"]: the index, and the agent may Query it
    ddb = session.client("dynamodb", endpoint_url=url)
    table = ddb.describe_table(TableName="tf-other-manifest")["Table"]
    (index,) = table["GlobalSecondaryIndexes"]
    assert index["IndexName"] == "meta_user_id"
    assert index["KeySchema"] == [
        {"AttributeName": "ix_user_id", "KeyType": "HASH"},
        {"AttributeName": "pk", "KeyType": "RANGE"},
    ]
    assert index["Projection"]["ProjectionType"] == "KEYS_ONLY"
    agent = json.loads(other["policy_json"])["Statement"]
    assert {
        "Sid": "ManifestIndexes",
        "Effect": "Allow",
        "Action": ["dynamodb:Query"],
        "Resource": [table["TableArn"] + "/index/*"],
        "Condition": {
            "ForAllValues:StringLike": {
                "dynamodb:LeadingKeys": list(leading_keys("tf-other-agents", "langgraph"))
            }
        },
    } in agent


async def check_shared(url: str, other: dict[str, Any], shared: dict[str, Any]) -> None:
    """The third deployment, on the second's table (create_table = false): it made no
    table, its outputs name that one, its agent is limited to its own partition keys
    there, its sweeper reads that table's stream, and a saver on it writes only keys
    its policy's patterns allow."""
    import boto3

    session = boto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )
    ddb = session.client("dynamodb", endpoint_url=url)
    assert "tf-shared-agents" not in ddb.list_tables()["TableNames"]
    table = ddb.describe_table(TableName="tf-other-manifest")["Table"]
    conn = "s3://tf-shared-agents/agents/dev?table=tf-other-manifest"
    assert (shared["table_name"], shared["table_arn"]) == (other["table_name"], table["TableArn"])
    assert shared["checkpointer_conn_string"] == conn
    assert shared["environment"]["LANGGRAPH_S3_CHECKPOINTER"] == conn
    mine = list(leading_keys("tf-shared-agents", "agents/dev"))
    grants = {s["Sid"]: s for s in json.loads(shared["policy_json"])["Statement"]}
    assert grants["Manifest"]["Resource"] == [table["TableArn"]]
    assert grants["ManifestIndexes"]["Resource"] == [table["TableArn"] + "/index/*"]
    for sid in ("Manifest", "ManifestIndexes"):
        condition = grants[sid]["Condition"]["ForAllValues:StringLike"]
        assert condition == {"dynamodb:LeadingKeys": mine}, (sid, condition)
    sweeper = {s["Sid"]: s for s in json.loads(shared["sweeper_policy_json"])["Statement"]}
    assert sweeper["TombstoneTheThread"]["Condition"] == grants["Manifest"]["Condition"]
    # a deletion's late pass, run on its record's TTL removal, ends by deleting it
    assert "dynamodb:DeleteItem" in sweeper["TombstoneTheThread"]["Action"]
    lam = session.client("lambda", endpoint_url=url)
    fn = lam.get_function(FunctionName=shared["sweeper_function_name"])["Configuration"]
    assert fn["Environment"]["Variables"]["LANGGRAPH_S3_PREFIX"] == "agents/dev"
    arns = [m["EventSourceArn"] for m in lam.list_event_source_mappings()["EventSourceMappings"]]
    assert arns.count(table["LatestStreamArn"]) == 2  # the second's sweeper and its own

    index = {"index_metadata": ["user_id"]}  # found by a Query of meta_user_id
    async with AsyncS3Saver.from_conn_string(conn, endpoint_url=url, **index) as saver:
        graph = chat_graph().compile(checkpointer=saver)
        run_cfg = {"configurable": {"thread_id": "t"}, "metadata": {"user_id": "u1"}}
        await graph.ainvoke({"messages": [("user", "hello")]}, run_cfg)
        assert [t.thread_id async for t in saver.alist_threads(metadata={"user_id": "u1"})] == ["t"]
    items = ddb.scan(TableName="tf-other-manifest")["Items"]  # the test's own look
    assert items and all(allows(mine, i["pk"]["S"]) for i in items), [i["pk"] for i in items]


async def test_apply_three_deployments_one_on_anothers_table_then_run_without_setup(
    tf: dict[str, Any], moto_iam: str
) -> None:
    # one apply, three deployments in one account: examples/basic (name "tf-agents",
    # enforce_tls = false), the bare module with its defaults, and a third on the second's
    # table (tests/moto/main.tf)
    root = tf["dir"] / "tests" / "moto"
    package = shutil.make_archive(
        str(tf["dir"].parent / "sweeper"), "zip", Path(__file__).parent.parent / "src"
    )  # the library's source: moto stores the code, it does not run it
    run(tf, "init", "-backend=false", "-input=false", cwd=root)
    run(
        tf,
        "apply",
        "-auto-approve",
        "-input=false",
        "-var",
        f"endpoint_url={moto_iam}",
        "-var",
        f"sweeper_package={package}",
        cwd=root,
        timeout=900,
    )
    both = {k: v["value"] for k, v in json.loads(run(tf, "output", "-json", cwd=root)).items()}
    outputs, other = both["agents"], both["other"]
    assert outputs["checkpointer_conn_string"] == "s3://tf-agents/agents/prod?table=tf-manifest"
    assert outputs["lambda_role_arn"]
    assert (
        other["checkpointer_conn_string"]
        == "s3://tf-other-agents/langgraph?table=tf-other-manifest"
    )
    check_archiver(moto_iam, other)
    await check_shared(moto_iam, other, both["shared"])
    assert outputs.get("archiver_state_machine_arn") is None  # off unless asked for

    from botocore.exceptions import ClientError

    async with AsyncS3Saver(bucket="tf-agents", endpoint_url=moto_iam) as probe:
        # the thread TTL sweeper: the table's stream, the function and its mapping
        ddb = await probe.clients.client("dynamodb")
        table = (await ddb.describe_table(TableName="tf-other-manifest"))["Table"]
        assert table["StreamSpecification"] == {
            "StreamEnabled": True,
            "StreamViewType": "OLD_IMAGE",
        }
        assert other["stream_arn"] == table["LatestStreamArn"]
        lam = await probe.clients.client("lambda")
        fn = (await lam.get_function(FunctionName=other["sweeper_function_name"]))["Configuration"]
        assert fn["Handler"] == "langgraph_s3.sweeper.handler"
        assert fn["Environment"]["Variables"]["LANGGRAPH_S3_BUCKET"] == "tf-other-agents"
        mappings = (await lam.list_event_source_mappings())["EventSourceMappings"]
        assert [m["EventSourceArn"] for m in mappings if m["FunctionArn"] == fn["FunctionArn"]] == [
            table["LatestStreamArn"]
        ]
        assert outputs.get("sweeper_function_name") is None  # off unless asked for
        # the names carry each deployment's prefix (the default one: the bucket's name),
        # and both deployments' roles and policies exist side by side
        iam = await probe.clients.client("iam")
        roles = {r["RoleName"] for r in (await iam.list_roles())["Roles"]}
        policies = {p["PolicyName"] for p in (await iam.list_policies(Scope="Local"))["Policies"]}
        assert {"tf-agents-lambda", "tf-other-agents-lambda"} <= roles, roles
        assert {"tf-agents-agent", "tf-other-agents-agent"} <= policies, policies
        assert (outputs["lambda_role_name"], other["lambda_role_name"]) == (
            "tf-agents-lambda",
            "tf-other-agents-lambda",
        )
        for who in (outputs, other):  # each role has its own deployment's policy attached
            role = who["lambda_role_name"]
            attached = (await iam.list_attached_role_policies(RoleName=role))["AttachedPolicies"]
            assert who["policy_name"] in {a["PolicyName"] for a in attached}, (role, attached)

        # TLS enforced by default: moto serves plain http, so the policy refuses a write
        # (moto 5.2.5 answers object requests with an empty-bodied 403)...
        s3 = await probe.clients.client("s3")
        assert (
            "aws:SecureTransport"
            in (await s3.get_bucket_policy(Bucket="tf-other-agents"))["Policy"]
        )
        with pytest.raises(ClientError, match=r"Forbidden|AccessDenied"):
            await s3.put_object(Bucket="tf-other-agents", Key="langgraph/probe", Body=b"x")
        # ...and enforce_tls = false left no bucket policy: the run below needs none removed
        with pytest.raises(ClientError, match="NoSuchBucketPolicy"):
            await s3.get_bucket_policy(Bucket="tf-agents")

    made: set[str] = set()
    keys: list[str] = []

    def record(request: Any, **kw: Any) -> None:
        op = kw["event_name"].split(".", 2)
        name = f"{'s3' if op[1] == 's3' else 'dynamodb'}.{op[2]}"
        if name == "s3.PutObject" and request.headers.get("x-amz-tagging"):
            name += "+tagging"
        made.add(name)
        if op[1] == "s3":
            keys.append(request.url.split("/tf-agents", 1)[1])

    cfg = {"configurable": {"thread_id": "tf-thread"}}
    async with AsyncS3Saver.from_conn_string(
        outputs["checkpointer_conn_string"], endpoint_url=moto_iam
    ) as saver:  # no setup(): terraform made the bucket and the table
        saver.clients.add_hook("before-send", record)
        graph = chat_graph().compile(checkpointer=saver)
        await graph.ainvoke({"messages": [("user", "hello")]}, cfg)
        await saver.acopy_thread("tf-thread", "tf-copy")
        await saver.aprune(["tf-copy"], strategy="keep_latest")
        await saver.adelete_thread("tf-copy")
    async with AsyncS3Saver.from_conn_string(
        outputs["checkpointer_conn_string"], endpoint_url=moto_iam
    ) as operator:  # delete_for_runs Queries once an operator's setup() (a Scan: not
        # the agent's) marked the run index whole; not recorded
        assert "runs_indexed" not in await operator.manifest.setup.marker_says()
        await operator.setup()
    async with AsyncS3Saver.from_conn_string(
        outputs["checkpointer_conn_string"], endpoint_url=moto_iam
    ) as resumed:
        resumed.clients.add_hook("before-send", record)
        await resumed.adelete_for_runs(["no-such-run"])
        graph = chat_graph().compile(checkpointer=resumed)
        out = await graph.ainvoke({"messages": [("user", "what is the weather?")]}, cfg)
        assert len(out["messages"]) == 6  # the conversation continued
    async with AsyncS3Store.from_conn_string(
        outputs["store_conn_string"], endpoint_url=moto_iam
    ) as store:
        store.clients.add_hook("before-send", record)
        await store.aput(("users", "1"), "prefs", {"theme": "dark"}, ttl=2 * 1440)
        assert (await store.aget(("users", "1"), "prefs")) is not None
        assert len(await store.asearch(("users",))) == 1
        await store.adelete(("users", "1"), "prefs")
        await store.aput(("users", "1"), "prefs", {"theme": "light"}, ttl=2 * 1440)
        key = store.layout.store_item(("users", "1"), "prefs")
    async with AsyncS3Saver(bucket="tf-agents", endpoint_url=moto_iam) as inspect:
        s3 = await inspect.clients.client("s3")  # not recorded: the test's own look
        tags = (await s3.get_object_tagging(Bucket="tf-agents", Key=key))["TagSet"]
        lifecycle = await s3.get_bucket_lifecycle_configuration(Bucket="tf-agents")
        rules = lifecycle["Rules"]
        assert lifecycle["TransitionDefaultMinimumObjectSize"] == "all_storage_classes_128K"
    assert tags == [{"Key": TTL_TAG, "Value": "2d"}]
    # archived history moves as packs only, and only packs over 128 KB
    # (the size filter itself is checked offline: moto drops it, the example sets 0 here)
    (packs_rule,) = [r for r in rules if r["ID"] == "langgraph-s3-archive-packs"]
    assert packs_rule["Filter"]["Prefix"] == "agents/prod/packs/"
    assert [t["StorageClass"] for t in packs_rule["Transitions"]] == ["STANDARD_IA", "GLACIER_IR"]
    assert all("Transitions" not in r for r in rules if r is not packs_rule)
    matching = [r for r in rules if r.get("Filter", {}).get("Tag") == tags[0]]
    assert len(matching) == 1 and matching[0]["Expiration"]["Days"] == 2
    assert matching[0]["Status"] == "Enabled"

    # the policy allows every action the library made, and nothing broader
    policy = json.loads(outputs["policy_json"])
    allowed = {a for s in policy["Statement"] for a in s["Action"]}
    needed = {a for op in made for a in actions_for(op)}
    assert needed <= allowed, needed - allowed
    assert allowed == set(RUNTIME_ACTIONS)
    assert all("*" not in a for a in allowed)

    # and every object it touched lies under the prefix the policy names
    def under_prefix(k: str) -> bool:
        if k.startswith("/"):
            return k.startswith("/agents/prod/")
        return "prefix=agents%2Fprod%2F" in k or k.startswith("?delete")  # keys in the body

    assert keys and all(under_prefix(k) for k in keys), [k for k in keys if not under_prefix(k)]
    assert {"s3.PutObject+tagging", "s3.CopyObject", "s3.DeleteObjects", "dynamodb.Query"} <= made
    assert "dynamodb.Scan" not in made  # the agent's policy has none
    # and its manifest actions only on its deployment's partition keys
    (manifest,) = [s for s in policy["Statement"] if s["Sid"] == "Manifest"]
    assert manifest["Condition"] == {
        "ForAllValues:StringLike": {
            "dynamodb:LeadingKeys": list(leading_keys("tf-agents", "agents/prod"))
        }
    }
    list_stmt = next(s for s in policy["Statement"] if s["Action"] == ["s3:ListBucket"])
    assert list_stmt["Condition"]["StringLike"]["s3:prefix"] == ["agents/prod/*"]


OVERRIDE = """provider "aws" {{
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
  s3_use_path_style           = true
  endpoints {{
    s3     = "{url}"
    dynamodb = "{url}"
    iam    = "{url}"
    sts    = "{url}"
    lambda = "{url}"
  }}
}}

module "langgraph_s3" {{
  enforce_tls              = false # moto is plain http: a TLS-only policy refuses the upload
  archive_min_object_bytes = 0     # moto loses a lifecycle filter's size (terraform waits)
}}
"""
"""An override file (terraform merges it into the root's blocks): the root as written,
pointed at moto, with moto's two quirks."""


def test_lambda_terraform_writes_a_root_that_deploys_a_zip_with_its_secret_and_bedrock(
    tf: dict[str, Any], moto_iam: str, tmp_path: Path
) -> None:
    """From the package alone: `langgraph-s3 lambda terraform` writes the module and the
    root into a project; the root validates and applies on moto with a model key from
    Secrets Manager and a Bedrock statement; what it made, read back with boto3."""
    import subprocess as sp
    import sys
    import zipfile

    import boto3

    project = tmp_path / "project"
    (project / "dist").mkdir(parents=True)
    with zipfile.ZipFile(project / "dist" / "lambda.zip", "w") as z:  # moto stores it
        z.writestr("langgraph_s3_handler.py", "def handler(event, context):\n    return {}\n")
    wrote = sp.run(
        [sys.executable, "-m", "langgraph_s3.cli", "lambda", "terraform"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert wrote.returncode == 0, wrote.stderr
    root = project / "terraform"
    assert "terraform -chdir=terraform init" in wrote.stdout
    assert sorted(p.name for p in (root / "modules" / "langgraph-s3").iterdir()) == [
        "main.tf",
        "outputs.tf",
        "variables.tf",
        "versions.tf",
    ]
    run(tf, "fmt", "-check", "-recursive", cwd=root)
    run(tf, "init", "-backend=false", "-input=false", cwd=root)
    run(tf, "validate", cwd=root)

    session = boto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )
    secret = session.client("secretsmanager", endpoint_url=moto_iam).create_secret(
        Name="tf-scaffold-openai", SecretString="sk-test"
    )["ARN"]
    model = "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0"
    (root / "moto_override.tf").write_text(OVERRIDE.format(url=moto_iam))
    (root / "terraform.tfvars.json").write_text(
        json.dumps(
            {
                "name": "tf-scaffold",
                "bucket_name": "tf-scaffold-state",
                "table_name": "tf-scaffold-manifest",
                "environment": {"MODEL_ID": "claude-3-5-haiku"},
                "secrets": {"OPENAI_API_KEY": secret},
                "policy_statements": [{"Action": ["bedrock:InvokeModel"], "Resource": [model]}],
            }
        )
    )
    run(tf, "apply", "-auto-approve", "-input=false", cwd=root, timeout=900)

    lam = session.client("lambda", endpoint_url=moto_iam)
    fn = lam.get_function_configuration(FunctionName="tf-scaffold-agent")
    env = fn["Environment"]["Variables"]
    assert json.loads(env["LANGGRAPH_S3_SECRETS"]) == {"OPENAI_API_KEY": secret}
    assert env["MODEL_ID"] == "claude-3-5-haiku"
    assert env["LANGGRAPH_S3_CHECKPOINTER"] == (
        "s3://tf-scaffold-state/agents/prod?table=tf-scaffold-manifest"
    )
    assert fn["Handler"] == "langgraph_s3_handler.handler"
    iam = session.client("iam", endpoint_url=moto_iam)
    role = fn["Role"].rsplit("/", 1)[1]
    attached = {
        p["PolicyName"]: p["PolicyArn"]
        for p in iam.list_attached_role_policies(RoleName=role)["AttachedPolicies"]
    }
    assert {"tf-scaffold-agent", "tf-scaffold-extra"} <= set(attached), attached
    version = iam.get_policy(PolicyArn=attached["tf-scaffold-extra"])["Policy"]["DefaultVersionId"]
    document = iam.get_policy_version(PolicyArn=attached["tf-scaffold-extra"], VersionId=version)
    statements = document["PolicyVersion"]["Document"]["Statement"]
    granted = {(a, r) for s in statements for a in s["Action"] for r in s["Resource"]}
    assert ("secretsmanager:GetSecretValue", secret) in granted
    assert ("bedrock:InvokeModel", model) in granted
    assert all(s["Effect"] == "Allow" for s in statements)
    # the agent policy stays the library's own: nothing of the extras in it
    agent = iam.get_policy(PolicyArn=attached["tf-scaffold-agent"])["Policy"]
    body = iam.get_policy_version(PolicyArn=agent["Arn"], VersionId=agent["DefaultVersionId"])
    assert "bedrock" not in json.dumps(body["PolicyVersion"]["Document"])
