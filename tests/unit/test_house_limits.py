"""The house's size limits, read from the source with ``ast``: no module over 500 lines,
no class over 300, no function over 80, and a docstring on every public name of the
ports and of the four public classes. A unit grown past one fails here, by name."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from langgraph_s3 import AsyncS3Saver, AsyncS3Store, S3Saver, S3Store
from langgraph_s3.core.ports import ManifestPort, ObjectStorePort, TablePort

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "langgraph_s3"
MODULE_LINES, CLASS_LINES, FUNCTION_LINES = 500, 300, 80


def _units() -> list[tuple[str, str, int]]:
    """(kind, where, lines) of every module, class and function of the package."""
    out: list[tuple[str, str, int]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        rel = str(path.relative_to(PACKAGE))
        out.append(("module", rel, len(text.splitlines())))
        for node in ast.walk(ast.parse(text)):
            size = (
                (node.end_lineno or node.lineno) - node.lineno + 1 if hasattr(node, "lineno") else 0
            )
            if isinstance(node, ast.ClassDef):
                out.append(("class", f"{rel}:{node.name}", size))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                out.append(("function", f"{rel}:{node.name}", size))
    return out


def test_no_unit_outgrows_its_limit() -> None:
    limits = {"module": MODULE_LINES, "class": CLASS_LINES, "function": FUNCTION_LINES}
    units = _units()
    assert len([u for u in units if u[0] == "module"]) > 50  # the walk found the package
    over = [
        f"{kind} {where}: {n} lines (limit {limits[kind]})"
        for kind, where, n in units
        if n > limits[kind]
    ]
    assert over == []


@pytest.mark.parametrize(
    "cls", [ObjectStorePort, ManifestPort, TablePort, AsyncS3Saver, S3Saver, AsyncS3Store, S3Store]
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
