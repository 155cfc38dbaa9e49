"""The command line, at its earlier path (``langgraph_s3.ops.cli``):
:mod:`langgraph_s3.ops.tools.cli`.

This path is that package itself (``sys.modules``), and each of its modules is too
(``langgraph_s3.ops.cli.reading`` is ``langgraph_s3.ops.tools.cli.reading``): every name,
private ones too, and a monkeypatch through either path reaches the one module."""

import importlib
import pkgutil
import sys

from langgraph_s3.ops.tools import cli as _home
from langgraph_s3.ops.tools.cli import *  # noqa: F403  (the names, for type checkers)

for _module in pkgutil.iter_modules(_home.__path__):
    sys.modules[f"{__name__}.{_module.name}"] = importlib.import_module(
        f"{_home.__name__}.{_module.name}"
    )
sys.modules[__name__] = _home
