"""Where an object manifest keeps an item's versions: pure functions, no I/O.

Layout under the manifest's root (``{prefix}/manifest/`` of a deployment)::

    format                          what ``create`` wrote: the table exists
    i/{P}/{K}/{inv(seq)}            version ``seq`` of item (pk, sk)
    t/{txid}                        the decision of a transaction of several writes
    x/{index}                       an index's definition (the attribute it keys)

``P`` is the partition key with the table's ``strip`` prefix (the deployment key)
taken off, ``K`` the sort key, each :func:`escape`'d: an injective, order-preserving,
prefix-free code whose characters all sort above ``/``. So a listing in binary order
is the items' (pk, sk) order, one item's versions together, and a store that lists
directory by directory (SeaweedFS lists ``o/a/x`` before ``o/a-b/y``) lists in the
same order. ``inv(seq)`` counts down in fixed-width hex, so an item's newest version
is the first key under its prefix.
"""

from __future__ import annotations

from langgraph_s3.errors import InvalidIdError

__all__ = [
    "MAX_SEQ",
    "decision_key",
    "escape",
    "format_key",
    "index_key",
    "item_prefix",
    "seq_of",
    "unescape",
    "version_key",
]

MAX_SEQ = (1 << 48) - 1
"""The most versions an item can have (one a millisecond for 8,900 years)."""
_SEQ_DIGITS = 12
_LOW = "0"  # the lowest character above "/": the escape's lead
MAX_KEY_BYTES = 1024  # S3's limit on a whole key


def escape(text: str) -> str:
    """``text`` in characters above ``/``, order and prefixes kept: ``0`` is ``01``,
    a character below ``0`` is ``00`` and its code in hex, and the empty string ``0``."""
    if not text:
        return _LOW
    out: list[str] = []
    for ch in text:
        if ch > _LOW:
            out.append(ch)
        elif ch == _LOW:
            out.append("01")
        else:
            out.append(f"00{ord(ch):02x}")
    return "".join(out)


def unescape(code: str) -> str:
    """The text :func:`escape` made ``code`` of."""
    if code == _LOW:
        return ""
    out: list[str] = []
    i = 0
    while i < len(code):
        ch = code[i]
        if ch != _LOW:
            out.append(ch)
            i += 1
        elif code[i + 1] == "1":
            out.append(_LOW)
            i += 2
        else:
            out.append(chr(int(code[i + 2 : i + 4], 16)))
            i += 4
    return "".join(out)


def _part(pk: str, strip: str) -> str:
    if not pk.startswith(strip):
        raise InvalidIdError(
            f"partition key {pk[:80]!r} is not under this manifest's deployment {strip!r}: "
            "an object manifest holds one deployment's items"
        )
    return escape(pk[len(strip) :])


def item_prefix(root: str, strip: str, pk: str, sk: str) -> str:
    """The prefix of every version of item (pk, sk)."""
    prefix = f"{root}i/{_part(pk, strip)}/{escape(sk)}/"
    if len((prefix + "f" * _SEQ_DIGITS).encode()) > MAX_KEY_BYTES:
        raise InvalidIdError(
            f"the manifest item ({pk[:60]!r}, {sk[:60]!r}) would need an object key over "
            f"S3's {MAX_KEY_BYTES} bytes: use a shorter prefix, thread id or namespace"
        )
    return prefix


def partition_of(root: str, strip: str, pk: str) -> str:
    """The prefix of every version of every item of partition ``pk``."""
    return f"{root}i/{_part(pk, strip)}/"


def partition_prefix(root: str, strip: str, pk_prefix: str) -> str:
    """The prefix of every version of every item whose pk starts with ``pk_prefix``
    (the whole table when it is ``strip`` or shorter)."""
    if len(pk_prefix) <= len(strip):
        return f"{root}i/"
    return f"{root}i/{_part(pk_prefix, strip)}"


def version_key(prefix: str, seq: int) -> str:
    """The key of version ``seq`` under an item's prefix (newer sorts first)."""
    return f"{prefix}{MAX_SEQ - seq:0{_SEQ_DIGITS}x}"


def split(root: str, strip: str, key: str) -> tuple[str, str, int] | None:
    """(pk, sk, seq) of a version's key; None for any other key."""
    parts = key[len(root) + 2 :].split("/")
    if not key.startswith(f"{root}i/") or len(parts) != 3 or len(parts[2]) != _SEQ_DIGITS:
        return None
    try:
        seq = MAX_SEQ - int(parts[2], 16)
        return strip + unescape(parts[0]), unescape(parts[1]), seq
    except (ValueError, IndexError):
        return None


def seq_of(key: str) -> int:
    """The version number a version key ends with."""
    return MAX_SEQ - int(key[-_SEQ_DIGITS:], 16)


def format_key(root: str) -> str:
    return f"{root}format"


def decision_key(root: str, txid: str) -> str:
    return f"{root}t/{txid}"


def index_key(root: str, index: str) -> str:
    return f"{root}x/{escape(index)}"
