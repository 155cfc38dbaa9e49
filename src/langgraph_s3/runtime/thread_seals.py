"""Which threads are sealed, and for whom: the subjects of a deployment's threads as
this process knows them, and the sealing and opening of their bodies.

A thread's subject is decided by the put that begins it (its checkpoint's metadata,
through the deployment's :class:`~langgraph_s3.core.subject_policy.SubjectPolicy`) and
recorded on every manifest item of the thread (``sj``: the subject's token, ``sl``: the
subject's life; :mod:`.sealed_table` writes them). From then on the manifest, never a
body's first bytes, says whether the thread's objects and held copies are sealed: a
plaintext body read for a sealed thread is refused, as a sealed one read for a plain
thread is. A thread begun before the deployment declared subjects (or whose metadata
named none) stays plain until it is migrated (``langgraph-s3 seal``); one whose later
checkpoints name a subject is still named for it, so that forgetting deletes it.

What this process knows comes from every thread item the manifest reads (a reader
always reads its thread's item before its objects); a thread it has not seen is asked
once (1 GetItem of its root item). Bodies are bound to the subject's token and the
thread (a sealed body copied into another thread, or another subject's, fails its check).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache

from langgraph_s3.core import sealing
from langgraph_s3.core.keys import ERASURE_MARKER, encode
from langgraph_s3.core.subject_policy import SubjectPolicy
from langgraph_s3.errors import InvalidRequestError, SealBrokenError, SubjectForgottenError
from langgraph_s3.runtime.subjects import Subjects

__all__ = ["PLAIN", "SUBJECT_ATTRIBUTE", "SUBJECT_LIFE_ATTRIBUTE", "Seal", "ThreadSeals"]

log = logging.getLogger("langgraph_s3")

_TOKEN = re.compile(r"[0-9a-f]{32}")
SUBJECT_ATTRIBUTE = "sj"
"""A sealed thread's items: its subject's token."""
SUBJECT_LIFE_ATTRIBUTE = "sl"
"""A sealed thread's items: the subject's life the thread was begun in."""
KNOWN = 65536
"""Threads whose state one process keeps (a few dozen bytes each)."""


@dataclass(frozen=True, slots=True)
class Seal:
    """A sealed thread's subject: its token and the life the thread belongs to."""

    token: str
    life: int

    def binding(self, thread: str) -> str:
        """What a body of ``thread`` (``keys.encode``'d) is bound to: the subject and
        the thread."""
        return f"{self.token}|{thread}"


PLAIN = "plain"
"""A thread whose items exist without a subject: its bodies are stored as they are."""
NEW = "new"
"""A thread without items (never begun, or deleted): its first put decides."""
State = Seal | str


def seal_of_item(item: Mapping[str, Any]) -> Seal | None:
    """The seal an item says its thread's content has (a tombstone's too), or None."""
    token = item.get(SUBJECT_ATTRIBUTE, {}).get("S")
    life = item.get(SUBJECT_LIFE_ATTRIBUTE, {}).get("N")
    if token is None and life is None:
        return None
    if not isinstance(token, str) or not _TOKEN.fullmatch(token) or not str(life).isdigit():
        where = f"{item.get('pk', {}).get('S', '?')} {item.get('sk', {}).get('S', '?')}"
        raise SealBrokenError(where, "its subject attributes (sj, sl) are not a token and a life")
    return Seal(token, int(str(life)))


def passes(body: bytes | memoryview) -> bool:
    """Bodies that hold no content and stay as they are in a sealed thread: an empty
    marker (a tip's) and a deletion's erasure marker (listings know them by size)."""
    return len(body) == 0 or bytes(body) == ERASURE_MARKER


class ThreadSeals:
    """The subjects of one deployment's threads, as this process knows them.

    Args:
        subjects: the deployment's subjects (tokens, keys).
        policy: how a checkpoint names its thread's subject.
        root_item: the thread's (``keys.encode``'d) root item as the table holds it now
            (a GetItem that does not pass through :meth:`learn`), None when there is none.
    """

    def __init__(
        self,
        subjects: Subjects,
        policy: SubjectPolicy,
        root_item: Callable[[str], Awaitable[Mapping[str, Any] | None]],
    ) -> None:
        self.subjects = subjects
        self.policy = policy
        self._root_item = root_item
        self._known: LRUCache[str, State] = LRUCache(maxsize=KNOWN)
        self._named: LRUCache[tuple[str, str], bool] = LRUCache(maxsize=KNOWN)
        self._claiming: dict[tuple[int, str], asyncio.Lock] = {}
        """(event loop, thread) -> the lock its claims take turns under."""
        self._expected: dict[str, str] = {}
        """Thread -> the token a migration rewrites it for (``langgraph-s3 seal``): its
        checkpoints that name no subject are sealed for it too."""
        self._content: LRUCache[str, Seal] = LRUCache(maxsize=KNOWN)
        """Thread -> the seal its content is sealed by, as far as this process wrote or
        read it (its claim, or a live item naming one; a tombstone teaches nothing): what it still
        writes there (a held copy stored late, a put under way while a reader found no
        item yet) is sealed by it, or refused once that life is over, never plain."""

    # ----------------------------------------------------------------- learning
    def learn(self, thread: str, item: Mapping[str, Any]) -> State:
        """What an item of ``thread`` (``keys.encode``'d) says; a tombstone's thread is
        one whose next life is still to be decided."""
        seal = seal_of_item(item)
        if item.get("deleted", {}).get("BOOL"):  # its seal is the old life's: not learned
            return self.learn_absent(thread)
        if seal is not None:
            self._content[thread] = seal
        if seal is None:
            self._content.pop(thread, None)  # a live plain item: the thread is plain now
        state: State = seal or PLAIN
        self._known[thread] = state
        return state

    def learn_absent(self, thread: str) -> State:
        """The thread has no live item (none, or a tombstone): its next put decides."""
        self._known[thread] = NEW
        return NEW

    async def state(self, thread: str, *, fresh: bool = False) -> State:
        """The thread's state: as known, or read (1 GetItem) when it is not, or ``fresh``."""
        held = None if fresh else self._known.get(thread)
        if held is not None:
            return held
        item = await self._root_item(thread)
        return self.learn_absent(thread) if item is None else self.learn(thread, item)

    async def seal_of(self, thread: str) -> Seal | None:
        """The seal the thread's bodies are written and read with (None: plain): its
        own; for a thread without a live item, the one its content had here."""
        state = await self.state(thread)
        if isinstance(state, Seal):
            return state
        return self._content.get(thread) if state == NEW else None

    # ----------------------------------------------------------------- claiming
    async def claim(self, thread_id: str, metadata: Mapping[str, Any] | None) -> Seal | None:
        """Before a put of ``thread_id`` whose checkpoint carries ``metadata``: the seal
        its bodies get. A new thread takes the subject the metadata names (its key
        made or unwrapped, the thread named for the subject: 1 PutItem, once); a sealed
        one keeps its own (another subject named is refused), and is refused with
        SubjectForgottenError once its subject is being forgotten. Claims of one thread
        on one event loop go one at a time (a put and its writes ask together: the
        second finds what the first decided, with no request of its own)."""
        thread = encode(thread_id, "thread_id")
        subject = self.policy.thread_subject(metadata or {})
        token = None if subject is None else await self.subjects.token(subject)
        token = token or self._expected.get(thread)
        slot = (id(asyncio.get_running_loop()), thread)
        lock = self._claiming.get(slot)
        if lock is None:
            lock = self._claiming[slot] = asyncio.Lock()
        try:
            async with lock:
                return await self._claim(thread_id, thread, token)
        finally:
            if not lock.locked() and self._claiming.get(slot) is lock:
                del self._claiming[slot]

    def expect(self, thread_id: str, token: str | None) -> None:
        """While a migration rewrites ``thread_id`` for the subject ``token``, a put of it
        naming no subject is sealed for that subject (None: no longer)."""
        thread = encode(thread_id, "thread_id")
        if token is None:
            self._expected.pop(thread, None)
        else:
            self._expected[thread] = token

    async def _claim(self, thread_id: str, thread: str, token: str | None) -> Seal | None:
        state = await self.state(thread)
        if state == NEW or (isinstance(state, Seal) and not await self._holds(state, token)):
            # what this process saw may be behind (another began the thread meanwhile, or
            # it was deleted, or its subject forgotten): the table says (1 GetItem)
            state = await self.state(thread, fresh=True)
        if isinstance(state, Seal):
            if token is not None and token != state.token:
                raise InvalidRequestError(
                    f"thread {thread_id!r} belongs to another subject than the one this "
                    "checkpoint's metadata names: a thread keeps the subject it was begun "
                    "for; begin a new thread for this one"
                )
            await self.subjects.key_for_token(state.token, life=state.life)  # still live?
            return state
        if token is None:
            if state == NEW and thread not in self._content:
                self._known[thread] = PLAIN  # this process begins it plain
            elif state == NEW:  # a new life over a sealed one's tombstone: it decides
                content = self._content[thread]
                await self.subjects.key_for_token(content.token, life=content.life)
                return content
            return None
        if state == PLAIN:
            await self._name(token, thread, 0, thread_id)
            if (token, "~plain") not in self._named:
                self._named[(token, "~plain")] = True
                log.warning(
                    "langgraph-s3: thread %r names a subject but was begun without one: its "
                    "content stays plain until migrated (`langgraph-s3 seal`); forgetting "
                    "the subject deletes it",
                    thread_id,
                )
            return None
        key = await self.subjects.key_for_token(token)
        seal = Seal(token, key.life)
        await self._name(token, thread, key.life, thread_id)
        self._known[thread] = self._content[thread] = seal
        return seal

    async def _holds(self, seal: Seal, token: str | None) -> bool:
        """Whether a seal this process knows still stands for a put naming ``token``."""
        if token is not None and token != seal.token:
            return False
        try:
            await self.subjects.key_for_token(seal.token, life=seal.life)
        except SubjectForgottenError:
            return False
        return True

    async def adopt(self, thread: str, seal: Seal) -> None:
        """A thread (``keys.encode``'d) made as a copy of one sealed by ``seal`` is the
        same subject's (``copy_thread``): named for it, its bodies sealed for it.
        InvalidRequestError when it is another subject's already."""
        state = await self.state(thread)
        if state == PLAIN or (isinstance(state, Seal) and state.token != seal.token):
            raise InvalidRequestError(
                f"thread {thread!r} is not the subject's of the thread copied into it (plain, "
                "or another subject's): copy a sealed thread into a new thread, or its own"
            )
        await self._name(seal.token, thread, seal.life)
        self._known[thread] = self._content[thread] = seal

    async def _name(self, token: str, thread: str, life: int, thread_id: str | None = None) -> None:
        if (token, f"{life}/{thread}") not in self._named:
            await self.subjects.registry.add_thread(token, thread, life, thread_id)
            self._named[(token, f"{life}/{thread}")] = True

    # ---------------------------------------------------------- sealing, opening
    async def seal_body(self, thread: str, body: bytes, where: str) -> bytes:
        """``body`` as ``thread`` (``keys.encode``'d) stores it: sealed when the thread
        is (with its subject's current key), as it is otherwise."""
        seal = await self.seal_of(thread)
        if seal is None or passes(body):
            return body
        key = await self.subjects.key_for_token(seal.token, life=seal.life)
        return sealing.seal(key.key, seal.binding(thread), body)

    async def reseal_body(self, seal: Seal, thread: str, body: bytes, where: str) -> bytes:
        """``body`` sealed again by ``seal``, a life that may be being forgotten (content
        read from the thread and put back as it was: a failed deletion's restore)."""
        if passes(body):
            return body
        key = await self.subjects.key_of_life(seal.token, seal.life)
        return sealing.seal(key, seal.binding(thread), body)

    async def open_body(self, thread: str, body: bytes, where: str) -> bytes:
        """The plaintext of a body of ``thread`` read from ``where`` (an object's key,
        or an item's attribute): SealBrokenError when it is plain in a sealed thread,
        sealed in a plain one, or fails its check; SubjectForgottenError when its key
        is destroyed."""
        if passes(body):
            return body
        sealed = sealing.is_sealed(body)
        seal = await self.seal_of(thread)
        if sealed and seal is None:  # sealed since this process last looked?
            state = await self.state(thread, fresh=True)
            seal = state if isinstance(state, Seal) else None
        if seal is None:
            if sealed:
                raise SealBrokenError(where, "sealed, in a thread the manifest says is plain")
            return body
        if not sealed:
            raise SealBrokenError(where, "plain, in a thread the manifest says is sealed")
        return await self.open_sealed(seal, thread, body, where)

    async def open_sealed(self, seal: Seal, thread: str, body: bytes, where: str) -> bytes:
        """The plaintext of ``body``, sealed by ``seal`` for ``thread`` (what an item of
        the thread says it is, tombstones included); SealBrokenError when it is not."""
        if not sealing.is_sealed(body):
            raise SealBrokenError(where, "plain, in a thread the manifest says is sealed")
        key_id = sealing.key_id_of(body, where)
        key = await self.subjects.key_for_read(seal.token, key_id, life=seal.life, where=where)
        return sealing.unseal(key, seal.binding(thread), body)
