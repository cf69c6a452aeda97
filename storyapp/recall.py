"""Recalling memories for a turn: the memory bank's loading half.

Only memories anchored on the current lineage are candidates, and only
those older than the history the prompt replays (which already tells the
narrator what happened there). Admission, ranking and near-duplicate
suppression are lore's, in `knowledge.ranking`: a memory is let in by the
same evidence a passage is, and word overlap never makes two memories one.

A long story holds a memory per narration, so none is read whole to find
the few a prompt carries:

1. the memories holding a query term are found through their stored word
   keys (MemoryWord, indexed by campaign and key), as rows of ids and keys;
   with a query vector, the lineage's vectors of the current model are read
   as bytes for their cosines (there is no vector index here);
2. `knowledge.ranking.shortlist` admits and orders them on those signals;
3. only the shortlist is loaded, text and vector, and ranked by `rank`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import numpy as np
from django.db import connection

from contextbuild import records
from contextbuild.memories import MAX_CHARS
from endpoints.embeddings import from_bytes
from knowledge.query import Query
from knowledge.query.vocabulary import stem
from knowledge.query.weighing import weigh_terms
from knowledge.ranking import cosine, rank, shortlist
from knowledge.ranking.records import Candidate

from .models import Action, Memory, MemoryWord

#: The most memories one prompt carries.
MEMORY_LIMIT = 6
#: Memories loaded whole per try: enough for identical texts and near
#: duplicates to be set aside and still leave MEMORY_LIMIT, almost always.
SHORTLIST = 4 * MEMORY_LIMIT

_WORDS_SQL = f"""
SELECT w.memory_id, w.key, m.anchor_id, m.authority
FROM {MemoryWord._meta.db_table} w
JOIN {Memory._meta.db_table} m ON m.id = w.memory_id
JOIN {Action._meta.db_table} a ON a.id = m.anchor_id
WHERE w.campaign_id = %s AND w.key IN ({{keys}}) AND a.depth < %s
"""


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
    terms = weigh_terms(query.terms, query.standing, query.shares)
    floor = floor if query_vector is not None else None
    candidates = _signals(campaign_id, lineage_ids, before_depth, query, query_vector, embedding_model)
    count = SHORTLIST
    while True:
        picked, complete = shortlist(candidates, terms, floor=floor, count=count)
        first = {c.id for c in picked[:count]}
        loaded = _loaded(picked, embedding_model)
        ranked = rank([loaded[c.id][0] for c in picked], terms, floor=floor, limit=MEMORY_LIMIT)
        if complete or (len(ranked.offered) == MEMORY_LIMIT and ranked.offered[-1].candidate.id in first):
            break
        count *= 4
    return tuple(
        records.Memory(
            text=d.candidate.text[:MAX_CHARS], authority=d.candidate.kind, score=round(d.score, 4),
            source_action=loaded[d.candidate.id][1], id=d.candidate.id, admitted_by=d.by,
        )
        for d in ranked.offered
    )


def _signals(campaign_id: int, lineage_ids, before_depth: int, query: Query, query_vector, embedding_model: str):
    """Each lineage memory older than `before_depth` that a path finds, as
    a candidate without text or vector: the query terms it holds (by the
    stems `knowledge.query.weighing.matched_terms` compares) and its cosine."""
    indexes: dict[str, list[int]] = defaultdict(list)
    for index, term in enumerate(query.terms):
        indexes[MemoryWord.key_of(stem(term))].append(index)
    matched: dict[int, set[int]] = defaultdict(set)
    kinds: dict[int, str] = {}
    keys = list(indexes)
    if keys:
        with connection.cursor() as cursor:
            # Raw rows: a long story's common words hold thousands of (memory, key) pairs.
            cursor.execute(_WORDS_SQL.format(keys=", ".join(["%s"] * len(keys))), [campaign_id, *keys, before_depth])
            for memory_id, key, anchor_id, authority in cursor.fetchall():
                if anchor_id in lineage_ids:
                    matched[memory_id].update(indexes[key])
                    kinds[memory_id] = authority
    cosines: dict[int, float] = {}
    if query_vector is not None and embedding_model:
        rows = Memory.objects.filter(
            campaign_id=campaign_id, embedding_model=embedding_model, embedding__isnull=False,
            anchor__depth__lt=before_depth,
        ).values_list("id", "anchor_id", "authority", "embedding")
        for memory_id, anchor_id, authority, blob in rows:
            if anchor_id in lineage_ids and blob:
                vector = from_bytes(blob)
                if vector.shape == query_vector.shape:
                    cosines[memory_id] = cosine(query_vector, vector)
                    kinds[memory_id] = authority
    candidates = []
    for memory_id, kind in kinds.items():
        held = frozenset(matched.get(memory_id, ()))
        candidates.append(Candidate(
            id=memory_id, kind=kind, text="", matched=held, lexical=float(len(held)) if held else None,
            cosine=cosines.get(memory_id), shared=held,
        ))
    return candidates


def _loaded(picked, embedding_model: str) -> dict[int, tuple[Candidate, int]]:
    """The shortlisted candidates with their text and vector, and each one's anchor."""
    rows = Memory.objects.filter(pk__in=[c.id for c in picked]).values_list(
        "id", "anchor_id", "text", "embedding_model", "embedding"
    )
    loaded = {}
    by_id = {c.id: c for c in picked}
    for memory_id, anchor_id, text, model, blob in rows:
        vector = from_bytes(blob) if blob and embedding_model and model == embedding_model else None
        candidate = by_id[memory_id]
        loaded[memory_id] = (
            Candidate(id=memory_id, kind=candidate.kind, text=text, matched=candidate.matched,
                      lexical=candidate.lexical, cosine=candidate.cosine, shared=candidate.shared, vector=vector),
            anchor_id,
        )
    return loaded


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
