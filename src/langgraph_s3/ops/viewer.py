"""The viewer, at its earlier path (``langgraph_s3.ops.viewer``):
:mod:`langgraph_s3.ops.tools.viewer`.

This path is that module itself (``sys.modules``): every name, private ones too, and a
monkeypatch through either path reaches the one module."""

import sys

from langgraph_s3.ops.tools import viewer as _home
from langgraph_s3.ops.tools.viewer import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _home
