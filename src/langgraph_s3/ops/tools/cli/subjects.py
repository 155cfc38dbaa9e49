"""Commands of a deployment's subjects: ``forget``, ``receipts`` and ``seal``.

The deployment names its subjects in its URL (``...&subjects=user_id&kms_key=alias/k``),
as its agents' savers do: ``forget`` seals nothing, but it must find the subject's
token, index and key where the agents keep them.
"""

from __future__ import annotations

from typing import Any

import click

from langgraph_s3.ops.tools.cli.base import (
    NotFound,
    Options,
    cli,
    command,
    confirm,
    pass_opts,
    say_plan,
    segment_option,
    sharded,
)

YES_HELP = "do not ask for confirmation on a terminal"


@cli.command()
@click.argument("subject")
@click.option(
    "--dry-run", is_flag=True, help="say how many threads and store namespaces it would delete"
)
@click.option("--yes", "-y", is_flag=True, help=YES_HELP)
@click.option(
    "--no-wait",
    is_flag=True,
    help="return once the threads are deleted; run it again after the time it prints",
)
@pass_opts
def forget(opts: Options, subject: str, dry_run: bool, yes: bool, no_wait: bool) -> None:
    """Forget SUBJECT (a user id, as the deployment's metadata key or namespace label
    names it): delete every thread and store item of theirs, destroy their key, print the
    receipt. Safe to run again."""
    _forget(opts, subject, dry_run, yes, no_wait)


@command
async def _forget(
    opts: Options, saver: Any, subject: str, dry_run: bool, yes: bool, no_wait: bool
) -> None:
    plan = await saver.aforget(subject, dry_run=True)
    what = (
        f"{plan['threads']} thread(s) and the items of {plan['store_namespaces']} store "
        "namespace(s)"
    )
    if dry_run:
        say_plan(
            opts,
            {k: plan[k] for k in ("subject", "threads", "store_namespaces", "key")},
            f"would forget subject {plan['subject']}: delete {what} and destroy its key "
            f"({plan['key']})",
        )
        return
    confirm(opts, f"forget this subject for good: delete {what} and destroy its key?", yes)
    with opts.progress("forgetting") as progress:
        receipt = await saver.aforget(subject, wait=not no_wait, progress=progress)
    if opts.as_json:
        opts.emit(receipt)
        return
    if receipt["state"] == "forgetting":
        opts.out.print(
            f"subject {receipt['subject']}: {receipt['deleted']['threads']} thread(s) deleted; "
            f"its key may be destroyed from {receipt['resume_after']}: run this again then"
        )
        return
    _print_receipt(opts, receipt)


@cli.command()
@click.option("--dry-run", is_flag=True, help="say how many threads and items it would rewrite")
@click.option(
    "--idle-minutes",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="rewrite only threads idle this long (a busy one is left for a later run)",
)
@segment_option
@click.option("--store-url", help="the store (default: $LANGGRAPH_S3_STORE_URL, else --url's)")
@click.option("--yes", "-y", is_flag=True, help=YES_HELP)
@pass_opts
def seal(
    opts: Options,
    dry_run: bool,
    idle_minutes: float,
    shard: Any,
    store_url: str | None,
    yes: bool,
) -> None:
    """Rewrite sealed what the deployment's subjects had before it declared them: their
    plain threads (each as a new life, like an import's replace) and store items. Safe
    to run again; N runs of --segment I/N share the work."""
    _seal(opts, dry_run, idle_minutes, shard, store_url, yes)


@command
async def _seal(
    opts: Options,
    saver: Any,
    dry_run: bool,
    idle_minutes: float,
    shard: Any,
    store_url: str | None,
    yes: bool,
) -> None:
    async with opts.store(store_url) as store:
        has_store = store.seals is not None
        plan = await saver.aseal(dry_run=True, idle_minutes=idle_minutes, **sharded(shard))
        items = await store.aseal(dry_run=True, **sharded(shard)) if has_store else None
        what = f"{plan['threads']} thread(s)" + (
            f" and {items['items']} store item(s)" if items is not None else ""
        )
        if dry_run:
            say_plan(
                opts,
                {"threads": plan, "store": items},
                f"would rewrite sealed {what}; {len(plan['busy'])} busy thread(s) left",
            )
            return
        confirm(opts, f"rewrite sealed {what}?", yes)
        with opts.progress("sealing") as progress:
            done = await saver.aseal(idle_minutes=idle_minutes, progress=progress, **sharded(shard))
        stored = await store.aseal(**sharded(shard)) if has_store else None
    if opts.as_json:
        opts.emit({"threads": done, "store": stored})
        return
    opts.out.print(
        f"sealed {done['threads']} thread(s) ({done['checkpoints']} checkpoint(s)); "
        f"{len(done['busy'])} busy, left for a later run"
        + (
            f"; {stored['items']} store item(s), {stored['segments']} segment(s) dropped"
            if stored is not None
            else ""
        )
    )
    remains = [*done["remains"], *(stored["remains"] if stored is not None else [])]
    for remain in remains:
        opts.out.print(f"  remains: {remain['what']}: readable until {remain['readable_until']}")


@cli.command()
@click.option("--verify", is_flag=True, help="check the chain: exit 1 where it breaks")
@click.option("--subject", "token", default=None, help="only the receipts of this token")
@pass_opts
def receipts(opts: Options, verify: bool, token: str | None) -> None:
    """Print the deployment's forgetting receipts, oldest first (tamper-evident: each
    names the digest of the one before)."""
    _receipts(opts, verify, token)


@command
async def _receipts(opts: Options, saver: Any, verify: bool, token: str | None) -> None:
    chain = saver.receipts()
    found = [r async for r in chain.all() if token is None or r.get("subject") == token]
    broken = await chain.verify() if verify else None
    if opts.as_json:
        opts.emit({"receipts": found, **({"verified": broken is None} if verify else {})})
    else:
        for receipt in found:
            _print_receipt(opts, receipt)
        if verify and broken is None:
            opts.out.print(f"the chain of {len(found)} receipt(s) holds")
    if broken is not None:
        raise click.ClickException(f"the chain breaks at receipt {broken.seq}: {broken.reason}")
    if token is not None and not found:
        raise NotFound(f"no receipt of subject {token}")


def _print_receipt(opts: Options, r: dict[str, Any]) -> None:
    d = r.get("deleted", {})
    opts.out.print(
        f"receipt {r.get('seq')}: subject {r.get('subject')} (life {r.get('life')}) forgotten "
        f"{r.get('ended')}; key {r.get('key_id')} destroyed {r.get('key_destroyed')}"
    )
    opts.out.print(
        f"  deleted: {d.get('threads', 0)} thread(s), {d.get('checkpoints', 0)} checkpoint(s), "
        f"{d.get('objects', 0)} object(s), {d.get('bytes', 0):,} bytes; "
        f"{d.get('store_items', 0)} store item(s) in {d.get('store_namespaces', 0)} "
        f"namespace(s), {d.get('store_bytes', 0):,} bytes"
    )
    for remain in r.get("remains", []):
        opts.out.print(f"  remains: {remain['what']}: readable until {remain['readable_until']}")
    opts.out.print(f"  exports: {r.get('exports')}")
    opts.out.print(f"  digest {r.get('digest')}, after {str(r.get('previous'))[:16]}...")
