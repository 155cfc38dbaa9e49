"""A seeded world of subjects: writers for alice and bob (of threads, and of store items
in their namespaces, which a segment folds together), maintenance, and a forgetter of
alice, each a process with its own saver (subjects declared, one key vault) on one
bucket and one table, every request released one at a time by the seed's scheduler,
with its faults, crashes and clock skew (``loop.py``).

Checked after every operation, as the bucket and the table hold it then:

* **sealed everywhere**: every object and item of a subject's thread holds its content
  sealed (a body, a held copy, the metadata), never plain, as does every store item of
  a subject's namespace and every segment;
* **the bound**: no turn or store put of alice's that began after her forgetting began
  plus the deployment's bound is acknowledged while her key lives (a writer refuses
  with SubjectForgottenError, a typed error, not a plaintext write);

and once the actors are done and a fault-free forgetting has run to its end:

* nothing of alice's is read (threads, items), and her words are in no byte the bucket
  or table holds;
* every turn of bob's that was acknowledged is in his thread's history (but where a
  prune removed history, as it is asked to), and his last acknowledged item is read;
* one receipt per life of alice's that was forgotten, in a chain that holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.store.base import PutOp

from langgraph_s3.checkpoint.saver import AsyncS3Saver
from langgraph_s3.core import codec, sealing
from langgraph_s3.core.keys import ERASURE_MARKER, Layout
from langgraph_s3.core.subject_policy import SubjectPolicy
from langgraph_s3.errors import S3PersistenceError
from langgraph_s3.runtime.sealed_table import held_attribute
from langgraph_s3.store.items import ItemStore
from langgraph_s3.store.seals import ItemSeals
from langgraph_s3.store.segments import Segments
from langgraph_s3.testing.fakes import MemoryBucket, MemoryTable
from langgraph_s3.testing.graphs import chat_graph, norm
from langgraph_s3.testing.memory_vault import MemoryKeyVault

from .bucket_table import BucketTable, manifest_format
from .checks import BUCKET, DEPLOYMENT, TABLE
from .loop import Crash, Process, Profile, Scheduler, SimDeadlock, SimLoop, VirtualClock
from .ports import SimObjectStore, sim_manifest
from .shims import PROCESS, Deterministic

BOUND = 20.0
"""The deployment's bound (``subject_key_seconds``): short, so forgetting ends in a run."""
MAX_STEPS = 5000
THREADS = {"a1": "alice", "a2": "alice", "b1": "bob"}
ITEMS = ("m0", "m1")
"""The keys of each user's items, in ``("users", user, "m")``."""


def words(user: str, n: int, proc: str) -> str:
    return f"{user}-says-{proc}-{n}-zq"


@dataclass
class Turn:
    user: str
    thread: str
    text: str
    began: float
    acked: float | None = None
    error: str = ""


@dataclass
class ForgetResult:
    seed: int
    shape: str
    findings: list[str] = field(default_factory=list)
    turns: int = 0
    refused: int = 0
    forgotten: bool = False


class ForgetWorld:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        rng = random.Random(f"{seed}/forget-world")
        profile = Profile()
        mood = rng.random()
        if mood < 0.4:
            self.mood = "calm"
        elif mood < 0.7:
            self.mood, profile.fault_rate = "faults", 0.04
        else:
            self.mood, profile.fault_rate, profile.crash_rate = "crashes", 0.01, 0.01
        self.skew = rng.choice((0.0, 0.0, -3.0, 3.0))
        self.forget_at = rng.uniform(0.0, 3.0)
        self.maintenance = rng.choice(("prune", "pack", "copy", ""))
        upkeep = self.maintenance or "no upkeep"
        # a third of the worlds keep the manifest (and the subjects' keys) in the bucket,
        # drawn apart: the other draws of a seed are those it always had
        kept = random.Random(f"{seed}/manifest").random() < 1 / 3
        self.manifest_kind = "s3" if kept else "dynamodb"
        self.shape = (
            f"{self.mood}, manifest={self.manifest_kind}, skew={self.skew}, "
            f"forget at {self.forget_at:.1f}s, {upkeep}"
        )
        self.clock = VirtualClock()
        self.sim = Scheduler(seed, self.clock, profile, MAX_STEPS)
        self.bucket = MemoryBucket(BUCKET, clock=self.clock.time)
        self.table: Any = MemoryTable(TABLE, clock=self.clock.time)
        if self.manifest_kind == "s3":
            manifest_format(self.bucket)
            self.table = BucketTable(self.bucket)
        self.vault = MemoryKeyVault()
        self.turns: list[Turn] = []
        self.result = ForgetResult(seed, self.shape)
        self.began: float | None = None
        self.destroyed: float | None = None

    # ------------------------------------------------------------------ running
    def run(self) -> ForgetResult:
        loop = SimLoop(self.clock, self.sim.idle)
        with Deterministic(self.clock, self.seed):
            try:
                loop.run_until_complete(self._main())
            except SimDeadlock as exc:
                self._find(f"deadlock: {exc}")
            finally:
                for proc in list(self.sim.processes):
                    self.sim.kill(proc)
                tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
                for t in tasks:
                    t.cancel()
                with contextlib.suppress(BaseException):
                    if tasks:
                        loop.run_until_complete(asyncio.wait(tasks))
                    loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()
        if self.sim.exhausted:
            self._find(f"livelock: {MAX_STEPS} steps")
        self.result.turns = len([t for t in self.turns if t.acked is not None])
        self.result.refused = len([t for t in self.turns if "SubjectForgotten" in t.error])
        return self.result

    def _find(self, text: str) -> None:
        self.result.findings.append(text)

    def _saver(self, proc: Process, *, faults: bool = True) -> AsyncS3Saver:
        store = SimObjectStore(self.bucket, self.sim, proc)
        manifest = sim_manifest(self.table, self.sim, proc, deployment=DEPLOYMENT, ttl_seconds=None)
        saver = AsyncS3Saver(
            bucket=BUCKET,
            object_store=store,
            manifest=manifest,
            **({} if self.manifest_kind == "s3" else {"table": TABLE}),
            subjects="user_id",
            subject_label=1,
            kms_key=self.vault,
            subject_key_seconds=BOUND,
        )
        store.stats = manifest.stats = saver.stats
        proc.saver = saver
        proc.items = self._items(saver)
        return saver

    def _items(self, saver: AsyncS3Saver) -> ItemStore:
        """The process's store items, over its saver's objects and subjects (a store of
        the same deployment: one bucket, one table, one policy)."""
        seals = saver._w.seals
        assert seals is not None
        policy = SubjectPolicy(namespace_label=1)
        layout = Layout("")
        return ItemStore(
            saver.raw_objects,
            layout,
            max_conflicts=4,
            seals=ItemSeals(seals.subjects, policy, layout),
        )

    def _spawn(self, name: str, skew: float = 0.0) -> Process:
        proc = self.sim.spawn(name, name.split("#")[0], skew=skew)
        self._saver(proc)
        PROCESS.set(proc)
        return proc

    async def _main(self) -> None:
        actors = [
            self._writer("wa", ("a1", "a2"), 4),
            self._writer("wb", ("b1",), 4),
            self._writer("wx", tuple(THREADS), 4, skew=self.skew),
            self._item_writer("ws", 5),
            self._forgetter(),
        ]
        if self.maintenance:
            actors.append(self._upkeep())
        tasks = [asyncio.create_task(a) for a in actors]
        await asyncio.wait(tasks)
        for t in tasks:
            if t.exception() is not None:
                self._find(f"harness: {t.exception()!r}")
        self.sim.frozen += 1
        try:
            self._sealed_everywhere("end")
        finally:
            self.sim.frozen -= 1
        await self._finish()

    async def _writer(
        self, name: str, threads: tuple[str, ...], turns: int, skew: float = 0.0
    ) -> None:
        rng = random.Random(f"{self.seed}/{name}")
        lives = 0
        proc = self._spawn(name, skew)
        for n in range(turns):
            await asyncio.sleep(rng.uniform(0.0, 1.5))
            if proc.dead:
                lives += 1
                proc = self._spawn(f"{name}#{lives}", skew)
            thread = rng.choice(threads)
            user = THREADS[thread]
            turn = Turn(user, thread, words(user, n, proc.name), self.clock.time())
            self.turns.append(turn)
            graph = chat_graph().compile(checkpointer=proc.saver)
            config = {"configurable": {"thread_id": thread, "user_id": user}}
            try:
                await graph.ainvoke({"messages": [HumanMessage(turn.text)]}, config)
                if not proc.dead:
                    turn.acked = self.clock.time()
            except Crash:
                turn.error = "crash"
            except Exception as exc:  # faults, conflicts, and alice refused
                turn.error = f"{type(exc).__name__}: {exc}"[:200]
            self._after_op(f"{name} turn {n} on {thread}")

    async def _item_writer(self, name: str, puts: int) -> None:
        """Puts of alice's and bob's items, and now and then a segment of ``("users",)``
        folding both (each entry sealed as stored)."""
        rng = random.Random(f"{self.seed}/{name}")
        proc = self._spawn(name)
        for n in range(puts):
            await asyncio.sleep(rng.uniform(0.0, 1.5))
            if proc.dead:
                proc = self._spawn(f"{name}#{n}")
            user, key = rng.choice(("alice", "bob")), rng.choice(ITEMS)
            turn = Turn(user, f"item {key}", words(user, n, proc.name), self.clock.time())
            self.turns.append(turn)
            op = PutOp(("users", user, "m"), key, {"text": turn.text})
            try:
                await proc.items.put(op, {})
                if not proc.dead:
                    turn.acked = self.clock.time()
                if rng.random() < 0.4:
                    segments = Segments(proc.items.objects, proc.items.layout, proc.items,
                                        compact_after=16)  # fmt: skip
                    await segments.compact(("users",))
            except Crash:
                turn.error = "crash"
            except Exception as exc:  # faults, conflicts, and alice refused
                turn.error = f"{type(exc).__name__}: {exc}"[:200]
            self._after_op(f"{name} put {n} of {user}'s {key}")

    async def _forgetter(self) -> None:
        await asyncio.sleep(self.forget_at)
        proc = self._spawn("f")
        for attempt in range(4):  # a crash or a fault: run again, as an operator would
            if proc.dead:
                proc = self._spawn(f"f#{attempt}")
            try:
                receipt = await proc.saver.aforget("alice")
                if receipt["state"] == "forgotten":
                    self.result.forgotten = True
                    break
            except (Crash, S3PersistenceError):
                pass
            self._after_op("forget")
        self._after_op("forget")

    async def _upkeep(self) -> None:
        rng = random.Random(f"{self.seed}/upkeep")
        proc = self._spawn("m")
        for n in range(3):
            await asyncio.sleep(rng.uniform(0.2, 1.5))
            if proc.dead:
                proc = self._spawn(f"m#{n}")
            thread = rng.choice(tuple(THREADS))
            saver = proc.saver
            with contextlib.suppress(Crash, S3PersistenceError):
                if self.maintenance == "prune":
                    await saver.aprune([thread], keep_last=1)
                elif self.maintenance == "pack":
                    await saver.apack([thread])
                else:
                    await saver.acopy_thread(thread, f"{thread}-copy{n}")
            self._after_op(f"{self.maintenance} {thread}")

    # ------------------------------------------------------------------ checks
    def _after_op(self, what: str) -> None:
        self.sim.frozen += 1
        try:
            self._note_forgetting()
            self._sealed_everywhere(what)
            self._bound(what)
        finally:
            self.sim.frozen -= 1

    def _subject_items(self) -> list[dict[str, Any]]:
        return [
            i
            for (pk, sk), i in self.table.items.items()
            if "~subjects/" in pk and sk == "~" and "life" in i
        ]

    def _note_forgetting(self) -> None:
        for item in self._subject_items():
            if "began" in item and item.get("life", {}).get("N") == "1":
                self.began = float(item["began"]["N"])
            if item.get("state", {}).get("S") == "forgotten" and self.destroyed is None:
                self.destroyed = self.clock.time()

    def _sealed_everywhere(self, what: str) -> None:
        for key, obj in self.bucket.objects.items():
            if key.startswith("store/"):
                plain = [w for w in self._all_words() if w.encode() in obj.body]
                if plain or (key.startswith("store/i/") and not sealing.is_named(obj.body)):
                    self._find(f"{what}: a plain store object {key}")
                continue
            if not key.startswith("threads/") and not key.startswith("packs/"):
                continue
            body = obj.body
            if key.startswith("packs/"):
                if any(w.encode() in body for w in self._all_words()):
                    self._find(f"{what}: plaintext in pack {key}")
                continue
            if len(body) == 0 or body == ERASURE_MARKER or sealing.is_sealed(body):
                continue
            self._find(f"{what}: a plain body in a subject's thread: {key}")
        for (pk, sk), item in self.table.items.items():
            thread = pk[len(DEPLOYMENT) :]
            if not pk.startswith(DEPLOYMENT) or "/" in thread or thread.startswith("~"):
                continue
            for name, value in item.items():
                if not held_attribute(name):
                    continue
                raw = value.get("B") or value.get("M", {}).get("b", {}).get("B")
                if (name == "md" and "S" in value) or (
                    raw is not None and not sealing.is_sealed(raw)
                ):
                    self._find(f"{what}: a plain {name} in item {thread}/{sk}")

    def _all_words(self) -> list[str]:
        return [t.text for t in self.turns]

    def _bound(self, what: str) -> None:
        if self.began is None:
            return
        end = self.destroyed if self.destroyed is not None else float("inf")
        for t in self.turns:
            if t.user != "alice" or t.acked is None:
                continue
            if self.began + BOUND + 1.0 < t.began and t.acked < end:
                self._find(
                    f"{what}: alice's turn begun at {t.began:.1f} was acknowledged at "
                    f"{t.acked:.1f}, after her forgetting began at {self.began:.1f} + {BOUND}"
                )

    async def _finish(self) -> None:
        """A fault-free forgetting to its end (every life), then the final checks."""
        proc = self.sim.spawn("final", "final", faults=False)
        saver = self._saver(proc, faults=False)
        PROCESS.set(proc)
        for _ in range(3):  # alice may have come back (a new life) after a forgetting
            try:
                receipt = await saver.aforget("alice")
            except S3PersistenceError as exc:
                self._find(f"the final forgetting failed: {exc!r}")
                return
            if receipt["state"] != "forgotten":
                self._find(f"the final forgetting did not end: {receipt}")
                return
            record = next((i for i in self._subject_items()), None)
            if record is None or record.get("state", {}).get("S") == "forgotten":
                break
        if True:  # the actors are done: the final process alone sends requests
            for thread, user in THREADS.items():
                if user == "alice":
                    for t in (thread, f"{thread}-copy0", f"{thread}-copy1", f"{thread}-copy2"):
                        if await saver.aget_tuple({"configurable": {"thread_id": t}}) is not None:
                            self._find(f"alice's {t} is read after she was forgotten")
            await self._items_after(proc.items)
            alices = [t.text.encode() for t in self.turns if t.user == "alice"]
            for key, obj in self.bucket.objects.items():
                body = obj.body
                plain = b"" if sealing.is_sealed(body) else _inflated(body)
                if any(w in body or w in plain for w in alices):
                    self._find(f"alice's words in {key}")
            if any(w.decode() in repr(i) for i in self.table.items.values() for w in alices):
                self._find("alice's words in an item")
            history = [t async for t in saver.alist({"configurable": {"thread_id": "b1"}})]
            said = repr([norm(t.checkpoint["channel_values"]) for t in history])  # forks too
            for t in self.turns:  # (a prune removes history by design: not checked there)
                if self.maintenance == "prune":
                    break
                if t.thread.startswith("item "):
                    continue  # a store put: checked by _items_after
                if t.user == "bob" and t.acked is not None and t.text not in said:
                    self._find(f"bob's acknowledged turn {t.text!r} is lost")
            broken = await saver.receipts().verify()
            if broken is not None:
                self._find(f"the receipts' chain breaks: {broken}")

    async def _items_after(self, items: ItemStore) -> None:
        """Alice's items read as absent; bob's last acknowledged put of each key read (a
        put that was not acknowledged may have landed after it)."""
        for key in ITEMS:
            if await items.get(items.layout.store_item(("users", "alice", "m"), key)):
                self._find(f"alice's item {key} is read after she was forgotten")
            puts = [t for t in self.turns if t.user == "bob" and t.thread == f"item {key}"]
            acked = [t for t in puts if t.acked is not None]
            if not acked:
                continue
            got = await items.get(items.layout.store_item(("users", "bob", "m"), key))
            after = [t.text for t in puts if t.began >= acked[-1].began]  # it, or a later try
            if got is None or got.item.value.get("text") not in after:
                self._find(f"bob's item {key} reads {got and got.item.value}, not {after}")


def _inflated(body: bytes) -> bytes:
    try:
        return codec.plain(body)
    except Exception:
        return body


def run_forget_seed(seed: int) -> ForgetResult:
    return ForgetWorld(seed).run()
