"""Commands of a deployment's subjects: ``forget`` and ``receipts``.

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
)

YES_HELP = "do not ask for confirmation on a terminal"


@cli.command()
@click.argument("subject")
@click.option("--dry-run", is_flag=True, help="say how many threads it would delete")
@click.option("--yes", "-y", is_flag=True, help=YES_HELP)
@click.option(
    "--no-wait",
    is_flag=True,
    help="return once the threads are deleted; run it again after the time it prints",
)
@pass_opts
def forget(opts: Options, subject: str, dry_run: bool, yes: bool, no_wait: bool) -> None:
    """Forget SUBJECT (a user id, as the deployment's metadata key names it): delete
    every thread of theirs, destroy their key, print the receipt. Safe to run again."""
    _forget(opts, subject, dry_run, yes, no_wait)


@command
async def _forget(
    opts: Options, saver: Any, subject: str, dry_run: bool, yes: bool, no_wait: bool
) -> None:
    plan = await saver.aforget(subject, dry_run=True)
    if dry_run:
        say_plan(
            opts,
            {"subject": plan["subject"], "threads": plan["threads"], "key": plan["key"]},
            f"would forget subject {plan['subject']}: delete {plan['threads']} thread(s) and "
            f"destroy its key ({plan['key']})",
        )
        return
    confirm(
        opts,
        f"forget this subject for good: delete {plan['threads']} thread(s) and destroy its key?",
        yes,
    )
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
        f"{d.get('objects', 0)} object(s), {d.get('bytes', 0):,} bytes"
    )
    for remain in r.get("remains", []):
        opts.out.print(f"  remains: {remain['what']}: readable until {remain['readable_until']}")
    opts.out.print(f"  exports: {r.get('exports')}")
    opts.out.print(f"  digest {r.get('digest')}, after {str(r.get('previous'))[:16]}...")
