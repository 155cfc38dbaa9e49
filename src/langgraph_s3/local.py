"""The moto helpers, at their earlier path: :mod:`langgraph_s3.testing.moto`."""

from langgraph_s3.testing.moto import *  # noqa: F403
