"""The sample graphs, at their earlier path: :mod:`langgraph_s3.testing.graphs`."""

from langgraph_s3.testing.graphs import *  # noqa: F403
