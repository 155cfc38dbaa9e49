"""``langgraph-s3 lambda build``: your own graph as an AWS Lambda deployment
(:mod:`langgraph_s3.ops.deploy.packaging`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from langgraph_s3.ops.tools.cli.base import EXIT_FAILED, Options, cli, pass_opts


@cli.group(name="lambda")
def lambda_group() -> None:
    """Your own agent on AWS Lambda: package a graph with its requirements."""


@lambda_group.command(name="build")
@click.argument("graph", metavar="PATH/TO/GRAPH.py:GRAPH")
@click.option(
    "-r",
    "--requirements",
    type=click.Path(dir_okay=False, path_type=Path),
    help="a requirements file (your LLM SDK, tools...)",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="the zip (default dist/lambda.zip), or with --image a new folder (dist/lambda-image)",
)
@click.option(
    "--include",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="another file or folder the graph needs (repeat it)",
)
@click.option(
    "--keep-service",
    multiple=True,
    metavar="NAME",
    help="a botocore service model to keep beside S3/DynamoDB/STS (bedrock-runtime...)",
)
@click.option("--python", "python", default="3.11", show_default=True, help="Lambda's runtime")
@click.option("--arch", type=click.Choice(["x86_64", "arm64"]), default="x86_64", show_default=True)
@click.option("--image", is_flag=True, help="a container image's folder and Dockerfile, no zip")
@click.option("--find-links", metavar="DIR", help="pip: wheels from this folder too (offline)")
@pass_opts
def lambda_build(
    opts: Options,
    graph: str,
    requirements: Path | None,
    output: Path | None,
    include: tuple[Path, ...],
    keep_service: tuple[str, ...],
    python: str,
    arch: str,
    image: bool,
    find_links: str | None,
) -> None:
    """Build GRAPH (a graph, a builder, or a function making one) into a deployment:
    a zip with your requirements, langgraph-s3 and a handler
    (langgraph_s3_handler.handler), for terraform/examples/lambda, which uploads it
    through S3 (no 50 MB cap). Events: {"thread_id", "message"|"input"|"resume"}."""
    from langgraph_s3.ops.deploy.packaging import BuildError, build

    out = output or Path("dist") / ("lambda-image" if image else "lambda.zip")
    try:
        built = build(
            graph,
            out,
            requirements=requirements,
            include=include,
            keep_services=keep_service,
            python=python,
            arch=arch,
            image=image,
            pip_args=["--find-links", find_links] if find_links else [],
            say=lambda line: opts.err.print(f"lambda build: {line}"),
        )
    except BuildError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_FAILED)
    facts = {
        "path": str(built.path),
        "handler": built.handler,
        "zipped_bytes": built.zipped,
        "unzipped_bytes": built.unzipped,
        "files": built.files,
        "trimmed_bytes": built.trimmed,
        "notes": built.notes,
    }
    if opts.as_json:
        opts.emit(facts)
        return
    size = f"{built.zipped / 1e6:.1f} MB zipped, " if built.zipped else ""
    opts.out.print(
        f"wrote {built.path}: {size}{built.unzipped / 1e6:.1f} MB unzipped, {built.files:,} "
        f"files ({built.trimmed / 1e6:.1f} MB of unused SDK models and backends left out); "
        f"handler {built.handler}"
    )
    for note in built.notes:
        opts.out.print(f"note: {note}")


@lambda_group.command(name="terraform")
@click.argument("directory", default="terraform", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--zip",
    "zip_path",
    default=str(Path("dist") / "lambda.zip"),
    show_default=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="the zip `lambda build` wrote: the root's zip_path",
)
@click.option("--force", is_flag=True, help="write over a root written before (and its module)")
@pass_opts
def lambda_terraform(opts: Options, directory: Path, zip_path: Path, force: bool) -> None:
    """Write the terraform module this version ships into DIRECTORY/modules/langgraph-s3,
    and a ready root beside it (DIRECTORY/main.tf) that deploys the zip `lambda build`
    wrote: the bucket, the table, the role, the function, its secrets by ARN
    (-var 'secrets={OPENAI_API_KEY="arn:..."}') and extra IAM statements. No clone."""
    from langgraph_s3.ops.deploy.scaffold import ScaffoldError, write_terraform

    try:
        written = write_terraform(directory, zip_path, force=force)
    except ScaffoldError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_FAILED)
    if opts.as_json:
        opts.emit(
            {
                "root": str(written.root),
                "module": str(written.module),
                "files": [str(f) for f in written.files],
                "zip_path": str(zip_path),
            }
        )
        return
    opts.out.print(f"wrote {written.root} and the module in {written.module}")
    if not zip_path.exists():
        opts.out.print(f"note: {zip_path} is not there yet: run `langgraph-s3 lambda build` first")
    chdir = f"terraform -chdir={directory}"
    opts.out.print(
        "next:\n"
        f"  {chdir} init\n"
        f"  {chdir} apply -var name=my-agent -var bucket_name=my-agent-state "
        "-var table_name=my-agent-manifest \\\n"
        "      -var 'secrets={OPENAI_API_KEY=\"arn:aws:secretsmanager:...\"}'\n"
        f"  aws lambda invoke --function-name my-agent-agent --cli-binary-format "
        'raw-in-base64-out --payload \'{"thread_id":"t1","message":"Hi"}\' out.json'
    )
