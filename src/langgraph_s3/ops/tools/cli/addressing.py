"""Naming on the command line, resolved through the saver: a checkpoint by any part
of its id or ``latest~N``, a namespace by its node path (``ops/refs.py`` decides)."""

from __future__ import annotations

from typing import Any

from langgraph_s3.errors import InvalidRequestError
from langgraph_s3.ops.tools.cli.base import NotFound, Options
from langgraph_s3.ops.views import checkpoint_id, parent_id


def conf(thread: str, ns: str, cid: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if cid:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


async def resolve_ns(opts: Options, saver: Any, thread: str, given: str) -> str:
    """The namespace ``given`` names in ``thread`` (``refs.match_namespaces``); a path
    that ran several times is its newest run, said on stderr. 1 Query, and a read of
    each run's latest when there are several."""
    from langgraph_s3.ops.tools.refs import match_namespaces, namespace_listing

    if not given or given in ("(root)", "/"):
        return ""
    info = await saver.aget_thread(thread)
    if info is None:
        raise NotFound(
            f"thread {thread!r} has no checkpoints: `langgraph-s3 threads` lists the threads"
        )
    found = match_namespaces(given, info.namespaces)
    if not found:
        raise NotFound(
            f"thread {thread!r} has no namespace {given!r}; its namespaces: "
            f"{namespace_listing(info.namespaces)} (by node path; --json threads gives "
            "the full strings)"
        )
    if len(found) == 1:
        return found[0]
    latest = {ns: await saver.aget_tuple(conf(thread, ns)) for ns in found}
    pick = max(found, key=lambda ns: checkpoint_id(t) if (t := latest[ns]) is not None else "")
    opts.err.print(
        f"note: {given!r} ran {len(found)} times in thread {thread!r}: the newest run is "
        f"shown ({pick}); give the full namespace for another"
    )
    return pick


async def resolve(saver: Any, thread: str, ns: str, ref: str | None) -> Any:
    """The checkpoint ``ref`` names (``refs.parse``): ``latest~N`` walks N parents
    (N + 1 reads), a full id is one read, a prefix or suffix lists the namespace."""
    from langgraph_s3.ops.tools.refs import Back, RefError, match_id, parse

    where = f"thread {thread!r}" + (f" namespace {ns!r}" if ns else "")
    r = parse(ref)
    if isinstance(r, Back):
        tup = await get_tuple_of(saver, thread, ns, None)
        for step in range(r.steps):
            pid = parent_id(tup)
            if pid is None:
                raise NotFound(
                    f"latest~{r.steps} goes back past the first checkpoint of {where}: "
                    f"latest~{step} is its first"
                )
            parent = await saver.aget_tuple(conf(thread, ns, pid))
            if parent is None:
                raise NotFound(f"latest~{step + 1} of {where} ({pid}) was pruned away")
            tup = parent
        return tup
    if len(r) == 36:  # a whole id: one read
        tup = await saver.aget_tuple(conf(thread, ns, r))
        if tup is not None:
            return tup
    tuples = {checkpoint_id(t): t async for t in saver.alist(conf(thread, ns))}
    if not tuples:
        raise NotFound(f"{where} has no checkpoints: `langgraph-s3 threads` lists the threads")
    try:
        return tuples[match_id(r, list(tuples), where=where)]
    except RefError as exc:
        if exc.ambiguous:
            raise InvalidRequestError(str(exc)) from None
        raise NotFound(str(exc)) from None


async def get_tuple_of(saver: Any, thread: str, ns: str, cid: str | None) -> Any:
    tup = await saver.aget_tuple(conf(thread, ns, cid))
    if tup is None:
        what = f"no checkpoint {cid!r}" if cid else "no checkpoints"
        raise NotFound(
            f"thread {thread!r} has {what} in namespace {ns!r}: "
            "`langgraph-s3 threads` lists the threads, `history THREAD` their checkpoints"
        )
    return tup
