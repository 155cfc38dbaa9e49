"""The import paths users have stay valid after the package moved into folders: each
earlier path is a thin module over its new home, the same objects under both names."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

KEPT = {
    # earlier path: (new home, names a user takes from it)
    "langgraph_s3.sweeper": (
        "langgraph_s3.ops.handlers.sweeper",
        ["handler", "ahandle", "MalformedRecord"],
    ),
    "langgraph_s3.agent_server": (
        "langgraph_s3.ops.handlers.agent_server",
        ["checkpointer", "store"],
    ),
    "langgraph_s3.cli": ("langgraph_s3.ops.tools.cli", ["main"]),
    "langgraph_s3.ops.lambda_app": ("langgraph_s3.ops.handlers.lambda_app", ["LambdaApp"]),
    "langgraph_s3.ops.sweeper": ("langgraph_s3.ops.handlers.sweeper", ["handler", "ahandle"]),
    "langgraph_s3.ops.archiver": ("langgraph_s3.ops.handlers.archiver", ["handler"]),
    "langgraph_s3.ops.agent_server": (
        "langgraph_s3.ops.handlers.agent_server",
        ["checkpointer", "store"],
    ),
    "langgraph_s3.ops.lambda_extension": ("langgraph_s3.ops.handlers.lambda_extension", ["NAME"]),
    "langgraph_s3.ops.iam": ("langgraph_s3.ops.deploy.iam", ["RUNTIME_ACTIONS", "leading_keys"]),
    "langgraph_s3.ops.cli": ("langgraph_s3.ops.tools.cli", ["main"]),
    "langgraph_s3.ops.cli.reading": ("langgraph_s3.ops.tools.cli.reading", []),
    "langgraph_s3.ops.packaging": ("langgraph_s3.ops.deploy.packaging", ["PACKAGE"]),
    "langgraph_s3.ops.viewer": ("langgraph_s3.ops.tools.viewer", []),
    "langgraph_s3.ops.doctor": ("langgraph_s3.ops.tools.doctor", []),
    "langgraph_s3.ops.demo": ("langgraph_s3.ops.tools.demo", []),
    "langgraph_s3.ops.layout": ("langgraph_s3.ops.tools.layout", []),
    "langgraph_s3.ops.refs": ("langgraph_s3.ops.tools.refs", []),
    "langgraph_s3.transfer": (
        "langgraph_s3.checkpoint.transfer",
        ["aexport_threads", "aimport_threads", "amigrate", "FORMAT", "VERSION"],
    ),
    "langgraph_s3.memory": (
        "langgraph_s3.testing.fakes",
        ["MemoryBucket", "MemoryTable", "MemoryManifest", "MemoryObjectStore", "memory_saver"],
    ),
    "langgraph_s3.local": (
        "langgraph_s3.testing.moto",
        ["moto_server", "MotoServer", "unique_names"],
    ),
    "langgraph_s3.graphs": (
        "langgraph_s3.testing.graphs",
        ["chat_graph", "nested_graph", "CHAT_TURNS"],
    ),
    "langgraph_s3.testing": (
        "langgraph_s3.testing.moto",
        ["MotoServer", "unique_names", "moto_server"],
    ),
}


@pytest.mark.parametrize("old", sorted(KEPT))
def test_an_earlier_import_path_gives_the_same_objects(old: str) -> None:
    new, names = KEPT[old]
    before, after = importlib.import_module(old), importlib.import_module(new)
    if old.startswith("langgraph_s3.ops."):  # the moved module itself, not a copy
        assert before is after, f"{old} is another module than {new}"
    for name in names:
        assert getattr(before, name) is getattr(after, name), f"{old}.{name}"


def test_the_pytest_plugin_keeps_its_hooks_and_fixtures() -> None:
    """The entry point names ``langgraph_s3.testing``: every hook and fixture the plugin
    module defines is there (read from its source: a new one not copied fails here)."""
    package = importlib.import_module("langgraph_s3.testing")
    source = Path(package.__file__ or "").with_name("plugin.py").read_text()
    defined = {
        node.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and (
            node.name.startswith("pytest_")
            or any("fixture" in ast.unparse(d) for d in node.decorator_list)
        )
    }
    assert len(defined) >= 9
    assert defined == set(package.PLUGIN)
    for name in defined:
        assert callable(getattr(package, name)), name


def test_the_fakes_and_graphs_do_not_import_pytest() -> None:
    """Outside a pytest run, the fakes and the sample graphs load without pytest."""
    code = (
        "import sys, langgraph_s3.memory, langgraph_s3.graphs, langgraph_s3.testing;"
        "print('pytest' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    assert out.stdout.strip() == b"False"


@pytest.mark.parametrize("old", sorted(set(KEPT) - {"langgraph_s3.testing"}))
def test_an_earlier_path_is_the_module_itself(old: str) -> None:
    """A monkeypatch through the earlier path reaches the code that runs."""
    assert importlib.import_module(old) is importlib.import_module(KEPT[old][0])


def test_the_public_face_is_unchanged() -> None:
    import langgraph_s3

    for name in ("AsyncS3Saver", "S3Saver", "AsyncS3Store", "S3Store", "RequestStats", "Report"):
        assert hasattr(langgraph_s3, name), name
    # the types of the constructors' hooks and of progress callbacks, public now
    for name in ("ObjectStorePort", "ManifestPort", "Progress", "Limits"):
        assert name in langgraph_s3.__all__, name


@pytest.mark.parametrize(
    ("package", "names"),
    [
        ("langgraph_s3.manifest", ["Manifest", "Entry", "Raw", "deployment_key", "META_SK"]),
        ("langgraph_s3.store", ["AsyncS3Store", "lifecycle_rules", "PUT_ATTEMPTS", "RULE_PREFIX"]),
    ],
)
def test_the_earlier_modules_now_folders_keep_their_names(package: str, names: list[str]) -> None:
    module = importlib.import_module(package)
    for name in names:
        assert name in module.__all__ and getattr(module, name) is not None, name
