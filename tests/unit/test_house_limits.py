"""The house's size limits, read from the source with ``ast``: no module over 500 lines,
no class over 300 counted with the in-package classes it inherits (a chain of bases is
one class to its reader; the ports and the lifecycle mixins, shared by the four public
classes, are measured on their own), no function over 80; docstrings are not counted (the public
façades' cost notes are worth their lines). No class inherits deeper than one
in-package base, beside the ports (``Protocol``), the lifecycle mixins of
``runtime/lifecycle.py`` and the exception hierarchy. A docstring on every public name
of the ports and of the four public classes. A unit grown past one fails here, by name."""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from langgraph_s3 import AsyncS3Saver, AsyncS3Store, S3Saver, S3Store
from langgraph_s3.core.manifest_ports import (
    ManifestCommits,
    ManifestDeletions,
    ManifestHeld,
    ManifestReads,
    ManifestSetup,
    ManifestUpkeep,
)
from langgraph_s3.core.ports import ManifestPort, ObjectStorePort
from langgraph_s3.core.staging import StagingPort
from langgraph_s3.manifest.table import TablePort

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "langgraph_s3"
MODULE_LINES, CLASS_LINES, FUNCTION_LINES = 500, 300, 80
LIFECYCLE = "runtime/lifecycle.py"
ROLE_METHODS = 12
"""Methods one role of the manifest serves at most."""


@dataclass
class Klass:
    where: str
    name: str
    lines: int
    bases: list[str]
    protocol: bool
    exception: bool = False
    resolved: list[Klass] = field(default_factory=list)


def _docstring_lines(node: ast.AST) -> int:
    """Lines of the docstrings of ``node`` and of everything defined in it."""
    n = 0
    for sub in ast.walk(node):
        if isinstance(sub, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef | ast.Module):
            first = sub.body[0] if sub.body else None
            value = first.value if isinstance(first, ast.Expr) else None
            if first and isinstance(value, ast.Constant) and isinstance(value.value, str):
                n += (first.end_lineno or first.lineno) - first.lineno + 1
    return n


def _size(node: ast.AST) -> int:
    start = getattr(node, "lineno", 1)
    return (getattr(node, "end_lineno", start) or start) - start + 1 - _docstring_lines(node)


def _base_name(b: ast.expr) -> str:
    if isinstance(b, ast.Subscript):
        b = b.value
    if isinstance(b, ast.Attribute):
        return b.attr
    return b.id if isinstance(b, ast.Name) else ""


def _walk() -> tuple[list[tuple[str, str, int]], list[Klass]]:
    """(kind, where, lines) of every module and function, and every class."""
    units: list[tuple[str, str, int]] = []
    classes: list[Klass] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        rel = str(path.relative_to(PACKAGE))
        tree = ast.parse(text)
        units.append(("module", rel, len(text.splitlines()) - _docstring_lines(tree)))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [_base_name(b) for b in node.bases]
                classes.append(Klass(rel, node.name, _size(node), bases, "Protocol" in bases))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                units.append(("function", f"{rel}:{node.name}", _size(node)))
    by_name: dict[str, list[Klass]] = {}
    for k in classes:
        by_name.setdefault(k.name, []).append(k)
    for k in classes:
        for b in k.bases:
            found = by_name.get(b, [])
            same = [c for c in found if c.where == k.where]
            if found:
                k.resolved.append((same or found)[0])
    for k in classes:
        k.exception = k.where == "errors.py" or _inherits(k, lambda c: c.where == "errors.py")
    return units, classes


def _inherits(k: Klass, test: object, seen: frozenset[str] = frozenset()) -> bool:
    assert callable(test)
    return any(
        test(b) or (b.name not in seen and _inherits(b, test, seen | {b.name})) for b in k.resolved
    )


def _counted(b: Klass) -> bool:
    """A base that counts toward depth: not a port, not a lifecycle mixin."""
    return not b.protocol and b.where != LIFECYCLE


def depth(k: Klass) -> int:
    """In-package inheritance depth, the ports and the lifecycle mixins aside."""
    return max((1 + depth(b) for b in k.resolved if _counted(b)), default=0)


def with_bases(k: Klass, seen: set[int] | None = None) -> int:
    """The class's lines (docstrings aside) with those of every in-package class it
    inherits from (each counted once), the ports and the lifecycle mixins aside: those
    are shared by the four public classes and measured on their own."""
    seen = seen if seen is not None else set()
    if id(k) in seen:
        return 0
    seen.add(id(k))
    return k.lines + sum(with_bases(b, seen) for b in k.resolved if _counted(b))


def test_no_unit_outgrows_its_limit() -> None:
    units, classes = _walk()
    limits = {"module": MODULE_LINES, "class": CLASS_LINES, "function": FUNCTION_LINES}
    assert len([u for u in units if u[0] == "module"]) > 50  # the walk found the package
    sized = [*units, *(("class", f"{k.where}:{k.name}", with_bases(k)) for k in classes)]
    over = [
        f"{kind} {where}: {n} lines (limit {limits[kind]})"
        for kind, where, n in sized
        if n > limits[kind]
    ]
    assert over == []


def test_no_class_inherits_deeper_than_one_in_package_base() -> None:
    _, classes = _walk()
    deep = sorted(
        f"{k.where}:{k.name} (depth {depth(k)})"
        for k in classes
        if depth(k) > 1 and not k.exception
    )
    assert deep == []


def test_a_chain_is_measured_whole() -> None:
    """The checks themselves, on made-up classes: a chain of three counts its bases'
    lines and is two deep; a port and a lifecycle mixin add no depth."""
    port = Klass("core/ports.py", "P", 10, ["Protocol"], True)
    life = Klass(LIFECYCLE, "L", 20, [], False)
    a = Klass("x.py", "A", 100, [], False)
    b = Klass("x.py", "B", 150, ["A"], False, resolved=[a])
    c = Klass("x.py", "C", 120, ["B", "P", "L"], False, resolved=[b, port, life])
    assert depth(b) == 1 and depth(c) == 2 and with_bases(c) == 370 > CLASS_LINES
    assert depth(Klass("y.py", "D", 5, ["L", "P"], False, resolved=[life, port])) == 0


@pytest.mark.parametrize(
    "role",
    [
        ManifestReads,
        ManifestCommits,
        ManifestHeld,
        ManifestUpkeep,
        ManifestDeletions,
        StagingPort,
        ManifestSetup,
    ],
)
def test_each_role_of_the_manifest_is_narrow(role: type) -> None:
    methods = [n for n in vars(role) if not n.startswith("_") and callable(getattr(role, n))]
    assert 0 < len(methods) <= ROLE_METHODS, methods


@pytest.mark.parametrize(
    "cls",
    [
        ObjectStorePort,
        ManifestPort,
        ManifestReads,
        ManifestCommits,
        ManifestUpkeep,
        ManifestDeletions,
        StagingPort,
        TablePort,
        AsyncS3Saver,
        S3Saver,
        AsyncS3Store,
        S3Store,
    ],
)
def test_every_public_name_of_the_ports_and_public_classes_has_a_docstring(cls: type) -> None:
    assert inspect.getdoc(cls)
    names = [n for n in dir(cls) if not n.startswith("_")]
    assert len(names) >= 3
    missing = [
        n
        for n in names
        if not inspect.getdoc(getattr(cls, n, None)) and callable(getattr(cls, n, None))
    ]
    assert missing == []


def test_a_commit_takes_six_parameters_at_most() -> None:
    """``advance``: where the checkpoint goes and ``How`` (no callbacks)."""
    names = list(inspect.signature(ManifestCommits.advance).parameters)
    assert names[0] == "self" and len(names) - 1 <= 6, names
