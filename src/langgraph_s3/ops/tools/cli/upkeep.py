"""Commands that keep a deployment: ``prune``, ``pack``, ``sweep``, ``doctor``."""

from __future__ import annotations

import contextlib
import functools
from datetime import timedelta
from typing import Any

import click

from langgraph_s3.core.shards import Shard
from langgraph_s3.ops.tools.cli.base import (
    Options,
    Unhealthy,
    asks,
    cli,
    command,
    confirm,
    finite,
    guarded,
    pass_opts,
    print_report,
    say_plan,
    segment_option,
    segment_value,
    sharded,
)

DRY_HELP = "say what it would remove, and remove nothing"
YES_HELP = "do not ask for confirmation on a terminal"
RULES = "--keep-last N (the newest N checkpoints stay), --older-than-days D (older ones go)"


@cli.command()
@click.option("--dry-run", is_flag=True, help="say what it would create, and create nothing")
@click.option("--store-url", help="the store too (default: $LANGGRAPH_S3_STORE_URL, if set)")
@pass_opts
def setup(opts: Options, dry_run: bool, store_url: str | None) -> None:
    """Create the deployment: the bucket, the manifest table (and, for a store, its TTL
    lifecycle rules), each only when missing. Idempotent; prints what it created."""
    guarded(functools.partial(_setup, opts, dry_run, store_url))


async def _setup(opts: Options, dry_run: bool, store_url: str | None) -> None:
    import os

    done: dict[str, list[str]] = {}
    async with opts.saver() as saver:
        done["saver"] = await saver.setup(dry_run=dry_run)
    if store_url or os.environ.get("LANGGRAPH_S3_STORE_URL"):
        async with opts.store(store_url) as store:
            done["store"] = await store.setup(dry_run=dry_run)
    if opts.as_json:
        opts.emit({"dry_run": dry_run, **done})
        return
    made = list(dict.fromkeys(x for part in done.values() for x in part))  # a shared bucket once
    verb = "would create" if dry_run else "created"
    if not made:
        opts.out.print("the deployment is set up: nothing to create")
    for x in made:
        opts.out.print(f"{verb} {x}")


@cli.command()
@click.argument("thread_ids", nargs=-1, required=True)
@click.option("--keep-last", type=click.IntRange(min=1), help="the newest N checkpoints stay")
@click.option(
    "--older-than-days",
    type=click.FloatRange(min=0, max=36500),
    help="checkpoints older than this many days go",
)
@click.option("--dry-run", is_flag=True, help=DRY_HELP)
@click.option("--yes", "-y", is_flag=True, help=YES_HELP)
@pass_opts
def prune(
    opts: Options,
    thread_ids: tuple[str, ...],
    keep_last: int | None,
    older_than_days: float | None,
    dry_run: bool,
    yes: bool,
) -> None:
    """Shrink threads to a retention rule (each namespace's latest always stays)."""
    if keep_last is None and older_than_days is None:
        raise click.UsageError(f"give a rule: {RULES} (both: a checkpoint either keeps stays)")
    older = (
        timedelta(days=finite(older_than_days, "--older-than-days"))
        if older_than_days is not None
        else None
    )
    _prune(opts, list(dict.fromkeys(thread_ids)), keep_last, older, dry_run, yes)


@command
async def _prune(
    opts: Options,
    saver: Any,
    thread_ids: list[str],
    keep_last: int | None,
    older: Any,
    dry_run: bool,
    yes: bool,
) -> None:
    rule: dict[str, Any] = {"keep_last": keep_last, "older_than": older}
    if dry_run:
        each = {t: await saver.aprune([t], dry_run=True, **rule) for t in thread_ids}
        removed = sum(r.checkpoints for r in each.values())
        acting = [t for t, r in each.items() if r.checkpoints]
        say_plan(
            opts,
            {"threads": acting, "checkpoints": removed},
            f"would remove {removed} checkpoint(s) from {len(acting)} thread(s)",
        )
        return
    if asks(opts, yes):  # the plan costs reads: made only for a question
        plan = await saver.aprune(thread_ids, dry_run=True, **rule)
        if plan.checkpoints:
            confirm(
                opts, f"remove {plan.checkpoints} checkpoint(s) from {plan.threads} thread(s)?", yes
            )
    with opts.progress("pruning") as progress:
        report = await saver.aprune(thread_ids, progress=progress, **rule)
    print_report(opts, "pruned", report)


@cli.command()
@click.argument("thread_ids", nargs=-1)
@click.option(
    "--idle-days",
    type=click.FloatRange(min=0, max=36500),
    help="pack every thread idle this many days",
)
@click.option("--dry-run", is_flag=True, help="say which threads it would pack, and pack none")
@segment_option
@pass_opts
def pack(
    opts: Options,
    thread_ids: tuple[str, ...],
    idle_days: float | None,
    dry_run: bool,
    shard: Shard | None,
) -> None:
    """Archive threads: each into one pack object the lifecycle rule can move."""
    if not thread_ids and idle_days is None:
        raise click.UsageError("name threads to pack, or give --idle-days")
    if thread_ids and shard is not None:
        raise click.UsageError("--segment shards --idle-days' pass: name threads or give it")
    if idle_days is not None:
        finite(idle_days, "--idle-days")
    _pack(opts, list(thread_ids) or None, idle_days, dry_run, shard)


@command
async def _pack(
    opts: Options,
    saver: Any,
    thread_ids: list[str] | None,
    idle_days: float | None,
    dry_run: bool,
    shard: Shard | None,
) -> None:
    where = sharded(shard)
    if dry_run:
        if thread_ids is None:
            from datetime import UTC, datetime

            cutoff = datetime.now(UTC) - timedelta(days=idle_days or 0)
            listing = saver.alist_threads(updated_before=cutoff, **where)
            thread_ids = [t.thread_id async for t in listing if not t.packed]
        found = [t for t in thread_ids if await saver.aget_thread(t) is not None]
        say_plan(opts, {"threads": found}, f"would pack {len(found)} thread(s)")
        return
    with opts.progress("packing") as progress:
        report = await saver.apack(thread_ids, idle_days=idle_days, progress=progress, **where)
    print_report(opts, "packed", report)


@cli.command()
@click.option(
    "--segment",
    "shard",
    metavar="I/N",
    required=True,
    callback=segment_value,
    help="shard I of N (I from 0): N workers cover every thread once",
)
@click.option(
    "--pack-after-days",
    type=click.FloatRange(min=0, max=36500),
    help="also pack the shard's threads idle this many days (not packed since)",
)
@click.option("--store-url", help="also sweep this store's expired items of the shard")
@pass_opts
def archive(
    opts: Options, shard: Shard, pack_after_days: float | None, store_url: str | None
) -> None:
    """One shard's upkeep, as the terraform archiver runs it per Lambda: the TTL sweep
    of its expired threads, packing of its idle threads, the store's sweep."""
    guarded(functools.partial(_archive, opts, shard, pack_after_days, store_url))


async def _archive(
    opts: Options, shard: Shard, pack_after_days: float | None, store_url: str | None
) -> None:
    from langgraph_s3.ops.handlers.archiver import arun_shard

    store = opts.store(store_url) if store_url else None
    async with opts.saver() as saver:
        await saver.averify()
        async with contextlib.AsyncExitStack() as stack:
            if store is not None:
                await stack.enter_async_context(store)
            report = await arun_shard(saver, shard, pack_after_days=pack_after_days, store=store)
    if opts.as_json:
        opts.emit({"segment": shard.segment, "total_segments": shard.total, **report.as_dict()})
        return
    print_report(opts, f"shard {shard}: swept threads", report.swept)
    print_report(opts, f"shard {shard}: packed", report.packed)
    if store is not None:
        opts.out.print(f"shard {shard}: swept store: {report.store_items} expired item(s)")


@cli.command()
@click.option(
    "--what",
    type=click.Choice(["all", "threads", "store"]),
    default="all",
    show_default=True,
    help="threads: thread TTL; store: the store's expired items",
)
@click.option("--store-url", help="the store (default: $LANGGRAPH_S3_STORE_URL, else --url's)")
@click.option("--dry-run", is_flag=True, help="list the expired threads, and delete nothing")
@click.option("--yes", "-y", is_flag=True, help=YES_HELP)
@segment_option
@pass_opts
def sweep(
    opts: Options,
    what: str,
    store_url: str | None,
    dry_run: bool,
    yes: bool,
    shard: Shard | None,
) -> None:
    """Delete what outlived its TTL now: threads whose thread TTL passed (objects and
    all) and the store's expired items. Each part's result is printed as it ends, so
    a failing store sweep still shows what the thread sweep did."""
    if dry_run:
        if what != "threads":
            raise click.UsageError(
                "--dry-run lists the threads whose TTL passed: give --what threads (the "
                "store's expired items are not listed ahead)"
            )
        _sweep_plan(opts, shard)
        return
    guarded(functools.partial(_sweep, opts, what, store_url, yes, shard))


@command
async def _sweep_plan(opts: Options, saver: Any, shard: Shard | None) -> None:
    expired = [t async for t in saver.aexpired_threads(**sharded(shard))]
    say_plan(opts, {"threads": expired}, f"would delete {len(expired)} expired thread(s)")


async def _sweep(
    opts: Options, what: str, store_url: str | None, yes: bool = False, shard: Shard | None = None
) -> None:
    from dataclasses import asdict

    done: dict[str, Any] = {"threads": None, "store": None}
    store = None
    if what in ("all", "store"):  # a bad store URL is refused before anything is deleted
        store = opts.store(store_url)
    try:
        if what in ("all", "threads"):  # the saver is opened only when asked for
            async with opts.saver() as saver:
                if asks(opts, yes):  # the expired threads are listed only to ask
                    expired = [t async for t in saver.aexpired_threads(**sharded(shard))]
                    if expired:
                        confirm(opts, f"delete {len(expired)} expired thread(s) for good?", yes)
                with opts.progress("sweeping threads") as progress:
                    report = await saver.asweep_ttl(progress=progress, **sharded(shard))
            done["threads"] = asdict(report)
            if not opts.as_json:
                print_report(opts, "swept threads", report)
        if store is not None:
            async with store:
                deleted = await store.asweep_ttl(**sharded(shard))
            done["store"] = {"deleted": deleted}
            if not opts.as_json:
                opts.out.print(f"swept store: {deleted} expired item(s)")
    finally:
        if opts.as_json and any(v is not None for v in done.values()):
            opts.emit(done)  # what was done, even when the next part failed


@cli.command()
@click.option("--strict", is_flag=True, help="hardening warnings fail too (exit 1)")
@pass_opts
def doctor(opts: Options, strict: bool) -> None:
    """Check the deployment for real: endpoint, credentials, bucket, table, every action
    the library needs, hardening, lifecycle rules, latency. ✘ breaks the deployment
    (exit 1); ⚠ is hardening it lacks (exit 0, 1 with --strict), each with its fix."""
    _doctor(opts, strict)


@functools.partial(command, verify=False)  # what is missing is the doctor's to say
async def _doctor(opts: Options, saver: Any, strict: bool) -> None:
    from dataclasses import asdict

    from langgraph_s3.ops.tools.doctor import FAIL, INFO, WARN, diagnose

    checks = await diagnose(saver)
    if opts.as_json:
        opts.emit([asdict(c) for c in checks])
    else:
        from rich.text import Text

        marks = {FAIL: ("✘", "red"), WARN: ("⚠", "yellow"), INFO: ("·", "dim")}
        for c in checks:
            mark, style = marks.get(c.status, ("✔", "green"))
            line = Text(mark, style=style)
            line.append(f" {c.name}" + (f": {c.detail}" if c.detail else ""))
            if c.fix:
                line.append(f" → {c.fix}", style="dim")
            opts.out.print(line)
    failed = [c for c in checks if c.status == FAIL or (strict and c.status == WARN)]
    warned = [c for c in checks if c.status == WARN]
    verdict = f"{len(failed)} check(s) failed: {', '.join(c.name for c in failed)}"
    if not opts.as_json:  # the verdict ends the report, on stdout (the error line too)
        if failed:
            opts.out.print(f"unhealthy: {verdict}")
        elif warned:
            opts.out.print(
                f"healthy, with {len(warned)} hardening warning(s): "
                f"{', '.join(c.name for c in warned)} (--strict makes them failures)"
            )
        else:
            opts.out.print(f"healthy: {len(checks)} checks passed")
    if failed:
        raise Unhealthy(verdict)
