"""An import is all or nothing per thread, and every failure is ours and says what to do.

Exports of real graphs (a nested graph resumed to its end, an 11-checkpoint chat with
a tool call, a one-turn chat) are damaged the ways files get damaged (a cut, a plain
file named ``.gz``, a wrong type, an undecodable value, a lost line) and imported
into the S3 saver on moto: the damaged thread leaves no trace (no manifest item, no
object, no listing), the threads before it stay whole, and once the file is repaired
the thread imports without ``replace``. A failure in the middle of writing a thread
(a 503 from a fault proxy) removes what was written of it."""

from __future__ import annotations

import base64
import gzip
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from faults import FaultPlan, fault_proxy
from helpers import cfg, chat, clocked, dump, keys_of, nest, run, url_of
from langgraph_s3 import AsyncS3Saver, CorruptObjectError, S3PersistenceError
from langgraph_s3.checkpoint.transfer import aexport_threads, aimport_threads
from langgraph_s3.core.staging import STAGE_LEASE_SECONDS
from langgraph_s3.errors import CorruptExportError, ThreadExistsError
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.graphs import CHAT_TURNS, chat_graph, nested_graph

UNDECODABLE = base64.b64encode(b"\xc1").decode()  # a msgpack byte that is no value
FAST = {"max_attempts": 1, "connect_timeout": 1, "read_timeout": 2, "request_timeout": 3}


async def source() -> InMemorySaver:
    """ "before" (a nested graph: three namespaces), "long" (11 checkpoints: a chat
    with a tool call) and "after" (one turn)."""
    memory = InMemorySaver()
    await nest(memory, "before")
    await chat(memory, "long", *CHAT_TURNS[:3])
    await chat(memory, "after", CHAT_TURNS[0])
    return memory


async def exported(memory: InMemorySaver, threads: list[str]) -> bytes:
    buf = io.BytesIO()
    await aexport_threads(memory, threads, buf)
    return buf.getvalue()


def records(data: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in data.splitlines()]


def rows(data: bytes, kind: str, thread: str = "long") -> list[int]:
    """Indexes of the lines of that kind of that thread."""
    return [
        i
        for i, r in enumerate(records(data))
        if r.get("kind") == kind and r.get("thread_id") == thread
    ]


def edited(data: bytes, i: int, change: Callable[[dict[str, Any]], object]) -> bytes:
    lines = data.splitlines(keepends=True)
    record = orjson.loads(lines[i])
    change(record)
    lines[i] = orjson.dumps(record) + b"\n"
    return b"".join(lines)


def replaced(data: bytes, i: int, line: bytes | None) -> bytes:
    lines = data.splitlines(keepends=True)
    lines[i : i + 1] = [] if line is None else [line]
    return b"".join(lines)


async def absent(target: AsyncS3Saver, thread: str, *, untouched: bool = True) -> None:
    """Nothing of ``thread`` in the target: no listing, no live manifest entry (no item
    at all when ``untouched``: never written), no object, not among the threads."""
    assert [t async for t in target.alist(cfg(thread, ns=None))] == []
    assert await target.manifest.reads.latest(thread, "") is None
    if untouched:
        assert await target.manifest.reads.read(thread, "") is None
    assert await keys_of(target, thread) == []
    assert thread not in {t.thread_id async for t in target.alist_threads()}


async def same(target: AsyncS3Saver, memory: InMemorySaver, *threads: str) -> None:
    for thread in threads:
        assert await dump(target, thread) == await dump(memory, thread), thread


# ------------------------------------------------------ the finding, end to end
async def test_an_undecodable_value_in_the_3rd_of_11_checkpoints_writes_nothing_of_its_thread(
    s3_saver: AsyncS3Saver, tmp_path: Path
) -> None:
    memory = await source()
    whole = await exported(memory, ["before", "long", "after"])
    checkpoints = rows(whole, "checkpoint")
    assert len(checkpoints) == 11
    third = checkpoints[2]
    cid = records(whole)[third]["checkpoint_id"]
    file = tmp_path / "threads.jsonl"
    file.write_bytes(edited(whole, third, lambda r: r["checkpoint"].update(data=UNDECODABLE)))

    with pytest.raises(CorruptExportError) as info:
        await s3_saver.aimport(file)
    message = str(info.value)
    for part in (str(file), f"line {third + 1}", "thread 'long'", cid, "cannot be decoded"):
        assert part in message, (part, message)
    assert "imported before it: 'before'" in message and "bucket version" not in message
    assert info.value.imported == ("before",)
    await same(s3_saver, memory, "before")
    await absent(s3_saver, "long")
    await absent(s3_saver, "after")

    # the repaired file: "before" is there, so it is refused (before writing anything)
    file.write_bytes(whole)
    with pytest.raises(ThreadExistsError, match=r"'before'.*replace=True") as refused:
        await s3_saver.aimport(file)
    assert refused.value.imported == ()
    await absent(s3_saver, "long")
    # the threads not imported, without replace: nothing of "long" was left to refuse it
    back = await s3_saver.aimport(io.BytesIO(await exported(memory, ["long", "after"])))
    assert (back.threads, back.checkpoints) == (2, 11 + len(rows(whole, "checkpoint", "after")))
    await same(s3_saver, memory, "before", "long", "after")

    # with replace, the damaged thread is found before its copy in the target is deleted
    file.write_bytes(edited(whole, third, lambda r: r["checkpoint"].update(data=UNDECODABLE)))
    with pytest.raises(CorruptExportError, match="cannot be decoded") as info:
        await s3_saver.aimport(file, replace=True)
    assert info.value.imported == ("before",)
    await same(s3_saver, memory, "before", "long", "after")


# ---------------------------------------------------- damaged records, one by one
@dataclass(frozen=True)
class Damage:
    name: str
    damage: Callable[[bytes], tuple[bytes, int | None]]
    """The damaged file, and the index of the damaged line (None: no one line)."""
    says: str


def _first(kind: str, n: int = 0) -> Callable[[bytes], int]:
    return lambda data: rows(data, kind)[n]


def _edit(at: Callable[[bytes], int], change: Callable[[dict[str, Any]], object]) -> Any:
    return lambda data: (edited(data, at(data), change), at(data))


def _line(at: Callable[[bytes], int], line: Callable[[bytes], bytes | None]) -> Any:
    def damage(data: bytes) -> tuple[bytes, int | None]:
        i = at(data)
        return replaced(data, i, line(data.splitlines(keepends=True)[i])), i

    return damage


def _lost_write(data: bytes) -> tuple[bytes, int | None]:
    return replaced(data, rows(data, "write")[-1], None), None


DAMAGES = [
    Damage("an index that is a word", _edit(_first("write"), lambda r: r.update(index="zero")),
           "'index' is 'zero', not an integer"),
    Damage("a count that is a bool", _edit(_first("thread"), lambda r: r.update(checkpoints=True)),
           "'checkpoints' is True, not an integer"),
    Damage("a missing field", _edit(_first("checkpoint", 1), lambda r: r.pop("metadata")),
           "the field 'metadata' is missing"),
    Damage("a line that is no object", _line(_first("write", 2), lambda _: b"[1, 2]\n"),
           "a JSON list, not an object"),
    Damage("a line that is not UTF-8",
           _line(_first("write", 1), lambda raw: raw.replace(b'"channel":"', b'"channel":"\xff')),
           "not UTF-8"),
    Damage("a line that is not JSON", _line(_first("checkpoint", 4), lambda raw: raw[:40] + b"\n"),
           "not JSON"),
    Damage("a value that is not base64",
           _edit(_first("checkpoint", 5), lambda r: r["metadata"].update(data="!!!")),
           "is not base64"),
    Damage("a value of a serializer the target lacks",
           _edit(_first("write", 3), lambda r: r["value"].update(type="pickle")),
           "cannot be decoded by the target's serializer"),
    Damage("an undecodable value in the last record",
           _edit(_first("checkpoint", 10), lambda r: r["metadata"].update(data=UNDECODABLE)),
           "cannot be decoded"),
    Damage("a record of another thread",
           _edit(_first("write", 4), lambda r: r.update(thread_id="before")),
           "a write record of thread 'before' among this thread's records"),
    Damage("a lost write", _lost_write, r"has 11 checkpoints and \d+ writes, its thread record"),
]  # fmt: skip


@pytest.mark.parametrize("case", DAMAGES, ids=[d.name for d in DAMAGES])
async def test_a_damaged_record_stops_the_import_before_its_thread_is_written(
    s3_saver: AsyncS3Saver, tmp_path: Path, case: Damage
) -> None:
    memory = await source()
    damaged, at = case.damage(await exported(memory, ["before", "long"]))
    file = tmp_path / "threads.jsonl"
    file.write_bytes(damaged)
    with pytest.raises(CorruptExportError, match=case.says) as info:
        await s3_saver.aimport(file)
    message = str(info.value)
    assert message.startswith(f"{file}: ") and "\n" not in message
    if at is not None:
        assert f"line {at + 1}" in message and "'long'" in message, message
    assert info.value.imported == ("before",), message
    assert "imported before it: 'before'" in message
    await same(s3_saver, memory, "before")
    await absent(s3_saver, "long")
    back = await s3_saver.aimport(io.BytesIO(await exported(memory, ["long"])))
    assert (back.threads, back.checkpoints) == (1, 11)
    await same(s3_saver, memory, "before", "long")


# ---------------------------------------------------------- damaged files as a whole
def _gzip_cut_in_long(data: bytes) -> bytes:
    """gzip flushed after "before"'s records, then cut halfway through the rest: the
    reader gets "before" whole and a part of "long"."""
    start = sum(len(line) for line in data.splitlines(keepends=True)[: rows(data, "thread")[0]])
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb") as gz:
        gz.write(data[:start])
        gz.flush()
        mark = buf.tell()
        gz.write(data[start:])
    packed = buf.getvalue()
    return packed[: mark + (len(packed) - mark) // 2]


def _lost_thread(data: bytes) -> bytes:
    lines = data.splitlines(keepends=True)
    return b"".join(lines[: rows(data, "thread")[0]] + lines[-1:])


def _plain_cut_in_long(data: bytes) -> bytes:
    return data[: sum(len(line) for line in data.splitlines(keepends=True)[:-6]) - 25]


FILES = [
    # (name, file name, the damaged bytes, what the error says, threads imported)
    ("version true", "x.jsonl", lambda d: edited(d, 0, lambda r: r.update(version=True)),
     "the header's \"version\" is True, not an integer", ()),
    ("version zero", "x.jsonl", lambda d: edited(d, 0, lambda r: r.update(version=0)),
     "version 0 is no version", ()),
    ("a plain file named .gz", "x.jsonl.gz", lambda d: d,
     "not gzip-compressed .* rename it without .gz", ()),
    ("gzip named plain", "x.jsonl", gzip.compress, "it is gzip-compressed: name it .gz", ()),
    ("a cut .jsonl.gz", "x.jsonl.gz", _gzip_cut_in_long,
     "cut off inside its gzip data .*export or copy it again whole", ("before",)),
    ("a cut .jsonl", "x.jsonl", _plain_cut_in_long,
     "cut off in its last line .*export or copy it again whole", ("before",)),
    ("a missing end", "x.jsonl", lambda d: b"".join(d.splitlines(keepends=True)[:-1]),
     "ends after line .* inside thread 'long' without its end record", ("before",)),
    ("an empty file", "x.jsonl", lambda d: b"", "the file is empty", ()),
    ("a lost thread (the last one waits for the end record's counts)", "x.jsonl",
     _lost_thread,
     "the end record counts 2 threads, .* the file holds 1", ()),
]  # fmt: skip


@pytest.mark.parametrize(
    ("what", "name", "damage", "says", "done"), FILES, ids=[f[0] for f in FILES]
)
async def test_a_damaged_file_is_named_and_its_threads_whole_or_absent(
    s3_saver: AsyncS3Saver,
    tmp_path: Path,
    what: str,
    name: str,
    damage: Callable[[bytes], bytes],
    says: str,
    done: tuple[str, ...],
) -> None:
    memory = await source()
    whole = await exported(memory, ["before", "long"])
    file = tmp_path / name
    file.write_bytes(damage(whole))
    with pytest.raises(CorruptExportError, match=says) as info:
        await s3_saver.aimport(file)
    message = str(info.value)
    assert message.startswith(f"{file}: ") and "bucket version" not in message
    assert info.value.imported == done
    assert ("nothing of the file was imported" in message) == (not done)
    for thread in ("before", "long"):
        if thread in done:
            await same(s3_saver, memory, thread)
        else:
            await absent(s3_saver, thread)
    # repaired (the whole file, as it is named), the rest imports without replace
    repaired = tmp_path / ("fixed" + "".join(Path(name).suffixes))
    rest = whole if not done else await exported(memory, ["long"])
    repaired.write_bytes(gzip.compress(rest) if name.endswith(".gz") else rest)
    back = await s3_saver.aimport(repaired)
    assert back.threads == 2 - len(done)
    await same(s3_saver, memory, "before", "long")


# ------------------------------------------------------ an AWS error mid-thread
@dataclass
class FailAt(FaultPlan):
    """A 503 for requests ``at`` to ``until`` (1-based, counted since ``seen`` was reset)."""

    at: int = 0
    until: int = 0

    def pick(self, method: str, target: str) -> str | None:
        self.seen += 1
        if self.at and self.at <= self.seen <= self.until:
            self.injected["503"] += 1
            return "503"
        return None


async def _requests(url: str, plan: FailAt, memory: InMemorySaver) -> tuple[int, int]:
    """How many requests a fresh saver makes to import "before", then "long"."""
    async with AsyncS3Saver(endpoint_url=url, **FAST, **unique_names()) as probe:
        await probe.setup()
        counts = []
        for thread in ("before", "long"):
            plan.seen = 0
            await probe.aimport(io.BytesIO(await exported(memory, [thread])))
            counts.append(plan.seen)
    return counts[0], counts[1]


@pytest.mark.parametrize("removal_fails", [False, True], ids=["removed", "removal-fails"])
async def test_an_aws_error_while_writing_a_thread_leaves_nothing_of_it(
    s3_fresh: MotoServer, removal_fails: bool
) -> None:
    memory = await source()
    both = await exported(memory, ["before", "long"])
    plan = FailAt(every=10**9)
    with fault_proxy(s3_fresh.url, plan) as url:
        before, long = await _requests(url, plan, memory)
        assert long > 20  # 11 puts and their writes: the 503 falls among them
        async with AsyncS3Saver(endpoint_url=url, **FAST, **unique_names()) as target:
            await target.setup()
            plan.seen, plan.at = 0, before + long // 2
            plan.until = 10**9 if removal_fails else plan.at
            with pytest.raises(S3PersistenceError) as info:
                await target.aimport(io.BytesIO(both))
            assert plan.injected["503"] >= 1
            notes = " | ".join(getattr(info.value, "__notes__", ()))
            assert "imported before this failure: 'before'" in notes
            plan.at = 0  # the endpoint is back
            await same(target, memory, "before")
            assert "nothing of thread 'long' was published" in notes
            assert [t async for t in target.alist(cfg("long", ns=None))] == []
            if removal_fails:  # what it wrote is there, unseen, until its hold runs out
                assert "removing what was written failed too" in notes
                assert await keys_of(target, "long") != []
                clocked(target).now += STAGE_LEASE_SECONDS + 1  # (an import waits for it)
            else:
                await absent(target, "long", untouched=False)
            await target.aimport(io.BytesIO(await exported(memory, ["long"])))
            await same(target, memory, "before", "long")


# ------------------------------------------------------------------ the command line
async def test_the_cli_says_in_one_line_what_failed_and_what_was_imported(
    s3_fresh: MotoServer, tmp_path: Path
) -> None:
    memory = await source()
    whole = await exported(memory, ["before", "long"])
    names = unique_names()
    url = url_of(names)
    async with AsyncS3Saver(endpoint_url=s3_fresh.url, **names) as target:
        await target.setup()

        def failed(*args: str) -> str:
            proc = run(s3_fresh, url, "import", *args)
            err = proc.stderr.decode()
            assert proc.returncode == 1, (proc.returncode, err)
            assert err.startswith("error: ") and err.count("\n") == 1, err
            assert "Traceback" not in err and proc.stdout == b""
            assert "replace=True" not in err and "bucket version" not in err
            return err

        cut = tmp_path / "cut.jsonl"
        cut.write_bytes(_plain_cut_in_long(whole))
        err = failed(str(cut))
        assert "cut off" in err and "export or copy it again whole" in err
        assert "imported before it: 'before'" in err and "--replace" in err
        await same(target, memory, "before")
        await absent(target, "long")

        third = rows(whole, "checkpoint")[2]
        damaged = tmp_path / "damaged.jsonl"
        damaged.write_bytes(
            edited(whole, third, lambda r: r["checkpoint"].update(data=UNDECODABLE))
        )
        err = failed(str(damaged))  # "before" is there now: refused, and said so
        assert "thread 'before' already has checkpoints" in err and "--replace" in err
        assert "nothing of the file was imported" in err
        err = failed(str(damaged), "--replace")
        assert f"line {third + 1} (thread 'long'" in err and "cannot be decoded" in err
        assert "imported before it: 'before'" in err
        await same(target, memory, "before")  # replaced by its own copy
        await absent(target, "long")

        fixed = tmp_path / "fixed.jsonl"
        fixed.write_bytes(whole)
        proc = run(s3_fresh, url, "import", str(fixed), "--replace")
        assert proc.returncode == 0 and b"imported: 2 thread(s)" in proc.stdout, proc.stderr
        await same(target, memory, "before", "long")

    # a deployment that is not there: its own exit code, before anything is read, on
    # one line that names it and what to run
    proc = run(s3_fresh, url_of(unique_names()), "import", str(fixed))
    err = proc.stderr.decode()
    assert proc.returncode == 4 and err.count("\n") == 1, err
    assert "does not exist" in err and "langgraph-s3 setup" in err


# Garbage exports: a duplicated line, reordered write records.


async def exported_chat() -> list[bytes]:
    src = InMemorySaver()
    g = chat_graph().compile(checkpointer=src)
    for text in CHAT_TURNS[:2]:
        await g.ainvoke({"messages": [("user", text)]}, cfg("t"))
    buf = io.BytesIO()
    await aexport_threads(src, ["t"], buf)
    return buf.getvalue().splitlines(keepends=True)


async def test_a_duplicated_line_imports_nothing_of_its_thread() -> None:
    lines = await exported_chat()
    kinds = [orjson.loads(line).get("kind") for line in lines]
    i = kinds.index("checkpoint") + 1
    bad = [*lines[:i], lines[i - 1], *lines[i:]]  # a line written twice
    dst = InMemorySaver()
    with pytest.raises(S3PersistenceError):
        await aimport_threads(dst, io.BytesIO(b"".join(bad)))
    assert len(await dump(dst, "t")) == 0, "half a thread was imported before the error"


async def test_a_write_record_moved_after_another_checkpoint_is_refused() -> None:
    src = InMemorySaver()
    g = nested_graph().compile(checkpointer=src)
    await g.ainvoke({"trail": []}, cfg("w", ns=None))  # waits on an interrupt: pending writes
    buf = io.BytesIO()
    await aexport_threads(src, ["w"], buf)
    lines = buf.getvalue().splitlines(keepends=True)
    recs = [orjson.loads(line) for line in lines]
    w = next(i for i, r in enumerate(recs) if r.get("kind") == "write")
    cks = [i for i, r in enumerate(recs) if r.get("kind") == "checkpoint"]
    # a write moved after a checkpoint that is not its own
    other = next(i for i in cks if recs[i]["checkpoint_id"] != recs[w]["checkpoint_id"] and i > w)
    moved = [*lines[:w], *lines[w + 1 : other + 1], lines[w], *lines[other + 1 :]]
    with pytest.raises(CorruptObjectError, match="out of place"):
        await aimport_threads(InMemorySaver(), io.BytesIO(b"".join(moved)))
