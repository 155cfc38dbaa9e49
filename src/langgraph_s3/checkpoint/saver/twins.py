"""Sync twins: each runs its async method on the saver's background loop.

``get_tuple = twin(aget_tuple)`` in a class body makes the sync method, with the async
one's parameters (typed: ``ParamSpec``); it calls the method by name, so a subclass's
override of the async method is the one its twin runs.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, cast

from langgraph_s3.runtime.runner import BackgroundLoop

P = ParamSpec("P")
T = TypeVar("T")


class Looped(Protocol):
    """What a class with sync twins has: the background loop they run on."""

    _runner: BackgroundLoop


S = TypeVar("S", bound=Looped)


def twin(fn: Callable[Concatenate[S, P], Coroutine[Any, Any, T]]) -> Callable[Concatenate[S, P], T]:
    """The sync twin of the async method ``fn``: the same call, run to its end on the
    background loop (same cost)."""
    name = fn.__name__

    @functools.wraps(fn)  # its signature too: LangGraph reads put_writes' (task_path)
    def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return cast(T, self._runner.run(getattr(self, name)(*args, **kwargs)))

    return _named(run, name)


def twin_iter(
    fn: Callable[Concatenate[S, P], AsyncIterator[T]],
) -> Callable[Concatenate[S, P], Iterator[T]]:
    """:func:`twin` of an async generator method: an iterator over its items, each
    pulled on the background loop."""
    name = fn.__name__

    @functools.wraps(fn)
    def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        return cast(Iterator[T], self._runner.iterate(getattr(self, name)(*args, **kwargs)))

    sig = inspect.signature(fn)
    back = str(sig.return_annotation).replace("AsyncIterator", "Iterator")
    run.__signature__ = sig.replace(return_annotation=back)  # type: ignore[attr-defined]
    return _named(run, name)


F = TypeVar("F", bound=Callable[..., Any])


def _named(run: F, name: str) -> F:
    """The twin's own name and docstring (the signature stays the async method's: a
    sync call takes the same arguments)."""
    run.__name__ = name.removeprefix("a")
    run.__qualname__ = run.__qualname__.rsplit(".", 1)[0] + "." + run.__name__
    run.__doc__ = f"Sync twin of :meth:`{name}` (same cost), on the background loop."
    return run


def given(scope: dict[str, Any]) -> dict[str, Any]:
    """A method's arguments as it was called (``locals()`` at its first line, without
    ``self``): what a façade method hands to the part that does the work."""
    return {k: v for k, v in scope.items() if k not in ("self", "__class__")}
