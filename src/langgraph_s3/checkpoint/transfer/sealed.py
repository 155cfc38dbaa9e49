"""Sealed exports: a subject's thread written to an export sealed with the subject's key,
so that forgetting the subject makes every copy of the file unreadable too.

A sealed thread is one line in place of its thread record and its records::

    {"kind": "sealed", "thread_id": str, "subject": token, "life": int,
     "checkpoints": int, "writes": int, "body": base64}

``body`` is the thread's lines (as a plain export holds them), compressed with zstd,
then sealed (:func:`~langgraph_s3.core.sealing.seal`) with the key of the subject's life
and bound to the subject's token and the thread: a body moved to another thread, or
changed, fails its check. The counts stay in the clear so that a file whose subject
was forgotten still proves whole (its end record counts it).

An import opens a sealed thread with the key it is given (``key_for``: the deployment's
own subjects, or the source deployment's for an import elsewhere); a thread whose
subject was forgotten is skipped (its content is erased), and said.
"""

from __future__ import annotations

import base64
import tempfile
import zlib
from collections.abc import Awaitable, Callable, Iterator
from typing import IO, Any

import orjson

from langgraph_s3.checkpoint.transfer.common import json_line
from langgraph_s3.core.report import Report
from langgraph_s3.core.sealing import DataKey, key_id_of, seal, unseal
from langgraph_s3.errors import ConfigurationError, CorruptExportError, SealBrokenError

__all__ = ["KeyFor", "SealFor", "Unsealed", "sealed_line", "unsealed"]

SEALED = b'{"kind":"sealed"'
"""How a sealed thread's line begins (orjson writes the ``kind`` first, unspaced)."""

SealFor = Callable[[str], Awaitable[tuple[str, int, DataKey] | None]]
"""A thread id -> its subject's token, life and key (None: a plain thread)."""
KeyFor = Callable[[str, int, bytes], Awaitable[DataKey | None]]
"""(token, life, key id) -> the key that opens it (None: the subject was forgotten)."""


def _where(token: str, thread_id: str) -> str:
    return f"{token}|export|{thread_id}"


def sealed_line(
    thread_id: str, token: str, life: int, key: DataKey, lines: bytes, counts: Report
) -> bytes:
    """The one line a sealed thread takes in an export (its ``lines`` compressed, sealed)."""
    import zstandard

    body = seal(key, _where(token, thread_id), zstandard.ZstdCompressor(level=3).compress(lines))
    return json_line(
        {
            "kind": "sealed",
            "thread_id": thread_id,
            "subject": token,
            "life": life,
            "checkpoints": counts.checkpoints,
            "writes": counts.writes,
            "body": base64.b64encode(body).decode("ascii"),
        }
    )


def _fields(raw: bytes, name: str) -> tuple[str, str, int, bytes, Report]:
    try:
        rec = orjson.loads(raw)
        body = base64.b64decode(rec["body"], validate=True)
        counts = Report(threads=1, checkpoints=int(rec["checkpoints"]), writes=int(rec["writes"]))
        return str(rec["thread_id"]), str(rec["subject"]), int(rec["life"]), body, counts
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptExportError(name, f"a sealed thread's line is damaged ({exc})") from None


async def unsealed(src: IO[bytes], key_for: KeyFor | None, name: str) -> Unsealed:
    """``src`` to read through, its sealed threads opened. With ``key_for``, the keys they
    need are fetched first (one pass over ``src``, which is then rewound; a damaged file
    is left for the reader to name); without, a sealed thread is refused when met.
    """
    wanted: dict[tuple[str, int, bytes], DataKey | None] = {}
    if key_for is not None:
        src = seekable(src)
        try:
            for raw in src:
                if raw.startswith(SEALED):
                    thread_id, token, life, body, _ = _fields(raw, name)
                    where = f"{name}: thread {thread_id!r}"
                    wanted[(token, life, key_id_of(body, where))] = None
        except (CorruptExportError, SealBrokenError, EOFError, OSError, ValueError, zlib.error):
            pass  # the reader meets it again, and names it with its line
        src.seek(0)
        for token, life, key_id in wanted:
            try:
                wanted[(token, life, key_id)] = await key_for(token, life, key_id)
            except SealBrokenError as exc:  # a key its subject never had in that life
                raise CorruptExportError(name, f"a sealed thread's key: {exc}") from None
    return Unsealed(src, wanted if key_for is not None else None, name)


def seekable(src: IO[bytes]) -> IO[bytes]:
    """``src``, or a spooled copy of it when it cannot be rewound (a pipe)."""
    if src.seekable():
        return src
    copy = tempfile.SpooledTemporaryFile(max_size=32 * 1024 * 1024)  # noqa: SIM115
    for chunk in iter(lambda: src.read(1 << 20), b""):
        copy.write(chunk)
    copy.seek(0)
    return copy


class Unsealed:
    """An export's lines, each sealed thread's opened in its place (or skipped, counted,
    when its subject was forgotten)."""

    def __init__(
        self, src: IO[bytes], keys: dict[tuple[str, int, bytes], DataKey | None] | None, name: str
    ) -> None:
        """``keys``: those fetched for the file's sealed threads; None: no key source
        (a sealed thread is refused with a ConfigurationError that says what to pass)."""
        self.src, self.keys, self.name = src, keys, name
        self.skipped = Report()
        """The threads skipped: their subject was forgotten."""
        self.forgotten: list[str] = []

    def __iter__(self) -> Iterator[bytes]:
        import zstandard

        for raw in self.src:
            if not raw.startswith(SEALED):
                yield raw
                continue
            if self.keys is None:
                raise ConfigurationError(
                    f"{self.name} holds threads sealed for their subjects: import it with a "
                    "saver that declares the deployment's subjects (subjects=, kms_key=), or "
                    "pass sealed_by= (the saver of the deployment that made it; the CLI's "
                    "--sealed-by URL)"
                )
            thread_id, token, life, body, counts = _fields(raw, self.name)
            where = f"{self.name}: thread {thread_id!r}"
            try:
                key = self.keys.get((token, life, key_id_of(body, where)))
            except SealBrokenError as exc:
                raise CorruptExportError(self.name, str(exc)) from None
            if key is None:
                self.skipped = self.skipped + counts
                self.forgotten.append(thread_id)
                continue
            try:
                opened = unseal(key, _where(token, thread_id), body, name=where)
            except SealBrokenError as exc:
                raise CorruptExportError(self.name, str(exc)) from None
            lines = zstandard.ZstdDecompressor().decompress(opened, max_output_size=1 << 34)
            yield from lines.splitlines(keepends=True)


def skipped_of(src: Any) -> Report:
    """The threads an :class:`Unsealed` skipped (none for a plain file)."""
    return src.skipped if isinstance(src, Unsealed) else Report()
