"""Commands that look: ``threads``, ``history``, ``show``, ``diff``, ``view``."""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from datetime import datetime
from typing import Any

import click
from rich.table import Table

from langgraph_s3.core.shards import Shard
from langgraph_s3.ops.tools.cli.addressing import conf, resolve, resolve_ns
from langgraph_s3.ops.tools.cli.base import (
    NotFound,
    Options,
    age,
    brief,
    cli,
    command,
    parse_when,
    pass_opts,
    print_json,
    printable,
    segment_option,
    short,
    where_pairs,
)
from langgraph_s3.ops.views import checkpoint_id, parent_id


@cli.command()
@click.option("--updated-after", help="only threads written after this (ISO date/time, UTC)")
@click.option("--updated-before", help="only threads last written before this")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True)
@click.option(
    "--where",
    multiple=True,
    metavar="KEY=VALUE",
    help="only threads whose latest checkpoint's metadata has KEY=VALUE (a string; "
    "KEY:=JSON for a number, true, null); repeat for several",
)
@segment_option
@pass_opts
def threads(
    opts: Options,
    updated_after: str | None,
    updated_before: str | None,
    limit: int,
    where: tuple[str, ...],
    shard: Shard | None,
) -> None:
    """The deployment's threads, newest first (from the manifest: no S3 read)."""
    when = (parse_when(updated_after), parse_when(updated_before))
    _threads(opts, *when, limit, where_pairs(where), shard)


@command
async def _threads(
    opts: Options,
    saver: Any,
    after: datetime | None,
    before: datetime | None,
    limit: int,
    metadata: dict[str, Any] | None,
    shard: Shard | None,
) -> None:
    listing = saver.alist_threads(
        updated_after=after,
        updated_before=before,
        metadata=metadata,
        segment=shard.segment if shard else None,
        total_segments=shard.total if shard else None,
    )
    found = [t async for t in listing]
    found.sort(key=lambda t: t.updated_at, reverse=True)
    shown = found[:limit]
    if opts.as_json:
        opts.emit(
            [
                {
                    "thread_id": t.thread_id,
                    "namespaces": list(t.namespaces),
                    "latest_id": t.latest_id,
                    "created_at": t.created_at,
                    "updated_at": t.updated_at,
                    "expires_at": t.expires_at,
                    "metadata": dict(t.metadata),
                    "packed": t.packed,
                }
                for t in shown
            ]
        )
        return
    table = Table(title=f"{len(shown)} of {len(found)} threads, newest first")
    for col in ("thread", "namespaces", "updated", "created", "expires", "latest"):
        table.add_column(col)
    for t in shown:
        table.add_row(
            printable(t.thread_id),
            str(len(t.namespaces)),
            age(t.updated_at),
            age(t.created_at),
            age(t.expires_at),
            short(t.latest_id),
        )
    opts.out.print(table)


NS_HELP = (
    "the checkpoint namespace: its node path (middle/inner) or full string "
    "(default: the root graph)"
)
ALL_HELP = "LangGraph's own channels too (branch:*, __start__, ...)"


@cli.command()
@click.argument("thread")
@click.option("--ns", default="", help=NS_HELP)
@click.option("--limit", type=click.IntRange(min=1), help="the newest N checkpoints")
@click.option("--all", "all_channels", is_flag=True, help=ALL_HELP)
@pass_opts
def history(opts: Options, thread: str, ns: str, limit: int | None, all_channels: bool) -> None:
    """One line per checkpoint, newest first: step, source, nodes run, what changed
    (new messages as they read), its id (any unique part of it names it)."""
    _history(opts, thread, ns, limit, all_channels)


@command
async def _history(
    opts: Options, saver: Any, thread: str, ns: str, limit: int | None, all_channels: bool
) -> None:
    from langgraph_s3.ops.conversation import asks, changed_names, headline
    from langgraph_s3.ops.views import new_messages, summary

    ns = await resolve_ns(opts, saver, thread, ns)
    tuples = [t async for t in saver.alist(conf(thread, ns), limit=limit)]
    if not tuples:
        raise NotFound(f"thread {thread!r} has no checkpoints in namespace {ns!r}")
    by_id = {checkpoint_id(t): t for t in tuples}
    rows = []
    for t in tuples:
        pid = parent_id(t)
        parent = by_id.get(pid) if pid else None
        if pid and parent is None:  # past the limit: read it
            parent = await saver.aget_tuple(conf(thread, ns, pid))
        row = summary(t, parent)
        row["changed"] = changed_names(row["changed"], all_channels=all_channels)
        row["said"] = new_messages(t, parent)
        rows.append(row)
    if opts.as_json:
        opts.emit(rows)
        return
    table = Table(title=f"thread {printable(thread)!r}: {len(rows)} checkpoints, newest first")
    for col in ("step", "source", "nodes", "changed"):
        table.add_column(col)
    for col in ("checkpoint", "parent"):  # whole, whatever the width: show takes them
        table.add_column(col, no_wrap=True, min_width=12)
    table.add_column("notes", overflow="fold")
    for r in rows:
        notes = [headline(m, 60) for m in r["said"][:2]]
        if len(r["said"]) > 2:
            notes.append(f"(+{len(r['said']) - 2} messages)")
        notes += [f"asks: {q}" for q in asks(r["interrupts"], 100)]
        if r["errors"]:
            notes.append(f"error: {brief(r['errors'][0])}")
        table.add_row(
            str(r["step"]),
            str(r["source"]),
            ", ".join(r["nodes"]) or "-",
            ", ".join(r["changed"]) or "-",
            short(r["checkpoint_id"]),
            short(r["parent_id"]),
            "\n".join(notes),
        )
    opts.out.print(table)


@cli.command()
@click.argument("thread")
@click.argument("ref", required=False, metavar="[CHECKPOINT]")
@click.option(
    "--checkpoint",
    "checkpoint_id",
    help="the checkpoint (as the argument): an id, a unique part of one, latest~N",
)
@click.option("--ns", default="", help=NS_HELP)
@click.option("--all", "all_channels", is_flag=True, help=ALL_HELP)
@pass_opts
def show(
    opts: Options,
    thread: str,
    ref: str | None,
    checkpoint_id: str | None,
    ns: str,
    all_channels: bool,
) -> None:
    """A checkpoint whole (default: latest): what changed since its parent, as
    messages and values, its pending writes and interrupts, and its state."""
    if ref and checkpoint_id and ref != checkpoint_id:
        raise click.UsageError("name the checkpoint once: as the argument or --checkpoint")
    _show(opts, thread, ref or checkpoint_id, ns, all_channels)


@command
async def _show(
    opts: Options, saver: Any, thread: str, ref: str | None, ns: str, all_channels: bool
) -> None:
    from langgraph_s3.ops.conversation import asks, changes
    from langgraph_s3.ops.views import diff, plain, state, summary

    ns = await resolve_ns(opts, saver, thread, ns)
    tup = await resolve(saver, thread, ns, ref)
    pid = parent_id(tup)
    parent = None
    if pid:  # a parent pruned away: the checkpoint is shown against nothing
        parent = await saver.aget_tuple(conf(thread, ns, pid))
    values = plain(tup.checkpoint.get("channel_values") or {})
    before = plain(parent.checkpoint.get("channel_values") or {}) if parent else None
    shown = {
        **state(tup),
        **summary(tup, parent),
        "diff": diff(parent, tup),
        "changes": changes(before, values, all_channels=all_channels),
    }
    if opts.as_json:
        opts.emit(shown)
        return
    opts.out.print(
        f"thread {thread!r} checkpoint {shown['checkpoint_id']} "
        f"(step {shown['step']}, {shown['source']}; parent {shown['parent_id']})"
    )
    opts.out.print(f"nodes run: {', '.join(shown['nodes']) or '-'}")
    opts.out.print("changed since its parent:")
    print_changes(opts, shown["changes"], "  ")
    for w in shown["writes"]:
        opts.out.print(
            f"pending write {w['channel']} (task {w['task_id'][:8]}): {brief(w['value'])}"
        )
    for question in asks(shown["interrupts"], 200):
        opts.out.print(f"interrupt: asks {question}")
    opts.out.print("state:")
    print_state(opts, values, all_channels)


def print_changes(opts: Options, ch: dict[str, Any], indent: str) -> None:
    """A ``conversation.changes`` model, for people."""
    from langgraph_s3.ops.conversation import headline

    shown = 0
    for channel, m in ch["messages"].items():
        for mark, key in (("+", "added"), ("-", "removed")):
            for msg in m[key]:
                opts.out.print(f"{indent}{mark} {channel}: {headline(msg, 200)}")
                shown += 1
        for e in m["edited"]:
            opts.out.print(f"{indent}~ {channel}: {headline(e['before'], 90)}")
            opts.out.print(f"{indent}  now: {headline(e['after'], 200)}")
            shown += 1
    for channel, c in ch["channels"].items():
        for d in c["changes"]:
            path = channel if d["path"] == "(value)" else f"{channel}.{d['path']}"
            opts.out.print(f"{indent}{path}: {brief(d['before'])} -> {brief(d['after'])}")
            shown += 1
        if c["more"]:
            opts.out.print(f"{indent}{channel}: {c['more']} more differences (--json has all)")
    if ch["internal"]:
        opts.out.print(
            f"{indent}(LangGraph's own channels changed too: {', '.join(ch['internal'])}; "
            "--all shows them)"
        )
    elif not shown:
        opts.out.print(f"{indent}nothing")


def print_state(opts: Options, values: dict[str, Any], all_channels: bool) -> None:
    """A checkpoint's values: conversations as messages, the rest as JSON."""
    from langgraph_s3.ops.conversation import internal, is_conversation, message

    rest = {}
    for ch, v in values.items():
        if internal(ch) and not all_channels:
            continue
        if is_conversation(v) and v:
            opts.out.print(f"  {ch}: {len(v)} messages")
            for m in v:
                view = message(m)
                calls = "".join(
                    f" → {c['name']}({brief(c['args'])})" for c in view.get("tool_calls", [])
                )
                text = " ".join(x for x in (view["text"], calls.strip()) if x)
                opts.out.print(f"    {view['role']}: {text}")
            continue
        rest[ch] = v
    if rest:
        print_json(opts, rest)


@cli.command(name="diff")
@click.argument("thread")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B", default="latest")
@click.option("--ns", default="", help=NS_HELP)
@click.option("--all", "all_channels", is_flag=True, help=ALL_HELP)
@pass_opts
def diff_command(opts: Options, thread: str, a: str, b: str, ns: str, all_channels: bool) -> None:
    """What changed from checkpoint A to B (default: latest): messages added, removed
    and edited, other values by their changed leaves. A and B: ids, unique parts of
    ids, latest, latest~N."""
    _diff(opts, thread, a, b, ns, all_channels)


@command
async def _diff(
    opts: Options, saver: Any, thread: str, a: str, b: str, ns: str, all_channels: bool
) -> None:
    from langgraph_s3.ops.conversation import changes
    from langgraph_s3.ops.views import plain

    ns = await resolve_ns(opts, saver, thread, ns)
    first = await resolve(saver, thread, ns, a)
    second = await resolve(saver, thread, ns, b)
    model = changes(
        plain(first.checkpoint.get("channel_values") or {}),
        plain(second.checkpoint.get("channel_values") or {}),
        all_channels=all_channels,
    )
    if opts.as_json:
        opts.emit({"from": checkpoint_id(first), "to": checkpoint_id(second), **model})
        return
    opts.out.print(f"from {checkpoint_id(first)} to {checkpoint_id(second)}:")
    print_changes(opts, model, "  ")


@cli.command()
@click.argument("thread")
@click.option("-o", "--output", help="the HTML file to write (default: THREAD.html; - for stdout)")
@click.option(
    "--graph",
    "graph_spec",
    metavar="MODULE:GRAPH",
    help="the graph that wrote the thread (module or file.py, then its graph, builder or "
    "a function making one): DeltaChannel values are then folded by their own reducers",
)
@pass_opts
def view(opts: Options, thread: str, output: str | None, graph_spec: str | None) -> None:
    """Write a thread's history as one self-contained HTML page: the checkpoint graph
    with its forks, subgraphs grouped, each checkpoint's changes and state, and a
    search over the messages. No network: it opens from an archive years later."""
    graph = _load_graph(graph_spec) if graph_spec else None
    _view(opts, thread, output or _file_name(thread) + ".html", graph)


def _file_name(thread: str) -> str:
    """A file name from a thread id; an id changed to make it gets a short hash, so
    that ``a/b`` and ``a:b`` do not write the same file."""
    import hashlib

    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in thread).strip(".")[:100]
    if safe != thread:
        digest = hashlib.blake2b(thread.encode("utf-8", "backslashreplace"), digest_size=4)
        safe = f"{safe or 'thread'}-{digest.hexdigest()}"
    return safe


def _load_graph(spec: str) -> Any:
    """The graph ``--graph`` names (``ops/graph_spec.py``), or a usage error saying why not."""
    from langgraph_s3.ops.graph_spec import GraphSpecError, load_graph

    try:
        return load_graph(spec)
    except GraphSpecError as exc:
        raise click.BadParameter(str(exc)) from exc
    except Exception as exc:
        raise click.BadParameter(f"{spec!r} could not be loaded: {exc!r}") from exc


@command
async def _view(opts: Options, saver: Any, thread: str, output: str, graph: Any) -> None:
    from langgraph_s3.ops.tools.viewer import forks, model, render

    tuples = []
    with opts.progress("reading checkpoints") as progress:  # a long thread takes seconds
        async for t in saver.alist({"configurable": {"thread_id": thread}}):
            tuples.append(t)
            if progress is not None:
                progress(None, len(tuples), None)
    if not tuples:
        raise NotFound(
            f"thread {thread!r} has no checkpoints: `langgraph-s3 threads` lists the threads"
        )
    data = model(thread, tuples, source=opts.url, graph=graph)
    if graph is not None:
        unfolded = sorted(
            {
                (n["ns"] or "(root)", ch)
                for g in data["namespaces"]
                for n in g["nodes"]
                for ch, d in n["delta"].items()
                if not d["folded"]
            }
        )
        for ns, ch in unfolded:
            opts.err.print(
                f"warning: the graph given has no DeltaChannel {ch!r} for namespace {ns}: "
                "its writes are shown appended in order (is it the graph that wrote the thread?)"
            )
    page = render(data).encode()
    if output == "-":
        sys.stdout.buffer.write(page)
    else:
        part = f"{output}.{secrets.token_hex(4)}.part"  # never a half-written page
        try:
            with open(part, "wb") as f:
                f.write(page)
            os.replace(part, output)
        except OSError as exc:
            raise OSError(f"cannot write {output!r}: {exc.strerror or exc}") from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(part)
    facts = {
        "file": output,
        "checkpoints": len(tuples),
        "namespaces": len(data["namespaces"]),
        "forks": forks(data),
        "bytes": len(page),
    }
    if opts.as_json and output != "-":
        opts.emit(facts)
    elif output != "-":
        opts.out.print(
            f"wrote {output}: {facts['checkpoints']} checkpoints in {facts['namespaces']} "
            f"namespace(s), {facts['forks']} fork(s), {facts['bytes']:,} bytes"
        )
