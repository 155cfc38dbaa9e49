"""The `langgraph-s3` commands, each run as a subprocess against moto, on
threads built by real graphs: a chat with a tool call and a fork, and a nested
subgraph waiting on an interrupt. ``--json`` answers are compared with the
library's own; the human output is checked for the key facts."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from helpers import agent_user, answer, build, cfg, left_of, moto_process, run, url_of
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.ops.deploy.iam import RUNTIME_ACTIONS
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.graphs import chat_graph


async def test_threads_history_show_and_diff_answer_what_the_library_does(
    s3_fresh: MotoServer, deployment: Any
) -> None:
    saver, url = deployment
    listed = answer(run(s3_fresh, url, "--json", "threads"))
    mine = {t.thread_id: t async for t in saver.alist_threads()}
    assert {t["thread_id"] for t in listed} == set(mine) == {"chat", "nest"}
    assert [t["updated_at"] for t in listed] == sorted(
        (t["updated_at"] for t in listed), reverse=True
    )
    assert {t["thread_id"]: len(t["namespaces"]) for t in listed} == {"chat": 1, "nest": 3}
    human = run(s3_fresh, url, "threads").stdout.decode()
    assert "2 of 2 threads" in human and "chat" in human and "nest" in human

    rows = answer(run(s3_fresh, url, "--json", "history", "chat"))
    tuples = [t async for t in saver.alist(cfg("chat"))]
    assert [r["checkpoint_id"] for r in rows] == [t.checkpoint["id"] for t in tuples]
    assert [r["step"] for r in rows] == [t.metadata["step"] for t in tuples]
    assert {n for r in rows for n in r["nodes"]} >= {"agent", "tools"}
    assert any(r["source"] == "update" for r in rows)  # the fork
    human = run(s3_fresh, url, "history", "chat", "--limit", "3").stdout.decode()
    assert "thread 'chat': 3 checkpoints" in human

    latest = answer(run(s3_fresh, url, "--json", "show", "chat"))
    mine_latest = await saver.aget_tuple(cfg("chat"))
    assert mine_latest is not None
    assert latest["checkpoint_id"] == mine_latest.checkpoint["id"]
    assert [m["content"] for m in latest["values"]["messages"]] == [
        m.content for m in mine_latest.checkpoint["channel_values"]["messages"]
    ]
    assert "messages" in latest["diff"]
    oldest = rows[-1]["checkpoint_id"]
    changes = answer(run(s3_fresh, url, "--json", "diff", "chat", oldest, latest["checkpoint_id"]))
    said = changes["messages"]["messages"]
    assert said["added"] and not said["removed"] and changes["to"] == latest["checkpoint_id"]
    waiting = answer(run(s3_fresh, url, "--json", "history", "nest"))
    sub = [
        t
        async for t in saver.alist(cfg("nest", ns=None))
        if t.config["configurable"]["checkpoint_ns"]
    ]
    deepest = max((t.config["configurable"]["checkpoint_ns"] for t in sub), key=len)
    inner = answer(run(s3_fresh, url, "--json", "show", "nest", "--ns", deepest))
    assert waiting and inner["checkpoint_ns"] == deepest
    assert any(w["channel"] == "__interrupt__" for w in inner["writes"]) or inner["interrupts"]
    # for people: what the interrupt asks, as text, not the stored JSON with its id
    asked = run(s3_fresh, url, "show", "nest", "--ns", deepest).stdout.decode()
    lines = [ln for ln in asked.splitlines() if ln.startswith("interrupt:")]
    assert lines == ["interrupt: asks inner needs input"], asked


async def test_export_import_round_trip_through_files_and_pipes(
    s3_fresh: MotoServer, deployment: Any, tmp_path: Path
) -> None:
    _, url = deployment
    other_names = unique_names()
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **other_names) as other:
        await other.setup()
        other_url = url_of(other_names)
        file = tmp_path / "threads.jsonl.gz"
        out = answer(run(s3_fresh, url, "--json", "export", "-o", str(file)))
        assert out["threads"] == 2 and file.stat().st_size > 0
        back = answer(run(s3_fresh, other_url, "--json", "import", str(file)))
        assert (back["threads"], back["checkpoints"]) == (2, out["checkpoints"])
        for thread in ("chat", "nest"):
            assert answer(run(s3_fresh, other_url, "--json", "history", thread)) == answer(
                run(s3_fresh, url, "--json", "history", thread)
            )
        # through a pipe, replacing what is there
        piped = run(s3_fresh, url, "export", "chat")
        assert piped.returncode == 0 and piped.stdout.startswith(b'{"format"')
        refused = run(s3_fresh, other_url, "import", "-", stdin=piped.stdout)
        assert refused.returncode == 1 and b"--replace" in refused.stderr
        again = run(s3_fresh, other_url, "import", "-", "--replace", stdin=piped.stdout)
        assert again.returncode == 0 and b"imported: 1 thread(s)" in again.stdout


async def test_maintenance_commands_report_what_they_did(
    s3_fresh: MotoServer, deployment: Any
) -> None:
    saver, url = deployment
    copied = answer(run(s3_fresh, url, "--json", "copy", "chat", "chat-2"))
    assert copied["threads"] == 1 and copied["objects"] > 0
    pruned = answer(run(s3_fresh, url, "--json", "prune", "chat-2", "--keep-last", "2"))
    assert pruned["threads"] == 1 and pruned["checkpoints"] > 0
    assert len([t async for t in saver.alist(cfg("chat-2"))]) == 2
    packed = answer(run(s3_fresh, url, "--json", "pack", "nest"))
    assert packed["threads"] == 1
    assert await saver.raw_objects.list_all(saver.layout.thread("nest")) == []
    human = run(s3_fresh, url, "history", "nest")
    assert human.returncode == 0 and "checkpoints" in human.stdout.decode()  # read from the pack
    swept = answer(run(s3_fresh, url, "--json", "sweep"))
    assert swept["threads"]["threads"] == 0 and swept["store"] == {"deleted": 0}
    deleted = run(s3_fresh, url, "delete", "chat-2", "nest")
    assert deleted.returncode == 0 and b"deleted: 2 thread(s)" in deleted.stdout
    assert {t.thread_id async for t in saver.alist_threads()} == {"chat"}


async def test_sweep_deletes_expired_threads_and_store_items(s3_fresh: MotoServer) -> None:
    names = unique_names()
    url = url_of(names)
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, thread_ttl_days=1, **names) as saver:
        await saver.setup()
        saver.manifest.clock = lambda: time.time() - 2 * 86400  # type: ignore[attr-defined]
        await build(saver)  # written two days ago: their one-day TTL has passed
        saver.manifest.clock = time.time  # type: ignore[attr-defined]
        graph = chat_graph().compile(checkpointer=saver)
        await graph.ainvoke({"messages": [("user", "still here")]}, cfg("fresh"))
        stale = await saver.raw_objects.list_all(saver.layout.thread("chat"))
        assert stale
    assert run(s3_fresh, url, "store", "put", "a", "short", "{}", "--ttl", "0.01").returncode == 0
    assert run(s3_fresh, url, "store", "put", "a", "long", "{}", "--ttl", "60").returncode == 0
    time.sleep(1.0)  # 0.6 s of TTL ran out
    refused = run(s3_fresh, url, "sweep", "--store-url", "not a url")  # before any delete
    assert refused.returncode in (2, 4) and refused.stdout == b"", refused.stderr
    only_threads = answer(run(s3_fresh, url, "--json", "sweep", "--what", "threads"))
    assert only_threads["threads"]["threads"] == 2 and only_threads["store"] is None
    human = run(s3_fresh, url, "sweep")
    assert human.returncode == 0, human.stderr.decode()
    out = human.stdout.decode()
    assert "swept threads: 0 thread(s)" in out and "swept store: 1 expired item(s)" in out
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as saver:
        assert {t.thread_id async for t in saver.alist_threads()} == {"fresh"}
        assert await left_of(saver, "chat") == []
    assert answer(run(s3_fresh, url, "--json", "store", "ls")) == ["a"]
    assert run(s3_fresh, url, "store", "get", "a", "short").returncode == 3
    assert run(s3_fresh, url, "store", "get", "a", "long").returncode == 0
    # the store alone needs no saver URL
    store_url = f"s3://{names['bucket']}/"
    alone = run(s3_fresh, None, "--json", "sweep", "--what", "store", "--store-url", store_url)
    assert answer(alone) == {"threads": None, "store": {"deleted": 0}}
    # a store that cannot be swept: the thread sweep's result is still reported
    broken = run(s3_fresh, url, "--json", "sweep", "--store-url", "s3://no-such-bucket-lgs3/")
    assert broken.returncode == 4 and b"no-such-bucket-lgs3" in broken.stderr
    assert orjson.loads(broken.stdout) == {
        "threads": {**orjson.loads(broken.stdout)["threads"], "threads": 0},
        "store": None,
    }


def test_exit_codes_and_one_line_errors(s3_fresh: MotoServer) -> None:
    names = unique_names()
    missing = run(s3_fresh, None, "threads")
    assert missing.returncode == 4 and b"LANGGRAPH_S3_URL" in missing.stderr
    no_table = run(s3_fresh, url_of(names), "threads")
    assert no_table.returncode == 4
    assert no_table.stderr.decode().startswith("error: ") and no_table.stderr.count(b"\n") == 1
    bad = run(s3_fresh, url_of(names), "history")
    assert bad.returncode == 2
    assert run(s3_fresh, url_of(names), "pack").returncode == 2  # nothing named


async def test_nothing_found_is_exit_3(s3_fresh: MotoServer, deployment: Any) -> None:
    _, url = deployment
    gone = run(s3_fresh, url, "show", "no-such-thread")
    assert gone.returncode == 3 and b"no-such-thread" in gone.stderr
    assert run(s3_fresh, url, "history", "no-such-thread").returncode == 3
    assert run(s3_fresh, url, "show", "chat", "--checkpoint", "nope").returncode in (2, 3)


async def test_store_commands_answer_what_the_store_does(
    s3_fresh: MotoServer, deployment: Any
) -> None:
    from langgraph_s3 import AsyncS3Store

    saver, url = deployment
    stored = run(s3_fresh, url, "store", "put", "users.42", "prefs", '{"theme": "dark"}')
    assert stored.returncode == 0, stored.stderr.decode()
    run(s3_fresh, url, "store", "put", "users.7", "prefs", '{"theme": "light"}', "--ttl", "60")
    run(s3_fresh, url, "store", "put", "docs", "readme", '{"text": "hello"}')
    t = saver.target
    async with AsyncS3Store(bucket=t.bucket, prefix=t.prefix, endpoint_url=s3_fresh.url) as store:
        item = await store.aget(("users", "42"), "prefs")
        assert item is not None and item.value == {"theme": "dark"}
        mine = sorted(".".join(ns) for ns in await store.alist_namespaces())
    assert sorted(answer(run(s3_fresh, url, "--json", "store", "ls"))) == mine
    assert answer(run(s3_fresh, url, "--json", "store", "ls", "users")) == ["users.42", "users.7"]
    got = answer(run(s3_fresh, url, "--json", "store", "get", "users.42", "prefs"))
    assert got["value"] == {"theme": "dark"} and got["namespace"] == "users.42"
    found = answer(
        run(s3_fresh, url, "--json", "store", "search", "users", "--filter", '{"theme": "light"}')
    )
    assert [(r["namespace"], r["key"]) for r in found] == [("users.7", "prefs")]
    assert run(s3_fresh, url, "store", "rm", "users.42", "prefs").returncode == 0
    assert run(s3_fresh, url, "store", "get", "users.42", "prefs").returncode == 3
    assert answer(run(s3_fresh, url, "--json", "store", "sweep")) == {"deleted": 0}
    bad = run(s3_fresh, url, "store", "put", "users.1", "k", "[1, 2]")
    assert bad.returncode == 2 and b"JSON object" in bad.stderr


async def healthy(s3_fresh: MotoServer) -> tuple[dict[str, str], AsyncS3Saver]:
    """A deployment as the terraform module leaves it (moto over http: no TLS policy)."""
    from langgraph_s3 import AsyncS3Store

    names = unique_names()
    saver = AsyncS3Saver(endpoint_url=s3_fresh.url, **names)
    await saver.setup()
    async with AsyncS3Store(bucket=names["bucket"], endpoint_url=s3_fresh.url) as store:
        await store.setup()  # the store's TTL lifecycle rules
    s3 = await saver.clients.client("s3")
    await s3.put_bucket_encryption(
        Bucket=names["bucket"],
        ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
        },
    )
    await s3.put_public_access_block(
        Bucket=names["bucket"],
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True,
        },
    )
    ddb = await saver.clients.client("dynamodb")
    await ddb.update_continuous_backups(
        TableName=names["table"],
        PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
    )
    return names, saver


async def test_doctor_on_a_healthy_deployment_and_on_broken_ones(s3_fresh: MotoServer) -> None:
    names, saver = await healthy(s3_fresh)
    url = url_of(names)
    checks = answer(run(s3_fresh, url, "--json", "doctor"))
    failed = [c for c in checks if c["status"] == "fail"]
    assert failed == [], failed
    names_seen = {c["name"] for c in checks}
    for expected in (
        "S3 reachable",
        "DynamoDB reachable",
        "credentials",
        f"bucket {names['bucket']}",
        "bucket encryption",
        "public access block",
        f"table {names['table']}",
        "table TTL",
        "point-in-time recovery",
        "allowed: s3:PutObject",
        "allowed: dynamodb:BatchGetItem",
        "lifecycle: store TTL classes",
    ):
        assert expected in names_seen, expected
    human = run(s3_fresh, url, "doctor")
    assert human.returncode == 0 and "✔ table TTL" in human.stdout.decode()
    assert human.stdout.decode().splitlines()[-1].startswith("healthy, with 1 hardening warning")
    assert await saver.raw_objects.list_all("doctor/") == []  # probes cleaned up

    # moto evaluates no IAM: this role reaches every deployment's items, a warning
    reach = next(c for c in checks if c["name"] == "other deployments' items")
    assert reach["status"] == "warn" and "LeadingKeys" in reach["fix"], reach
    assert reach["detail"] == "reachable: allowed a GetItem of another key and a Scan"

    # a bucket without lifecycle rules: hardening it lacks, a failure only with --strict
    s3 = await saver.clients.client("s3")
    await s3.delete_bucket_lifecycle(Bucket=names["bucket"])
    warned = run(s3_fresh, url, "doctor")
    assert warned.returncode == 0
    assert "⚠ lifecycle rules" in warned.stdout.decode()
    both = b"2 hardening warning(s): other deployments' items, lifecycle rules"
    assert warned.stdout.splitlines()[-1].startswith(b"healthy, with " + both), warned.stdout
    strict = run(s3_fresh, url, "doctor", "--strict")
    assert (
        strict.returncode == 1 and b"2 check(s) failed: other deployments' items" in strict.stderr
    )
    last = strict.stdout.splitlines()[-1]
    assert last.startswith(b"unhealthy: 2 check(s) failed: other deployments' items"), last

    # a missing table
    ddb = await saver.clients.client("dynamodb")
    await ddb.delete_table(TableName=names["table"])
    gone = answer_failing(run(s3_fresh, url, "--json", "doctor"))
    table = next(c for c in gone if c["name"] == f"table {names['table']}")
    assert table["status"] == "fail" and "terraform" in table["fix"]
    await saver.aclose()


async def test_doctor_finds_a_deployment_made_by_setup_healthy_with_warnings(
    s3_fresh: MotoServer,
) -> None:
    names = unique_names()
    url = url_of(names)
    assert run(s3_fresh, url, "setup").returncode == 0
    checks = answer(run(s3_fresh, url, "--json", "doctor"))
    assert [c["name"] for c in checks if c["status"] == "fail"] == []
    warned = {c["name"] for c in checks if c["status"] == "warn"}
    assert warned == {
        "bucket encryption",
        "public access block",
        "point-in-time recovery",
        "other deployments' items",
        "lifecycle rules",
    }, warned
    human = run(s3_fresh, url, "doctor")
    assert human.returncode == 0 and b"5 hardening warning(s)" in human.stdout.splitlines()[-1]
    assert run(s3_fresh, url, "doctor", "--strict").returncode == 1


def answer_failing(proc: subprocess.CompletedProcess[bytes]) -> Any:
    assert proc.returncode == 1, proc.stderr.decode()
    return orjson.loads(proc.stdout)


async def test_doctor_names_a_denied_action(tmp_path: Path) -> None:
    """A moto server that enforces IAM (after its first N requests): the agent's user
    may do everything but s3:DeleteObject, and the doctor names that action."""
    with moto_process(INITIAL_NO_AUTH_ACTION_COUNT="60") as url:
        names = unique_names()
        async with AsyncS3Saver(endpoint_url=url, **names) as saver:
            await saver.setup()
            creds = await agent_user(
                saver,
                [
                    {"Effect": "Allow", "Action": "*", "Resource": "*"},
                    {"Effect": "Deny", "Action": "s3:DeleteObject", "Resource": "*"},
                ],
            )
        agent = {
            **os.environ,
            **creds,
            "AWS_ENDPOINT_URL": url,
            "LANGGRAPH_S3_URL": url_of(names),
        }
        proc = subprocess.run(
            [sys.executable, "-m", "langgraph_s3.cli", "--json", "doctor"],
            env=agent,
            capture_output=True,
            timeout=120,
        )
        checks = {c["name"]: c for c in answer_failing(proc)}
        assert checks["credentials"]["detail"].startswith("arn:aws:iam::")
        assert "user/agent" in checks["credentials"]["detail"]
        denied = checks["allowed: s3:DeleteObject"]
        assert denied["status"] == "fail" and denied["detail"] == "denied"
        assert "s3:DeleteObject" in denied["fix"]
        allowed = [n for n, c in checks.items() if n.startswith("allowed:") and c["status"] == "ok"]
        assert "allowed: s3:PutObject" in allowed and "allowed: dynamodb:UpdateItem" in allowed


async def test_doctor_under_the_agents_runtime_policy() -> None:
    """A moto server that enforces IAM actions (not conditions): the agent's user has
    exactly the runtime's actions. Nothing fails; the Scan it lacks is a note; the
    GetItem of another deployment's key is let through (moto ignores the LeadingKeys
    condition that AWS applies), and the doctor warns of it."""
    with moto_process(INITIAL_NO_AUTH_ACTION_COUNT="60") as url:
        names = unique_names()
        async with AsyncS3Saver(endpoint_url=url, **names) as saver:
            await saver.setup()
            # and the doctor's own reads of the bucket's and the table's settings
            settings = ["s3:GetBucket*", "s3:Get*Configuration", "dynamodb:Describe*"]
            actions = [*sorted(RUNTIME_ACTIONS), "s3:HeadBucket", *settings]
            creds = await agent_user(
                saver, [{"Effect": "Allow", "Action": actions, "Resource": "*"}]
            )
        agent = {**os.environ, **creds, "AWS_ENDPOINT_URL": url, "LANGGRAPH_S3_URL": url_of(names)}
        proc = subprocess.run(
            [sys.executable, "-m", "langgraph_s3.cli", "--json", "doctor"],
            env=agent,
            capture_output=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        checks = {c["name"]: c for c in orjson.loads(proc.stdout)}
        allowed = [n for n in checks if n.startswith("allowed:") and checks[n]["status"] == "ok"]
        assert "allowed: dynamodb:Query" in allowed and "allowed: s3:DeleteObject" in allowed
        scan = checks["allowed: dynamodb:Scan"]
        assert scan["status"] == "info" and scan["detail"].startswith("denied: an agent needs none")
        reach = checks["other deployments' items"]
        assert reach["status"] == "warn", reach
        assert reach["detail"] == "reachable: allowed a GetItem of another key"


async def test_the_cli_with_awkward_data_and_input(
    s3_fresh: MotoServer, deployment: Any, tmp_path: Path
) -> None:
    """Markup in data, a pruned parent, files and numbers a user gets wrong, a copy of
    nothing."""
    saver, url = deployment
    graph = chat_graph().compile(checkpointer=saver)
    await graph.ainvoke({"messages": [("user", "[/bold] oops [red]")]}, cfg("markup"))
    shown = run(s3_fresh, url, "show", "markup")
    assert shown.returncode == 0 and "[/bold] oops [red]" in shown.stdout.decode()
    rows = answer(run(s3_fresh, url, "--json", "history", "markup"))
    changed = run(
        s3_fresh, url, "diff", "markup", rows[-1]["checkpoint_id"], rows[0]["checkpoint_id"]
    )
    assert changed.returncode == 0 and "[red]" in changed.stdout.decode()

    assert run(s3_fresh, url, "copy", "chat", "pruned").returncode == 0
    assert run(s3_fresh, url, "prune", "pruned", "--keep-last", "1").returncode == 0
    alone = answer(run(s3_fresh, url, "--json", "show", "pruned"))  # its parent is gone
    assert alone["parent_id"] is not None and alone["values"]["messages"]

    for args, code in (
        (("import", str(tmp_path / "no-such-file")), 1),
        (("import", str(tmp_path)), 1),
        (("export", "chat", "-o", str(tmp_path / "no-dir" / "x.jsonl")), 1),
        (("prune", "chat", "--older-than-days", "nan"), 2),
        (("store", "put", "a.b", "k", "{}", "--ttl", "1e300"), 2),
        (("copy", "no-such-thread", "x"), 3),
        (("delete", "no-such-thread"), 3),
        (("export", "no-such-thread", "-o", str(tmp_path / "e.jsonl")), 3),
    ):
        proc = run(s3_fresh, url, *args)
        assert proc.returncode == code, (args, proc.returncode, proc.stderr.decode())
        assert b"Traceback" not in proc.stderr, proc.stderr
        if code != 2:  # click words a usage error in a few lines of its own
            assert proc.stderr.count(b"\n") == 1, proc.stderr
    bad = tmp_path / "bad.gz"
    bad.write_text("not gzip")
    proc = run(s3_fresh, url, "import", str(bad))
    assert proc.returncode in (1, 2) and b"Traceback" not in proc.stderr
