"""The IAM actions and partition keys at its earlier path (``langgraph_s3.ops.iam``):
:mod:`langgraph_s3.ops.deploy.iam`.

This path is that module itself (``sys.modules``): every name, private ones too, and a
monkeypatch through either path reaches the one module."""

import sys

from langgraph_s3.ops.deploy import iam as _home
from langgraph_s3.ops.deploy.iam import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _home
