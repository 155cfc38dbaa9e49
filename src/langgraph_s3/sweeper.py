"""The TTL stream handler at the path terraform's Lambda names
(``langgraph_s3.sweeper.handler``): :mod:`langgraph_s3.ops.sweeper`."""

from langgraph_s3.ops.sweeper import *  # noqa: F403
