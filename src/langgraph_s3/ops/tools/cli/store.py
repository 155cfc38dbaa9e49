"""``langgraph-s3 store``: the long-term memory store's items."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import click
import orjson
from rich.table import Table

from langgraph_s3.ops.tools.cli.base import (
    NotFound,
    Options,
    StoreGroup,
    age,
    brief,
    cli,
    finite,
    guarded,
    item_of,
    namespace_of,
    pass_opts,
    print_json,
)


def store_command(fn: Callable[..., Awaitable[Any]]) -> Callable[..., None]:
    """Run an async store command; errors as for the saver's commands."""

    @functools.wraps(fn)
    def run(opts: Options, store_url: str | None, /, *args: Any, **kwargs: Any) -> None:
        async def go() -> Any:
            async with opts.store(store_url) as store:
                return await fn(opts, store, *args, **kwargs)

        guarded(go)

    return run


@cli.group(cls=StoreGroup)
@click.option("--store-url", help="the store (default: $LANGGRAPH_S3_STORE_URL, else --url's)")
@click.pass_context
def store(ctx: click.Context, store_url: str | None) -> None:
    """The long-term memory store: ls, get, put, rm, search, sweep."""
    ctx.meta["store_url"] = store_url


def _store_url_of() -> str | None:
    value = click.get_current_context().meta.get("store_url")
    return str(value) if value else None


@store.command(name="ls")
@click.argument("prefix", default="")
@click.option("--max-depth", type=click.IntRange(min=1), help="namespaces cut to this depth")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True)
@pass_opts
def store_ls(opts: Options, prefix: str, max_depth: int | None, limit: int) -> None:
    """Namespaces under PREFIX (labels joined by dots: users.42)."""
    _store_ls(opts, _store_url_of(), namespace_of(prefix), max_depth, limit)


@store_command
async def _store_ls(
    opts: Options, store: Any, prefix: tuple[str, ...], max_depth: int | None, limit: int
) -> None:
    found = await store.alist_namespaces(prefix=prefix or None, max_depth=max_depth, limit=limit)
    names = [".".join(ns) for ns in found]
    if opts.as_json:
        opts.emit(names)
        return
    for name in names:
        opts.out.print(name)
    if not names:
        opts.err.print("no namespaces")


@store.command(name="get")
@click.argument("namespace")
@click.argument("key")
@pass_opts
def store_get(opts: Options, namespace: str, key: str) -> None:
    """One item's value."""
    _store_get(opts, _store_url_of(), namespace_of(namespace), key)


@store_command
async def _store_get(opts: Options, store: Any, namespace: tuple[str, ...], key: str) -> None:
    item = await store.aget(namespace, key)
    if item is None:
        raise NotFound(f"no item {key!r} in namespace {'.'.join(namespace)!r}")
    if opts.as_json:
        opts.emit(item_of(item))
        return
    print_json(opts, item_of(item)["value"])


@store.command(name="put")
@click.argument("namespace")
@click.argument("key")
@click.argument("value")
@click.option(
    "--ttl", type=click.FloatRange(min=0, min_open=True, max=5e7), help="minutes until it expires"
)
@pass_opts
def store_put(opts: Options, namespace: str, key: str, value: str, ttl: float | None) -> None:
    """Store an item: VALUE is a JSON object."""
    if ttl is not None:
        finite(ttl, "--ttl")
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise click.BadParameter(f"VALUE is not JSON: {exc}") from exc
    if not isinstance(parsed, dict):
        raise click.BadParameter("VALUE must be a JSON object ({...}), as LangGraph's store takes")
    _store_put(opts, _store_url_of(), namespace_of(namespace), key, parsed, ttl)


@store_command
async def _store_put(
    opts: Options,
    store: Any,
    namespace: tuple[str, ...],
    key: str,
    value: dict[str, Any],
    ttl: float | None,
) -> None:
    await store.aput(namespace, key, value, ttl=ttl)
    if opts.as_json:
        opts.emit({"namespace": ".".join(namespace), "key": key, "stored": True})
    else:
        opts.out.print(f"stored {'.'.join(namespace)}/{key}")


@store.command(name="rm")
@click.argument("namespace")
@click.argument("key")
@pass_opts
def store_rm(opts: Options, namespace: str, key: str) -> None:
    """Delete an item."""
    _store_rm(opts, _store_url_of(), namespace_of(namespace), key)


@store_command
async def _store_rm(opts: Options, store: Any, namespace: tuple[str, ...], key: str) -> None:
    await store.adelete(namespace, key)
    if opts.as_json:
        opts.emit({"namespace": ".".join(namespace), "key": key, "deleted": True})
    else:
        opts.out.print(f"deleted {'.'.join(namespace)}/{key}")


@store.command(name="search")
@click.argument("prefix", default="")
@click.option("--query", help="natural-language query (with an index)")
@click.option("--filter", "filter_json", help='JSON filter, e.g. {"theme": "dark"}')
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True)
@pass_opts
def store_search(
    opts: Options, prefix: str, query: str | None, filter_json: str | None, limit: int
) -> None:
    """Items under PREFIX, newest first (or by relevance with --query)."""
    flt = None
    if filter_json:
        try:
            flt = orjson.loads(filter_json)
        except orjson.JSONDecodeError as exc:
            raise click.BadParameter(f"--filter is not JSON: {exc}") from exc
    _store_search(opts, _store_url_of(), namespace_of(prefix), query, flt, limit)


@store_command
async def _store_search(
    opts: Options,
    store: Any,
    prefix: tuple[str, ...],
    query: str | None,
    flt: dict[str, Any] | None,
    limit: int,
) -> None:
    items = await store.asearch(prefix, query=query, filter=flt, limit=limit)
    rows = [item_of(i) for i in items]
    if opts.as_json:
        opts.emit(rows)
        return
    table = Table(title=f"{len(rows)} item(s)")
    for col in ("namespace", "key", "updated", "value"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["namespace"], r["key"], age(r["updated_at"]), brief(r["value"]))
    opts.out.print(table)


@store.command(name="sweep")
@pass_opts
def store_sweep(opts: Options) -> None:
    """Delete every expired store item now."""
    _store_sweep(opts, _store_url_of())


@store_command
async def _store_sweep(opts: Options, store: Any) -> None:
    n = await store.asweep_ttl()
    if opts.as_json:
        opts.emit({"deleted": n})
    else:
        opts.out.print(f"swept: {n} expired item(s)")
