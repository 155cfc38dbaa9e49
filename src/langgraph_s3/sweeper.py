"""The TTL stream handler at the path terraform's Lambda names
(``langgraph_s3.sweeper.handler``):
:mod:`langgraph_s3.ops.handlers.sweeper`.

This path is that module itself (``sys.modules``): every name, private ones too, and a
monkeypatch through either path reaches the one module."""

import sys

from langgraph_s3.ops.handlers import sweeper as _home
from langgraph_s3.ops.handlers.sweeper import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _home
