"""Commands that move threads: ``export``, ``import``, ``copy``, ``delete``."""

from __future__ import annotations

import sys
from typing import Any

import click

from langgraph_s3.errors import (
    CorruptExportError,
    ThreadExistsError,
)
from langgraph_s3.ops.cli.base import (
    NotFound,
    Options,
    cli,
    command,
    pass_opts,
    print_report,
)


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
    print_report(opts, "exported", report, quiet=output == "-")
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
    print_report(opts, "imported", report)


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
    print_report(opts, "copied", report)


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
        print_report(opts, "deleted", report)
    if missing:
        raise NotFound(f"no such thread: {', '.join(repr(t) for t in missing)}")


async def _exists(saver: Any, thread: str) -> bool:
    async for _ in saver.alist({"configurable": {"thread_id": thread}}, limit=1):
        return True
    return False
