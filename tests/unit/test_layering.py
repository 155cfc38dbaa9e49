"""The library's imports run one way: no module imports, even lazily or for types only,
a module that imports it back (directly or through others), and the test machinery is
imported by no runtime module. Read from the source with ``ast``: nothing is run."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "langgraph_s3"

TEST_MACHINERY = {"memory", "local", "testing", "graphs"}
"""Fakes, the moto helpers, the pytest plugin and the sample graphs."""
MAY_USE_MACHINERY = TEST_MACHINERY | {"cli", "demo"}
"""The operator's tools run the demo and the bench server on moto."""


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(parts)


def _imports(path: Path, name: str) -> set[str]:
    """The package's modules ``path`` imports, anywhere in it (a function body, a
    ``TYPE_CHECKING`` block): every arrow counts."""
    package = name.split(".")[:-1] if path.name != "__init__.py" else name.split(".")
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                mod = ".".join([*base, *(node.module.split(".") if node.module else [])])
                if node.module is None:  # from . import x: x may be a module
                    out.update(".".join([*base, a.name]) for a in node.names)
                else:
                    out.add(mod)
            elif node.module and node.module.split(".")[0] == "langgraph_s3":
                out.add(".".join(node.module.split(".")[1:]))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "langgraph_s3":
                    out.add(".".join(a.name.split(".")[1:]))
    return out


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {
        name: {m for m in _imports(path, name) if m in modules and m != name}
        for name, path in modules.items()
    }


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                out.append(sorted(scc))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_imports_have_no_circle() -> None:
    graph = _graph()
    assert len(graph) > 40  # the whole package was read
    assert _circles(graph) == []


def test_a_circle_is_found() -> None:
    """The check itself: a made-up circle of three modules is reported."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]


def test_no_runtime_module_imports_the_test_machinery() -> None:
    graph = _graph()
    wrong = {
        name: sorted(deps & TEST_MACHINERY)
        for name, deps in graph.items()
        if name not in MAY_USE_MACHINERY and deps & TEST_MACHINERY
    }
    assert wrong == {}


def test_the_value_types_import_nothing_of_the_package_but_errors() -> None:
    """The records the ports speak in sit at the bottom: the ports, both kinds of
    adapter and the fakes can all import them."""
    graph = _graph()
    assert graph["records"] <= {"errors"}
    assert graph["cache"] == set()
    assert graph["stats"] == set()
    assert "manifest" not in graph["ports"] and "objects" not in graph["ports"]
