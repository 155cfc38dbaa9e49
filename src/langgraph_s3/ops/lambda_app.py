"""The module every generated Lambda handler imports, at its earlier path
(``langgraph_s3.ops.lambda_app``): :mod:`langgraph_s3.ops.handlers.lambda_app`.

This path is that module itself (``sys.modules``): every name, private ones too, and a
monkeypatch through either path reaches the one module."""

import sys

from langgraph_s3.ops.handlers import lambda_app as _home
from langgraph_s3.ops.handlers.lambda_app import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _home
