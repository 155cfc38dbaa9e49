"""Commands that keep a deployment: ``prune``, ``pack``, ``sweep``, ``doctor``."""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

import click

from langgraph_s3.ops.cli.base import (
    Options,
    Unhealthy,
    cli,
    command,
    finite,
    guarded,
    pass_opts,
    print_report,
)


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
        timedelta(days=finite(older_than_days, "--older-than-days"))
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
    print_report(opts, "pruned", report)


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
        finite(idle_days, "--idle-days")
    _pack(opts, list(thread_ids) or None, idle_days)


@command
async def _pack(
    opts: Options, saver: Any, thread_ids: list[str] | None, idle_days: float | None
) -> None:
    with opts.progress("packing") as progress:
        report = await saver.apack(thread_ids, idle_days=idle_days, progress=progress)
    print_report(opts, "packed", report)


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
    guarded(functools.partial(_sweep, opts, what, store_url))


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
                print_report(opts, "swept threads", report)
        if store is not None:
            async with store:
                deleted = await store.asweep_ttl()
            done["store"] = {"deleted": deleted}
            if not opts.as_json:
                opts.out.print(f"swept store: {deleted} expired item(s)")
    finally:
        if opts.as_json and any(v is not None for v in done.values()):
            opts.emit(done)  # what was done, even when the next part failed


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
