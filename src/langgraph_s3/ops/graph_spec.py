"""A graph named on a command line or in a handler: ``module:NAME`` or
``path/to/file.py:NAME`` (a compiled graph, a builder, or a function of no arguments
returning either), loaded as ``python -m`` or ``python file.py`` would find it. Used by
``langgraph-s3 view --graph`` and the Lambda handler (:mod:`.lambda_app`)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any


class GraphSpecError(ValueError):
    """The spec names no graph (its shape, its file, its object): the message says what."""


def load_graph(spec: str, *, root: str | None = None) -> Any:
    """``module:name`` or ``path/to/file.py:name``: a graph (compiled or a builder), or
    a function of no arguments returning one. ``root``: where modules are found
    (default: the working directory, as ``python -m`` would)."""
    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise GraphSpecError(f"{spec!r}: give MODULE:GRAPH or path/to/file.py:GRAPH")
    if where.endswith(".py") or "/" in where:
        path = Path(root or ".", where).resolve()
        stem = path.stem
        known = sys.modules.get(stem)
        if stem in sys.stdlib_module_names or (
            known is not None and getattr(known, "__file__", None) != str(path)
        ):
            raise GraphSpecError(
                f"{path.name}: its name is a module Python already has ({stem}); rename it"
            )
        found = importlib.util.spec_from_file_location(stem, path)
        if found is None or found.loader is None:
            raise GraphSpecError(f"{where!r} is not a Python file")
        if str(path.parent) not in sys.path:  # its siblings import; they shadow nothing
            sys.path.append(str(path.parent))
        module = importlib.util.module_from_spec(found)
        sys.modules[stem] = module
        try:
            found.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(stem, None)
            raise
    else:
        if (root or os.getcwd()) not in sys.path:
            sys.path.append(root or os.getcwd())
        module = importlib.import_module(where)
    obj = getattr(module, name)
    if callable(obj) and not hasattr(obj, "channels") and not hasattr(obj, "compile"):
        obj = obj()
    if not hasattr(obj, "channels") and not hasattr(obj, "compile"):
        raise GraphSpecError(f"{spec!r} is a {type(obj).__name__}, not a LangGraph graph")
    return obj


def with_saver(graph: Any, saver: Any) -> Any:
    """The graph compiled (a builder) or copied (compiled) with ``saver`` as its
    checkpointer."""
    if hasattr(graph, "compile"):
        return graph.compile(checkpointer=saver)
    return graph.copy(update={"checkpointer": saver})
