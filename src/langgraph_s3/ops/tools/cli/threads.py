"""Commands that move threads: ``export``, ``import``, ``copy``, ``delete``."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import click

from langgraph_s3.core.shards import Shard
from langgraph_s3.errors import (
    ConflictError,
    CorruptExportError,
    ThreadExistsError,
)
from langgraph_s3.ops.tools.cli.base import (
    NotFound,
    Options,
    asks,
    cli,
    command,
    confirm,
    ids_text,
    pass_opts,
    print_report,
    say_plan,
    segment_option,
    sharded,
)


@cli.command()
@click.argument("thread_ids", nargs=-1)
@click.option("-o", "--output", default="-", help="a file (.gz: gzip), or - for stdout")
@segment_option
@click.option(
    "--sealed",
    is_flag=True,
    help="write each subject's threads sealed with its key (forgetting it makes them unreadable)",
)
@pass_opts
def export(
    opts: Options, thread_ids: tuple[str, ...], output: str, shard: Shard | None, sealed: bool
) -> None:
    """Write threads (default: every thread, or a shard's) in the versioned export format."""
    if thread_ids and shard is not None:
        raise click.UsageError("--segment exports a shard of every thread: name no threads")
    _export(opts, list(thread_ids) or None, output, shard, sealed)


@command
async def _export(
    opts: Options,
    saver: Any,
    thread_ids: list[str] | None,
    output: str,
    shard: Shard | None,
    sealed: bool,
) -> None:
    where: dict[str, Any] = {**sharded(shard), **({"sealed": True} if sealed else {})}
    with opts.progress("exporting") as progress:
        if output == "-":
            report = await saver.aexport(thread_ids, sys.stdout.buffer, progress=progress, **where)
            sys.stdout.buffer.flush()
        else:
            report = await saver.aexport(thread_ids, output, progress=progress, **where)
    print_report(opts, "exported", report, quiet=output == "-")
    if thread_ids and report.threads < len(thread_ids):
        raise NotFound(
            f"{len(thread_ids) - report.threads} of the threads named have no checkpoints "
            "(written: the others)"
        )


DRY_HELP = "say what it would do, and do nothing"
YES_HELP = "do not ask for confirmation on a terminal"


@cli.command(name="import")
@click.argument("source", default="-")
@click.option("--replace", is_flag=True, help="delete a thread that exists before importing it")
@click.option("--dry-run", is_flag=True, help="check the whole file and say what it would do")
@click.option("--yes", "-y", is_flag=True, help="do not ask for confirmation on a terminal")
@click.option(
    "--sealed-by",
    metavar="URL",
    help="the deployment that made a sealed export (its subjects' keys open it)",
)
@pass_opts
def import_command(
    opts: Options, source: str, replace: bool, dry_run: bool, yes: bool, sealed_by: str | None
) -> None:
    """Read an export (a file, or - for stdin) into the deployment."""
    if dry_run and source == "-":
        raise click.UsageError("--dry-run reads the file before the import: give a file, not -")
    _import(opts, source, replace, dry_run, yes, sealed_by)


@command
async def _import(
    opts: Options,
    saver: Any,
    source: str,
    replace: bool,
    dry_run: bool,
    yes: bool,
    sealed_by_url: str | None,
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        sealed_by = None
        if sealed_by_url is not None:  # the deployment whose subjects' keys open it
            from langgraph_s3.checkpoint.saver import AsyncS3Saver

            kwargs = {"endpoint_url": opts.endpoint_url} if opts.endpoint_url else {}
            source_saver = AsyncS3Saver.from_conn_string(sealed_by_url, **kwargs)
            sealed_by = await stack.enter_async_context(source_saver)
        await _import_into(opts, saver, source, replace, dry_run, yes, sealed_by)


async def _import_into(
    opts: Options, saver: Any, source: str, replace: bool, dry_run: bool, yes: bool, sealed_by: Any
) -> None:
    if dry_run or (replace and source != "-" and asks(opts, yes)):
        plan = await saver.aplan_import(source, sealed_by=sealed_by)
        if dry_run:
            verb = "replaced" if replace else "refused: they exist (--replace replaces them)"
            say_plan(
                opts,
                {"threads": plan.threads, "existing": plan.existing, "replace": replace},
                f"would import {len(plan.threads)} thread(s), {plan.report.checkpoints} "
                f"checkpoints; {len(plan.existing)} of them {verb}"
                if plan.existing
                else f"would import {len(plan.threads)} thread(s), "
                f"{plan.report.checkpoints} checkpoints; none exists here",
            )
            return
        if plan.existing:
            confirm(
                opts,
                f"replace {len(plan.existing)} existing thread(s): {ids_text(plan.existing)}?",
                yes,
            )
    try:
        with opts.progress("importing") as progress:
            file: Any = sys.stdin.buffer if source == "-" else source
            report = await saver.aimport(
                file, replace=replace, progress=progress, sealed_by=sealed_by
            )
    except ThreadExistsError as exc:  # worded for this command line: --replace
        raise ThreadExistsError(
            exc.thread_id, exc.file, line=exc.line, imported=exc.imported, replace="--replace"
        ) from exc
    except CorruptExportError as exc:
        raise CorruptExportError(
            exc.file, exc.reason, imported=exc.imported, replace="--replace"
        ) from exc
    print_report(opts, "imported", report)


@cli.command()
@click.argument("source")
@click.argument("target")
@click.option("--replace", is_flag=True, help="delete TARGET first when it exists")
@click.option("--dry-run", is_flag=True, help=DRY_HELP)
@click.option("--yes", "-y", is_flag=True, help=YES_HELP)
@pass_opts
def copy(opts: Options, source: str, target: str, replace: bool, dry_run: bool, yes: bool) -> None:
    """Copy a thread's whole history to another thread id (an existing TARGET only
    with --replace, which deletes it first)."""
    if source == target:
        raise click.UsageError("SOURCE and TARGET are the same thread")
    _copy(opts, source, target, replace, dry_run, yes)


@command
async def _copy(
    opts: Options, saver: Any, source: str, target: str, replace: bool, dry_run: bool, yes: bool
) -> None:
    src, dst = await saver.aget_thread(source), await saver.aget_thread(target)
    if src is None:
        raise NotFound(f"thread {source!r} has no checkpoints: nothing was copied")
    if dst is not None and not replace:
        raise ConflictError(
            f"thread {target!r} exists ({len(dst.namespaces)} namespace(s)): nothing was "
            "copied; copy onto it with --replace (which deletes it first), or name a new thread"
        )
    if dry_run:
        say_plan(
            opts,
            {
                "source": source,
                "target": target,
                "namespaces": len(src.namespaces),
                "replaced": dst is not None,
            },
            f"would copy thread {source!r} ({len(src.namespaces)} namespace(s)) to {target!r}"
            + (f", deleting {target!r} first" if dst is not None else ""),
        )
        return
    if dst is not None:
        confirm(opts, f"delete thread {target!r} and copy {source!r} onto it?", yes)
        await saver.aprune([target], strategy="delete")
    try:
        report = await saver.acopy_thread(source, target)
    except Exception as exc:
        if dst is not None:
            exc.add_note(
                f"thread {target!r} was deleted (--replace) before the copy failed: run the "
                "same copy again to finish it, or import the thread from an export"
            )
        raise
    if report.skipped and not report.threads:
        raise NotFound(f"thread {source!r} has no checkpoints: nothing was copied")
    print_report(opts, "copied", report)


@cli.command()
@click.argument("thread_ids", nargs=-1, required=True)
@click.option("--dry-run", is_flag=True, help=DRY_HELP)
@click.option("--yes", "-y", is_flag=True, help=YES_HELP)
@pass_opts
def delete(opts: Options, thread_ids: tuple[str, ...], dry_run: bool, yes: bool) -> None:
    """Delete threads: every namespace, checkpoint, write, blob and pack."""
    _delete(opts, list(dict.fromkeys(thread_ids)), dry_run, yes)


@command
async def _delete(
    opts: Options, saver: Any, thread_ids: list[str], dry_run: bool, yes: bool
) -> None:
    infos = {t: await saver.aget_thread(t) for t in thread_ids}
    present = [t for t, i in infos.items() if i is not None]
    missing = [t for t in thread_ids if t not in present]
    if dry_run:
        plan = await saver.aprune(present, strategy="delete", dry_run=True)
        say_plan(
            opts,
            {
                "threads": present,
                "namespaces": plan.namespaces,
                "checkpoints": plan.checkpoints,
                "missing": missing,
            },
            f"would delete {len(present)} thread(s) ({plan.namespaces} namespace(s), "
            f"{plan.checkpoints} checkpoint(s))",
        )
    elif present:
        confirm(opts, f"delete {len(present)} thread(s) for good: {ids_text(present)}?", yes)
        with opts.progress("deleting") as progress:
            report = await saver.aprune(present, strategy="delete", progress=progress)
        print_report(opts, "deleted", report)
    if missing:
        raise NotFound(f"no such thread: {', '.join(repr(t) for t in missing)}")
