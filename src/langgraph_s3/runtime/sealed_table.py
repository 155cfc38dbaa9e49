"""The manifest's table as a deployment with subjects sees it: what a sealed thread's
items hold of its content sealed, and every thread item read taught to
:class:`~.thread_seals.ThreadSeals`.

A thread's items hold content in three places: the checkpoints they hold until their
objects land (``inline:<id>``'s ``b``), the pending writes they hold (``hw:<tail>``'s
``b``, or the bare bytes of an earlier build's), and the latest metadata (``md``, and
``ix_<key>``, the hash key of an index). For a sealed thread the first two and ``md``
are sealed here on every write (``md`` becomes bytes), and in every condition that
names them (sealing is deterministic, so a condition naming a body still matches the
one stored), and opened on every read; an index value becomes a keyed hash of the
value (:meth:`~.subjects.Subjects.value_token`: the index still answers equality, and
:meth:`SealedTable.query_index` asks for both forms). Every write of a sealed thread's
item also sets its subject (``sj``, ``sl``), so that any item of the thread tells a
reader. Other items (the deployment's marker, run indexes, subjects, an import's
stage) pass as they are.

Cost: no request of its own but, for a thread this process never read, the GetItem
:class:`~.thread_seals.ThreadSeals` makes once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from langgraph_s3.core.shards import Shard
from langgraph_s3.errors import SubjectForgottenError
from langgraph_s3.manifest.conditions import (
    Absent,
    All,
    AnyOf,
    Change,
    Compare,
    Cond,
    Contains,
    N,
    Not,
    S,
    TxCheck,
    TxDelete,
    TxPut,
    TxUpdate,
    TxWrite,
    all_of,
)
from langgraph_s3.manifest.schema import ROOT_SK
from langgraph_s3.manifest.stage_items import STAGE_MARK
from langgraph_s3.manifest.table import Item, TablePort
from langgraph_s3.runtime.thread_seals import (
    SUBJECT_ATTRIBUTE,
    SUBJECT_LIFE_ATTRIBUTE,
    Seal,
    ThreadSeals,
    seal_of_item,
)

__all__ = ["SealedTable", "held_attribute"]

_HELD = ("inline:", "hw:")
METADATA = "md"
INDEX = "ix_"
HASHED = "~h:"
"""Begins an index value's keyed hash (after the deployment key): no value's text does."""


def held_attribute(name: str) -> bool:
    """Whether an item attribute holds content (a held checkpoint or pending write, or
    the latest metadata)."""
    return name.startswith(_HELD) or name == METADATA


Code = Callable[[str, bytes, str], Awaitable[bytes]]
"""(thread, bytes, where) -> the bytes sealed or opened."""


class SealedTable:
    """A :class:`~langgraph_s3.manifest.table.TablePort` over ``inner`` for the
    deployment ``deployment`` (its partition keys' prefix)."""

    def __init__(self, inner: TablePort, deployment: str, seals: ThreadSeals) -> None:
        self.inner = inner
        self.deployment = deployment
        self.seals = seals

    @property
    def name(self) -> str:
        return self.inner.name

    def thread_of(self, key: Item) -> str | None:
        """The thread (``keys.encode``'d: a long id is ``~~`` and a hash) an item's key
        names, an import's stage of it included; None for another item (the marker, run
        indexes, subjects, receipts: each has a ``/`` after the deployment key)."""
        pk = key.get("pk", {}).get("S", "")
        rest = pk[len(self.deployment) :] if pk.startswith(self.deployment) else ""
        if rest.startswith(STAGE_MARK):  # {deployment}~stage/{thread}/{token}
            rest = rest[len(STAGE_MARK) :].split("/", 1)[0]
        return rest if rest and "/" not in rest else None

    # ------------------------------------------------------------------ reading
    async def _read(self, item: Item | None) -> Item | None:
        if item is None:
            return None
        thread = self.thread_of(item)
        if thread is None:
            return item
        self.seals.learn(thread, item)
        seal = seal_of_item(item)
        if seal is None:  # the thread's state says (a plain item of a sealed thread fails)
            return await _coded(item, thread, self.seals.open_body, opening=True)

        async def opened(thread: str, body: bytes, where: str) -> bytes:
            assert seal is not None
            return await self.seals.open_sealed(seal, thread, body, where)

        try:
            return await _coded(item, thread, opened, opening=True)
        except SubjectForgottenError:  # its subject's key is destroyed: its content is gone
            return {k: v for k, v in item.items() if not held_attribute(k)}

    async def get(self, key: Item) -> Item | None:
        item = await self.inner.get(key)
        thread = self.thread_of(key)
        if item is None and thread is not None and key.get("sk", {}).get("S") == ROOT_SK:
            self.seals.learn_absent(thread)
        return await self._read(item)

    async def get_many(self, keys: Sequence[Item]) -> list[Item]:
        return [i for i in [await self._read(i) for i in await self.inner.get_many(keys)] if i]

    async def query(self, pk: str) -> AsyncIterator[list[Item]]:
        thread = self.thread_of({"pk": S(pk)})
        empty = True
        async for page in self.inner.query(pk):
            empty = empty and not page
            yield [i for i in [await self._read(i) for i in page] if i]
        if empty and thread is not None:
            self.seals.learn_absent(thread)

    async def scan(
        self, *, prefix: str = "", after: Item | None = None, shard: Shard | None = None
    ) -> AsyncIterator[list[Item]]:
        async for page in self.inner.scan(prefix=prefix, after=after, shard=shard):
            yield [i for i in [await self._read(i) for i in page] if i]

    async def query_index(
        self, index: str, attribute: str, value: str
    ) -> AsyncIterator[list[Item]]:
        """The items whose ``attribute`` is ``value``: plain threads' by the value, sealed
        ones' by its keyed hash (two Queries per page of each)."""
        async for page in self.inner.query_index(index, attribute, value):
            yield page
        hashed = await self._hashed(attribute, value)
        if hashed != value:
            async for page in self.inner.query_index(index, attribute, hashed):
                yield page

    async def _hashed(self, attribute: str, value: str) -> str:
        """An index attribute's value as a sealed thread's item holds it."""
        if not attribute.startswith(INDEX) or not value.startswith(self.deployment):
            return value
        text = value[len(self.deployment) :]
        if text.startswith(HASHED):
            return value
        token = await self.seals.subjects.value_token(attribute[len(INDEX) :], text)
        return f"{self.deployment}{HASHED}{token}"

    async def indexes(self) -> list[str]:
        return await self.inner.indexes()

    async def create_index(self, index: str, attribute: str) -> None:
        await self.inner.create_index(index, attribute)

    async def erase_history(self, key: Item) -> None:
        await self.inner.erase_history(key)

    async def exists(self) -> bool:
        return await self.inner.exists()

    async def create(self, *, ttl_attribute: str) -> None:
        await self.inner.create(ttl_attribute=ttl_attribute)

    # ------------------------------------------------------------------ writing
    async def _seal_of(self, key: Item) -> tuple[str, Seal] | None:
        thread = self.thread_of(key)
        if thread is None:
            return None
        seal = await self.seals.seal_of(thread)
        return None if seal is None else (thread, seal)

    async def _change(self, key: Item, change: Change) -> tuple[Change, Cond | None]:
        """The change as the table gets it, and a condition it needs: content written
        plain only into an item that is no sealed thread's (this process's word on the
        thread may be behind: the write fails, and its caller reads the item again)."""
        found = await self._seal_of(key)
        if found is None:
            content = any(held_attribute(n) for n in change.set)
            thread = self.thread_of(key)
            return change, Absent(SUBJECT_ATTRIBUTE) if content and thread is not None else None
        thread, seal = found
        sets = await _coded(dict(change.set), thread, self.seals.seal_body, opening=False)
        sets = await self._hash_indexes(sets)
        if not change.remove or SUBJECT_ATTRIBUTE not in change.remove:
            sets[SUBJECT_ATTRIBUTE] = S(seal.token)
            sets[SUBJECT_LIFE_ATTRIBUTE] = N(seal.life)
        return replace(change, set=sets), None

    async def _when(self, key: Item, when: Cond | None) -> Cond | None:
        found = None if when is None else await self._seal_of(key)
        if found is None or when is None:
            return when
        return await _cond(when, found[0], self.seals.seal_body)

    async def _item(self, item: Item) -> Item:
        """A whole item as the table gets it: sealed by the seal it names itself (an
        item read and put back, a tombstone's included), else by the thread's."""
        thread = self.thread_of(item)
        own = seal_of_item(item)
        if thread is not None and own is not None:

            async def again(thread: str, body: bytes, where: str) -> bytes:
                return await self.seals.reseal_body(own, thread, body, where)

            out = await _coded(dict(item), thread, again, opening=False)
            return await self._hash_indexes(out)
        found = await self._seal_of(item)
        if found is None:
            return item
        thread, seal = found
        out = await _coded(dict(item), thread, self.seals.seal_body, opening=False)
        out = await self._hash_indexes(out)
        if "deleted" not in out:
            out[SUBJECT_ATTRIBUTE], out[SUBJECT_LIFE_ATTRIBUTE] = S(seal.token), N(seal.life)
        return out

    async def _hash_indexes(self, attrs: dict[str, Any]) -> dict[str, Any]:
        for name, value in list(attrs.items()):
            if name.startswith(INDEX) and isinstance(text := value.get("S"), str):
                attrs[name] = S(await self._hashed(name, text))
        return attrs

    async def update(
        self, key: Item, change: Change, *, when: Cond | None = None, old: bool = False
    ) -> Item | None:
        change, needs = await self._change(key, change)
        when = all_of(await self._when(key, when), needs)
        got = await self.inner.update(key, change, when=when, old=old)
        return await self._read(got) if old else got

    async def put(self, item: Item, *, when: Cond | None = None) -> None:
        await self.inner.put(await self._item(item), when=await self._when(item, when))

    async def delete(self, key: Item, *, when: Cond | None = None) -> None:
        await self.inner.delete(key, when=await self._when(key, when))

    async def transact(self, writes: Sequence[TxWrite]) -> None:
        out: list[TxWrite] = []
        for w in writes:
            if isinstance(w, TxUpdate):
                change, needs = await self._change(w.key, w.change)
                out.append(TxUpdate(w.key, change, all_of(await self._when(w.key, w.when), needs)))
            elif isinstance(w, TxPut):
                out.append(TxPut(await self._item(w.item), await self._when(w.item, w.when)))
            elif isinstance(w, TxDelete):
                out.append(TxDelete(w.key, await self._when(w.key, w.when)))
            else:
                when = await self._when(w.key, w.when)
                assert when is not None
                out.append(TxCheck(w.key, when))
        await self.inner.transact(out)


async def _coded(
    attrs: dict[str, Any], thread: str, code: Code, *, opening: bool
) -> dict[str, Any]:
    """``attrs`` with the content of their held attributes sealed or opened."""
    out = dict(attrs)
    for name, value in attrs.items():
        if held_attribute(name) and isinstance(value, dict):
            out[name] = await _value(value, thread, code, name, opening=opening)
    return out


async def _value(
    value: dict[str, Any], thread: str, code: Code, name: str, *, opening: bool
) -> dict[str, Any]:
    """A held attribute's value: its bare bytes, or its map's ``b``, coded; the
    metadata's text sealed into bytes, and opened back into text."""
    if name == METADATA:
        if opening and isinstance(raw := value.get("B"), bytes | bytearray):
            return {"S": (await code(thread, bytes(raw), name)).decode()}
        if not opening and isinstance(text := value.get("S"), str):
            return {"B": await code(thread, text.encode(), name)}
        return value
    if isinstance(body := value.get("B"), bytes | bytearray):
        return {"B": await code(thread, bytes(body), name)}
    m = value.get("M")
    if isinstance(m, dict) and isinstance(b := m.get("b", {}).get("B"), bytes | bytearray):
        return {"M": {**m, "b": {"B": await code(thread, bytes(b), name)}}}
    return value


async def _cond(when: Cond, thread: str, code: Code) -> Cond:
    """A condition with the held bodies it names sealed (a tag, ``.d``, is no content)."""
    if isinstance(when, All | AnyOf):
        return type(when)(tuple([await _cond(p, thread, code) for p in when.parts]))
    if isinstance(when, Not):
        return Not(await _cond(when.part, thread, code))
    if isinstance(when, Compare | Contains) and held_attribute(when.path) and "." not in when.path:
        sealed = await _value(when.value, thread, code, when.path, opening=False)
        return replace(when, value=sealed)
    return when
