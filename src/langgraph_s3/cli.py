"""The command line at its earlier path (``langgraph_s3.cli:main``):
:mod:`langgraph_s3.ops.tools.cli`.

This path is that module itself (``sys.modules``): every name, private ones too, and a
monkeypatch through either path reaches the one module."""

import sys

from langgraph_s3.ops.tools import cli as _home
from langgraph_s3.ops.tools.cli import *  # noqa: F403  (the names, for type checkers)

if __name__ == "__main__":  # python -m langgraph_s3.cli, as before the move
    raise SystemExit(_home.main())
sys.modules[__name__] = _home
