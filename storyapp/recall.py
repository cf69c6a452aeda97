"""Recalling memories for a turn: the memory bank's loading half.

Only memories anchored on the current lineage are candidates, and only
those older than the history the prompt replays (which already tells the
narrator what happened there). Admission, ranking and near-duplicate
suppression are lore's, in `knowledge.ranking`: a memory is let in by the
same evidence a passage is, and word overlap never makes two memories one.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from contextbuild import records
from contextbuild.memories import MAX_CHARS
from endpoints.embeddings import from_bytes
from knowledge.query import Query
from knowledge.query.weighing import matched_terms, weigh_terms
from knowledge.ranking import cosine, rank
from knowledge.ranking.records import Candidate

from .models import Memory

#: The most memories one prompt carries.
MEMORY_LIMIT = 6


def memories_for(
    campaign_id: int,
    *,
    lineage_ids,
    before_depth: int,
    query: Query,
    query_vector: np.ndarray | None,
    embedding_model: str,
    floor: float | None,
) -> tuple[records.Memory, ...]:
    """The top memories of this lineage for the query, best first."""
    if not lineage_ids or query.empty:
        return ()
    anchors = Memory.objects.filter(campaign_id=campaign_id, anchor__depth__lt=before_depth).values_list(
        "id", "anchor_id"
    )
    ids = [memory_id for memory_id, anchor_id in anchors if anchor_id in lineage_ids]
    if not ids:
        return ()
    by_id = {m.pk: m for m in Memory.objects.filter(pk__in=ids)}
    candidates = [_candidate(m, query, query_vector, embedding_model) for m in by_id.values()]
    terms = weigh_terms(query.terms, query.standing, query.shares)
    ranked = rank(candidates, terms, floor=floor if query_vector is not None else None, limit=MEMORY_LIMIT)
    return tuple(
        records.Memory(
            text=by_id[d.candidate.id].text[:MAX_CHARS], authority=d.candidate.kind, score=round(d.score, 4),
            source_action=by_id[d.candidate.id].anchor_id, id=d.candidate.id, admitted_by=d.by,
        )
        for d in ranked.offered
    )


def _candidate(memory: Memory, query: Query, query_vector, embedding_model: str) -> Candidate:
    matched = matched_terms(query.terms, memory.text)
    vector = None
    if memory.embedding and embedding_model and memory.embedding_model == embedding_model:
        vector = from_bytes(memory.embedding)
    similarity = cosine(query_vector, vector) if vector is not None and query_vector is not None \
        and vector.shape == query_vector.shape else None
    return Candidate(
        id=memory.pk, kind=memory.authority, text=memory.text, matched=matched,
        lexical=float(len(matched)) if matched else None, cosine=similarity, shared=matched, vector=vector,
    )


def remembering(embed_query: Callable | None) -> Callable | None:
    """`embed_query`, answering a second call for the same text from the
    first: lore and memories are searched with one query vector per turn."""
    if embed_query is None:
        return None
    made: dict[str, tuple] = {}

    def embed(text: str):
        if text not in made:
            made[text] = embed_query(text)
        return made[text]

    return embed
