"""Queries: search (filters, vector similarity) and list_namespaces over segments.

Both read every item under a namespace prefix through
:meth:`Segments.scan <langgraph_s3.store.segments.Segments.scan>`, then decide
in memory: the filter before ``limit``/``offset``, newest ``updated_at`` first
(or best cosine similarity first with a ``query``), expired items never. The
rules themselves (filter operators, namespace patterns, cosine) are the pure
functions of :mod:`langgraph_s3.store.format`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langgraph.store.base import (
    IndexConfig,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)
from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path

from langgraph_s3.errors import ConfigurationError
from langgraph_s3.store import format as it
from langgraph_s3.store.items import Live, unexpired
from langgraph_s3.store.segments import Segments
from langgraph_s3.store.ttl import ItemExpiry

ItemId = tuple[tuple[str, ...], str]
"""(namespace, key)."""
Vectors = dict[ItemId, dict[str, list[float]]]
"""Per item, its embeddings by field path (``path`` or ``path.i`` for list elements)."""
Scored = list[tuple[float | None, Live]]


class VectorIndex:
    """The embedding side of ``index=``: which fields to embed, and the embedder.

    Args:
        config: LangGraph's ``IndexConfig`` (``dims``, ``embed``, optional ``fields``).

    Raises:
        ConfigurationError: ``dims`` or ``embed`` is missing.
    """

    def __init__(self, config: IndexConfig) -> None:
        if "dims" not in config or "embed" not in config:
            raise ConfigurationError("index= needs 'dims' and 'embed' (and optionally 'fields')")
        self.config: dict[str, Any] = dict(config)
        self.embeddings: Any = ensure_embeddings(config["embed"])
        self.config["__tokenized_fields"] = [
            (p, tokenize_path(p)) if p != "$" else (p, p) for p in (config.get("fields") or ["$"])
        ]

    def texts(self, ops: Iterable[PutOp]) -> list[tuple[ItemId, str, str]]:
        """What to embed for these puts: (item, field label, text), in order."""
        jobs: list[tuple[ItemId, str, str]] = []
        for op in ops:
            if op.index is False or op.value is None:
                continue
            if op.index is None:
                paths = self.config["__tokenized_fields"]
            else:
                paths = [(p, tokenize_path(p)) for p in op.index]
            for path, field in paths:
                found = get_text_at_path(op.value, field)
                for i, text in enumerate(found):
                    label = f"{path}.{i}" if len(found) > 1 else path
                    jobs.append(((op.namespace, op.key), label, text))
        return jobs

    async def embed_puts(self, ops: Iterable[PutOp]) -> Vectors:
        """The vectors of a batch of puts: one call of the embedder for the whole batch.

        Raises:
            ConfigurationError: the embedder returned a vector count other than asked.
        """
        jobs = self.texts(ops)
        if not jobs:
            return {}
        vecs = await self.embeddings.aembed_documents([text for _, _, text in jobs])
        if len(vecs) != len(jobs):
            raise ConfigurationError(
                f"the embedding function returned {len(vecs)} vectors for {len(jobs)} texts"
            )
        out: Vectors = {}
        for (item_id, label, _), vec in zip(jobs, vecs, strict=True):
            out.setdefault(item_id, {})[label] = [float(x) for x in vec]
        return out

    async def embed_query(self, query: str) -> list[float]:
        """The query's vector: one call of the embedder."""
        vector: list[float] = await self.embeddings.aembed_query(query)
        return vector


# ----------------------------------------------------------------- pure rules
def check_search(op: SearchOp, index: VectorIndex | None) -> None:
    """Fail before any request on an unknown filter operator or an unindexed query."""
    it.validate_filter(op.filter)
    if op.query and index is None:
        raise ConfigurationError(
            "search(query=...) needs a vector index: create the store with "
            "index={'dims': ..., 'embed': ..., 'fields': [...]}"
        )


def by_recency(live: Sequence[Live]) -> Scored:
    """Newest ``updated_at`` first (ties: namespace, then key, descending); no scores."""
    ordered = sorted(
        live, key=lambda h: (h.item.updated_at, h.item.namespace, h.item.key), reverse=True
    )
    return [(None, h) for h in ordered]


def by_similarity(live: Sequence[Live], query: Sequence[float]) -> Scored:
    """Best cosine similarity first (an item scores its best field); unindexed items
    after the scored ones, with no score."""
    scored = [
        (max(it.cosine(query, v) for v in h.item.vectors.values()), h)
        for h in live
        if h.item.vectors
    ]
    scored.sort(key=lambda p: (-p[0], p[1].item.namespace, p[1].item.key))
    return [*scored, *((None, h) for h in live if not h.item.vectors)]


def search_item(score: float | None, live: Live) -> SearchItem:
    """The result LangGraph expects for one item; its value a copy (a decoded segment's
    items serve later searches: a caller changing a result changes nothing stored)."""
    item = live.item
    return SearchItem(
        namespace=item.namespace,
        key=item.key,
        value=copy.deepcopy(item.value),
        created_at=item.created_at,
        updated_at=item.updated_at,
        score=score,
    )


def fixed_prefix(conditions: Iterable[MatchCondition]) -> tuple[str, ...]:
    """The labels every match must start with: a prefix condition's, up to its first ``*``."""
    for cond in conditions:
        if cond.match_type == "prefix":
            fixed: list[str] = []
            for label in cond.path:
                if label == "*":
                    break
                fixed.append(label)
            return tuple(fixed)
    return ()


def select_namespaces(
    found: Iterable[tuple[str, ...]], op: ListNamespacesOp
) -> list[tuple[str, ...]]:
    """Apply a ListNamespacesOp to the namespaces that hold items: conditions,
    ``max_depth`` truncation, sorted, then ``offset``/``limit``."""
    kept = set(found)
    if op.match_conditions:
        kept = {ns for ns in kept if it.namespace_matches(ns, op.match_conditions)}
    if op.max_depth is not None:
        kept = {ns[: op.max_depth] for ns in kept}
    return sorted(kept)[op.offset : op.offset + op.limit]


def matching(live: Sequence[Live], flt: Mapping[str, Any] | None) -> list[Live]:
    """The entries whose value passes the filter."""
    return [h for h in live if it.matches_filter(h.item.value, flt)]


# -------------------------------------------------------------------- queries
class Queries:
    """Runs SearchOp and ListNamespacesOp.

    Args:
        segments: reads a prefix's items.
        expiry: refreshes the TTL of returned items when asked.
        index: the vector index, if the store has one.
    """

    def __init__(self, segments: Segments, expiry: ItemExpiry, index: VectorIndex | None) -> None:
        self.segments = segments
        self.expiry = expiry
        self.index = index

    async def search(self, op: SearchOp) -> list[SearchItem]:
        """One page of the items under ``op.namespace_prefix`` that pass its filter.

        Requests: those of :meth:`Segments.scan`, then, with ``refresh_ttl``, one
        conditional PUT per returned item that has a TTL (one round trip more).
        """
        scanned = await self.segments.scan(op.namespace_prefix)
        live = matching(unexpired(scanned, it.now()), op.filter)
        scored = await self._similar(live, op.query) if op.query else by_recency(live)
        page = scored[op.offset : op.offset + op.limit]
        if op.refresh_ttl:
            await self.expiry.refresh([h for _, h in page], it.now())
        return [search_item(score, h) for score, h in page]

    async def _similar(self, live: Sequence[Live], query: str) -> Scored:
        if self.index is None:  # abatch checked before any request (check_search)
            raise ConfigurationError("search(query=...) needs a vector index")
        return by_similarity(live, await self.index.embed_query(query))

    async def list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        """The namespaces holding unexpired items that match ``op``.

        Requests: those of :meth:`Segments.scan` on the longest fixed prefix of
        the op's prefix condition (the whole store without one).
        """
        scanned = await self.segments.scan(fixed_prefix(op.match_conditions or ()))
        found = {h.item.namespace for h in unexpired(scanned, it.now())}
        return select_namespaces(found, op)
