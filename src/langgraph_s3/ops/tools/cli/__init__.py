"""The ``langgraph-s3`` command line: the operator's questions, on the saver's public API.

Every command but ``demo`` takes the deployment from ``--url`` or ``LANGGRAPH_S3_URL``
(``s3://BUCKET/PREFIX?table=TABLE``) and the usual AWS environment. Output is for
people by default and JSON with ``--json``. Exit codes: 0 done, 1 the operation
failed, 2 a bad command line, 3 nothing found (no such thread or checkpoint),
4 the deployment is not usable as given (no URL, a missing bucket or table, access
denied). Errors are one line on stderr: what went wrong and what to do.

The command line holds no storage logic: it calls :class:`AsyncS3Saver` and renders
what it answers (``views.py``). One module per kind of command: :mod:`.reading`,
:mod:`.threads`, :mod:`.upkeep`, :mod:`.store`, :mod:`.demo`, over :mod:`.base` and
:mod:`.addressing` (checkpoints and namespaces as operators name them). Global options
(``--url``, ``--endpoint-url``, ``--json``) go anywhere on the line; ``--help`` loads no
SDK and no LangGraph (the package's names load on first use).
"""

from __future__ import annotations

from collections.abc import Sequence

import click

# each module adds its commands to the group: imported for that
from langgraph_s3.ops.tools.cli import (  # noqa: F401
    demo,
    deploying,
    reading,
    store,
    subjects,
    threads,
    upkeep,
)
from langgraph_s3.ops.tools.cli.base import (
    EXIT_DEPLOYMENT,
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    Options,
    cli,
)

__all__ = [
    "EXIT_DEPLOYMENT",
    "EXIT_FAILED",
    "EXIT_NOT_FOUND",
    "EXIT_USAGE",
    "Options",
    "cli",
    "main",
]


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
