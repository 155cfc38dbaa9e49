"""The Agent Server entry points at the path ``langgraph.json`` names
(``langgraph_s3.agent_server:checkpointer``, ``:store``): :mod:`langgraph_s3.ops.agent_server`."""

from langgraph_s3.ops.agent_server import *  # noqa: F403
