"""The in-memory fakes and fault wrappers, at their earlier path:
:mod:`langgraph_s3.testing.fakes`."""

from langgraph_s3.testing.fakes import *  # noqa: F403
