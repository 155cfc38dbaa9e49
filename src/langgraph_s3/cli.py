"""The ``langgraph-s3`` command line."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import Iterator, Sequence


@contextlib.contextmanager
def _endpoint(args: argparse.Namespace) -> Iterator[tuple[str | None, str]]:
    """Real settings when given (flags or AWS_ENDPOINT_URL), else an embedded moto."""
    if args.bucket or os.environ.get("AWS_ENDPOINT_URL") or args.endpoint_url:
        yield args.endpoint_url, "the configured AWS endpoint"
        return
    from .local import BENCH_LATENCY, moto_server

    # AWS-like latency, so that the round trips the demo prints mean what they would on AWS
    with moto_server(latency=BENCH_LATENCY) as server:
        yield (
            server.url,
            (
                f"an embedded moto server at {server.url} (20 ms per S3 request and 6 ms per "
                "DynamoDB request injected, roughly AWS in region)"
            ),
        )


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo
    from .saver import AsyncS3Saver

    bucket = args.bucket or f"langgraph-s3-demo-{uuid.uuid4().hex[:8]}"
    table = args.table or "langgraph-s3-demo"
    with _endpoint(args) as (endpoint_url, where):
        print(f"langgraph-s3 demo: bucket {bucket!r}, table {table!r}, on {where}\n")

        def make() -> AsyncS3Saver:
            return AsyncS3Saver(
                bucket=bucket, prefix=args.prefix, table=table, endpoint_url=endpoint_url
            )

        asyncio.run(run_demo(make, args.thread or f"demo-{uuid.uuid4().hex[:6]}", sys.stdout))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="langgraph-s3", description="LangGraph persistence on AWS object storage"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="run a scripted agent: persist, resume, browse history, fork, and show the cost",
    )
    demo.add_argument("--bucket", help="use this bucket (default: an embedded moto server)")
    demo.add_argument("--table", help="manifest table (default: langgraph-s3-demo)")
    demo.add_argument("--prefix", default="demo", help="key prefix inside the bucket")
    demo.add_argument("--endpoint-url", help="S3/DynamoDB endpoint (default: AWS environment)")
    demo.add_argument("--thread", help="thread id (default: a new one)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return _demo(args)
    return 2  # pragma: no cover - argparse enforces the choices


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
