"""Subjects' wrapped data keys in the manifest table: one item per subject of a
deployment, under the deployment's own partition keys (``{deployment}~subjects/{token}``,
so an agent policy limited to its ``dynamodb:LeadingKeys`` reaches them, and another
deployment's never).

A subject's item goes through lives: ``live`` (its current key, wrapped, and the key's
id), ``forgetting`` (set first when the subject is forgotten: writers refuse to seal
for it from then on, while the deletion runs), ``forgotten`` (the wrapped key removed:
whatever of the subject's content remains anywhere, versions and backups included, has
no key left that opens it). A subject that comes back gets a new key and a new life
(``life`` counts them); every change is conditioned on the life and state it read, so a
forgetting never destroys a key a new life made, and two writers starting one subject's
life at once agree on one key (the second reads the first's).

Each call is one request. The token is the subject's keyed hash
(:func:`~langgraph_s3.core.sealing.subject_token`), never the subject's own id.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Literal

from langgraph_s3.core.clock import wall_clock
from langgraph_s3.errors import ConditionFailedError
from langgraph_s3.manifest.conditions import (
    Absent,
    Change,
    Compare,
    Cond,
    Exists,
    N,
    S,
    all_of,
    any_of,
    eq,
)
from langgraph_s3.manifest.schema import ROOT_SK
from langgraph_s3.manifest.table import Item, TablePort

__all__ = [
    "NAMESPACE_MARK",
    "SUBJECTS_MARK",
    "THREAD_MARK",
    "LifeRecord",
    "NamedNamespace",
    "NamedThread",
    "SubjectRecord",
    "SubjectRegistry",
]

SUBJECTS_MARK = "~subjects/"
"""After the deployment key, the partition keys of its subjects' items (a thread id is
``keys.encode``'d, so it never starts with ``~``)."""
OLD_LIFE = ("began", "exports_sealed", "exports_plain")
"""What a life's forgetting left on the subject's item, removed when a new life begins."""
THREAD_MARK = "t/"
"""Sort keys of a subject's partition naming its threads (its record's is ``ROOT_SK``)."""
NAMESPACE_MARK = "n/"
"""Sort keys of a subject's partition naming its store namespaces."""
LIFE_MARK = "r/"
"""Sort keys of a subject's partition holding one forgotten life each (:class:`LifeRecord`):
what its forgetting deleted, its receipt's number, and who writes it."""
_TOKEN = re.compile(r"[0-9a-f]{32}")
State = Literal["live", "forgetting", "forgotten"]


@dataclass(frozen=True)
class SubjectRecord:
    """One subject's item as read."""

    token: str
    life: int
    state: State
    key_id: bytes | None
    """The current data key's id; None once forgotten."""
    wrapped: bytes | None = None
    since: float = 0.0
    """When the state was last set (the registry's clock, epoch seconds)."""
    began: float | None = None
    """When this life's forgetting began (kept once the key is destroyed: a resumed
    forgetting and its receipt read it)."""
    exports: dict[str, int] = field(default_factory=dict)
    """Exports of this life's threads made so far: ``sealed`` and ``plain`` counts."""


class SubjectRegistry:
    """The subjects' items of one deployment in one table."""

    def __init__(
        self, table: TablePort, deployment: str, *, clock: Callable[[], float] = wall_clock
    ) -> None:
        self.table = table
        self.deployment = deployment
        self._clock = clock

    def now(self) -> float:
        """The clock the items' ``since`` is written by (epoch seconds)."""
        return self._clock()

    def key(self, token: str) -> Item:
        if not _TOKEN.fullmatch(token):
            raise ValueError(f"a subject token is 32 hex digits (subject_token), got {token!r}")
        return {"pk": S(f"{self.deployment}{SUBJECTS_MARK}{token}"), "sk": S(ROOT_SK)}

    def secret_key(self) -> Item:
        """The item of the deployment's token secret (``~`` never starts a token)."""
        return {"pk": S(f"{self.deployment}{SUBJECTS_MARK}~secret"), "sk": S(ROOT_SK)}

    async def secret(self) -> tuple[bytes, bytes, float] | None:
        """The deployment's token secret: its id, its wrapped form, and the deployment's
        bound (seconds any process keeps a subject's key or record); None before the
        first."""
        item = await self.table.get(self.secret_key())
        if item is None:
            return None
        return bytes(item["kid"]["B"]), bytes(item["wrapped"]["B"]), float(item["bound"]["N"])

    async def keep_secret(
        self, key_id: bytes, wrapped: bytes, bound: float
    ) -> tuple[bytes, bytes, float]:
        """Keep this token secret and bound unless another process kept them first: the
        ones kept, either way. A deployment's secret never changes (every token of every
        subject depends on it), nor its bound (every process keeps keys that long)."""
        item = {
            **self.secret_key(),
            "kid": {"B": key_id},
            "wrapped": {"B": wrapped},
            "bound": N(bound),
        }
        try:
            await self.table.put(item, when=Absent("pk"))
        except ConditionFailedError:
            kept = await self.secret()
            if kept is None:  # pragma: no cover - a kept secret is never deleted
                raise
            return kept
        return key_id, wrapped, bound

    async def get(self, token: str) -> SubjectRecord | None:
        """The subject's item, strongly consistent; None when it never had one."""
        item = await self.table.get(self.key(token))
        return None if item is None else _record(token, item)

    async def begin(self, token: str, key_id: bytes, wrapped: bytes) -> SubjectRecord:
        """Start the subject's next life with this key, unless a live one exists (a
        writer that raced this one): the live record either way. A subject being
        forgotten is refused: the record says ``forgetting``, and nothing changed."""
        seen = await self.get(token)
        while True:
            if seen is not None and seen.state != "forgotten":
                return seen
            life = 1 if seen is None else seen.life + 1
            now = self._clock()
            when = (
                Absent("pk")
                if seen is None
                else all_of(eq("state", S("forgotten")), eq("life", N(seen.life)))
            )
            change = Change(
                set={
                    "state": S("live"),
                    "life": N(life),
                    "kid": {"B": key_id},
                    "wrapped": {"B": wrapped},
                    "since": N(now),
                },
                remove=OLD_LIFE if seen is not None else (),
            )
            if await self._applied(token, change, when):
                return SubjectRecord(token, life, "live", key_id, wrapped, now)
            seen = await self.get(token)  # another writer began it, or forgot it

    async def forgetting(self, token: str, life: int | None = None) -> SubjectRecord | None:
        """Mark the subject's live life (``life``, when given: never a later one) as
        being forgotten; idempotent. The record as it is after, or None when the
        subject has no item."""
        while True:
            seen = await self.get(token)
            if seen is None or seen.state != "live" or (life is not None and seen.life != life):
                return seen
            now = self._clock()
            when = all_of(eq("state", S("live")), eq("life", N(seen.life)))
            change = Change(set={"state": S("forgetting"), "since": N(now), "began": N(now)})
            if await self._applied(token, change, when):
                return SubjectRecord(
                    token, seen.life, "forgetting", seen.key_id, seen.wrapped, now, now
                )

    async def destroy(self, token: str, life: int) -> bool:
        """Remove the wrapped key of the subject's life ``life`` once it is being
        forgotten (its id and when forgetting began stay, for the receipt), and from
        the item's earlier versions where the table keeps any: True when
        this call removed it, False when it was already gone (a resumed forgetting) or
        another life holds the item."""
        when = all_of(eq("life", N(life)), eq("state", S("forgetting")))
        change = Change(
            set={"state": S("forgotten"), "since": N(self._clock())}, remove=("wrapped",)
        )
        removed = await self._applied(token, change, when)
        await self.table.erase_history(self.key(token))  # a resumed forgetting: again
        return removed

    async def add_thread(
        self, token: str, thread: str, life: int, thread_id: str | None = None
    ) -> None:
        """Name ``thread`` (``keys.encode``'d; ``thread_id`` its own id, when known) as
        one of the subject's in its life ``life`` (0: a plain thread of theirs), so that
        forgetting that life finds it by one Query of the subject's partition, never a
        Scan, and a later life's threads are not its (1 PutItem)."""
        item = {"pk": self.key(token)["pk"], "sk": S(_sk(NamedThread(thread, life)))}
        if thread_id is not None:
            item["id"] = S(thread_id)
        await self.table.put(item)

    async def threads(
        self, token: str, *, upto: int | None = None
    ) -> AsyncIterator[list[NamedThread]]:
        """Pages of the threads named for the subject, of lives up to ``upto`` (all
        when None); 1 Query per 1 MB (a few thousand threads)."""
        async for page in self.table.query(self.key(token)["pk"]["S"]):
            out = [t for t in map(_named, page) if t is not None]
            out = [t for t in out if upto is None or t.life <= upto]
            if out:
                yield out

    async def add_namespace(self, token: str, labels: tuple[str, ...], life: int) -> None:
        """Name the store namespace ``labels`` as one of the subject's in its life
        ``life``: forgetting finds its items by one Query of the subject's partition and
        one listing of the namespace (1 PutItem)."""
        named = NamedNamespace(labels, life)
        item = {
            "pk": self.key(token)["pk"],
            "sk": S(_sk(named)),
            "ns": {"L": [S(x) for x in labels]},
        }
        await self.table.put(item)

    async def namespaces(
        self, token: str, *, upto: int | None = None
    ) -> AsyncIterator[list[NamedNamespace]]:
        """Pages of the store namespaces named for the subject, of lives up to ``upto``
        (all when None); 1 Query per 1 MB."""
        async for page in self.table.query(self.key(token)["pk"]["S"]):
            out = [n for n in map(_named_namespace, page) if n is not None]
            out = [n for n in out if upto is None or n.life <= upto]
            if out:
                yield out

    async def mark_deleted(self, token: str, named: NamedThread | NamedNamespace) -> bool:
        """Mark the named thread (or namespace) deleted by the subject's forgetting: True
        the first time (a receipt counts it once, whatever number of passes and runs
        deleted it), False after, or when it is named no more. 1 conditional UpdateItem."""
        key = {"pk": self.key(token)["pk"], "sk": S(_sk(named))}
        try:
            await self.table.update(
                key,
                Change(set={"deleted": N(1)}),
                when=all_of(Exists("pk"), Absent("deleted")),
            )
        except ConditionFailedError:
            return False
        return True

    async def drop_named(self, token: str, named: NamedThread | NamedNamespace) -> None:
        """Stop naming the thread (or namespace) for the subject (its deletion is done):
        1 DeleteItem."""
        await self.table.delete({"pk": self.key(token)["pk"], "sk": S(_sk(named))})

    async def note_export(self, token: str, life: int, *, sealed: bool) -> None:
        """Count an export of the subject's threads in its life ``life`` (sealed, or
        plaintext): its forgetting's receipt names both. 1 UpdateItem."""
        field = "exports_sealed" if sealed else "exports_plain"
        await self._applied(token, Change(add={field: N(1)}), eq("life", N(life)))

    def life_key(self, token: str, life: int) -> Item:
        """The item of the subject's life ``life`` once its forgetting began."""
        return {"pk": self.key(token)["pk"], "sk": S(f"{LIFE_MARK}{life:010d}")}

    async def open_life(self, record: SubjectRecord) -> None:
        """Keep the life ``record`` is forgetting as an item of its own (when it began,
        its key's id, its exports so far), unless it is kept already: what its receipt
        says survives a new life, and a life without a receipt is found (``owed``).
        1 PutItem."""
        item = {**self.life_key(record.token, record.life), "life": N(record.life)}
        if record.began is not None:
            item["began"] = N(record.began)
        if record.key_id is not None:
            item["kid"] = {"B": record.key_id}
        for kind, n in record.exports.items():
            item[f"exports_{kind}"] = N(n)
        with contextlib.suppress(ConditionFailedError):  # another run kept it first
            await self.table.put(item, when=Absent("sk"))

    async def life_of(self, token: str, life: int) -> LifeRecord | None:
        """The item of the subject's forgotten (or being forgotten) life, strongly
        consistent; None before its forgetting began. 1 GetItem."""
        item = await self.table.get(self.life_key(token, life))
        return None if item is None else _life(token, item)

    async def owed(self, token: str, below: int) -> list[LifeRecord]:
        """The subject's lives below ``below`` whose forgetting began and whose receipt
        was never written (a run stopped after it destroyed the key, and the subject
        came back before it ran again): 1 Query per MB."""
        out: list[LifeRecord] = []
        async for page in self.table.query(self.key(token)["pk"]["S"]):
            for item in page:
                if str(item.get("sk", {}).get("S", "")).startswith(LIFE_MARK):
                    life = _life(token, item)
                    if life.receipt is None and life.life < below:
                        out.append(life)
        return out

    async def claim_receipt(self, token: str, life: int, until: float) -> bool:
        """Take the right to write the receipt of forgetting the life ``life`` until
        ``until``: True unless another run holds it (not run out) or it is written."""
        when = all_of(
            Exists("sk"),
            Absent("receipt"),
            any_of(Absent("receipt_claim"), Compare("receipt_claim", "<", N(self._clock()))),
        )
        return await self._life_applied(token, life, Change(set={"receipt_claim": N(until)}), when)

    async def note_receipt(self, token: str, life: int, seq: int, at: str) -> None:
        """Name the receipt of forgetting the life ``life``: its number in the chain kept
        at ``at`` (a receipts place's URL; "" for the deployment's own)."""
        change = Change(set={"receipt": N(seq), "receipt_at": S(at)})
        await self._life_applied(token, life, change, Exists("sk"))

    async def note_destroyed(self, token: str, life: int, at: float) -> None:
        """When the life's key was destroyed (the first run that saw it destroyed says)."""
        when = all_of(Exists("sk"), Absent("destroyed"))
        await self._life_applied(token, life, Change(set={"destroyed": N(at)}), when)

    async def count_deleted(self, token: str, life: int, counts: dict[str, int]) -> None:
        """Add what a pass of forgetting the life ``life`` deleted to its item (kept for
        the receipt, whatever number of runs the forgetting takes): 1 UpdateItem."""
        add = {f"deleted_{k}": N(v) for k, v in counts.items() if v}
        if add:
            await self._life_applied(token, life, Change(add=add), Exists("sk"))

    async def _life_applied(self, token: str, life: int, change: Change, when: Cond | None) -> bool:
        try:
            await self.table.update(self.life_key(token, life), change, when=when)
        except ConditionFailedError:
            return False
        return True

    async def _applied(self, token: str, change: Change, when: Cond | None) -> bool:
        try:
            await self.table.update(self.key(token), change, when=when)
        except ConditionFailedError:
            return False
        return True


@dataclass(frozen=True)
class LifeRecord:
    """One life of a subject whose forgetting began, as its own item holds it."""

    token: str
    life: int
    key_id: bytes | None
    began: float | None
    destroyed: float | None
    """When its key was destroyed (None: not yet, or not yet seen so)."""
    deleted: dict[str, int]
    """What its forgetting deleted (threads, objects...: ``count_deleted``)."""
    exports: dict[str, int]
    """Exports of its threads made before its forgetting began (``sealed``, ``plain``)."""
    receipt: int | None
    """Its receipt's number, once written (one per life)."""
    receipt_claim: float | None
    """Until when a forgetting run holds the right to write that receipt."""
    receipt_at: str = ""
    """Where that receipt is kept (a receipts place's URL; "": the deployment's own)."""


@dataclass(frozen=True)
class NamedThread:
    """A thread the subject's index names: its (``keys.encode``'d) name, the life it was
    named in (0: a plain one), its own id when known."""

    thread: str
    life: int
    thread_id: str | None = None


@dataclass(frozen=True)
class NamedNamespace:
    """A store namespace the subject's index names, and the life it was named in."""

    labels: tuple[str, ...]
    life: int

    @property
    def digest(self) -> str:
        """What names it in a sort key (labels may be long: a sort key is 1,024 bytes)."""
        raw = "\0".join(self.labels).encode("utf-8", "surrogatepass")
        return hashlib.sha256(b"%d\0" % len(self.labels) + raw).hexdigest()[:32]


def _sk(named: NamedThread | NamedNamespace) -> str:
    if isinstance(named, NamedThread):
        return f"{THREAD_MARK}{named.life:010d}/{named.thread}"
    return f"{NAMESPACE_MARK}{named.life:010d}/{named.digest}"


def _named_namespace(item: Item) -> NamedNamespace | None:
    sk = str(item.get("sk", {}).get("S", ""))
    labels = item.get("ns", {}).get("L")
    if not sk.startswith(NAMESPACE_MARK) or not isinstance(labels, list):
        return None
    life = sk[len(NAMESPACE_MARK) :].partition("/")[0]
    if not life.isdigit() or not all(isinstance(x, dict) and "S" in x for x in labels):
        return None
    return NamedNamespace(tuple(str(x["S"]) for x in labels), int(life))


def _named(item: Item) -> NamedThread | None:
    sk = str(item.get("sk", {}).get("S", ""))
    if not sk.startswith(THREAD_MARK):
        return None
    life, _, thread = sk[len(THREAD_MARK) :].partition("/")
    if not life.isdigit() or not thread:
        return None
    return NamedThread(thread, int(life), item.get("id", {}).get("S"))


def _counts(item: Item, prefix: str) -> dict[str, int]:
    return {k[len(prefix) :]: int(float(v["N"])) for k, v in item.items() if k.startswith(prefix)}


def _life(token: str, item: Item) -> LifeRecord:
    def number(name: str) -> float | None:
        return float(item[name]["N"]) if name in item else None

    kid = item.get("kid", {}).get("B")
    return LifeRecord(
        token,
        int(str(item["sk"]["S"])[len(LIFE_MARK) :]),
        bytes(kid) if kid is not None else None,
        number("began"),
        number("destroyed"),
        {
            k[len("deleted_") :]: int(float(v["N"]))
            for k, v in item.items()
            if k.startswith("deleted_")
        },
        {
            k[len("exports_") :]: int(float(v["N"]))
            for k, v in item.items()
            if k.startswith("exports_")
        },
        int(float(item["receipt"]["N"])) if "receipt" in item else None,
        number("receipt_claim"),
        str(item.get("receipt_at", {}).get("S", "")),
    )


def _record(token: str, item: Item) -> SubjectRecord:
    state = item.get("state", {}).get("S", "forgetting")
    if state not in ("live", "forgetting", "forgotten"):
        state = "forgetting"  # a state a newer release wrote: seal nothing for it
    kid, wrapped = item.get("kid", {}).get("B"), item.get("wrapped", {}).get("B")
    return SubjectRecord(
        token,
        int(item.get("life", {}).get("N", "1")),
        state,
        bytes(kid) if kid is not None else None,
        bytes(wrapped) if wrapped is not None else None,
        float(item.get("since", {}).get("N", "0")),
        float(item["began"]["N"]) if "began" in item else None,
        {
            kind: int(float(item[f"exports_{kind}"]["N"]))
            for kind in ("sealed", "plain")
            if f"exports_{kind}" in item
        },
    )
