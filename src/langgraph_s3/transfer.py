"""Export, import and migration between savers, at their earlier path:
:mod:`langgraph_s3.checkpoint.transfer`.

This path is that module itself (``sys.modules``): every name, private ones too, and a
monkeypatch through either path reaches the one module."""

import sys

from langgraph_s3.checkpoint import transfer as _home
from langgraph_s3.checkpoint.transfer import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _home
