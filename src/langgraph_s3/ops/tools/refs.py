"""How an operator names a checkpoint and a namespace on the command line: pure
functions over what the saver lists (no I/O).

A checkpoint is ``latest``, ``latest~N`` (N parents back, as git's ``HEAD~N``), its
full id, or any unique prefix, suffix or part of it (``history`` prints the last 12
characters, where UUIDv6 ids differ; ids minted in the same second share their
first 13). A namespace is its full string (``middle:<task id>|inner:<task id>``),
or its node path (``middle/inner``, or with ``|``): a subgraph that ran many times
has one namespace per run, and the path names the newest.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

LATEST = re.compile(r"^latest(?:~(\d+))?$")


class RefError(Exception):
    """A name that fits no checkpoint or namespace, or more than one: the message
    says what was there."""

    def __init__(self, message: str, *, ambiguous: bool = False) -> None:
        super().__init__(message)
        self.ambiguous = ambiguous


@dataclass(frozen=True)
class Back:
    """``latest~steps``: the latest checkpoint, then ``steps`` parents back."""

    steps: int


def parse(ref: str | None) -> Back | str:
    """``latest``/``latest~N`` (None too) as :class:`Back`, anything else as given."""
    if ref is None:
        return Back(0)
    m = LATEST.match(ref.strip())
    if m is None:
        return ref.strip()
    return Back(int(m.group(1) or 0))


def match_id(ref: str, ids: Sequence[str], *, where: str) -> str:
    """The one id of ``ids`` that ``ref`` names: equal to it, else the only one it
    begins or ends. ``where`` says where they were listed, for the error."""
    if not ref:
        raise RefError("an empty checkpoint id: give an id, a prefix or suffix of one, or latest~N")
    if ref in ids:
        return ref
    found = sorted({i for i in ids if i.startswith(ref) or i.endswith(ref)})
    if not found:  # a part of what history printed (the last 12 characters)
        found = sorted({i for i in ids if ref in i})
    if len(found) == 1:
        return found[0]
    if not found:
        raise RefError(
            f"no checkpoint {ref!r} in {where} ({len(ids)} checkpoints): "
            "`langgraph-s3 history THREAD` lists them; latest and latest~N name them too"
        )
    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    raise RefError(
        f"{ref!r} names {len(found)} checkpoints in {where}: {shown}; give more characters",
        ambiguous=True,
    )


def node_path(ns: str) -> str:
    """``middle:<task>|inner:<task>`` -> ``middle/inner``; the root is ``""``."""
    return "/".join(part.split(":", 1)[0] for part in ns.split("|")) if ns else ""


def match_namespaces(given: str, namespaces: Sequence[str]) -> list[str]:
    """The namespaces ``given`` names: itself when it is one; else those whose node
    path it is (``/`` or ``|`` between the nodes, ``/`` around them ignored)."""
    if given in namespaces:
        return [given]
    if given in ("(root)", "/"):
        return [""] if "" in namespaces else []
    path = "/".join(p for p in re.split(r"[/|]", given) if p)
    return [ns for ns in namespaces if ns and node_path(ns) == path]


def namespace_listing(namespaces: Sequence[str]) -> str:
    """The thread's namespaces for an error: each node path, with its runs."""
    counts: dict[str, int] = {}
    for ns in namespaces:
        counts[node_path(ns) or "(root)"] = counts.get(node_path(ns) or "(root)", 0) + 1
    return ", ".join(p if n == 1 else f"{p} ({n} runs)" for p, n in sorted(counts.items()))
