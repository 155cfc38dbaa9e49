"""The long-term memory store (LangGraph's BaseStore): façade, format, items, search, TTL.

:mod:`.facade` holds :class:`AsyncS3Store`; it and the names ``langgraph_s3.store`` had
before the package moved into folders are here too.
"""

from langgraph_s3.store.facade import (
    BACKOFF_BASE,
    BACKOFF_CAP,
    COMPACT_AFTER,
    KNOWN_ITEMS,
    PUT_ATTEMPTS,
    RULE_PREFIX,
    AsyncS3Store,
    lifecycle_rules,
)

__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_CAP",
    "COMPACT_AFTER",
    "KNOWN_ITEMS",
    "PUT_ATTEMPTS",
    "RULE_PREFIX",
    "AsyncS3Store",
    "lifecycle_rules",
]
