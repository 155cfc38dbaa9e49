"""``langgraph-s3 demo``: the library end to end, on an embedded moto server."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import sys
from collections.abc import Iterator

import click

from langgraph_s3.ops.tools.cli.base import (
    Options,
    cli,
    pass_opts,
)


@cli.command()
@click.option("--bucket", help="use this bucket (default: an embedded moto server)")
@click.option("--table", help="manifest table (default: langgraph-s3-demo)")
@click.option("--prefix", default="demo", show_default=True, help="key prefix in the bucket")
@click.option("--thread", help="thread id (default: a new one)")
@pass_opts
def demo(
    opts: Options,
    bucket: str | None,
    table: str | None,
    prefix: str,
    thread: str | None,
) -> None:
    """Run a scripted agent: persist, resume, browse history, fork, and show the cost
    (on an embedded moto server unless --bucket, --endpoint-url or AWS_ENDPOINT_URL
    say where)."""
    demo_endpoint = opts.endpoint_url
    from langgraph_s3.checkpoint.saver import AsyncS3Saver
    from langgraph_s3.ops.tools.demo import run_demo

    given = bucket is not None
    bucket = bucket or f"langgraph-s3-demo-{secrets.token_hex(4)}"
    table = table or "langgraph-s3-demo"
    with _endpoint(given, demo_endpoint) as (endpoint_url, where):
        print(f"langgraph-s3 demo: bucket {bucket!r}, table {table!r}, on {where}\n")

        def make() -> AsyncS3Saver:
            return AsyncS3Saver(
                bucket=bucket, prefix=prefix, table=table, endpoint_url=endpoint_url
            )

        thread_id = thread or f"demo-{secrets.token_hex(3)}"
        browse = ""
        if endpoint_url and where == "the configured AWS endpoint":  # it stays: browse it
            url = f"s3://{bucket}/{prefix}?table={table}"
            tool = f"langgraph-s3 --endpoint-url {endpoint_url} --url '{url}'"
            browse = (
                "\nbrowse what it wrote (the server stays):\n"
                f"  {tool} threads\n  {tool} history {thread_id}\n"
                f"  {tool} view {thread_id} -o {thread_id}.html\n"
            )
        asyncio.run(run_demo(make, thread_id, sys.stdout, browse))


@contextlib.contextmanager
def _endpoint(given_bucket: bool, endpoint_url: str | None) -> Iterator[tuple[str | None, str]]:
    """Real settings when given (flags or AWS_ENDPOINT_URL), else an embedded moto."""
    if given_bucket or os.environ.get("AWS_ENDPOINT_URL") or endpoint_url:
        yield endpoint_url, "the configured AWS endpoint"
        return
    from langgraph_s3.testing.moto import BENCH_LATENCY, moto_server

    # AWS-like latency, so that the round trips the demo prints mean what they would on AWS
    with moto_server(latency=BENCH_LATENCY) as server:
        yield (
            server.url,
            (
                f"an embedded moto server at {server.url} (20 ms per S3 request and 6 ms per "
                "DynamoDB request injected, roughly AWS in region)"
            ),
        )
