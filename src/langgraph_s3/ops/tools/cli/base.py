"""The command line's common ground: the ``cli`` group, its options, exit codes, errors
as one line, and the output helpers every command uses."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson

try:
    import click
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
except ImportError as exc:  # pragma: no cover - the [cli] extra is missing
    raise SystemExit(
        f"langgraph-s3's command line needs click and rich ({exc}): "
        'pip install "langgraph-s3[cli]"'
    ) from exc

from langgraph_s3.core.shards import Shard
from langgraph_s3.errors import (
    AccessDeniedError,
    ConfigurationError,
    EndpointUnreachableError,
    InvalidIdError,
    InvalidRequestError,
    MissingResourceError,
    S3PersistenceError,
    ThreadExistsError,
)

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
        self.err = Console(stderr=True, soft_wrap=True, markup=False, highlight=False)

    def saver(self) -> Any:
        """The deployment's saver (no request). A URL without ``table=`` uses the default
        table: said on stderr, since a mistyped URL would otherwise look like an empty
        deployment."""
        from langgraph_s3.checkpoint.saver import DEFAULT_TABLE, AsyncS3Saver

        if not self.url:
            raise ConfigurationError(
                "no deployment given: pass --url s3://BUCKET/PREFIX?table=TABLE "
                "or set LANGGRAPH_S3_URL"
            )
        query = self.url.partition("?")[2]
        if "table=" not in query and "manifest=s3" not in query:
            self.err.print(f"note: the URL names no table: using {DEFAULT_TABLE!r} (add ?table=)")
        kwargs = {"endpoint_url": self.endpoint_url} if self.endpoint_url else {}
        return AsyncS3Saver.from_url(self.url, **kwargs)

    def store(self, store_url: str | None) -> Any:
        """The store: ``store_url``, else ``LANGGRAPH_S3_STORE_URL``, else beside the saver."""
        from langgraph_s3.store.facade import AsyncS3Store

        kwargs = {"endpoint_url": self.endpoint_url} if self.endpoint_url else {}
        return AsyncS3Store.from_url(resolve_store_url(self, store_url), **kwargs)

    def emit(self, data: Any) -> None:
        """The answer as JSON on stdout (``--json``)."""
        sys.stdout.write(orjson.dumps(data, default=str, option=orjson.OPT_INDENT_2).decode())
        sys.stdout.write("\n")

    @contextlib.contextmanager
    def progress(self, what: str) -> Iterator[Callable[[Any, int, int | None], None] | None]:
        """A progress bar on stderr for a long call (none with --json or without a
        terminal); yields the callback to hand the saver (a total of None: not known)."""
        if self.as_json or not self.err.is_terminal:
            yield None
            return
        with Progress(TextColumn(what), BarColumn(), MofNCompleteColumn(), console=self.err) as bar:
            task = bar.add_task(what, total=None)

            def update(report: Any, done: int, total: int | None) -> None:
                bar.update(task, completed=done, total=total)

            yield update


def exit_code(exc: BaseException) -> int:
    if isinstance(exc, NotFound):
        return EXIT_NOT_FOUND
    if isinstance(
        exc,
        (ConfigurationError, MissingResourceError, AccessDeniedError, EndpointUnreachableError),
    ):
        return EXIT_DEPLOYMENT
    if isinstance(exc, ThreadExistsError):  # the command line was right; the target is not
        return EXIT_FAILED
    if isinstance(exc, (InvalidRequestError, InvalidIdError)):
        return EXIT_USAGE
    return EXIT_FAILED


def command(fn: Callable[..., Awaitable[Any]], *, verify: bool = True) -> Callable[..., None]:
    """Run an async command with the saver, and turn errors into one line and a code.
    The bucket and the table are checked first (1 round trip; not for ``verify=False``,
    the doctor's): a missing one is exit 4 naming it, on every command, not an empty
    answer."""

    @functools.wraps(fn)
    def run(opts: Options, /, *args: Any, **kwargs: Any) -> None:
        async def go() -> Any:
            from langgraph_s3.aws.clients import one_attempt

            async with opts.saver() as saver:
                if verify:
                    with one_attempt():  # an endpoint that does not answer: exit 4 at once
                        await saver.averify()
                return await fn(opts, saver, *args, **kwargs)

        guarded(go)

    return run


def asks(opts: Options, yes: bool) -> bool:
    """Whether :func:`confirm` would ask: on a terminal, without ``--yes``."""
    return not yes and sys.stdin.isatty() and opts.err.is_terminal


def confirm(opts: Options, question: str, yes: bool) -> None:
    """Ask before a destructive step, on a terminal only (scripts pass ``--yes`` or
    run without one, as ``kubectl delete`` does); a no ends the command, exit 1."""
    if not asks(opts, yes):
        return
    if not click.confirm(question, default=False, err=True):
        raise Declined("nothing was changed")


class Declined(Exception):
    """The operator answered no to a confirmation."""


def guarded(go: Callable[[], Coroutine[Any, Any, Any]]) -> None:
    """Run a command; every failure a user can cause or meet is one line and a code."""
    import asyncio

    from langgraph.store.base import InvalidNamespaceError

    try:
        asyncio.run(go())
    except Declined as exc:
        click.echo(f"stopped: {exc}", err=True)
        sys.exit(EXIT_FAILED)
    except (S3PersistenceError, NotFound, Unhealthy) as exc:
        click.echo(f"error: {one_line(exc)}", err=True)
        sys.exit(exit_code(exc))
    except (OSError, EOFError) as exc:  # a file that cannot be read or written
        click.echo(f"error: {one_line(exc)}", err=True)
        sys.exit(EXIT_FAILED)
    except (InvalidNamespaceError, ValueError) as exc:  # a value the command refused
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)


def one_line(exc: BaseException) -> str:
    """The error and its notes (what was done before it, a rollback), on one line."""
    text = "; ".join([str(exc), *getattr(exc, "__notes__", ())])
    return " ".join(text.splitlines())


def parse_when(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError as exc:
        raise click.BadParameter(f"{text!r} is not an ISO date or time (2026-12-01T10:00)") from exc
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def segment_value(ctx: click.Context, param: click.Parameter, value: str | None) -> Shard | None:
    if value is None:
        return None
    try:
        return Shard.parse(value)
    except InvalidRequestError as exc:
        raise click.BadParameter(str(exc)) from None


F = TypeVar("F", bound=Callable[..., Any])


def segment_option(fn: F) -> F:
    """``--segment I/N``: the call covers shard I of N only (its ``shard`` argument)."""
    return click.option(
        "--segment",
        "shard",
        metavar="I/N",
        callback=segment_value,
        help="only shard I of N (I from 0): N workers cover every thread once",
    )(fn)


def sharded(shard: Shard | None) -> dict[str, int]:
    """A saver call's ``segment`` and ``total_segments`` (none without a shard)."""
    return {} if shard is None else {"segment": shard.segment, "total_segments": shard.total}


def where_pairs(pairs: tuple[str, ...]) -> dict[str, Any] | None:
    """``--where KEY=VALUE`` (a string) or ``KEY:=JSON`` (a number, true, null...)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition(":=")
        if sep:
            try:
                out[key] = orjson.loads(text)
            except orjson.JSONDecodeError:
                raise click.BadParameter(f"{pair!r}: after := comes a JSON value") from None
        else:
            key, sep, text = pair.partition("=")
            if not sep:
                raise click.BadParameter(f"{pair!r} is not KEY=VALUE (or KEY:=JSON)")
            out[key] = text
        if not key:
            raise click.BadParameter(f"{pair!r} names no key")
    return out or None


def finite(value: float, name: str) -> float:
    if not math.isfinite(value):
        raise click.BadParameter(f"{name} must be a number, got {value}")
    return value


def printable(text: str) -> str:
    """An id as a terminal may show it: control characters (an escape sequence stored
    in a thread id) written as their escapes, never sent to the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def short(cid: str | None) -> str:
    return "-" if cid is None else cid[-12:]


def age(when: Any) -> str:
    return when.strftime("%Y-%m-%d %H:%M") if isinstance(when, datetime) else "-"


GLOBAL_OPTIONS = {"--url": True, "--endpoint-url": True, "--json": False}
"""The group's options (True: takes a value), taken anywhere on the line."""


def hoisted(
    args: list[str], options: dict[str, bool], valued: frozenset[str] = frozenset()
) -> list[str]:
    """``args`` with ``options`` (and their values) moved to the front, as ``aws`` and
    ``kubectl`` take global flags anywhere. Nothing after ``--`` moves, nor the value of
    an option in ``valued`` (``--ns --json`` names the namespace ``--json``); a global
    option given twice, or without its value, is a usage error."""
    front: list[str] = []
    rest: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        name, eq, _ = arg.partition("=")
        if name in options:
            if name in seen:
                raise click.UsageError(f"{name} is given twice")
            seen.add(name)
            width = 2 if options[name] and not eq else 1
            if i + width > len(args):
                raise click.UsageError(f"{name} needs a value")
            front.extend(args[i : i + width])
            i += width
            continue
        rest.append(arg)
        if name in valued and not eq and i + 1 < len(args):
            rest.append(args[i + 1])  # its value, whatever it looks like
            i += 1
        i += 1
    return front + rest


def valued_options(group: click.Group) -> frozenset[str]:
    """Every option of the group's commands (and their subcommands) that takes a value."""
    out: set[str] = set()
    stack: list[click.Command] = list(group.commands.values())
    while stack:
        cmd = stack.pop()
        for param in cmd.params:
            if isinstance(param, click.Option) and not param.is_flag and param.nargs != 0:
                out.update(o for o in param.opts if o.startswith("-"))
        if isinstance(cmd, click.Group):
            stack.extend(cmd.commands.values())
    return frozenset(out)


class AnywhereGroup(click.Group):
    """A group whose own options may come after the subcommand too."""

    options_anywhere: dict[str, bool] = GLOBAL_OPTIONS

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        mine = set(self.options_anywhere)
        valued = valued_options(self) - mine
        return super().parse_args(ctx, hoisted(args, self.options_anywhere, valued))


class StoreGroup(AnywhereGroup):
    """``store``: ``--store-url`` anywhere after it."""

    options_anywhere = {"--store-url": True}


@click.group(
    cls=AnywhereGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
)
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


def print_json(opts: Options, value: Any) -> None:
    """Indented JSON; colored by rich when small (rich takes minutes on megabytes)."""
    text = orjson.dumps(value, default=str, option=orjson.OPT_INDENT_2).decode()
    if len(text) > 64 * 1024 or not opts.out.is_terminal:
        sys.stdout.write(text + "\n")
    else:
        opts.out.print_json(text)


def brief(value: Any) -> str:
    text = orjson.dumps(value, default=str).decode()
    return text if len(text) <= 120 else text[:117] + "..."


def print_report(opts: Options, verb: str, report: Any, *, quiet: bool = False) -> None:
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


def resolve_store_url(opts: Options, store_url: str | None) -> str:
    """The store's URL: given, or the saver's bucket and prefix (its table dropped)."""
    url = store_url or os.environ.get("LANGGRAPH_S3_STORE_URL") or opts.url
    if not url:
        raise ConfigurationError(
            "no store given: pass --store-url s3://BUCKET/PREFIX, set LANGGRAPH_S3_STORE_URL, "
            "or give the saver's --url (the store then shares its bucket and prefix)"
        )
    from langgraph_s3.runtime.lifecycle import store_url_of

    return store_url_of(url)


def namespace_of(text: str) -> tuple[str, ...]:
    """``users.42`` -> ("users", "42") (labels hold no dot)."""
    return tuple(p for p in text.split(".") if p) if text else ()


def item_of(item: Any) -> dict[str, Any]:
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


def ids_text(threads: list[str], shown: int = 5) -> str:
    text = ", ".join(repr(t) for t in threads[:shown])
    return text + (f" and {len(threads) - shown} more" if len(threads) > shown else "")


def say_plan(opts: Options, plan: dict[str, Any], line: str) -> None:
    """A dry run's answer: JSON with ``--json``, else one line and the thread ids."""
    if opts.as_json:
        opts.emit({"dry_run": True, **plan})
        return
    opts.out.print(f"dry run: {line}; nothing was changed")
    for key, value in plan.items():
        if isinstance(value, list) and value:
            opts.out.print(f"  {key}: {ids_text(value, 20)}")
