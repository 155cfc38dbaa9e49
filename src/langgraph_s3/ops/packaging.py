"""The Lambda package builder, at its earlier path (``langgraph_s3.ops.packaging``):
:mod:`langgraph_s3.ops.deploy.packaging`.

This path is that module itself (``sys.modules``): every name, private ones too, and a
monkeypatch through either path reaches the one module."""

import sys

from langgraph_s3.ops.deploy import packaging as _home
from langgraph_s3.ops.deploy.packaging import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _home
