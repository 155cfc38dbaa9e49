"""The import paths users have stay valid after the package moved into folders: each
earlier path is a thin module over its new home, the same objects under both names."""

from __future__ import annotations

import importlib

import pytest

pytestmark = pytest.mark.unit

KEPT = {
    # earlier path: (new home, names a user takes from it)
    "langgraph_s3.sweeper": ("langgraph_s3.ops.sweeper", ["handler", "ahandle", "MalformedRecord"]),
    "langgraph_s3.agent_server": ("langgraph_s3.ops.agent_server", ["checkpointer", "store"]),
    "langgraph_s3.cli": ("langgraph_s3.ops.cli", ["main"]),
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
    for name in names:
        assert getattr(before, name) is getattr(after, name), f"{old}.{name}"


def test_the_pytest_plugin_keeps_its_hooks_and_fixtures() -> None:
    """The entry point names ``langgraph_s3.testing``: its hooks and fixtures are there."""
    plugin = importlib.import_module("langgraph_s3.testing")
    for name in ("pytest_addoption", "pytest_configure", "s3_endpoint", "s3_fresh", "s3_saver"):
        assert callable(getattr(plugin, name)), name


def test_the_public_face_is_unchanged() -> None:
    import langgraph_s3

    for name in ("AsyncS3Saver", "S3Saver", "AsyncS3Store", "S3Store", "RequestStats", "Report"):
        assert hasattr(langgraph_s3, name), name
