"""Store items of a deployment's subjects, sealed with their subject's data key.

A namespace's subject is the deployment's :class:`SubjectPolicy` to say (a label, or a
function of the labels); an item of a namespace with a subject is stored sealed
(:mod:`langgraph_s3.core.sealing`), its subject's token and life in the clear ahead of
it (:func:`~langgraph_s3.core.sealing.name_subject`: a store item has no manifest item
to say whose it is), and bound to its token and its key under the store's root: a body
moved to another item, or named for another subject, fails its check. Segments keep
each item as it is stored (sealed with its own subject's key), so forgetting one
subject leaves every other's entries readable and the forgotten one's unreadable,
without rewriting a segment.

Each namespace is named in the subject's index once per life before its first item is
stored (1 PutItem, once per process): forgetting finds the subject's namespaces by one
Query, and deletes their items.

Costs: a write for a subject takes its key (one record read and one KMS ``Decrypt`` per
bound per process; a new subject's first write makes its key: a KMS ``GenerateDataKey``
and a PutItem); a read of another subject's item takes that subject's key the same way,
so a search across many subjects' namespaces pays one record read and one ``Decrypt``
per subject per bound.
"""

from __future__ import annotations

import asyncio

from cachetools import LRUCache

from langgraph_s3.core.keys import Layout
from langgraph_s3.core.sealing import key_id_of, name_subject, named_subject, seal, unseal
from langgraph_s3.core.subject_policy import SubjectPolicy
from langgraph_s3.errors import InvalidRequestError, SealBrokenError, SubjectForgottenError
from langgraph_s3.runtime.subjects import Subjects

__all__ = ["ItemSeals", "Opened"]

NAMED = 100_000
"""(subject, life, namespace) triples one process remembers naming in the index."""


class Opened:
    """An item's plaintext, and the subject token it was sealed for (None: stored plain)."""

    __slots__ = ("body", "token")

    def __init__(self, body: bytes, token: str | None) -> None:
        self.body, self.token = body, token


class ItemSeals:
    """Seals and opens the items of a deployment's subjects.

    Args:
        subjects: the deployment's subjects (tokens, keys, the registry).
        policy: which namespaces have a subject.
        layout: the store's layout (a body is bound to its key under the root).
    """

    def __init__(self, subjects: Subjects, policy: SubjectPolicy, layout: Layout) -> None:
        self.subjects = subjects
        self.policy = policy
        self.layout = layout
        self._named: LRUCache[tuple[str, int, tuple[str, ...]], bool] = LRUCache(maxsize=NAMED)
        self._locks: LRUCache[tuple[int, str], asyncio.Lock] = LRUCache(maxsize=10_000)

    def _lock(self, token: str) -> asyncio.Lock:
        """One subject's key fetched once on one loop: a search over a thousand of its
        items, or a batch of its puts, reads its record and unwraps its key once."""
        at = (id(asyncio.get_running_loop()), token)
        lock = self._locks.get(at)
        if lock is None:
            lock = self._locks[at] = asyncio.Lock()
        return lock

    def _where(self, token: str, key: str) -> str:
        rel = key[len(self.layout.root) :] if key.startswith(self.layout.root) else key
        return f"{token}|store|{rel}"

    def has_subject(self, namespace: tuple[str, ...]) -> bool:
        """Whether the namespace's items are a subject's (one the policy cannot name,
        a label too long to be a subject, counts as one: it is never written plain)."""
        try:
            return self.policy.namespace_subject(namespace) is not None
        except InvalidRequestError:
            return True

    async def token_of(self, namespace: tuple[str, ...]) -> str | None:
        """The token of the namespace's subject, or None when it has none."""
        subject = self.policy.namespace_subject(namespace)
        return None if subject is None else await self.subjects.token(subject)

    async def seal(self, key: str, namespace: tuple[str, ...], body: bytes) -> bytes:
        """``body`` as the item at ``key`` is stored: sealed when ``namespace`` has a
        subject (the namespace named in its index first), as it is otherwise.

        Raises:
            SubjectForgottenError: the subject is being forgotten.
        """
        subject = self.policy.namespace_subject(namespace)
        if subject is None:
            return body
        token = await self.subjects.token(subject)
        async with self._lock(token):
            wk = await self.subjects.key_for_token(token)
            named = (wk.token, wk.life, namespace)
            if named not in self._named:
                await self.subjects.registry.add_namespace(wk.token, namespace, wk.life)
                self._named[named] = True
        return name_subject(wk.token, wk.life, seal(wk.key, self._where(wk.token, key), body))

    async def note_plain(self, namespace: tuple[str, ...]) -> None:
        """An item read plain in a subject's namespace (stored before the deployment
        declared subjects) names the namespace for the subject, as a plain thread of
        theirs is named (life 0): forgetting finds and erases it. 1 PutItem, once per
        namespace and process."""
        try:
            subject = self.policy.namespace_subject(namespace)
        except InvalidRequestError:
            return
        if subject is None:
            return
        token = await self.subjects.token(subject)
        if (token, 0, namespace) not in self._named:
            await self.subjects.registry.add_namespace(token, namespace, 0)
            self._named[(token, 0, namespace)] = True

    async def open(self, key: str, body: bytes) -> Opened | None:
        """The plaintext of the item at ``key`` (a plain body as it is); None when it
        was sealed in a life of its subject that is over (forgotten: erased).

        Raises:
            SealBrokenError: the body failed its check (changed, moved, another key's).
        """
        named = named_subject(body, key)
        if named is None:
            return Opened(body, None)
        token, life, sealed = named
        try:
            async with self._lock(token):
                data_key = await self.subjects.key_for_read(
                    token, key_id_of(sealed, key), life=life, where=key
                )
        except SubjectForgottenError:
            return None
        return Opened(unseal(data_key, self._where(token, key), sealed, name=key), token)

    async def check(self, key: str, namespace: tuple[str, ...], opened: Opened) -> None:
        """An item opened for one subject must be its namespace's subject's: a body
        sealed for alice stored in bob's namespace (by a writer whose policy differs)
        is refused, not served as bob's.

        Raises:
            SealBrokenError: it was sealed for another subject than its namespace's.
        """
        if opened.token is None:
            return  # stored plain (before the deployment declared subjects)
        if await self.token_of(namespace) != opened.token:
            raise SealBrokenError(key, "sealed for another subject than its namespace's")
