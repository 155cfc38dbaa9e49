"""Plain helpers shared by the test modules: ``from helpers import cfg``.

Importable from every test folder: pytest puts the folder of ``tests/conftest.py``
(this one) on ``sys.path`` when it loads that conftest (the default, rootdir-less
``prepend`` import mode), as it does for ``faults``. Fixtures live in conftest.py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Scenario = Callable[[Any], Awaitable[Any]]


def cfg(thread: str = "t", cid: str | None = None, *, ns: str | None = "") -> dict[str, Any]:
    """The run config of ``thread`` (and of its checkpoint ``cid`` when given).

    ``ns``: the checkpoint namespace, the root one by default; ``None`` leaves it out,
    so that ``alist`` lists every namespace of the thread.
    """
    conf: dict[str, Any] = {"thread_id": thread}
    if ns is not None:
        conf["checkpoint_ns"] = ns
    if cid:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


async def value_holders(saver: Any, thread: str, channel: str, ns: str = "") -> list[str]:
    """The keys of the objects (other than the latest checkpoint's own) that hold the
    latest value of ``channel``: older checkpoints holding its runs, or its blob."""
    from langgraph_s3 import codec
    from langgraph_s3.values import value_keys

    entry = await saver.manifest.latest(thread, ns)
    nsp = saver.layout.namespace(thread, ns)
    key = nsp.checkpoint_at(entry.latest_tail)
    env = codec.load_checkpoint(await saver.objects.get(key))
    versions = saver.serde.loads_typed(env.checkpoint)["channel_versions"]
    return [k for k in value_keys(nsp, key, env, versions)[channel] if k != key]


async def side_by_side(scenario: Scenario, saver: Any) -> Any:
    """Run ``scenario`` on InMemorySaver, then on ``saver``: the results must be equal."""
    from langgraph.checkpoint.memory import InMemorySaver

    expected = await scenario(InMemorySaver())
    actual = await scenario(saver)
    assert actual == expected
    return actual
