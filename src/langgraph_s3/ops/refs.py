"""How an operator names a checkpoint, at its earlier path (``langgraph_s3.ops.refs``):
:mod:`langgraph_s3.ops.tools.refs`.

This path is that module itself (``sys.modules``): every name, private ones too, and a
monkeypatch through either path reaches the one module."""

import sys

from langgraph_s3.ops.tools import refs as _home
from langgraph_s3.ops.tools.refs import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _home
