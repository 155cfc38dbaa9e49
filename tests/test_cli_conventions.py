"""The command line's conventions, each as a subprocess against moto on threads built
by real graphs (``helpers.build``: a chat with a tool call and a fork, a subgraph in a
subgraph): it takes the ids it prints, ``latest~N`` and node paths; global options
anywhere; exit 4 naming a missing bucket; ``setup``; dry runs and confirmations
before anything is removed; conversations shown as messages; ``--help`` without the
SDK."""

from __future__ import annotations

import operator
import os
import pty
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from helpers import answer, build, cfg, run, url_of
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.moto import free_port


class OddState(TypedDict):
    items: Annotated[list[Any], operator.add]
    schema: dict[str, Any]


async def ids_of(saver: AsyncS3Saver, thread: str, ns: str = "") -> list[str]:
    return [t.checkpoint["id"] async for t in saver.alist(cfg(thread, ns=ns))]


async def test_checkpoints_are_named_as_history_prints_them(
    s3_fresh: MotoServer, deployment: Any
) -> None:
    saver, url = deployment
    ids = await ids_of(saver, "chat")
    shown = run(s3_fresh, url, "history", "chat").stdout.decode()
    printed = ids[3][-12:]
    assert printed in shown
    by_suffix = answer(run(s3_fresh, url, "--json", "show", "chat", printed))
    assert by_suffix["checkpoint_id"] == ids[3]
    unique = next(n for n in range(13, 37) if sum(i.startswith(ids[3][:n]) for i in ids) == 1)
    by_prefix = answer(
        run(s3_fresh, url, "--json", "show", "chat", "--checkpoint", ids[3][:unique])
    )
    assert by_prefix["checkpoint_id"] == ids[3]
    # latest~N walks parents, as LangGraph's history does
    latest = await saver.aget_tuple(cfg("chat"))
    assert latest is not None
    walk = [latest.checkpoint["id"]]
    tup = latest
    for _ in range(3):
        assert tup is not None and tup.parent_config is not None
        tup = await saver.aget_tuple(tup.parent_config)
        assert tup is not None
        walk.append(tup.checkpoint["id"])
    assert (
        answer(run(s3_fresh, url, "--json", "show", "chat", "latest"))["checkpoint_id"] == walk[0]
    )
    back = answer(run(s3_fresh, url, "--json", "show", "chat", "latest~3"))
    assert back["checkpoint_id"] == walk[3]
    # a prefix every id shares is ambiguous (2, the candidates named); none is 3
    shared = ids[0][: next(n for n in range(36) if len({i[: n + 1] for i in ids}) > 1)]
    ambiguous = run(s3_fresh, url, "show", "chat", shared)
    assert ambiguous.returncode == 2 and b"checkpoints in thread 'chat'" in ambiguous.stderr
    missing = run(s3_fresh, url, "show", "chat", "ffffffffffff")
    assert missing.returncode == 3 and b"history THREAD" in missing.stderr
    past = run(s3_fresh, url, "show", "chat", f"latest~{len(ids) + 5}")
    assert past.returncode == 3 and b"first checkpoint" in past.stderr


async def test_namespaces_by_node_path_and_a_miss_lists_them(
    s3_fresh: MotoServer, deployment: Any
) -> None:
    saver, url = deployment
    info = await saver.aget_thread("nest")
    assert info is not None
    deepest = max(info.namespaces, key=len)
    assert deepest.startswith("middle:") and "|inner:" in deepest
    for path in ("middle/inner", "middle|inner"):
        shown = answer(run(s3_fresh, url, "--json", "show", "nest", "--ns", path))
        assert shown["checkpoint_ns"] == deepest
    rows = answer(run(s3_fresh, url, "--json", "history", "nest", "--ns", "middle/inner"))
    assert [r["checkpoint_id"] for r in rows] == await ids_of(saver, "nest", deepest)
    miss = run(s3_fresh, url, "history", "nest", "--ns", "middle/nope")
    assert miss.returncode == 3
    assert b"middle/inner" in miss.stderr and b"(root)" in miss.stderr


async def test_global_options_anywhere_on_the_line(s3_fresh: MotoServer, deployment: Any) -> None:
    _, url = deployment
    before = answer(run(s3_fresh, url, "--json", "threads"))
    after = answer(run(s3_fresh, None, "threads", "--json", "--url", url))
    equals = answer(run(s3_fresh, None, "threads", f"--url={url}", "--json"))
    assert (
        {t["thread_id"] for t in before}
        == {t["thread_id"] for t in after}
        == {t["thread_id"] for t in equals}
    )
    # the store's --store-url after its subcommand too
    store_url = url.partition("?")[0]
    assert run(s3_fresh, url, "store", "ls", "--store-url", store_url).returncode == 0


def test_a_missing_bucket_or_table_is_exit_4_naming_it(s3_fresh: MotoServer) -> None:
    names = unique_names()
    no_bucket = run(s3_fresh, f"s3://no-such-bucket-lgs3/x?table={names['table']}", "threads")
    assert no_bucket.returncode == 4
    assert b"no-such-bucket-lgs3" in no_bucket.stderr and no_bucket.stdout == b""
    default_table = run(s3_fresh, f"s3://{names['bucket']}/x", "threads")
    assert b"using 'langgraph-s3-manifest'" in default_table.stderr
    assert default_table.returncode == 4


def test_an_endpoint_that_refuses_is_exit_4_after_one_attempt_however_given(
    s3_fresh: MotoServer,
) -> None:
    """The deployment check makes one attempt: a refused port is exit 4 within seconds,
    saying what to check, whether the endpoint came by --endpoint-url, inside the URL or
    from AWS_ENDPOINT_URL (the retry policy would take 5 attempts and their backoff)."""
    names = unique_names()
    dead = f"http://127.0.0.1:{free_port()}"
    url = f"s3://{names['bucket']}/x?table={names['table']}"
    env = {**os.environ, "AWS_ENDPOINT_URL": s3_fresh.url}
    env.pop("LANGGRAPH_S3_URL", None)
    for args, extra in (
        (["--url", url, "--endpoint-url", dead], {}),
        (["--url", f"{url}&endpoint_url={dead}"], {}),
        (["--url", url], {"AWS_ENDPOINT_URL": dead}),
    ):
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "langgraph_s3.cli", *args, "threads"],
            env={**env, **extra},
            capture_output=True,
            timeout=120,
        )
        took = time.monotonic() - started
        assert proc.returncode == 4, (args, proc.stderr)
        assert b"could not connect (1 attempt)" in proc.stderr and dead.encode() in proc.stderr
        assert proc.stdout == b""
        assert took < 5.0, (args, took)


def test_setup_creates_what_is_missing_and_a_dry_run_nothing(s3_fresh: MotoServer) -> None:
    names = unique_names()
    url = url_of(names)
    dry = answer(run(s3_fresh, url, "--json", "setup", "--dry-run"))
    assert dry["dry_run"] is True and any(names["table"] in x for x in dry["saver"])
    assert any(names["bucket"] in x for x in dry["saver"])
    assert run(s3_fresh, url, "threads").returncode == 4  # nothing was made
    made = run(s3_fresh, url, "setup")
    assert made.returncode == 0 and b"created table" in made.stdout
    again = run(s3_fresh, url, "setup")
    assert b"nothing to create" in again.stdout
    assert answer(run(s3_fresh, url, "--json", "threads")) == []


async def all_of(saver: Any, thread: str) -> list[Any]:
    """Every checkpoint of ``thread``, in every namespace."""
    return [t async for t in saver.alist(cfg(thread, ns=None))]


async def test_dry_runs_change_nothing_and_say_what_would_go(
    s3_fresh: MotoServer, deployment: Any
) -> None:
    saver, url = deployment
    before = await ids_of(saver, "chat")
    norule = run(s3_fresh, url, "prune", "chat")
    assert norule.returncode == 2 and b"--keep-last" in norule.stderr
    plan = answer(run(s3_fresh, url, "--json", "prune", "chat", "--keep-last", "2", "--dry-run"))
    assert plan["dry_run"] and plan["threads"] == ["chat"] and plan["checkpoints"] > 0
    assert await ids_of(saver, "chat") == before
    gone = answer(run(s3_fresh, url, "--json", "delete", "chat", "nest", "--dry-run"))
    assert gone["threads"] == ["chat", "nest"] and gone["namespaces"] == 4
    # every checkpoint of the two histories, each namespace's own counted
    every = [t for thread in ("chat", "nest") for t in await all_of(saver, thread)]
    assert gone["checkpoints"] == len(every) > 0, (gone, len(every))
    said = run(s3_fresh, url, "delete", "nest", "--dry-run").stdout.decode()
    nest = await all_of(saver, "nest")
    assert f"would delete 1 thread(s) (3 namespace(s), {len(nest)} checkpoint(s))" in said, said
    packed = answer(run(s3_fresh, url, "--json", "pack", "chat", "--dry-run"))
    assert packed["threads"] == ["chat"]
    swept = answer(run(s3_fresh, url, "--json", "sweep", "--what", "threads", "--dry-run"))
    assert swept["threads"] == []
    assert await ids_of(saver, "chat") == before and await saver.aget_thread("nest") is not None
    # and the real prune removes what the dry run said
    done = answer(run(s3_fresh, url, "--json", "prune", "chat", "--keep-last", "2"))
    assert done["checkpoints"] == plan["checkpoints"]


async def test_copy_onto_an_existing_thread_needs_replace(
    s3_fresh: MotoServer, deployment: Any
) -> None:
    saver, url = deployment
    chat = await ids_of(saver, "chat")
    nest = await ids_of(saver, "nest")
    refused = run(s3_fresh, url, "copy", "chat", "nest")
    assert refused.returncode == 1 and b"--replace" in refused.stderr
    assert await ids_of(saver, "nest") == nest
    plan = answer(run(s3_fresh, url, "--json", "copy", "chat", "nest", "--replace", "--dry-run"))
    assert plan["replaced"] is True and await ids_of(saver, "nest") == nest
    assert run(s3_fresh, url, "copy", "chat", "nest", "--replace").returncode == 0
    assert await ids_of(saver, "nest") == chat
    info = await saver.aget_thread("nest")
    assert info is not None and info.namespaces == ("",)


async def test_a_terminal_is_asked_before_a_delete(s3_fresh: MotoServer, deployment: Any) -> None:
    saver, url = deployment

    def on_terminal(answer_with: bytes) -> int:
        main, child = pty.openpty()
        env = {**os.environ, "AWS_ENDPOINT_URL": s3_fresh.url, "LANGGRAPH_S3_URL": url}
        proc = subprocess.Popen(
            [sys.executable, "-m", "langgraph_s3.cli", "delete", "chat"],
            stdin=child,
            stdout=subprocess.DEVNULL,
            stderr=child,
            env=env,
        )
        os.close(child)
        seen = b""
        while b"[y/N]" not in seen:
            seen += os.read(main, 1024)
        assert b"delete 1 thread(s) for good: 'chat'" in seen
        os.write(main, answer_with)
        code = proc.wait(timeout=60)
        os.close(main)
        return code

    assert on_terminal(b"n\n") == 1
    assert await saver.aget_thread("chat") is not None
    assert on_terminal(b"y\n") == 0
    assert await saver.aget_thread("chat") is None


def test_view_shows_its_progress_on_a_terminal(
    s3_fresh: MotoServer, deployment: Any, tmp_path: Path
) -> None:
    """Reading a thread's checkpoints can take seconds: on a terminal, `view` counts
    them as they come (stderr); piped, it prints no bar."""
    _, url = deployment
    main, child = pty.openpty()
    env = {**os.environ, "AWS_ENDPOINT_URL": s3_fresh.url, "LANGGRAPH_S3_URL": url}
    out = tmp_path / "chat.html"
    proc = subprocess.Popen(
        [sys.executable, "-m", "langgraph_s3.cli", "view", "chat", "-o", str(out)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=child,
        env=env,
    )
    os.close(child)
    seen = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the child's end closed: it exited
            break
        if not chunk:
            break
        seen += chunk
    assert proc.wait(timeout=60) == 0 and out.exists()
    os.close(main)
    assert b"reading checkpoints" in seen, seen
    piped = run(s3_fresh, url, "view", "chat", "-o", str(tmp_path / "again.html"))
    assert piped.returncode == 0 and b"reading checkpoints" not in piped.stderr


async def test_history_show_and_diff_read_as_a_conversation(
    s3_fresh: MotoServer, deployment: Any
) -> None:
    saver, url = deployment
    rows = answer(run(s3_fresh, url, "--json", "history", "chat"))
    assert not any(c.startswith(("branch:", "__")) for r in rows for c in r["changed"])
    said = [m for r in rows for m in r["said"]]
    assert {m["role"] for m in said} >= {"user", "assistant", "tool"}
    everything = answer(run(s3_fresh, url, "--json", "history", "chat", "--all"))
    assert any(c.startswith("branch:") for r in everything for c in r["changed"])
    latest = await saver.aget_tuple(cfg("chat"))
    assert latest is not None
    last = latest.checkpoint["channel_values"]["messages"][-1]
    role = {"human": "user", "ai": "assistant", "tool": "tool"}[last.type]
    shown = run(s3_fresh, url, "show", "chat", "latest").stdout.decode()
    assert f"+ messages: {role}: {last.content[:40]}" in shown
    assert "branch:to" not in shown.split("state:")[0].replace("--all shows them", "")
    diff = answer(run(s3_fresh, url, "--json", "diff", "chat", "latest~2", "latest"))
    added = diff["messages"]["messages"]["added"]
    assert added and added[-1]["text"] == last.content and added[-1]["role"] == role
    human = run(s3_fresh, url, "diff", "chat", "latest~2").stdout.decode()
    assert f"+ messages: {role}: {last.content[:40]}" in human


def test_help_loads_no_sdk_and_no_langgraph() -> None:
    probe = (
        "import sys\n"
        "from langgraph_s3.ops.tools.cli import main\n"
        "code = main(['--help'])\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'langgraph', 'langchain_core', 'botocore', 'aiobotocore', 'pydantic', 'moto'})\n"
        "print(repr((code, heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, check=True)
    assert out.stdout.decode().strip().splitlines()[-1] == "(0, [])"


async def test_reading_commands_work_under_the_agents_runtime_policy() -> None:
    """The deployment check before each command uses only what the runtime policy
    grants (no DescribeTable): an operator with the agent's role reads its threads.
    Listing every thread is a Scan, which that policy leaves out: the command says
    which role it needs (exit 4, a deployment problem), not a bare AccessDenied."""
    from helpers import agent_user, moto_process
    from langgraph_s3.ops.deploy.iam import RUNTIME_ACTIONS

    with moto_process(INITIAL_NO_AUTH_ACTION_COUNT="150") as url:
        names = unique_names()
        async with AsyncS3Saver(endpoint_url=url, **names) as saver:
            await saver.setup()
            await build(saver)
            # moto checks HeadBucket as s3:HeadBucket; AWS as s3:ListBucket (granted)
            actions = [*sorted(RUNTIME_ACTIONS), "s3:HeadBucket"]
            creds = await agent_user(
                saver, [{"Effect": "Allow", "Action": actions, "Resource": "*"}]
            )
        env = {
            **os.environ,
            **creds,
            "AWS_ENDPOINT_URL": url,
            "LANGGRAPH_S3_URL": url_of(names),
        }
        for args in (["history", "chat"], ["show", "chat", "latest"], ["threads"]):
            proc = subprocess.run(
                [sys.executable, "-m", "langgraph_s3.cli", *args], env=env, capture_output=True
            )
            if args != ["threads"]:
                assert proc.returncode == 0, (args, proc.stderr.decode())
        said = proc.stderr.decode()
        assert proc.returncode == 4 and said.startswith("error: dynamodb.scan on table"), said
        assert "a Scan reads every deployment's items" in said, said
        assert "need a role that may Scan the table, an operator's or the archiver's" in said


async def test_a_dry_run_counts_what_prune_removes_after_an_earlier_prune(
    s3_fresh: MotoServer, deployment: Any
) -> None:
    saver, url = deployment
    first = answer(run(s3_fresh, url, "--json", "prune", "chat", "--keep-last", "3", "--dry-run"))
    done = answer(run(s3_fresh, url, "--json", "prune", "chat", "--keep-last", "3"))
    assert first["checkpoints"] == done["checkpoints"] > 0
    # pruned already: checkpoints held below the floor for their values are not counted
    again = answer(run(s3_fresh, url, "--json", "prune", "chat", "--keep-last", "3", "--dry-run"))
    assert again["checkpoints"] == 0 and again["threads"] == []
    # and a packed thread pruned by the same rule stays packed (nothing to remove)
    await saver.apack(["chat"])
    packed = await saver.aprune(["chat"], keep_last=3)
    assert packed.checkpoints == 0 and packed.skipped == 1
    entries = await saver.manifest.reads.namespaces("chat")
    assert entries and all(e.pack is not None for e in entries)


async def test_odd_state_values_render_without_error(s3_fresh: MotoServer) -> None:
    """A list channel of plain values, and a dict that looks almost like a message,
    in history, show and diff."""
    from langgraph.graph import StateGraph

    def step(state: OddState) -> dict[str, Any]:
        return {"items": [len(state["items"]), None], "schema": {"type": ["string", "null"]}}

    names = unique_names()
    url = url_of(names)
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as saver:
        await saver.setup()
        builder = StateGraph(OddState)
        builder.add_node("step", step)
        builder.set_entry_point("step")
        graph = builder.compile(checkpointer=saver)
        for _ in range(2):
            await graph.ainvoke({"items": [{"type": ["x"], "content": 1}]}, cfg("odd"))
    rows = answer(run(s3_fresh, url, "--json", "history", "odd"))
    assert rows and all(r["said"] == [] for r in rows)
    assert run(s3_fresh, url, "show", "odd", "latest").returncode == 0
    diff = answer(run(s3_fresh, url, "--json", "diff", "odd", "latest~3", "latest"))
    assert diff["messages"] == {} and "items" in diff["channels"]


async def test_import_says_what_it_would_do_and_points_the_right_way(
    s3_fresh: MotoServer, deployment: Any, tmp_path: Any
) -> None:
    saver, url = deployment
    file = tmp_path / "chat.jsonl"
    assert run(s3_fresh, url, "export", "chat", "-o", str(file)).returncode == 0
    before = await ids_of(saver, "chat")
    exists = run(s3_fresh, url, "import", str(file))
    assert exists.returncode == 1 and b"--replace" in exists.stderr
    assert b"replace=True" not in exists.stderr
    plan = answer(run(s3_fresh, url, "--json", "import", str(file), "--replace", "--dry-run"))
    assert plan == {"dry_run": True, "threads": ["chat"], "existing": ["chat"], "replace": True}
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(file.read_bytes()[: file.stat().st_size // 2])
    refused = run(s3_fresh, url, "import", str(cut), "--replace", "--dry-run")
    assert refused.returncode == 1 and b"export or copy it again whole" in refused.stderr
    assert b"bucket version" not in refused.stderr
    assert await ids_of(saver, "chat") == before  # nothing was written by any of them
