"""The command line at its earlier path (``langgraph_s3.cli:main``): :mod:`langgraph_s3.ops.cli`."""

from langgraph_s3.ops.cli import *  # noqa: F403

if __name__ == "__main__":  # python -m langgraph_s3.cli, as before the move
    from langgraph_s3.ops.cli import main

    raise SystemExit(main())
