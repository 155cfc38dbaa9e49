"""The ``langgraph-s3`` command line: the operator's questions, on the saver's public API.

Every command but ``demo`` takes the deployment from ``--url`` or ``LANGGRAPH_S3_URL``
(``s3://BUCKET/PREFIX?table=TABLE``) and the usual AWS environment. Output is for
people by default and JSON with ``--json``. Exit codes: 0 done, 1 the operation
failed, 2 a bad command line, 3 nothing found (no such thread or checkpoint),
4 the deployment is not usable as given (no URL, a missing bucket or table, access
denied). Errors are one line on stderr: what went wrong and what to do.

The command line holds no storage logic: it calls :class:`AsyncS3Saver` and renders
what it answers (``views.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import os
import sys
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import orjson

try:
    import click
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    from rich.table import Table
except ImportError as exc:  # pragma: no cover - the [cli] extra is missing
    raise SystemExit(
        f"langgraph-s3's command line needs click and rich ({exc}): "
        'pip install "langgraph-s3[cli]"'
    ) from exc

from langgraph_s3.errors import (
    AccessDeniedError,
    ConfigurationError,
    CorruptExportError,
    InvalidIdError,
    InvalidRequestError,
    MissingResourceError,
    S3PersistenceError,
    ThreadExistsError,
)
from langgraph_s3.runtime.lifecycle import store_url_of

T = TypeVar("T")

EXIT_FAILED, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_DEPLOYMENT = 1, 2, 3, 4


class NotFound(Exception):
    """Nothing to show: the thread or checkpoint does not exist."""


class Unhealthy(Exception):
    """The doctor found a failing check (exit code 1)."""


class Options:
    """The group's options, for every command."""

    def __init__(self, url: str | None, endpoint_url: str | None, as_json: bool) -> None:
        self.url, self.endpoint_url, self.as_json = url, endpoint_url, as_json
        # what is printed holds data (thread ids, state, interrupts): never read as markup
        self.out = Console(soft_wrap=True, markup=False, highlight=False)
        self.err = Console(stderr=True, markup=False, highlight=False)

    def saver(self) -> Any:
        from langgraph_s3.checkpoint.saver import AsyncS3Saver

        if not self.url:
            raise ConfigurationError(
                "no deployment given: pass --url s3://BUCKET/PREFIX?table=TABLE "
                "or set LANGGRAPH_S3_URL"
            )
        kwargs = {"endpoint_url": self.endpoint_url} if self.endpoint_url else {}
        return AsyncS3Saver.from_url(self.url, **kwargs)

    def store(self, store_url: str | None) -> Any:
        """The store: ``store_url``, else ``LANGGRAPH_S3_STORE_URL``, else beside the saver."""
        from langgraph_s3.store.facade import AsyncS3Store

        kwargs = {"endpoint_url": self.endpoint_url} if self.endpoint_url else {}
        return AsyncS3Store.from_url(_store_url(self, store_url), **kwargs)

    def emit(self, data: Any) -> None:
        """The answer as JSON on stdout (``--json``)."""
        sys.stdout.write(orjson.dumps(data, default=str, option=orjson.OPT_INDENT_2).decode())
        sys.stdout.write("\n")

    @contextlib.contextmanager
    def progress(self, what: str) -> Iterator[Callable[[Any, int, int], None] | None]:
        """A progress bar on stderr for a long call (none with --json or without a
        terminal); yields the callback to hand the saver."""
        if self.as_json or not self.err.is_terminal:
            yield None
            return
        with Progress(TextColumn(what), BarColumn(), MofNCompleteColumn(), console=self.err) as bar:
            task = bar.add_task(what, total=None)

            def update(report: Any, done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            yield update


def _exit_code(exc: BaseException) -> int:
    if isinstance(exc, NotFound):
        return EXIT_NOT_FOUND
    if isinstance(exc, (ConfigurationError, MissingResourceError, AccessDeniedError)):
        return EXIT_DEPLOYMENT
    if isinstance(exc, ThreadExistsError):  # the command line was right; the target is not
        return EXIT_FAILED
    if isinstance(exc, (InvalidRequestError, InvalidIdError)):
        return EXIT_USAGE
    return EXIT_FAILED


def command(fn: Callable[..., Awaitable[Any]]) -> Callable[..., None]:
    """Run an async command with the saver, and turn errors into one line and a code."""

    @functools.wraps(fn)
    def run(opts: Options, /, *args: Any, **kwargs: Any) -> None:
        async def go() -> Any:
            async with opts.saver() as saver:
                return await fn(opts, saver, *args, **kwargs)

        _guarded(go)

    return run


def _guarded(go: Callable[[], Coroutine[Any, Any, Any]]) -> None:
    """Run a command; every failure a user can cause or meet is one line and a code."""
    from langgraph.store.base import InvalidNamespaceError

    try:
        asyncio.run(go())
    except (S3PersistenceError, NotFound, Unhealthy) as exc:
        click.echo(f"error: {_one_line(exc)}", err=True)
        sys.exit(_exit_code(exc))
    except (OSError, EOFError) as exc:  # a file that cannot be read or written
        click.echo(f"error: {_one_line(exc)}", err=True)
        sys.exit(EXIT_FAILED)
    except (InvalidNamespaceError, ValueError) as exc:  # a value the command refused
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)


def _one_line(exc: BaseException) -> str:
    """The error and its notes (what was done before it, a rollback), on one line."""
    text = "; ".join([str(exc), *getattr(exc, "__notes__", ())])
    return " ".join(text.splitlines())


def _when(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError as exc:
        raise click.BadParameter(f"{text!r} is not an ISO date or time (2026-12-01T10:00)") from exc
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _finite(value: float, name: str) -> float:
    if not math.isfinite(value):
        raise click.BadParameter(f"{name} must be a number, got {value}")
    return value


def _short(cid: str | None) -> str:
    return "-" if cid is None else cid[-12:]


def _age(when: Any) -> str:
    return when.strftime("%Y-%m-%d %H:%M") if isinstance(when, datetime) else "-"


# ------------------------------------------------------------------- the group
@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    envvar="LANGGRAPH_S3_URL",
    metavar="s3://BUCKET/PREFIX?table=TABLE",
    help="the deployment (default: $LANGGRAPH_S3_URL)",
)
@click.option("--endpoint-url", help="an S3/DynamoDB endpoint (moto, LocalStack)")
@click.option("--json", "as_json", is_flag=True, help="answer in JSON, for scripts")
@click.version_option(package_name="langgraph-s3", prog_name="langgraph-s3")
@click.pass_context
def cli(ctx: click.Context, url: str | None, endpoint_url: str | None, as_json: bool) -> None:
    """LangGraph persistence on AWS object storage: look at, move and clean up threads."""
    ctx.obj = Options(url, endpoint_url, as_json)


pass_opts = click.make_pass_decorator(Options)


# ----------------------------------------------------------------- threads
@cli.command()
@click.option("--updated-after", help="only threads written after this (ISO date/time, UTC)")
@click.option("--updated-before", help="only threads last written before this")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True)
@pass_opts
def threads(
    opts: Options, updated_after: str | None, updated_before: str | None, limit: int
) -> None:
    """The deployment's threads, newest first (from the manifest: no S3 read)."""
    _threads(opts, _when(updated_after), _when(updated_before), limit)


@command
async def _threads(
    opts: Options, saver: Any, after: datetime | None, before: datetime | None, limit: int
) -> None:
    found = [t async for t in saver.alist_threads(updated_after=after, updated_before=before)]
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
            t.thread_id,
            str(len(t.namespaces)),
            _age(t.updated_at),
            _age(t.created_at),
            _age(t.expires_at),
            _short(t.latest_id),
        )
    opts.out.print(table)


# ----------------------------------------------------------------- history
@cli.command()
@click.argument("thread")
@click.option("--ns", default="", help="the checkpoint namespace (default: the root)")
@click.option("--limit", type=click.IntRange(min=1), help="the newest N checkpoints")
@pass_opts
def history(opts: Options, thread: str, ns: str, limit: int | None) -> None:
    """One line per checkpoint, newest first: step, source, nodes run, what changed."""
    _history(opts, thread, ns, limit)


@command
async def _history(opts: Options, saver: Any, thread: str, ns: str, limit: int | None) -> None:
    from langgraph_s3.ops.views import parent_id, summary

    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
    tuples = [t async for t in saver.alist(config, limit=limit)]
    if not tuples:
        raise NotFound(f"thread {thread!r} has no checkpoints in namespace {ns!r}")
    by_id = {t.config["configurable"]["checkpoint_id"]: t for t in tuples}
    rows = []
    for t in tuples:
        pid = parent_id(t)
        parent = by_id.get(pid) if pid else None
        if pid and parent is None:  # past the limit: read it
            parent = await saver.aget_tuple(
                {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": pid}}
            )
        rows.append(summary(t, parent))
    if opts.as_json:
        opts.emit(rows)
        return
    table = Table(title=f"thread {thread!r}: {len(rows)} checkpoints, newest first")
    for col in ("step", "source", "nodes", "changed", "checkpoint", "parent", "notes"):
        table.add_column(col)
    for r in rows:
        notes = []
        if r["interrupts"]:
            notes.append(f"interrupt: {r['interrupts'][0]}")
        if r["errors"]:
            notes.append(f"error: {r['errors'][0]}")
        table.add_row(
            str(r["step"]),
            str(r["source"]),
            ", ".join(r["nodes"]) or "-",
            ", ".join(r["changed"]) or "-",
            _short(r["checkpoint_id"]),
            _short(r["parent_id"]),
            "; ".join(notes)[:80],
        )
    opts.out.print(table)


# -------------------------------------------------------------- show, diff
@cli.command()
@click.argument("thread")
@click.option("--checkpoint", "checkpoint_id", help="this checkpoint (default: the latest)")
@click.option("--ns", default="", help="the checkpoint namespace (default: the root)")
@pass_opts
def show(opts: Options, thread: str, checkpoint_id: str | None, ns: str) -> None:
    """A checkpoint whole: state, pending writes, interrupts, and what changed."""
    _show(opts, thread, checkpoint_id, ns)


async def _get(saver: Any, thread: str, ns: str, cid: str | None) -> Any:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if cid:
        conf["checkpoint_id"] = cid
    tup = await saver.aget_tuple({"configurable": conf})
    if tup is None:
        what = f"no checkpoint {cid!r}" if cid else "no checkpoints"
        raise NotFound(
            f"thread {thread!r} has {what} in namespace {ns!r}: "
            "`langgraph-s3 threads` lists the threads, `history THREAD` their checkpoints"
        )
    return tup


@command
async def _show(opts: Options, saver: Any, thread: str, cid: str | None, ns: str) -> None:
    from langgraph_s3.ops.views import diff, parent_id, state, summary

    tup = await _get(saver, thread, ns, cid)
    pid = parent_id(tup)
    parent = None
    if pid:  # a parent pruned away: the checkpoint is shown against nothing
        parent = await saver.aget_tuple(
            {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": pid}}
        )
    shown = {**state(tup), **summary(tup, parent), "diff": diff(parent, tup)}
    if opts.as_json:
        opts.emit(shown)
        return
    opts.out.print(
        f"thread {thread!r} checkpoint {shown['checkpoint_id']} "
        f"(step {shown['step']}, {shown['source']}; parent {shown['parent_id']})"
    )
    opts.out.print(f"nodes run: {', '.join(shown['nodes']) or '-'}")
    for ch, change in shown["diff"].items():
        opts.out.print(f"changed {ch}: {_brief(change['before'])} -> {_brief(change['after'])}")
    for w in shown["writes"]:
        opts.out.print(
            f"pending write {w['channel']} (task {w['task_id'][:8]}): {_brief(w['value'])}"
        )
    opts.out.print("state:")
    _print_json(opts, shown["values"])


def _print_json(opts: Options, value: Any) -> None:
    """Indented JSON; colored by rich when small (rich takes minutes on megabytes)."""
    text = orjson.dumps(value, default=str, option=orjson.OPT_INDENT_2).decode()
    if len(text) > 64 * 1024 or not opts.out.is_terminal:
        sys.stdout.write(text + "\n")
    else:
        opts.out.print_json(text)


def _brief(value: Any) -> str:
    text = orjson.dumps(value, default=str).decode()
    return text if len(text) <= 120 else text[:117] + "..."


@cli.command(name="diff")
@click.argument("thread")
@click.argument("a")
@click.argument("b")
@click.option("--ns", default="", help="the checkpoint namespace (default: the root)")
@pass_opts
def diff_command(opts: Options, thread: str, a: str, b: str, ns: str) -> None:
    """What differs between checkpoints A and B of a thread, channel by channel."""
    _diff(opts, thread, a, b, ns)


@command
async def _diff(opts: Options, saver: Any, thread: str, a: str, b: str, ns: str) -> None:
    from langgraph_s3.ops.views import diff

    first, second = await _get(saver, thread, ns, a), await _get(saver, thread, ns, b)
    changes = diff(first, second)
    if opts.as_json:
        opts.emit(changes)
        return
    if not changes:
        opts.out.print("no channel differs")
    for ch, change in changes.items():
        opts.out.print(f"{ch}: {_brief(change['before'])} -> {_brief(change['after'])}")


# --------------------------------------------------------------------- view
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
    """``package.module:name`` or ``path/to/file.py:name``: a graph, a builder, or a
    function of no arguments that returns one."""
    import importlib
    import importlib.util

    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise click.BadParameter(f"{spec!r}: give MODULE:GRAPH or path/to/file.py:GRAPH")
    try:
        if where.endswith(".py") or "/" in where:
            path = os.path.abspath(where)
            found = importlib.util.spec_from_file_location("langgraph_s3_view_graph", path)
            if found is None or found.loader is None:
                raise click.BadParameter(f"{where!r} is not a Python file")
            module = importlib.util.module_from_spec(found)
            # as `python file.py` would run it: its folder importable, itself a module
            sys.path.insert(0, os.path.dirname(path))
            sys.modules[found.name] = module
            found.loader.exec_module(module)
        else:
            sys.path.insert(0, os.getcwd())  # as `python -m` would find it
            module = importlib.import_module(where)
        obj = getattr(module, name)
        if callable(obj) and not hasattr(obj, "channels") and not hasattr(obj, "compile"):
            obj = obj()
    except click.BadParameter:
        raise
    except Exception as exc:
        raise click.BadParameter(f"{spec!r} could not be loaded: {exc!r}") from exc
    if not hasattr(obj, "channels") and not hasattr(obj, "compile"):
        raise click.BadParameter(f"{spec!r} is a {type(obj).__name__}, not a LangGraph graph")
    return obj


@command
async def _view(opts: Options, saver: Any, thread: str, output: str, graph: Any) -> None:
    from langgraph_s3.ops.viewer import forks, model, render

    tuples = [t async for t in saver.alist({"configurable": {"thread_id": thread}})]
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
        part = f"{output}.{uuid.uuid4().hex[:8]}.part"  # never a half-written page
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


# ------------------------------------------------------------ export, import
@cli.command()
@click.argument("thread_ids", nargs=-1)
@click.option("-o", "--output", default="-", help="a file (.gz: gzip), or - for stdout")
@pass_opts
def export(opts: Options, thread_ids: tuple[str, ...], output: str) -> None:
    """Write threads (default: every thread) in the versioned export format."""
    _export(opts, list(thread_ids) or None, output)


@command
async def _export(opts: Options, saver: Any, thread_ids: list[str] | None, output: str) -> None:
    with opts.progress("exporting") as progress:
        if output == "-":
            report = await saver.aexport(thread_ids, sys.stdout.buffer, progress=progress)
            sys.stdout.buffer.flush()
        else:
            report = await saver.aexport(thread_ids, output, progress=progress)
    _report(opts, "exported", report, quiet=output == "-")
    if thread_ids and report.threads < len(thread_ids):
        raise NotFound(
            f"{len(thread_ids) - report.threads} of the threads named have no checkpoints "
            "(written: the others)"
        )


@cli.command(name="import")
@click.argument("source", default="-")
@click.option("--replace", is_flag=True, help="delete a thread that exists before importing it")
@pass_opts
def import_command(opts: Options, source: str, replace: bool) -> None:
    """Read an export (a file, or - for stdin) into the deployment."""
    _import(opts, source, replace)


@command
async def _import(opts: Options, saver: Any, source: str, replace: bool) -> None:
    try:
        with opts.progress("importing") as progress:
            file: Any = sys.stdin.buffer if source == "-" else source
            report = await saver.aimport(file, replace=replace, progress=progress)
    except ThreadExistsError as exc:  # worded for this command line: --replace
        raise ThreadExistsError(
            exc.thread_id, exc.file, line=exc.line, imported=exc.imported, replace="--replace"
        ) from exc
    except CorruptExportError as exc:
        raise CorruptExportError(
            exc.file, exc.reason, imported=exc.imported, replace="--replace"
        ) from exc
    _report(opts, "imported", report)


# ------------------------------------------------------------- maintenance
@cli.command()
@click.argument("source")
@click.argument("target")
@pass_opts
def copy(opts: Options, source: str, target: str) -> None:
    """Copy a thread's whole history to another thread id."""
    _copy(opts, source, target)


@command
async def _copy(opts: Options, saver: Any, source: str, target: str) -> None:
    report = await saver.acopy_thread(source, target)
    if report.skipped and not report.threads:
        raise NotFound(f"thread {source!r} has no checkpoints: nothing was copied")
    _report(opts, "copied", report)


@cli.command()
@click.argument("thread_ids", nargs=-1, required=True)
@pass_opts
def delete(opts: Options, thread_ids: tuple[str, ...]) -> None:
    """Delete threads: every namespace, checkpoint, write, blob and pack."""
    _delete(opts, list(thread_ids))


@command
async def _delete(opts: Options, saver: Any, thread_ids: list[str]) -> None:
    present = [t for t in thread_ids if await _exists(saver, t)]
    missing = [t for t in thread_ids if t not in present]
    if present:
        with opts.progress("deleting") as progress:
            report = await saver.aprune(present, strategy="delete", progress=progress)
        _report(opts, "deleted", report)
    if missing:
        raise NotFound(f"no such thread: {', '.join(repr(t) for t in missing)}")


async def _exists(saver: Any, thread: str) -> bool:
    async for _ in saver.alist({"configurable": {"thread_id": thread}}, limit=1):
        return True
    return False


@cli.command()
@click.argument("thread_ids", nargs=-1, required=True)
@click.option("--keep-last", type=click.IntRange(min=1), help="the newest N checkpoints stay")
@click.option(
    "--older-than-days",
    type=click.FloatRange(min=0, max=36500),
    help="checkpoints older than this many days go",
)
@pass_opts
def prune(
    opts: Options, thread_ids: tuple[str, ...], keep_last: int | None, older_than_days: float | None
) -> None:
    """Shrink threads to a retention rule (default: keep the latest checkpoint)."""
    older = (
        timedelta(days=_finite(older_than_days, "--older-than-days"))
        if older_than_days is not None
        else None
    )
    _prune(opts, list(thread_ids), keep_last, older)


@command
async def _prune(
    opts: Options, saver: Any, thread_ids: list[str], keep_last: int | None, older: Any
) -> None:
    with opts.progress("pruning") as progress:
        report = await saver.aprune(
            thread_ids, keep_last=keep_last, older_than=older, progress=progress
        )
    _report(opts, "pruned", report)


@cli.command()
@click.argument("thread_ids", nargs=-1)
@click.option(
    "--idle-days",
    type=click.FloatRange(min=0, max=36500),
    help="pack every thread idle this many days",
)
@pass_opts
def pack(opts: Options, thread_ids: tuple[str, ...], idle_days: float | None) -> None:
    """Archive threads: each into one pack object the lifecycle rule can move."""
    if not thread_ids and idle_days is None:
        raise click.UsageError("name threads to pack, or give --idle-days")
    if idle_days is not None:
        _finite(idle_days, "--idle-days")
    _pack(opts, list(thread_ids) or None, idle_days)


@command
async def _pack(
    opts: Options, saver: Any, thread_ids: list[str] | None, idle_days: float | None
) -> None:
    with opts.progress("packing") as progress:
        report = await saver.apack(thread_ids, idle_days=idle_days, progress=progress)
    _report(opts, "packed", report)


@cli.command()
@click.option(
    "--what",
    type=click.Choice(["all", "threads", "store"]),
    default="all",
    show_default=True,
    help="threads: thread TTL; store: the store's expired items",
)
@click.option("--store-url", help="the store (default: $LANGGRAPH_S3_STORE_URL, else --url's)")
@pass_opts
def sweep(opts: Options, what: str, store_url: str | None) -> None:
    """Delete what outlived its TTL now: threads whose thread TTL passed (objects and
    all) and the store's expired items. Each part's result is printed as it ends, so
    a failing store sweep still shows what the thread sweep did."""
    _guarded(functools.partial(_sweep, opts, what, store_url))


async def _sweep(opts: Options, what: str, store_url: str | None) -> None:
    from dataclasses import asdict

    done: dict[str, Any] = {"threads": None, "store": None}
    store = None
    if what in ("all", "store"):  # a bad store URL is refused before anything is deleted
        store = opts.store(store_url)
    try:
        if what in ("all", "threads"):  # the saver is opened only when asked for
            async with opts.saver() as saver:
                with opts.progress("sweeping threads") as progress:
                    report = await saver.asweep_ttl(progress=progress)
            done["threads"] = asdict(report)
            if not opts.as_json:
                _report(opts, "swept threads", report)
        if store is not None:
            async with store:
                deleted = await store.asweep_ttl()
            done["store"] = {"deleted": deleted}
            if not opts.as_json:
                opts.out.print(f"swept store: {deleted} expired item(s)")
    finally:
        if opts.as_json and any(v is not None for v in done.values()):
            opts.emit(done)  # what was done, even when the next part failed


def _report(opts: Options, verb: str, report: Any, *, quiet: bool = False) -> None:
    from dataclasses import asdict

    if opts.as_json and not quiet:
        opts.emit(asdict(report))
        return
    console = opts.err if quiet else opts.out
    parts = [f"{report.threads} thread(s)"]
    for name in ("namespaces", "checkpoints", "writes", "objects"):
        if getattr(report, name):
            parts.append(f"{getattr(report, name)} {name}")
    if report.bytes:
        parts.append(f"{report.bytes:,} bytes")
    if report.skipped:
        parts.append(f"{report.skipped} left as they were")
    console.print(f"{verb}: " + ", ".join(parts))


# ------------------------------------------------------------------- doctor
@cli.command()
@pass_opts
def doctor(opts: Options) -> None:
    """Check the deployment for real: endpoint, credentials, bucket, table, every action
    the library needs, lifecycle rules, latency. Exits 1 on any failed check."""
    _doctor(opts)


@command
async def _doctor(opts: Options, saver: Any) -> None:
    from dataclasses import asdict

    from langgraph_s3.ops.doctor import FAIL, INFO, diagnose

    checks = await diagnose(saver)
    if opts.as_json:
        opts.emit([asdict(c) for c in checks])
    else:
        from rich.text import Text

        marks = {FAIL: ("✘", "red"), INFO: ("·", "yellow")}
        for c in checks:
            mark, style = marks.get(c.status, ("✔", "green"))
            line = Text(mark, style=style)
            line.append(f" {c.name}" + (f": {c.detail}" if c.detail else ""))
            if c.fix:
                line.append(f" → {c.fix}", style="dim")
            opts.out.print(line)
    failed = [c for c in checks if c.status == FAIL]
    if failed:
        raise Unhealthy(f"{len(failed)} check(s) failed: {', '.join(c.name for c in failed)}")


# -------------------------------------------------------------------- store
def _store_url(opts: Options, store_url: str | None) -> str:
    """The store's URL: given, or the saver's bucket and prefix (its table dropped)."""
    url = store_url or os.environ.get("LANGGRAPH_S3_STORE_URL") or opts.url
    if not url:
        raise ConfigurationError(
            "no store given: pass --store-url s3://BUCKET/PREFIX, set LANGGRAPH_S3_STORE_URL, "
            "or give the saver's --url (the store then shares its bucket and prefix)"
        )
    return store_url_of(url)


def _namespace(text: str) -> tuple[str, ...]:
    """``users.42`` -> ("users", "42") (labels hold no dot)."""
    return tuple(p for p in text.split(".") if p) if text else ()


def store_command(fn: Callable[..., Awaitable[Any]]) -> Callable[..., None]:
    """Run an async store command; errors as for the saver's commands."""

    @functools.wraps(fn)
    def run(opts: Options, store_url: str | None, /, *args: Any, **kwargs: Any) -> None:
        async def go() -> Any:
            async with opts.store(store_url) as store:
                return await fn(opts, store, *args, **kwargs)

        _guarded(go)

    return run


def _item(item: Any) -> dict[str, Any]:
    from langgraph_s3.ops.views import plain

    out = {
        "namespace": ".".join(item.namespace),
        "key": item.key,
        "value": plain(item.value),
        "created_at": item.created_at,
        "updated_at": item.updated_at,
    }
    score = getattr(item, "score", None)
    if score is not None:
        out["score"] = score
    return out


@cli.group()
@click.option("--store-url", help="the store (default: $LANGGRAPH_S3_STORE_URL, else --url's)")
@click.pass_context
def store(ctx: click.Context, store_url: str | None) -> None:
    """The long-term memory store: ls, get, put, rm, search, sweep."""
    ctx.meta["store_url"] = store_url


def _store_url_of() -> str | None:
    value = click.get_current_context().meta.get("store_url")
    return str(value) if value else None


@store.command(name="ls")
@click.argument("prefix", default="")
@click.option("--max-depth", type=click.IntRange(min=1), help="namespaces cut to this depth")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True)
@pass_opts
def store_ls(opts: Options, prefix: str, max_depth: int | None, limit: int) -> None:
    """Namespaces under PREFIX (labels joined by dots: users.42)."""
    _store_ls(opts, _store_url_of(), _namespace(prefix), max_depth, limit)


@store_command
async def _store_ls(
    opts: Options, store: Any, prefix: tuple[str, ...], max_depth: int | None, limit: int
) -> None:
    found = await store.alist_namespaces(prefix=prefix or None, max_depth=max_depth, limit=limit)
    names = [".".join(ns) for ns in found]
    if opts.as_json:
        opts.emit(names)
        return
    for name in names:
        opts.out.print(name)
    if not names:
        opts.err.print("no namespaces")


@store.command(name="get")
@click.argument("namespace")
@click.argument("key")
@pass_opts
def store_get(opts: Options, namespace: str, key: str) -> None:
    """One item's value."""
    _store_get(opts, _store_url_of(), _namespace(namespace), key)


@store_command
async def _store_get(opts: Options, store: Any, namespace: tuple[str, ...], key: str) -> None:
    item = await store.aget(namespace, key)
    if item is None:
        raise NotFound(f"no item {key!r} in namespace {'.'.join(namespace)!r}")
    if opts.as_json:
        opts.emit(_item(item))
        return
    _print_json(opts, _item(item)["value"])


@store.command(name="put")
@click.argument("namespace")
@click.argument("key")
@click.argument("value")
@click.option(
    "--ttl", type=click.FloatRange(min=0, min_open=True, max=5e7), help="minutes until it expires"
)
@pass_opts
def store_put(opts: Options, namespace: str, key: str, value: str, ttl: float | None) -> None:
    """Store an item: VALUE is a JSON object."""
    if ttl is not None:
        _finite(ttl, "--ttl")
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise click.BadParameter(f"VALUE is not JSON: {exc}") from exc
    if not isinstance(parsed, dict):
        raise click.BadParameter("VALUE must be a JSON object ({...}), as LangGraph's store takes")
    _store_put(opts, _store_url_of(), _namespace(namespace), key, parsed, ttl)


@store_command
async def _store_put(
    opts: Options,
    store: Any,
    namespace: tuple[str, ...],
    key: str,
    value: dict[str, Any],
    ttl: float | None,
) -> None:
    await store.aput(namespace, key, value, ttl=ttl)
    if opts.as_json:
        opts.emit({"namespace": ".".join(namespace), "key": key, "stored": True})
    else:
        opts.out.print(f"stored {'.'.join(namespace)}/{key}")


@store.command(name="rm")
@click.argument("namespace")
@click.argument("key")
@pass_opts
def store_rm(opts: Options, namespace: str, key: str) -> None:
    """Delete an item."""
    _store_rm(opts, _store_url_of(), _namespace(namespace), key)


@store_command
async def _store_rm(opts: Options, store: Any, namespace: tuple[str, ...], key: str) -> None:
    await store.adelete(namespace, key)
    if opts.as_json:
        opts.emit({"namespace": ".".join(namespace), "key": key, "deleted": True})
    else:
        opts.out.print(f"deleted {'.'.join(namespace)}/{key}")


@store.command(name="search")
@click.argument("prefix", default="")
@click.option("--query", help="natural-language query (with an index)")
@click.option("--filter", "filter_json", help='JSON filter, e.g. {"theme": "dark"}')
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True)
@pass_opts
def store_search(
    opts: Options, prefix: str, query: str | None, filter_json: str | None, limit: int
) -> None:
    """Items under PREFIX, newest first (or by relevance with --query)."""
    flt = None
    if filter_json:
        try:
            flt = orjson.loads(filter_json)
        except orjson.JSONDecodeError as exc:
            raise click.BadParameter(f"--filter is not JSON: {exc}") from exc
    _store_search(opts, _store_url_of(), _namespace(prefix), query, flt, limit)


@store_command
async def _store_search(
    opts: Options,
    store: Any,
    prefix: tuple[str, ...],
    query: str | None,
    flt: dict[str, Any] | None,
    limit: int,
) -> None:
    items = await store.asearch(prefix, query=query, filter=flt, limit=limit)
    rows = [_item(i) for i in items]
    if opts.as_json:
        opts.emit(rows)
        return
    table = Table(title=f"{len(rows)} item(s)")
    for col in ("namespace", "key", "updated", "value"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["namespace"], r["key"], _age(r["updated_at"]), _brief(r["value"]))
    opts.out.print(table)


@store.command(name="sweep")
@pass_opts
def store_sweep(opts: Options) -> None:
    """Delete every expired store item now."""
    _store_sweep(opts, _store_url_of())


@store_command
async def _store_sweep(opts: Options, store: Any) -> None:
    n = await store.asweep_ttl()
    if opts.as_json:
        opts.emit({"deleted": n})
    else:
        opts.out.print(f"swept: {n} expired item(s)")


# --------------------------------------------------------------------- demo
@cli.command()
@click.option("--bucket", help="use this bucket (default: an embedded moto server)")
@click.option("--table", help="manifest table (default: langgraph-s3-demo)")
@click.option("--prefix", default="demo", show_default=True, help="key prefix in the bucket")
@click.option("--endpoint-url", "demo_endpoint", help="S3/DynamoDB endpoint")
@click.option("--thread", help="thread id (default: a new one)")
def demo(
    bucket: str | None,
    table: str | None,
    prefix: str,
    demo_endpoint: str | None,
    thread: str | None,
) -> None:
    """Run a scripted agent: persist, resume, browse history, fork, and show the cost."""
    from langgraph_s3.checkpoint.saver import AsyncS3Saver
    from langgraph_s3.ops.demo import run_demo

    given = bucket is not None
    bucket = bucket or f"langgraph-s3-demo-{uuid.uuid4().hex[:8]}"
    table = table or "langgraph-s3-demo"
    with _endpoint(given, demo_endpoint) as (endpoint_url, where):
        print(f"langgraph-s3 demo: bucket {bucket!r}, table {table!r}, on {where}\n")

        def make() -> AsyncS3Saver:
            return AsyncS3Saver(
                bucket=bucket, prefix=prefix, table=table, endpoint_url=endpoint_url
            )

        asyncio.run(run_demo(make, thread or f"demo-{uuid.uuid4().hex[:6]}", sys.stdout))


@contextlib.contextmanager
def _endpoint(given_bucket: bool, endpoint_url: str | None) -> Iterator[tuple[str | None, str]]:
    """Real settings when given (flags or AWS_ENDPOINT_URL), else an embedded moto."""
    if given_bucket or os.environ.get("AWS_ENDPOINT_URL") or endpoint_url:
        yield endpoint_url, "the configured AWS endpoint"
        return
    from langgraph_s3.testing.moto import BENCH_LATENCY, moto_server

    # AWS-like latency, so that the round trips the demo prints mean what they would on AWS
    with moto_server(latency=BENCH_LATENCY) as server:
        yield (
            server.url,
            (
                f"an embedded moto server at {server.url} (20 ms per S3 request and 6 ms per "
                "DynamoDB request injected, roughly AWS in region)"
            ),
        )


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: the exit code (see the module docstring)."""
    try:
        cli.main(args=list(argv) if argv is not None else None, standalone_mode=False)
    except click.exceptions.Exit as done:
        return int(done.exit_code or 0)
    except click.ClickException as exc:
        exc.show()
        return EXIT_USAGE if isinstance(exc, click.UsageError) else EXIT_FAILED
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("interrupted", err=True)
        return 130
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_FAILED
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
