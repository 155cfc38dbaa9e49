"""Export, import and migration between savers, at their earlier path:
:mod:`langgraph_s3.checkpoint.transfer`."""

from langgraph_s3.checkpoint.transfer import *  # noqa: F403
