"""Build the example's Lambda deployment zip with ``langgraph-s3 lambda build``: the
agent in ``agent.py``, this folder's hand-written ``handler.py`` beside the generated
``langgraph_s3_handler.py`` (either can be the function's handler), langgraph-s3 and
its dependencies for Linux x86_64 / Python 3.11, and bytecode compiled ahead.

    python examples/lambda/build_zip.py [--out dist/lambda.zip]

(The same as ``langgraph-s3 lambda build agent.py:graph --include handler.py`` run here;
unzip it to a folder for ``coldstart.py --zip-dir``.)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from langgraph_s3.ops.deploy.packaging import build as package

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent.parent


def build(out: Path) -> Path:
    built = package("agent.py:graph", out, root=HERE, include=[HERE / "handler.py"])
    for note in built.notes:
        print(f"note: {note}")
    return built.path


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PROJECT / "dist" / "lambda.zip")
    args = parser.parse_args()
    path = build(args.out)
    print(f"{path} ({path.stat().st_size / 1e6:.1f} MB)")
