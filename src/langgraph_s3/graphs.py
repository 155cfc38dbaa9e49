"""The sample graphs, at their earlier path:
:mod:`langgraph_s3.testing.graphs`.

This path is that module itself (``sys.modules``): every name, private ones too, and a
monkeypatch through either path reaches the one module."""

import sys

from langgraph_s3.testing import graphs as _home
from langgraph_s3.testing.graphs import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _home
