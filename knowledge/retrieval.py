"""Choosing which imported passages a turn is shown (DESIGN.md §5): the
loading half. The rules are knowledge.ranking's.

    query (knowledge.query) ─┬─▶ lexical candidates, top 40 (knowledge.lexical,
                             │   found by the library's rarest terms: knowledge.termstats)
                             ├─▶ semantic candidates, top 40 (cosine, whole library)
                             └─▶ lorebook entries whose keys the scene names (knowledge.keys)
        ─▶ their passages, always-included Canon, their vectors (one scoped query)
        ─▶ knowledge.ranking.rank: ADMISSION on absolute signals ─▶ RANKING among
           survivors ─▶ near-duplicate suppression (within a class)
        ─▶ KnowledgeResult ─▶ contextbuild.inject (the budget cut)

This module only loads: the query's terms and their library statistics, the
lexical hits, the semantic neighbours, the passages' rows and vectors and
the calibrated floor, handed to the core as plain records
(`ranking.records.Candidate`, `ranking.records.Term`). A short term's lexical match is
confirmed against the passage's own words first (knowledge.query.vocabulary.SHORT_TERM).
There is no model reranker: a second inference call per turn, and opaque to
the inspector.

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

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from django.db import connection

from contextbuild.records import KnowledgeCandidate, KnowledgeResult, Rejection
from endpoints import calibration, localembed
from endpoints.embeddings import DTYPE

from . import hubs, keys, lexical, ranking, selectors, termstats
from .ranking.records import Candidate, Decision
from .models import KnowledgeChunk, KnowledgeEmbedding, KnowledgeSource
from .query import Query, QueryInputs, assemble
from .query.vocabulary import SHORT_TERM, words
from .query.weighing import matched_terms, weigh_terms

LEXICAL_CANDIDATES = 40
#: Rejected candidates a turn's snapshot lists with their reasons (the strongest first).
REJECTIONS_KEPT = 25
SEMANTIC_CANDIDATES = 40
#: Always-included Canon passages loaded per turn; inject caps what is shown
#: at 20 % of the budget, this only keeps the read bounded.
ALWAYS_LIMIT = 200
#: Libraries kept in memory per process (a 100,000-passage library at 384
#: dimensions is 150 MB).
CACHED_LIBRARIES = 4
#: Why a found passage is not offered when its row is gone from the scope.
WITHDRAWN = "its source is no longer enabled and ready"

Ready = KnowledgeSource.IndexState.READY


@dataclass(frozen=True)
class Retrieval:
    """A retrieval with its workings: the result, the query, and one decision
    per generated candidate (for the `retrieve` command)."""

    result: KnowledgeResult
    query: Query
    decisions: tuple[dict, ...] = ()


#: Turns the scene's text into its query vector, or returns None and why
#: (endpoints.embeddings.for_retrieval builds one from an endpoint profile).
EmbedQuery = Callable[[str], tuple["np.ndarray | None", str]]


def retrieve(
    *,
    campaign_id: int,
    query: QueryInputs,
    embedding_model: str = "",
    embed_query: EmbedQuery | None = None,
    query_vector: np.ndarray | None = None,
) -> KnowledgeResult:
    """The ranked, deduplicated passages this campaign's library offers for
    this turn. `embedding_model` names the vectors to search ("" for lexical
    only) and `embed_query` makes the query's, called only when the semantic
    path can run; `query_vector` is one made already (the benchmark). Never
    raises for an endpoint failure."""
    return explain(
        campaign_id=campaign_id, query=query, embedding_model=embedding_model,
        embed_query=embed_query, query_vector=query_vector,
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
) -> Retrieval:
    """`retrieve`, keeping its workings.

    1. Assemble the query; generate lexical and semantic candidates.
    2. Load their passages and always-included Canon, in one scoped query,
       and their vectors.
    3. Hand them to knowledge.ranking as plain records.
    4. Turn its decisions back into passages, rejections and report lines.
    """
    q = assemble(query)
    model = embedding_model.strip()
    floor = semantic_floor(model)

    stamp = selectors.library_stamp(campaign_id)
    rank_on: list[int] = []
    distinctive: set[int] = set()
    broad: set[int] = set()
    hits: list[lexical.LexicalHit] = []
    if q.terms:
        counts = termstats.profile_for(campaign_id, stamp[0])
        rank_on = termstats.rank_terms(q.terms, counts)
        distinctive = termstats.distinctive_terms(q.terms, counts)
        broad = termstats.broad_terms(q.terms, counts)
        hits = lexical.search(campaign_id=campaign_id, terms=q.terms, rank_on=rank_on, limit=LEXICAL_CANDIDATES)
    semantic, note, library, unit_query = _semantic(campaign_id, embed_query, model, floor, q, query_vector, stamp)

    named = _named_by_key(campaign_id, q, stamp)
    found = _found(semantic, hits, named)
    always = _always_included(campaign_id)
    rows = {
        c.pk: c
        for c in selectors.searchable_chunks(campaign_id=campaign_id, chunk_ids=sorted(set(found) | set(always)))
    }
    vectors = library.vectors_for(rows) if library is not None else {}
    if unit_query is not None:
        found = _with_cosines(found, vectors, unit_query)
    candidates = [
        _candidate(chunk_id, *paths, rows.get(chunk_id), q, vectors, always, named.get(chunk_id))
        for chunk_id, paths in found.items()
    ]
    candidates += [_always_candidate(rows[c], vectors) for c in always if c in rows and c not in found]
    terms = weigh_terms(q.terms, q.standing, q.shares, distinctive, broad)
    ranked = ranking.rank(candidates, terms, floor=floor, confirm_pairs=calibration.confirms_pairs(model))

    rejected = [d for d in ranked.decisions if not d.admitted and d.candidate.id in rows]
    result = KnowledgeResult(
        candidates=tuple(_passage(d, rows[d.candidate.id]) for d in ranked.offered),
        suppressed=tuple(_passage(d, rows[d.candidate.id]) for d in ranked.suppressed),
        terms=q.terms,
        rank_terms=tuple(q.terms[i] for i in rank_on),
        considered=ranked.considered,
        generated=len(found),
        rejected=ranked.rejected,
        semantic_floor=floor or 0.0,
        semantic_calibrated=floor is not None,
        embedding_model=model,
        semantic_used=not note and library is not None,
        semantic_note=note,
        rejections=tuple(_rejection(d, rows[d.candidate.id]) for d in rejected[:REJECTIONS_KEPT]),
    )
    lines = tuple(_line(d, rows.get(d.candidate.id)) for d in ranked.decisions)
    return Retrieval(result=result, query=q, decisions=lines)


def _found(
    semantic: list[tuple[int, float]], hits: list[lexical.LexicalHit], named: dict[int, keys.KeyMatch]
) -> dict[int, tuple[lexical.LexicalHit | None, float | None]]:
    """Each generated passage's lexical hit and cosine, the semantic path's
    first, then the lexical path's, then passages named only by a key (the
    order the decisions are listed in, before ranking)."""
    found: dict[int, tuple[lexical.LexicalHit | None, float | None]] = {
        chunk_id: (None, similarity) for chunk_id, similarity in semantic
    }
    for hit in hits:
        found[hit.chunk_id] = (hit, found.get(hit.chunk_id, (None, None))[1])
    for chunk_id in named:
        found.setdefault(chunk_id, (None, None))
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


#: Key indexes kept per process, one per (database, campaign).
_key_cache: OrderedDict[tuple, tuple[tuple, list[tuple[int, int, keys.EntryKeys]]]] = OrderedDict()


def _named_by_key(campaign_id: int, q: Query, stamp: tuple[tuple, frozenset]) -> dict[int, keys.KeyMatch]:
    """The passages of searchable sources whose entry's keys the scene names
    (or names to no effect, with the reason), by chunk id."""
    library_stamp, searchable = stamp
    indexed = _key_index(campaign_id, library_stamp)
    if not indexed or not q.text.strip():
        return {}
    live = [(chunk_id, entry) for chunk_id, source_id, entry in indexed if source_id in searchable]
    by_entry = keys.match({entry for _, entry in live}, q.text, q.standing_words)
    return {chunk_id: by_entry[entry.entry_id] for chunk_id, entry in live if entry.entry_id in by_entry}


def _key_index(campaign_id: int, library_stamp: tuple) -> list[tuple[int, int, keys.EntryKeys]]:
    """(chunk id, source id, its entry's keys) for the campaign's keyed
    passages, cached until the library stamp changes."""
    key = (connection.alias, str(connection.settings_dict.get("NAME")), campaign_id)
    with _cache_lock:
        cached = _key_cache.get(key)
    if cached is not None and cached[0] == library_stamp:
        return cached[1]
    entries: dict[int, keys.EntryKeys] = {}
    indexed = []
    for chunk_id, source_id, entry_id, plain, patterns, secondary, *settings, format_name in (
        selectors.keyed_passages(campaign_id)
    ):
        if entry_id not in entries:
            entries[entry_id] = _entry_keys(entry_id, plain, patterns, secondary, settings, format_name)
        if entries[entry_id].keys or entries[entry_id].regex_keys:
            indexed.append((chunk_id, source_id, entries[entry_id]))
    with _cache_lock:
        _key_cache[key] = (library_stamp, indexed)
        _key_cache.move_to_end(key)
        while len(_key_cache) > CACHED_LIBRARIES * 4:
            _key_cache.popitem(last=False)
    return indexed


def _entry_keys(entry_id, plain, patterns, secondary, settings, format_name: str) -> keys.EntryKeys:
    """An entry's keys as knowledge.keys matches them. KoboldAI matches keys
    as lowercase substrings; SillyTavern's per-entry settings are read where
    the entry has them (None means the book's default: whole words, any case)."""
    selective, logic, case_sensitive, whole_words = settings
    return keys.EntryKeys(
        entry_id=entry_id,
        keys=tuple(str(k) for k in plain or ()),
        regex_keys=tuple(str(k) for k in patterns or ()),
        secondary_keys=tuple(str(k) for k in secondary or ()),
        selective=selective is not False,
        logic=logic if isinstance(logic, int) and not isinstance(logic, bool) else keys.AND_ANY,
        substring=format_name.startswith("KoboldAI") or whole_words is False,
        case_sensitive=case_sensitive is True,
    )


def _always_included(campaign_id: int) -> list[int]:
    """The always-included Canon passages' ids, asked of the few source rows
    first: most campaigns have none, and then the passages are not read.
    Only Canon can be always included (the source's check constraint)."""
    sources = list(
        KnowledgeSource.objects.filter(
            campaign_id=campaign_id, enabled=True, index_state=Ready, always_include=True
        ).values_list("pk", flat=True)
    )
    chosen = []
    if sources:
        chosen = list(
            KnowledgeChunk.objects.filter(source_id__in=sources)
            .order_by("source__title", "source_id", "index")
            .values_list("pk", flat=True)[:ALWAYS_LIMIT]
        )
    if len(chosen) < ALWAYS_LIMIT and KnowledgeSource.objects.filter(campaign_id=campaign_id).exclude(format="").exists():
        taken = set(chosen)
        entries = selectors.always_included_entries(campaign_id, limit=ALWAYS_LIMIT)
        chosen += [c for c in entries if c not in taken][: ALWAYS_LIMIT - len(chosen)]
    return chosen


def _candidate(
    chunk_id: int,
    hit: lexical.LexicalHit | None,
    similarity: float | None,
    chunk: KnowledgeChunk | None,
    q: Query,
    vectors: dict[int, tuple[np.ndarray, float | None]],
    always: list[int],
    named: keys.KeyMatch | None = None,
) -> Candidate:
    """A generated passage as the core's record. The terms its own words
    hold confirm its short-term matches (the databases' stemmers fold short
    words onto stop words) and serve the standing-names rule."""
    by_key: dict = {}
    if named is not None:
        by_key = {"keys": named.keys, "key_refusal": named.why}
        if named.vetoed:
            by_key["withdrawn"] = "held back by its secondary keys"
    if chunk is None:
        matched = hit.matched - _short(q) if hit else frozenset()
        return Candidate(
            id=chunk_id, kind="", text="", matched=matched,
            lexical=hit.score if hit else None, cosine=similarity, **{**by_key, "withdrawn": WITHDRAWN},
        )
    held = matched_terms(q.terms, chunk.text, chunk.heading_path)
    matched = frozenset()
    if hit is not None:
        matched = (hit.matched - _short(q)) | (hit.matched & held)
    vector, share = vectors.get(chunk_id, (None, None))
    return Candidate(
        id=chunk_id,
        kind=chunk.source.classification,
        text=chunk.text,
        matched=matched,
        lexical=hit.score if hit else None,
        cosine=similarity,
        shared=held,
        vector=vector,
        hub=hubs.hub_reason(share, chunk.token_count) if vector is not None else "",
        always=chunk_id in always,
        **by_key,
    )


def _short(q: Query) -> frozenset[int]:
    return frozenset(i for i, term in enumerate(q.terms) if len(term) <= SHORT_TERM)


def _always_candidate(chunk: KnowledgeChunk, vectors: dict[int, tuple[np.ndarray, float | None]]) -> Candidate:
    return Candidate(
        id=chunk.pk, kind=chunk.source.classification, text=chunk.text,
        vector=vectors.get(chunk.pk, (None, None))[0], always=True,
    )


def _passage(decision: Decision, chunk: KnowledgeChunk) -> KnowledgeCandidate:
    source = chunk.source
    return KnowledgeCandidate(
        chunk_id=chunk.pk,
        source_id=source.pk,
        title=source.title,
        filename=source.original_filename,
        classification=source.classification,
        visibility=source.visibility,
        chunk_index=chunk.index,
        heading_path=chunk.heading_path,
        text=chunk.text,
        token_count=chunk.token_count,
        always_include=decision.candidate.always,
        lexical=decision.lexical,
        semantic=decision.semantic,
        cosine=decision.cosine,
        matched_terms=decision.matched_terms,
        admitted_by=decision.by,
        relevance=decision.relevance,
        score=decision.score,
        duplicate_of=decision.duplicate_of,
    )


def _rejection(decision: Decision, chunk: KnowledgeChunk) -> Rejection:
    return Rejection(
        title=chunk.source.title,
        filename=chunk.source.original_filename,
        passage=chunk.index + 1,
        heading_path=chunk.heading_path,
        classification=chunk.source.classification,
        visibility=chunk.source.visibility,
        matched_terms=decision.matched_terms,
        lexical=decision.raw_lexical,
        cosine=decision.cosine,
        why=decision.why,
    )


def _line(decision: Decision, chunk: KnowledgeChunk | None) -> dict:
    """A decision as the `retrieve` command prints it."""
    candidate = decision.candidate
    line: dict = {"chunk_id": candidate.id}
    if candidate.cosine is not None:
        line["cosine"] = decision.cosine
    if candidate.lexical is not None:
        line.update(lexical=decision.raw_lexical, matched_terms=list(decision.matched_terms))
    if chunk is not None:
        line.update(
            source=chunk.source.title,
            filename=chunk.source.original_filename,
            classification=chunk.source.classification,
            visibility=chunk.source.visibility,
            passage=chunk.index + 1,
            heading_path=chunk.heading_path,
        )
    line["admitted"] = decision.admitted
    if decision.admitted:
        line.update(admitted_by=decision.by, relevance=decision.relevance, score=decision.score)
        if decision.duplicate_of is not None:
            line["suppressed_as_duplicate_of"] = decision.duplicate_of
        else:
            line["rank"] = decision.rank
    line["why"] = decision.why
    return line


# --------------------------------------------------------------- semantic path


def _semantic(
    campaign_id: int,
    embed_query: EmbedQuery | None,
    model: str,
    floor: float | None,
    q: Query,
    query_vector: np.ndarray | None,
    stamp: tuple[tuple, frozenset],
) -> tuple[list[tuple[int, float]], str, _Library | None, np.ndarray | None]:
    """Top cosine candidates over the whole library, the library and the
    query's unit vector; or none of them and the reason."""
    if not model:
        return [], "No embedding model is configured for this campaign's endpoint, so retrieval is lexical only.", None, None
    if localembed.is_local(model) and (absent := localembed.missing(model)):
        return [], absent, None, None
    if floor is None:
        # Cosine scales differ between models: borrowing another model's floor
        # is how a model that scores unrelated text higher readmits everything.
        calibrated = calibration.calibrated_models()
        return [], (
            f"The embedding model “{model}” has no measured relevance floor, so semantic retrieval is "
            f"disabled and retrieval is lexical only. Run `manage.py calibrate_embeddings --model {model}`. "
            f"Calibrated models: {', '.join(calibrated) or 'none'}."
        ), None, None
    if not words(q.semantic_text):
        return [], "Nothing in the current scene to search on.", None, None
    library = library_for(campaign_id, model, stamp=stamp)
    if library.size == 0:
        why = (
            KnowledgeSource.objects.filter(campaign_id=campaign_id, enabled=True, index_state=Ready)
            .exclude(error="").values_list("error", flat=True).first()
        )
        return [], (
            f"No passage has been embedded with “{model}” yet, so retrieval is lexical only."
            + (f" {why}" if why else "")
        ), None, None
    if query_vector is None:
        if embed_query is None:
            return [], "No query embedder was given, so retrieval is lexical only this turn.", None, None
        query_vector, failure = embed_query(q.semantic_text)
        if query_vector is None:
            return [], f"Semantic retrieval unavailable this turn: {failure}", None, None
    query_vector = np.asarray(query_vector, dtype=DTYPE)
    if query_vector.shape != (library.dimensions,):
        return [], (
            f"The query vector has {query_vector.size} dimensions and the library's “{model}” vectors "
            f"{library.dimensions}; semantic retrieval skipped this turn."
        ), None, None
    norm = float(np.linalg.norm(query_vector))
    if norm == 0:
        return [], "The query vector is all zeros; semantic retrieval skipped this turn.", None, None
    unit = query_vector / norm
    return library.top(unit, SEMANTIC_CANDIDATES), "", library, unit


@dataclass
class _Library:
    """One campaign's vectors from one model: ids sorted, rows unit length."""

    stamp: tuple
    chunk_ids: np.ndarray
    source_ids: np.ndarray
    matrix: np.ndarray
    #: Each row's neutral share (knowledge.hubs), NaN where unmeasured.
    shares: np.ndarray = field(default_factory=lambda: np.zeros(0))
    searchable: frozenset = frozenset()
    mask: np.ndarray | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def size(self) -> int:
        return int(self.chunk_ids.size)

    @property
    def dimensions(self) -> int:
        return int(self.matrix.shape[1]) if self.matrix.ndim == 2 else 0

    def top(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        norm = float(np.linalg.norm(query))
        if norm == 0:
            return []
        scores = self.matrix @ (query / norm)
        if self.mask is not None:
            scores = np.where(self.mask, scores, -np.inf)
        k = min(k, scores.size)
        best = np.argpartition(-scores, k - 1)[:k]
        best = best[np.argsort(-scores[best], kind="stable")]
        return [(int(self.chunk_ids[i]), float(scores[i])) for i in best if np.isfinite(scores[i])]

    def vectors_for(self, chunk_ids) -> dict[int, tuple[np.ndarray, float | None]]:
        """Each passage's unit vector and neutral share, for those that have one."""
        wanted = np.asarray(sorted(int(c) for c in chunk_ids), dtype=np.int64)
        if not wanted.size or not self.size:
            return {}
        at = np.searchsorted(self.chunk_ids, wanted)
        at = np.clip(at, 0, self.size - 1)
        found = self.chunk_ids[at] == wanted
        return {
            int(c): (self.matrix[i], None if np.isnan(self.shares[i]) else float(self.shares[i]))
            for c, i, ok in zip(wanted, at, found, strict=True)
            if ok
        }


_cache: OrderedDict[tuple, _Library] = OrderedDict()
_cache_lock = threading.Lock()


def library_for(campaign_id: int, model: str, *, stamp: tuple[tuple, frozenset] | None = None) -> _Library:
    """The cached library, reloaded when the campaign's sources say it changed.

    The stamp is read before the vectors, so a change committed in between
    leaves a newer matrix under an older stamp (one extra reload next turn),
    never an older matrix under a newer stamp.
    """
    key = (connection.alias, str(connection.settings_dict.get("NAME")), campaign_id, model)
    stamp, searchable = stamp or selectors.library_stamp(campaign_id)
    with _cache_lock:
        library = _cache.get(key)
        if library is not None:
            _cache.move_to_end(key)
    if library is None or library.stamp != stamp:
        library = _load(campaign_id, model, stamp)
        with _cache_lock:
            _cache[key] = library
            _cache.move_to_end(key)
            while len(_cache) > CACHED_LIBRARIES:
                _cache.popitem(last=False)
    with library.lock:
        if library.mask is None or library.searchable != searchable:
            mask = np.isin(library.source_ids, np.fromiter(searchable, dtype=np.int64, count=len(searchable)))
            library.mask = None if mask.all() else mask
            library.searchable = searchable
    return library


def _load(campaign_id: int, model: str, stamp: tuple) -> _Library:
    rows = (
        KnowledgeEmbedding.objects.filter(model=model, chunk__campaign_id=campaign_id)
        .order_by("chunk_id")
        .values_list("chunk_id", "chunk__source_id", "dimensions", "vector", "neutral_share")
    )
    ids: list[int] = []
    sources: list[int] = []
    blobs: list[bytes] = []
    shares: list[float] = []
    width = None
    for chunk_id, source_id, dimensions, vector, share in rows.iterator(chunk_size=5000):
        width = width or dimensions
        if dimensions != width:
            continue  # a vector of another width cannot be compared; skip it
        ids.append(chunk_id)
        sources.append(source_id)
        blobs.append(bytes(vector))
        shares.append(np.nan if share is None else share)
    if not ids:
        empty = np.zeros(0, dtype=np.int64)
        return _Library(stamp, empty, empty, np.zeros((0, 0), dtype=DTYPE))
    matrix = np.frombuffer(b"".join(blobs), dtype=DTYPE).reshape(len(ids), width).copy()
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    matrix /= norms
    return _Library(
        stamp, np.asarray(ids, dtype=np.int64), np.asarray(sources, dtype=np.int64), matrix,
        np.asarray(shares, dtype=np.float64),
    )


def clear_cache() -> None:
    """Forgets every cached library matrix and term profile in this process."""
    with _cache_lock:
        _cache.clear()
        _key_cache.clear()
    termstats.clear_cache()
