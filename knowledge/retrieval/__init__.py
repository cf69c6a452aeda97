"""Choosing which imported passages a turn is shown (DESIGN.md §5): the
loading half. The rules are knowledge.ranking's.

    query (knowledge.query) ─┬─▶ lexical candidates, top 40 (knowledge.lexical,
                             │   found by the library's rarest terms: knowledge.termstats;
                             │   prose sources only)
                             └─▶ semantic candidates, top 40 (cosine, whole library)
        ─▶ their passages, always-included prose Canon, their vectors (one scoped query)
        ─▶ knowledge.ranking.rank: ADMISSION on absolute signals ─▶ RANKING among
           survivors ─▶ near-duplicate suppression (within a class)
        ─▶ KnowledgeResult ─▶ contextbuild.inject (the budget cut)

This package only loads: the query's terms and their library statistics, the
lexical hits, the semantic neighbours, the passages' rows and vectors and
the calibrated floor, handed to the core as plain records
(`ranking.records.Candidate`, `ranking.records.Term`). A short term's lexical match is
confirmed against the passage's own words first (knowledge.query.vocabulary.SHORT_TERM).
There is no model reranker: a second inference call per turn, and opaque to
the inspector. The semantic path is `library`, and the decisions become
passages and report lines in `report`.

Lorebook passages (cut from an entry) are World Info's to decide
(worldinfo.engine, fed by storyapp.worldinfo_turn): World Info entries
(lorebook sources) are chosen by the World Info budget (a share of the
window, SillyTavern's rule); prose sources by retrieval within what
remains; the always-include cap applies to prose Canon only. So the
lexical path never finds them, and none is always included here; the
semantic path still scores them, and those it admits are handed on as
`lore_by_meaning` (a vectorized entry's activation by meaning), never
offered as passages.

The semantic path scores the campaign's whole library: a float32 matrix per
(campaign, model), normalized once and cached in this process, is checked on
every turn against a stamp read from the campaign's source rows (count, id
sum, revision sum: selectors.library_stamp). Every change to a source's
passages or vectors (index, re-index, re-embed, delete) goes through the
source row, so another process's change is seen on the next turn. Enabled and index state are applied
as a mask at query time, so disabling a source needs no reload.

Retrieval never costs a turn: a dead embedding endpoint costs the semantic
half, with the reason in `semantic_note`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from contextbuild.records import KnowledgeResult
from endpoints import calibration

from .. import hubs, lexical, ranking, selectors, termstats
from ..models import KnowledgeChunk, KnowledgeSource
from ..query import Query, QueryInputs, assemble
from ..query.vocabulary import SHORT_TERM
from ..query.weighing import matched_terms, weigh_terms
from ..ranking.records import Candidate
from ..selectors import SearchablePassage
from . import library, report
from .library import EmbedQuery, Ready

LEXICAL_CANDIDATES = 40
#: Rejected candidates a turn's snapshot lists with their reasons (the strongest first).
REJECTIONS_KEPT = 25
#: Always-included Canon passages loaded per turn; inject caps what is shown
#: at 20 % of the budget, this only keeps the read bounded.
ALWAYS_LIMIT = 200
#: Why a found passage is not offered when its row is gone from the scope.
WITHDRAWN = "its source is no longer enabled and ready"


@dataclass(frozen=True)
class Retrieval:
    """A retrieval with its workings: the result, the query, and one decision
    per generated candidate (for the `retrieve` command)."""

    result: KnowledgeResult
    query: Query
    decisions: tuple[dict, ...] = ()


def retrieve(
    *,
    campaign_id: int,
    query: QueryInputs,
    embedding_model: str = "",
    embed_query: EmbedQuery | None = None,
    query_vector: np.ndarray | None = None,
    stamp: tuple[tuple, frozenset] | None = None,
    assembled: Query | None = None,
) -> KnowledgeResult:
    """The ranked, deduplicated passages this campaign's library offers for
    this turn. `embedding_model` names the vectors to search ("" for lexical
    only) and `embed_query` makes the query's, called only when the semantic
    path can run; `query_vector` is one made already (the benchmark);
    `stamp` is the library's this turn (selectors.library_stamp) and
    `assembled` the query assembled from `query`, when the caller has them
    already. Never raises for an endpoint failure."""
    return explain(
        campaign_id=campaign_id, query=query, embedding_model=embedding_model,
        embed_query=embed_query, query_vector=query_vector, stamp=stamp, assembled=assembled,
    ).result


def semantic_floor(model: str) -> float | None:
    """The calibrated cosine floor for exactly `model`, or None."""
    return calibration.floor_for(model)


def explain(
    *,
    campaign_id: int,
    query: QueryInputs,
    embedding_model: str = "",
    embed_query: EmbedQuery | None = None,
    query_vector: np.ndarray | None = None,
    stamp: tuple[tuple, frozenset] | None = None,
    assembled: Query | None = None,
) -> Retrieval:
    """`retrieve`, keeping its workings.

    1. Assemble the query; generate lexical and semantic candidates.
    2. Load their passages and always-included Canon, in one scoped query,
       and their vectors.
    3. Hand them to knowledge.ranking as plain records.
    4. Turn its decisions back into passages, rejections and report lines.
    """
    q = assembled or assemble(query)
    model = embedding_model.strip()
    floor = semantic_floor(model)

    stamp = stamp or selectors.library_stamp(campaign_id)
    searchable = bool(stamp[1])
    # Started first: the query's embedding and cosines run while the lexical search waits on the database.
    semantic_search = library.semantic_started(campaign_id, embed_query, model, floor, q, query_vector, stamp)
    rank_on: list[int] = []
    distinctive: set[int] = set()
    broad: set[int] = set()
    hits: list[lexical.LexicalHit] = []
    if q.terms and searchable:
        counts = termstats.profile_for(campaign_id, stamp[0])
        rank_on = termstats.rank_terms(q.terms, counts)
        distinctive = termstats.distinctive_terms(q.terms, counts)
        broad = termstats.broad_terms(q.terms, counts)
        hits = lexical.search(campaign_id=campaign_id, terms=q.terms, rank_on=rank_on, limit=LEXICAL_CANDIDATES)
    semantic, note, matrix, unit_query = semantic_search()

    found = _found(semantic, hits)
    # No source searchable: nothing to look up (a new or emptied library's turn;
    # no ids then make no statement for the rows either).
    always = _always_included(campaign_id) if searchable else []
    rows = {
        c.pk: c
        for c in selectors.searchable_chunks(campaign_id=campaign_id, chunk_ids=sorted(set(found) | set(always)))
    }
    vectors = matrix.vectors_for(rows) if matrix is not None else {}
    if unit_query is not None:
        found = _with_cosines(found, vectors, unit_query)
    candidates = [
        _candidate(chunk_id, *paths, rows.get(chunk_id), q, vectors, always)
        for chunk_id, paths in found.items()
    ]
    candidates += [_always_candidate(rows[c], vectors) for c in always if c in rows and c not in found]
    terms = weigh_terms(q.terms, q.standing, q.shares, distinctive, broad)
    ranked = ranking.rank(candidates, terms, floor=floor, confirm_pairs=calibration.confirms_pairs(model))

    lore = {chunk_id for chunk_id, row in rows.items() if row.entry_id is not None}
    rejected = [d for d in ranked.decisions if not d.admitted and d.candidate.id in rows and d.candidate.id not in lore]
    result = KnowledgeResult(
        candidates=tuple(report.passage(d, rows[d.candidate.id]) for d in ranked.offered if d.candidate.id not in lore),
        suppressed=tuple(
            report.passage(d, rows[d.candidate.id]) for d in ranked.suppressed if d.candidate.id not in lore
        ),
        lore_by_meaning=tuple(d.candidate.id for d in ranked.decisions if d.admitted and d.candidate.id in lore),
        terms=q.terms,
        rank_terms=tuple(q.terms[i] for i in rank_on),
        considered=ranked.considered,
        generated=len(found),
        rejected=ranked.rejected,
        semantic_floor=floor or 0.0,
        semantic_calibrated=floor is not None,
        embedding_model=model,
        semantic_used=not note and matrix is not None,
        semantic_note=note,
        rejections=tuple(report.rejection(d, rows[d.candidate.id]) for d in rejected[:REJECTIONS_KEPT]),
    )
    lines = tuple(report.line(d, rows.get(d.candidate.id)) for d in ranked.decisions)
    return Retrieval(result=result, query=q, decisions=lines)


def _found(
    semantic: list[tuple[int, float]], hits: list[lexical.LexicalHit]
) -> dict[int, tuple[lexical.LexicalHit | None, float | None]]:
    """Each generated passage's lexical hit and cosine, the semantic path's
    first, then the lexical path's (the order the decisions are listed in,
    before ranking)."""
    found: dict[int, tuple[lexical.LexicalHit | None, float | None]] = {
        chunk_id: (None, similarity) for chunk_id, similarity in semantic
    }
    for hit in hits:
        found[hit.chunk_id] = (hit, found.get(hit.chunk_id, (None, None))[1])
    return found


def _with_cosines(found: dict, vectors: dict[int, tuple[np.ndarray, float | None]], unit_query: np.ndarray) -> dict:
    """Every found passage with a vector gets its cosine, not only the
    semantic path's nearest: a lexical candidate's meaning is evidence too
    (knowledge.ranking's confirmation and veto read it)."""
    return {
        chunk_id: (hit, similarity if similarity is not None or chunk_id not in vectors
                   else float(vectors[chunk_id][0] @ unit_query))
        for chunk_id, (hit, similarity) in found.items()
    }


def _always_included(campaign_id: int) -> list[int]:
    """The always-included prose Canon passages' ids, asked of the few
    source rows first: most campaigns have none, and then the passages are
    not read. Only Canon can be always included (the source's check
    constraint); a lorebook's constant entries are World Info's."""
    sources = list(
        KnowledgeSource.objects.filter(
            campaign_id=campaign_id, enabled=True, index_state=Ready, always_include=True, format="", secret_seat=""
        ).values_list("pk", flat=True)
    )
    chosen = []
    if sources:
        chosen = list(
            KnowledgeChunk.objects.filter(source_id__in=sources)
            .order_by("source__title", "source_id", "index")
            .values_list("pk", flat=True)[:ALWAYS_LIMIT]
        )
    return chosen


def _candidate(
    chunk_id: int,
    hit: lexical.LexicalHit | None,
    similarity: float | None,
    chunk: SearchablePassage | None,
    q: Query,
    vectors: dict[int, tuple[np.ndarray, float | None]],
    always: list[int],
) -> Candidate:
    """A generated passage as the core's record. The terms its own words
    hold confirm its short-term matches (the databases' stemmers fold short
    words onto stop words) and serve the standing-names rule."""
    if chunk is None:
        matched = hit.matched - _short(q) if hit else frozenset()
        return Candidate(
            id=chunk_id, kind="", text="", matched=matched,
            lexical=hit.score if hit else None, cosine=similarity, withdrawn=WITHDRAWN,
        )
    held = matched_terms(q.terms, chunk.text, chunk.heading_path)
    matched = frozenset()
    if hit is not None:
        matched = (hit.matched - _short(q)) | (hit.matched & held)
    vector, share = vectors.get(chunk_id, (None, None))
    return Candidate(
        id=chunk_id,
        kind=chunk.classification,
        text=chunk.text,
        matched=matched,
        lexical=hit.score if hit else None,
        cosine=similarity,
        shared=held,
        vector=vector,
        hub=hubs.hub_reason(share, chunk.token_count) if vector is not None else "",
        always=chunk_id in always,
    )


def _short(q: Query) -> frozenset[int]:
    return frozenset(i for i, term in enumerate(q.terms) if len(term) <= SHORT_TERM)


def _always_candidate(chunk: SearchablePassage, vectors: dict[int, tuple[np.ndarray, float | None]]) -> Candidate:
    return Candidate(
        id=chunk.pk, kind=chunk.classification, text=chunk.text,
        vector=vectors.get(chunk.pk, (None, None))[0], always=True,
    )


def clear_cache() -> None:
    """Forgets every cached library matrix and term profile in this process."""
    library.clear()
    termstats.clear_cache()
