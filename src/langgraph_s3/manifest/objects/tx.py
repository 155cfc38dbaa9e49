"""Transactions on an object manifest: every part of a TransactWriteItems or none,
serializable, on create-only PUTs alone (optimistic, with intents, as Percolator).

1. **Read and check** every part's item (cached bases, concurrently); a condition that
   fails raises :class:`~langgraph_s3.errors.TransactionFailedError` and writes nothing.
2. **Intents** [1 round trip]: each *written* item gets its next version as an intent
   (what it was, what it becomes, the transaction's id). A checked item is not
   written, so checks never contend with each other. A lost intent aborts this
   transaction's own intents and the whole transaction is tried again.
3. **Validate** [1]: each checked item is read again after the intents landed (an
   intent met there is settled first); a condition that no longer holds aborts.
4. **Decide** [1]: one write commits by creating its item's next version from the
   intent's ``post``; several writes by creating the decision object ``t/{id}``,
   then each item's next version (resolutions anyone may write: the same bytes).

Anyone meeting a pending intent waits for its outcome, then aborts it (:mod:`.heads`):
first writer wins, so a committer frozen past the wait finds its decision taken and
starts again. A reader never returns an intent's ``pre`` while it is pending: that
is what orders the transaction at its validation.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from typing import Any

from langgraph_s3.core.retry import backoff
from langgraph_s3.core.tasks import bounded_map, gather_all
from langgraph_s3.errors import ConflictError, TransactionFailedError
from langgraph_s3.manifest.conditions import (
    TX_ITEMS,
    TxCheck,
    TxPut,
    TxUpdate,
    TxWrite,
)
from langgraph_s3.manifest.evaluate import applied, holds, key_of, refused, valid_item
from langgraph_s3.manifest.objects.codec import Image, Intent, Version
from langgraph_s3.manifest.objects.heads import ABORTED, COMMITTED, Head, Versions, new_token
from langgraph_s3.manifest.objects.keys import decision_key

__all__ = ["transact"]

MAX_ATTEMPTS = 16


def _key(write: TxWrite) -> dict[str, object]:
    return write.item if isinstance(write, TxPut) else write.key


def _post(write: TxWrite, image: Image | None) -> Image | None:
    if isinstance(write, TxUpdate):
        pk, sk = key_of(write.key)
        new = applied(write.change, image or {"pk": {"S": pk}, "sk": {"S": sk}})
    elif isinstance(write, TxPut):
        new = copy.deepcopy(write.item)
    else:
        return None
    valid_item(new)
    return new


def _failed(failed: tuple[int, ...]) -> TransactionFailedError:
    return TransactionFailedError("TransactionCanceledException: ConditionalCheckFailed", failed)


def refuse_malformed(writes: Sequence[TxWrite]) -> None:
    """Refuse what DynamoDB refuses of a transaction: no part or too many, an item
    named twice."""
    if not 0 < len(writes) <= TX_ITEMS:
        raise refused(f"a transaction names 1 to {TX_ITEMS} items, not {len(writes)}")
    keys_ = [key_of(_key(w)) for w in writes]
    if len(set(keys_)) != len(keys_):
        raise refused("Transaction request cannot include multiple operations on one item")


async def transact(
    versions: Versions, prefix_of: Callable[[dict[str, Any]], str], writes: Sequence[TxWrite]
) -> None:
    """Apply every part of ``writes`` (two or more) or none (see the module)."""
    written = [i for i, w in enumerate(writes) if not isinstance(w, TxCheck)]
    prefixes = [prefix_of(_key(w)) for w in writes]
    if not written:  # checks alone: each item read now, every condition evaluated
        heads = await bounded_map(
            lambda p: versions.head(p, fresh=True), prefixes, versions.store.concurrency
        )
        failed = tuple(
            i
            for i, (w, h) in enumerate(zip(writes, heads, strict=True))
            if w.when is not None and not holds(w.when, h.image)
        )
        if failed:
            raise _failed(failed)
        return
    for attempt in range(MAX_ATTEMPTS):
        if await _attempt(versions, prefixes, writes, written, fresh=attempt > 0):
            return
        await backoff(attempt)
    raise ConflictError("a manifest transaction kept losing to other writers: retry")


async def _attempt(
    versions: Versions,
    prefixes: list[str],
    writes: Sequence[TxWrite],
    written: list[int],
    *,
    fresh: bool,
) -> bool:
    """One try: True once committed, False when it lost to another writer."""
    heads: list[Head] = await bounded_map(
        lambda p: versions.head(p, fresh=fresh), prefixes, versions.store.concurrency
    )
    failed = tuple(
        i for i, w in enumerate(writes) if w.when is not None and not holds(w.when, heads[i].image)
    )
    if failed and not fresh:  # cached copies may be behind: read them before failing
        return False
    if failed:
        raise _failed(failed)
    txid = new_token() + new_token()
    multi = len(written) > 1
    try:
        posts = {i: _post(writes[i], heads[i].image) for i in written}
    except Exception:
        if not fresh:  # refused on cached copies: read them before refusing
            return False
        raise
    intents = {
        i: Version(
            heads[i].seq + 1, None, new_token(), Intent(txid, heads[i].image, posts[i], multi)
        )
        for i in written
    }
    sent = time.monotonic()  # an intent that lands is pending from here on
    landed = await gather_all(
        *(versions.try_create(prefixes[i], intents[i], heads[i].basis) for i in written)
    )
    if not all(landed):
        await _abort(
            versions,
            sent,
            txid,
            multi,
            [(prefixes[i], intents[i]) for i, ok in zip(written, landed, strict=True) if ok],
        )
        return False
    checks = [i for i, w in enumerate(writes) if isinstance(w, TxCheck)]
    now = await bounded_map(lambda i: versions.head(prefixes[i], fresh=True), checks, None)
    moved = tuple(
        i
        for i, head in zip(checks, now, strict=True)
        if not holds(writes[i].when, head.image)  # type: ignore[arg-type]
    )
    if moved:
        await _abort(versions, sent, txid, multi, [(prefixes[i], intents[i]) for i in written])
        raise _failed(moved)
    if not multi:
        (i,) = written
        commit = Version(intents[i].seq + 1, posts[i], new_token())
        return await versions.try_create(prefixes[i], commit, sent)
    if await versions.decide(txid, COMMITTED, sent) != COMMITTED:
        return False  # aborted by someone who met an intent (they resolve it), or fenced
    resolved = await gather_all(
        *(
            versions.try_create(
                prefixes[i], Version(intents[i].seq + 1, posts[i], new_token()), sent
            )
            for i in written
        )
    )
    if all(resolved):  # else the decision stays: whoever meets an intent resolves it
        await versions.store.delete([decision_key(versions.root, txid)])
    return True


async def _abort(
    versions: Versions, sent: float, txid: str, multi: bool, landed: list[tuple[str, Version]]
) -> None:
    """Abort this transaction's own intents (each back to what it was); an intent left
    pending (the fence refused the decision) is aborted by whoever meets it."""
    if multi and await versions.decide(txid, ABORTED, sent) != ABORTED:
        return
    await gather_all(
        *(
            versions.try_create(
                prefix, Version(v.seq + 1, v.intent.pre if v.intent else None, new_token()), sent
            )
            for prefix, v in landed
        )
    )
