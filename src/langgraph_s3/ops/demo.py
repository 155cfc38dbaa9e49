"""The demo, at its earlier path (``langgraph_s3.ops.demo``):
:mod:`langgraph_s3.ops.tools.demo`.

This path is that module itself (``sys.modules``): every name, private ones too, and a
monkeypatch through either path reaches the one module."""

import sys

from langgraph_s3.ops.tools import demo as _home
from langgraph_s3.ops.tools.demo import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _home
