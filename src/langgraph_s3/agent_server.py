"""The Agent Server entry points at the path ``langgraph.json`` names
(``langgraph_s3.agent_server:checkpointer``, ``:store``):
:mod:`langgraph_s3.ops.handlers.agent_server`.

This path is that module itself (``sys.modules``): every name, private ones too, and a
monkeypatch through either path reaches the one module."""

import sys

from langgraph_s3.ops.handlers import agent_server as _home
from langgraph_s3.ops.handlers.agent_server import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _home
