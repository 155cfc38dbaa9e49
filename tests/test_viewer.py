"""`langgraph-s3 view`: one self-contained HTML page per thread.

The layout is pure logic, tested on random trees (hypothesis). The page itself is
tested in a real headless browser: playwright driving Debian's Chromium, on pages
the command wrote, as a subprocess, from threads real graphs left on moto. Where no
Chromium is installed the browser tests skip with that reason
(``LANGGRAPH_S3_REQUIRE_CHROMIUM=1``, as CI sets, makes that a failure instead).

``LANGGRAPH_S3_SCREENSHOT_DIR=docs`` makes the browser test leave its screenshot
there: the README's picture of the viewer is the one this test takes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import answer, build, cfg, run, url_of
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.ops.tools.layout import lanes, order
from langgraph_s3.ops.tools.viewer import forks, model, render
from langgraph_s3.ops.views import checkpoint_id, parent_id
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.graphs import chat_graph

# ------------------------------------------------------------------ the layout


@st.composite
def trees(draw: Any) -> tuple[list[str], dict[str, str | None]]:
    """Checkpoints and their parents as a thread may hold them: mostly older parents,
    some gone (pruned), some newer than their child (a writer's clock behind), and
    now and then a loop (damaged or hand-made data)."""
    n = draw(st.integers(1, 40))
    ids = [f"c{i:03d}" for i in range(n)]
    parents: dict[str, str | None] = {}
    for i in range(n):
        kind = draw(st.sampled_from(["older"] * 8 + ["none", "gone", "any"]))
        if kind == "older" and i:
            parents[ids[i]] = ids[draw(st.integers(0, i - 1))]
        elif kind == "any":
            parents[ids[i]] = ids[draw(st.integers(0, n - 1))]
        else:
            parents[ids[i]] = "gone" if kind == "gone" else None
    return ids, parents


def _has_loop(cid: str, parents: dict[str, str | None]) -> bool:
    seen = set()
    at: str | None = cid
    while at is not None and at in parents:
        if at in seen:
            return True
        seen.add(at)
        at = parents[at]
    return False


@given(trees())
@settings(max_examples=400, deadline=None)
def test_rows_and_lanes_draw_every_fork_as_a_branch_and_never_through_a_checkpoint(
    tree: tuple[list[str], dict[str, str | None]],
) -> None:
    ids, parents = tree
    rows, cut = order(ids, parents)
    assert sorted(rows) == sorted(ids)  # each once: a loop neither hangs nor drops one
    assert all(_has_loop(c, parents) for c in cut)  # only loops are cut
    kept = {c: None if c in cut else parents[c] for c in ids}
    row = {c: i for i, c in enumerate(rows)}
    for c in ids:  # every parent above its children
        p = kept[c]
        assert p is None or p not in row or row[p] < row[c]
    if all(p is None or p not in row or p < c for c, p in kept.items()):
        assert rows == sorted(ids)  # time order whenever it is consistent
    lane = lanes(rows, kept)
    assert set(lane) == set(ids)
    kids: dict[str, list[str]] = {}
    for c in rows:
        p = kept[c]
        if p is not None and p in row:
            kids.setdefault(p, []).append(c)
    # at most one child continues its parent's lane: the others are forks
    for p, cs in kids.items():
        assert sum(lane[c] == lane[p] for c in cs) <= 1
    # lane 0 is the line the thread continues from: the last row and its ancestors
    at: str | None = rows[-1]
    while at is not None and at in row:
        assert lane[at] == 0
        at = kept[at]
    # no edge is drawn through another checkpoint of the lane it runs down
    for c in rows:
        p = kept[c]
        if p is not None and p in row:
            between = [q for q in rows if lane[q] == lane[c] and row[p] < row[q] < row[c]]
            assert between == [], (p, c, between)


def test_lanes_reuse_a_free_lane() -> None:
    # a -> c -> e is the line the thread continues from; b forks from a and ends
    # before c's fork d begins, so both branches share lane 1
    ids = ["a", "b", "c", "d", "e"]
    parents: dict[str, str | None] = {"a": None, "b": "a", "c": "a", "d": "c", "e": "c"}
    lane = lanes(ids, parents)
    assert (lane["a"], lane["c"], lane["e"]) == (0, 0, 0)
    assert lane["b"] == lane["d"] == 1
    # overlapping branches do not share: d (forked from a) spans the rows of b -> c
    parents = {"a": None, "b": "a", "c": "b", "d": "a", "e": "a"}
    lane = lanes(ids, parents)
    assert lane["e"] == 0 and lane["d"] == 1 and lane["b"] == lane["c"] == 2


# ------------------------------------------------------------ the page's data


def value_of(data: dict[str, Any], key: str) -> Any:
    """A value of the page's data as its script rebuilds it."""
    if key in data["values"]:
        return data["values"][key]
    base, tail = data["extends"][key]
    return value_of(data, base) + tail


async def chat_tuples(turns: int) -> list[Any]:
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    graph = chat_graph().compile(checkpointer=saver)
    for i in range(turns):
        await graph.ainvoke({"messages": [("user", f"turn {i}")]}, cfg("long"))
    return [t async for t in saver.alist(cfg("long", ns=None))]


async def test_the_page_grows_with_what_changed() -> None:
    tuples = await chat_tuples(8)
    data = model("long", tuples)
    nodes = [n for g in data["namespaces"] for n in g["nodes"]]
    assert len(nodes) == len(tuples)
    # every checkpoint's messages as they were, each list stored as its parent's + new ones
    for t in tuples:
        node = next(n for n in nodes if n["id"] == t.checkpoint["id"])
        if "messages" in t.checkpoint["channel_values"]:
            shown = value_of(data, node["channels"]["messages"])
            assert [m["content"] for m in shown] == [
                m.content for m in t.checkpoint["channel_values"]["messages"]
            ]
    assert data["extends"] and all(len(tail) <= 2 for _, tail in data["extends"].values())
    # four times the turns: about four times the page, not sixteen
    small = len(render(data))
    large = len(render(model("long", await chat_tuples(32))))
    assert large < 5 * small, (small, large)


def test_loops_pruned_parents_and_odd_values_still_draw() -> None:
    from langgraph.checkpoint.base import CheckpointTuple, empty_checkpoint

    def tup(cid: str, parent: str | None, ns: str = "", pns: str = "") -> CheckpointTuple:
        ck = empty_checkpoint()
        ck["id"] = cid
        ck["channel_values"] = {"n": 2**70, "s": "\ud800 lone", "b": b"\x00"}
        ck["channel_versions"] = {"n": "1", "s": "1", "b": "1"}
        conf = {"configurable": {"thread_id": "t", "checkpoint_ns": ns, "checkpoint_id": cid}}
        pc = (
            {"configurable": {"thread_id": "t", "checkpoint_ns": pns, "checkpoint_id": parent}}
            if parent
            else None
        )
        return CheckpointTuple(conf, ck, {"step": 0, "source": "loop"}, pc)  # type: ignore[arg-type]

    tuples = [
        tup("1f-1", "1f-2"),  # a loop: 1 -> 2 -> 1, with a child 3
        tup("1f-2", "1f-1"),
        tup("1f-3", "1f-1"),
        tup("1f-4", "1f-4"),  # its own parent
        tup("1f-5", "1f-0"),  # pruned parent
        tup("1f-6", "1f-3", ns="sub:x"),  # a parent in another namespace
    ]
    data = model("t\udcff", tuples)
    page = render(data)
    assert "\\ud800 lone" in page and "1180591620717411303424" in page
    nodes = {n["id"]: n for g in data["namespaces"] for n in g["nodes"]}
    assert len(nodes) == 6
    assert nodes["1f-1"]["parent_loop"] == "1f-2" and not nodes["1f-1"]["parent_missing"]
    assert nodes["1f-4"]["parent_loop"] == "1f-4"
    assert nodes["1f-5"]["parent_missing"] and "parent_loop" not in nodes["1f-5"]
    assert nodes["1f-6"]["parent_ns"] == "" and not nodes["1f-6"]["parent_missing"]


def test_no_value_can_break_out_of_the_data_block() -> None:
    from langgraph.checkpoint.base import CheckpointTuple, empty_checkpoint

    ckpt = empty_checkpoint()
    evil = "</script><script>alert(1)</script><!-- %%DATA%% %%TITLE%%"
    ckpt["channel_values"] = {"note": evil}
    ckpt["channel_versions"] = {"note": "1"}
    conf = {"configurable": {"thread_id": evil, "checkpoint_ns": "", "checkpoint_id": ckpt["id"]}}
    page = render(model(evil, [CheckpointTuple(conf, ckpt, {"step": 0, "source": "input"})]))  # type: ignore[arg-type]
    assert page.count("</script>") == 2  # the data block's and the script's own
    assert "<!--" not in page.split('id="thread-data">', 1)[1]
    assert "%%DATA%%" in page  # the value itself, escaped in JSON, left as it was
    assert page.count('id="thread-data"') == 1


# ---------------------------------------------------------------- the browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _need_chromium() -> str:
    if CHROMIUM:
        return CHROMIUM
    reason = (
        "no Chromium on this machine: `apt-get install chromium` (Debian) to run the "
        "viewer's browser test"
    )
    if os.environ.get("LANGGRAPH_S3_REQUIRE_CHROMIUM") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    executable = _need_chromium()
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            await chromium.close()


def fork_edges(tuples: list[Any]) -> int:
    """Forks counted from the saver's own answer: each checkpoint's children past
    the first (within its namespace)."""
    children = Counter(
        (t.config["configurable"]["checkpoint_ns"], parent_id(t)) for t in tuples if parent_id(t)
    )
    return sum(n - 1 for n in children.values())


async def open_page(browser: Any, path: Path) -> tuple[Any, list[str], list[str]]:
    page = await browser.new_page(viewport={"width": 1280, "height": 760})
    requests: list[str] = []
    problems: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("dialog", lambda d: problems.append(f"a dialog opened: {d.message}"))
    await page.goto(path.as_uri())
    await page.wait_for_selector("body[data-ready]")
    return page, requests, problems


async def test_the_viewer_in_a_real_browser(
    s3_fresh: MotoServer, browser: Any, tmp_path: Path
) -> None:
    names = unique_names()
    url = url_of(names)
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as saver:
        await saver.setup()
        await build(saver)
        # a second fork of the chat, from its first answer, and a run from it
        chat = chat_graph().compile(checkpointer=saver)
        states = [s async for s in chat.aget_state_history(cfg("chat"))]
        first_answer = next(s for s in reversed(states) if s.metadata["step"] == 1)
        again = await chat.aupdate_state(first_answer.config, {"messages": [("user", "fork two")]})
        await chat.ainvoke(None, again)
        chat_tuples = [t async for t in saver.alist(cfg("chat", ns=None))]
        nest_tuples = [t async for t in saver.alist(cfg("nest", ns=None))]

    file = tmp_path / "chat.html"
    facts = answer(run(s3_fresh, url, "--json", "view", "chat", "-o", str(file)))
    assert facts["checkpoints"] == len(chat_tuples)
    assert facts["forks"] == fork_edges(chat_tuples) == 2
    human = run(s3_fresh, url, "view", "nest", "-o", str(tmp_path / "nest.html"))
    assert human.returncode == 0
    assert f"{len(nest_tuples)} checkpoints in 3 namespace(s), 0 fork(s)" in human.stdout.decode()
    missing = run(s3_fresh, url, "view", "nobody", "-o", str(tmp_path / "x.html"))
    assert missing.returncode == 3 and not (tmp_path / "x.html").exists()

    page, requests, problems = await open_page(browser, file)
    assert await page.locator("g.cp").count() == len(chat_tuples)
    assert await page.locator("path.edge.fork").count() == 2
    assert await page.locator("path.edge").count() == len(chat_tuples) - 1
    # it opens on the newest checkpoint: what the thread continues from
    newest = max(chat_tuples, key=checkpoint_id)
    assert checkpoint_id(newest) in await page.locator("#details h2").inner_text()

    # a click on an early checkpoint shows its own state, not the latest one
    early = next(t for t in chat_tuples if t.metadata["step"] == 1)
    await page.locator(f'g.cp[data-id="{checkpoint_id(early)}"] circle').click()
    assert checkpoint_id(early) in await page.locator("#details h2").inner_text()
    state = await page.locator("#state").inner_text()
    for message in early.checkpoint["channel_values"]["messages"]:
        assert message.content in state
    assert "a fork" not in state and "fork two" not in state
    assert await page.locator(f'g.cp.selected[data-id="{checkpoint_id(early)}"]').count() == 1
    # what changed there is its new message, as the command line shows it (one model)
    said = '#details > details[data-channel="messages"]'
    assert await page.locator(f"{said} .sub").first.inner_text() == "+ 1 message(s)"
    reply = early.checkpoint["channel_values"]["messages"][-1]
    assert reply.content in await page.locator(f"{said} .msg").first.inner_text()

    # each row reads as `history` does: its new messages' text beside the step
    row = await page.locator(f'g.cp[data-id="{checkpoint_id(early)}"] text').text_content()
    assert row and f"assistant: {' '.join(str(reply.content).split())[:30]}" in row, row
    # LangGraph's own channels (the input's __start__) hide until asked for
    start = next(t for t in chat_tuples if t.metadata["source"] == "input")
    assert "__start__" in start.checkpoint["channel_values"]
    await page.locator(f'g.cp[data-id="{checkpoint_id(start)}"] circle').click()
    hidden = page.locator('#state details.internal[data-channel="__start__"]')
    assert await hidden.count() == 1 and not await hidden.is_visible()
    await page.locator("#internal").check()
    assert await hidden.is_visible()
    await page.locator("#internal").uncheck()

    # search across messages: every distinct message holding the word, once
    word = "oslo"
    distinct = {  # each distinct message (kind and text) once
        (m.type, str(m.content), str(getattr(m, "tool_calls", "")))
        for t in chat_tuples
        for m in t.checkpoint["channel_values"].get("messages", [])
        if word in str(m.content).lower() or word in str(getattr(m, "tool_calls", "")).lower()
    }
    await page.fill("#search", "Oslo")
    assert await page.locator("#results li").count() == len(distinct) > 0
    hits = page.locator("g.cp.hit")
    assert 0 < await hits.count() <= len(distinct)
    await page.locator("#results li").last.click()
    chosen = await page.locator("#results li").last.get_attribute("data-id")
    assert chosen and chosen in await page.locator("#details h2").inner_text()
    shot = tmp_path / "viewer.png"
    await page.screenshot(path=str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("LANGGRAPH_S3_SCREENSHOT_DIR"):
        shutil.copy(shot, Path(os.environ["LANGGRAPH_S3_SCREENSHOT_DIR"]) / "viewer.png")

    # subgraphs: one group per namespace, each linked to the checkpoint that called it
    nest, _, nest_problems = await open_page(browser, tmp_path / "nest.html")
    assert await nest.locator("section.ns").count() == 3
    assert await nest.locator("g.cp").count() == len(nest_tuples)
    assert await nest.locator("g.cp.has-interrupt").count() >= 1
    # an interrupt reads as its question, in the row and in the details
    waiting = nest.locator("g.cp.has-interrupt").first
    assert "asks: inner needs input" in (await waiting.locator("text").text_content() or "")
    await waiting.locator("circle").click()
    assert await nest.locator("#details p.asks").first.inner_text() == "asks: inner needs input"
    deepest = max({t.config["configurable"]["checkpoint_ns"] for t in nest_tuples}, key=len)
    inner = nest.locator(f'section.ns[data-ns="{deepest}"]')
    await inner.locator(".sub .link").click()
    middle_ns = deepest.rsplit("|", 1)[0]
    caller = next(
        t for t in nest_tuples if t.config["configurable"]["checkpoint_ns"] == deepest
    ).metadata["parents"][middle_ns]
    assert caller in await nest.locator("#details h2").inner_text()

    # opened from a file, it asked the network for nothing and raised nothing
    assert requests == [file.as_uri()]
    assert problems == [] and nest_problems == []


async def test_a_hostile_message_is_shown_as_text(
    s3_fresh: MotoServer, browser: Any, tmp_path: Path
) -> None:
    names = unique_names()
    evil = '</script><img src=x onerror="alert(1)"><b id="pwned">%%DATA%%</b>'
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as saver:
        await saver.setup()
        chat = chat_graph().compile(checkpointer=saver)
        await chat.ainvoke({"messages": [("user", evil)]}, cfg("x<y"))
    file = tmp_path / "evil.html"
    assert run(s3_fresh, url_of(names), "view", "x<y", "-o", str(file)).returncode == 0
    page, requests, problems = await open_page(browser, file)
    assert await page.locator("#pwned").count() == 0
    assert evil in await page.locator("#state").inner_text()
    assert await page.locator("#title").inner_text() == "Thread x<y"
    await page.fill("#search", "%%data%%")
    assert await page.locator("#results li").count() == 1
    assert requests == [file.as_uri()] and problems == []


async def message_texts(page: Any) -> list[str]:
    """The messages the details pane shows in the state's ``messages`` channel."""
    texts: list[str] = await page.eval_on_selector_all(
        '#state [data-channel="messages"] .msg', "els => els.map(e => e.lastChild.textContent)"
    )
    return texts


async def test_a_delta_channel_thread_shows_each_checkpoints_state(
    s3_fresh: MotoServer, browser: Any, tmp_path: Path
) -> None:
    from langgraph_s3.testing.graphs import delta_graph

    names = unique_names()
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as saver:
        await saver.setup()
        graph = delta_graph(3).compile(checkpointer=saver)
        for i in range(7):
            await graph.ainvoke({"messages": [("user", f"word{i}")]}, cfg("d"))
        states = [s async for s in graph.aget_state_history(cfg("d"))]
    url = url_of(names)
    exact, appended = tmp_path / "exact.html", tmp_path / "appended.html"
    spec = "langgraph_s3.graphs:delta_graph"
    assert run(s3_fresh, url, "view", "d", "-o", str(exact), "--graph", spec).returncode == 0
    page, requests, problems = await open_page(browser, exact)
    assert requests == [exact.as_uri()]
    # with the graph, every checkpoint shows exactly the state the graph rebuilds
    for state in states:
        cid = state.config["configurable"]["checkpoint_id"]
        await page.locator(f'g.cp[data-id="{cid}"]').click()
        shown = await message_texts(page)
        assert shown == [m.content for m in state.values.get("messages", [])], cid
    await page.locator(
        f'g.cp[data-id="{states[0].config["configurable"]["checkpoint_id"]}"]'
    ).click()
    assert "folded by the graph's reducer" in await page.locator("#state").inner_text()
    await page.fill("#search", "word0")
    assert await page.locator("#results li").count() == 2  # the question and its answer

    # without it, the writes since each snapshot are appended, and the page says so
    assert run(s3_fresh, url, "view", "d", "-o", str(appended)).returncode == 0
    plain_page, _, more_problems = await open_page(browser, appended)
    note = await plain_page.locator("#state").inner_text()
    assert "appended in order" in note and "--graph" in note
    last_answer = states[0].values["messages"][-1].content  # written since the snapshot
    assert last_answer.startswith("#") and last_answer in note
    bad = run(s3_fresh, url, "view", "d", "--graph", "no.such.module:g")
    assert bad.returncode == 2 and b"could not be loaded" in bad.stderr
    wrong = run(s3_fresh, url, "view", "d", "-o", "-", "--graph", "langgraph_s3.graphs:chat_graph")
    assert wrong.returncode == 0 and b"no DeltaChannel 'messages'" in wrong.stderr

    # the graph as a user's project holds it: a file importing a sibling, its state a
    # dataclass under `from __future__ import annotations`; by file and by module name,
    # through the installed command (which, unlike `python -m`, adds no folder itself)
    project = tmp_path / "project"
    (project / "agent").mkdir(parents=True)
    (project / "agent" / "settings.py").write_text("SNAPSHOT_EVERY = 3\n")
    (project / "agent" / "graph.py").write_text(
        "from __future__ import annotations\n"
        "from dataclasses import dataclass\n"
        "from settings import SNAPSHOT_EVERY\n"
        "from langgraph_s3.graphs import delta_graph\n"
        "@dataclass\n"
        "class Options:\n"
        "    every: int = SNAPSHOT_EVERY\n"
        "graph = delta_graph(Options().every).compile()\n"
    )
    (project / "agentmod.py").write_text("from langgraph_s3.graphs import delta_graph as make\n")
    command = str(Path(sys.executable).parent / "langgraph-s3")
    env = {**os.environ, "AWS_ENDPOINT_URL": s3_fresh.url, "LANGGRAPH_S3_URL": url}
    for spec in ("agent/graph.py:graph", "agentmod:make"):
        out = subprocess.run(
            [command, "view", "d", "-o", "page.html", "--graph", spec],
            cwd=project,
            env=env,
            capture_output=True,
            timeout=120,
        )
        assert out.returncode == 0 and not out.stderr, (spec, out.stderr.decode())
        assert b'"folded":true' in (project / "page.html").read_bytes()
    assert problems == [] and more_problems == []


async def test_many_forks_stay_reachable_and_a_bad_address_is_ignored(
    browser: Any, tmp_path: Path
) -> None:
    tuples = await chat_tuples(1)
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    graph = chat_graph().compile(checkpointer=saver)
    await graph.ainvoke({"messages": [("user", "root")]}, cfg("f"))
    first = [s async for s in graph.aget_state_history(cfg("f"))][-2]  # the input step
    for i in range(40):
        await graph.aupdate_state(first.config, {"messages": [("user", f"fork {i}")]})
    tuples = [t async for t in saver.alist(cfg("f", ns=None))]
    data = model("f", tuples)
    assert forks(data) == fork_edges(tuples) == 40
    file = tmp_path / "forks.html"
    file.write_text(render(data))
    page = await browser.new_page(viewport={"width": 1280, "height": 760})
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    await page.goto(file.as_uri() + "#%E0%A4%A")  # a malformed address: ignored
    await page.wait_for_selector("body[data-ready]")
    # the checkpoint on the farthest lane can be scrolled to and clicked
    far = max(data["namespaces"][0]["nodes"], key=lambda n: n["lane"])
    assert far["lane"] >= 10
    await page.locator(f'g.cp[data-id="{far["id"]}"] circle').click(timeout=5000)
    assert far["id"] in await page.locator("#details h2").inner_text()
    assert problems == []


async def test_a_message_said_twice_is_found_twice(browser: Any, tmp_path: Path) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    graph = chat_graph().compile(checkpointer=saver)
    for _ in range(2):
        await graph.ainvoke({"messages": [("user", "go on")]}, cfg("again"))
    file = tmp_path / "again.html"
    file.write_text(render(model("again", [t async for t in saver.alist(cfg("again", ns=None))])))
    page, _, problems = await open_page(browser, file)
    await page.fill("#search", "go on")
    who = "els => els.map(e => e.textContent)"
    found = await page.eval_on_selector_all("#results li .who", who)
    assert sorted(found) == ["ai", "ai", "human", "human"] and problems == []


async def test_the_page_and_the_command_line_share_the_conversation_model(
    s3_fresh: MotoServer,
) -> None:
    """Each checkpoint's ``said`` in the page's data is what ``diff`` of it against its
    parent says of its messages (``ops/conversation.py``), edits and removals too."""
    from langchain_core.messages import RemoveMessage

    from langgraph_s3.ops.conversation import changes
    from langgraph_s3.ops.tools.viewer import model
    from langgraph_s3.ops.views import parent_id, plain

    names = unique_names()
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as saver:
        await saver.setup()
        chat = chat_graph().compile(checkpointer=saver)
        for text in ("hello there", "what is the weather in Oslo?"):
            await chat.ainvoke({"messages": [("user", text)]}, cfg("said"))
        msgs = (await chat.aget_state(cfg("said"))).values["messages"]
        edited = msgs[0].model_copy(update={"content": "hello, edited"})
        await chat.aupdate_state(cfg("said"), {"messages": [edited, RemoveMessage(id=msgs[1].id)]})
        tuples = [t async for t in saver.alist(cfg("said"))]
    by_id = {checkpoint_id(t): t for t in tuples}
    nodes = {n["id"]: n for g in model("said", tuples)["namespaces"] for n in g["nodes"]}
    kinds = set()
    for cid, tup in by_id.items():
        pid = parent_id(tup)
        parent = by_id.get(pid) if pid else None
        before = plain(parent.checkpoint["channel_values"]) if parent else None
        cli = changes(before, plain(tup.checkpoint["channel_values"]))["messages"]
        assert nodes[cid]["said"] == cli, cid
        kinds |= {k for m in cli.values() for k, v in m.items() if v}
    assert kinds == {"added", "removed", "edited"}
