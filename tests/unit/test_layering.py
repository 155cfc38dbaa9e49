"""The library's imports run one way: no module imports, even lazily or for types only,
a module that imports it back (directly or through others), and the test machinery is
imported by no runtime module. Read from the source with ``ast``: nothing is run."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "langgraph_s3"

LAYERS = {
    "errors": 0,
    "core": 1,
    "aws": 2,
    "manifest": 3,
    "runtime": 4,
    "checkpoint": 5,
    "store": 5,
    "sync": 6,
    "testing": 7,
    "ops": 7,
}
"""Each folder (or top module) and its floor: a module imports only from its own floor
or below (``errors <- core <- aws <- manifest <- runtime <- {checkpoint, store} <-
sync <- {testing, ops}``). Anything else at the top (the package itself and the thin
modules that keep earlier import paths) sits above them all."""
TOP = 8


def floor(module: str) -> int:
    return LAYERS.get(module.split(".")[0], TOP)


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(parts)


def _imports(path: Path, name: str, modules: set[str]) -> set[str]:
    """The package's modules ``path`` imports, anywhere in it (a function body, a
    ``TYPE_CHECKING`` block): every arrow counts. ``from pkg import sub`` of a submodule
    is an arrow to the submodule (every module of a folder runs its ``__init__`` first:
    that is no arrow of its own)."""
    package = name.split(".")[:-1] if path.name != "__init__.py" else name.split(".")
    out: set[str] = set()

    def add(module: str, names: list[str]) -> None:
        subs = [f"{module}.{n}".strip(".") for n in names if f"{module}.{n}".strip(".") in modules]
        out.update(subs)
        if len(subs) < len(names):
            out.add(module)

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names]
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                add(".".join([*base, *(node.module.split(".") if node.module else [])]), names)
            elif node.module and node.module.split(".")[0] == "langgraph_s3":
                add(".".join(node.module.split(".")[1:]), names)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "langgraph_s3":
                    out.add(".".join(a.name.split(".")[1:]))
    return out


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {
        name: {m for m in _imports(path, name, set(modules)) if m in modules and m != name}
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


def test_imports_run_down_the_floors() -> None:
    graph = _graph()
    up = sorted(
        f"{name} -> {dep}"
        for name, deps in graph.items()
        for dep in deps
        if floor(dep) > floor(name)
    )
    assert up == []


def test_the_store_and_the_checkpoint_saver_never_import_each_other() -> None:
    """Side by side on one floor: what both need (the TTL sweep's background task, the
    lifecycle) sits below them, in runtime/."""
    graph = _graph()
    wrong = sorted(
        f"{name} -> {dep}"
        for name, deps in graph.items()
        for dep in deps
        if {name.split(".")[0], dep.split(".")[0]} == {"store", "checkpoint"}
    )
    assert wrong == []


def test_the_layer_check_finds_an_arrow_up() -> None:
    """The check itself: core importing the saver is an arrow up."""
    assert floor("checkpoint.saver") > floor("core.keys")
    assert floor("memory") == TOP and floor("errors") == 0


def test_the_value_types_import_nothing_of_the_package_but_errors() -> None:
    """The records the ports speak in sit at the bottom: the ports, both kinds of
    adapter and the fakes can all import them."""
    graph = _graph()
    assert graph["core.records"] <= {"errors", "core.held"}
    assert graph["core.held"] <= {"errors"}
    assert graph["core.cache"] == set()
    assert graph["aws.stats"] == set()
    assert {d.split(".")[0] for d in graph["core.ports"]} <= {"core", "errors"}


ROLE_MODULES = (
    "core/manifest_ports.py",
    "core/staging.py",
    "manifest/reads.py",
    "manifest/commits.py",
    "manifest/held.py",
    "manifest/upkeep.py",
    "manifest/deletions.py",
    "manifest/staging.py",
    "manifest/setup.py",
)
"""The manifest's ports and the roles that serve them."""
CLIMBING = ("Awaitable", "Coroutine", "AsyncIterator", "AsyncGenerator")


def _climbing(source: str) -> list[str]:
    """``Class.method(param)`` of every public method in ``source`` that takes an
    awaitable or an async callable: a call its callee would make back into its caller."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        for fn in node.body:
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if fn.name.startswith("_"):
                continue
            args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
            for a in args:
                note = ast.unparse(a.annotation) if a.annotation is not None else ""
                if any(word in note for word in CLIMBING):
                    out.append(f"{node.name}.{fn.name}({a.arg})")
    return out


def test_the_manifest_never_calls_back_into_its_callers() -> None:
    """No method of the manifest's roles or ports takes an awaitable or an async
    callable: a contended commit answers with what its writer must do
    (``core/commit.py``) instead of calling back up into it."""
    found = [f"{m}: {c}" for m in ROLE_MODULES for c in _climbing((PACKAGE / m).read_text())]
    assert found == []


def test_a_climbing_callback_is_found() -> None:
    """The check itself: the ``advance`` of before, with its five callbacks."""
    before = (
        "class Commits:\n"
        "    async def advance(self, thread_id: str, *, rewrite: Callable[[], Awaitable[None]]"
        " | None = None, stored: Awaitable[Any] | None = None) -> str: ...\n"
    )
    assert _climbing(before) == ["Commits.advance(rewrite)", "Commits.advance(stored)"]


WIRE_TAGS = {"S", "N", "B", "SS", "NS", "BS", "M", "L", "BOOL", "NULL"}
"""DynamoDB's attribute type tags: a dict keyed by one, or a subscript or ``get`` of one,
is the table's wire format."""


def _wire_format(source: str) -> list[int]:
    """Lines of ``source`` that write or read DynamoDB's attribute format."""
    lines: list[int] = []
    for node in ast.walk(ast.parse(source)):
        tags: list[ast.expr | None] = []
        if isinstance(node, ast.Dict):
            tags = list(node.keys)
        elif isinstance(node, ast.Subscript):
            tags = [node.slice]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
        ):
            tags = [node.args[0]]
        if any(isinstance(t, ast.Constant) and t.value in WIRE_TAGS for t in tags):
            lines.append(node.lineno)
    return lines


def test_core_speaks_no_wire_format() -> None:
    """``core/`` is pure: the manifest's schema and DynamoDB's attribute format live in
    ``manifest/`` (``schema.py``, ``conditions.py``, ``table.py``); the rules in ``core/``
    decide on records the schema reads."""
    found = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted((PACKAGE / "core").rglob("*.py"))
        if (lines := _wire_format(path.read_text()))
    }
    assert found == {}


def test_the_wire_format_check_finds_an_item_read_by_hand() -> None:
    assert _wire_format('rev = int(item.get("rev", {}).get("N", "0"))\n') == [1]
    assert _wire_format('key = {"pk": {"S": pk}}\n') == [1]
    assert _wire_format('tag = item["sk"]["S"]\n') == [1]
    assert _wire_format("n = counts.get('rev', 0)\n") == []
