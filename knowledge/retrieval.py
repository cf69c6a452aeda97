"""Choosing which imported passages a turn is shown (DESIGN.md §5).

    query (knowledge.query) ─┬─▶ lexical candidates, top 40 (knowledge.lexical,
                             │   found by the library's rarest terms: knowledge.termstats)
                             └─▶ semantic candidates, top 40 (cosine, whole library)
        ─▶ ADMISSION on absolute signals ─▶ always-included Canon joins
        ─▶ RANKING among survivors ─▶ near-duplicate suppression (within a class)
        ─▶ KnowledgeResult ─▶ contextbuild.inject (the budget cut)

Admission comes before ranking, and the order is the point. Admission asks
whether a passage matched *at all*, using signals that mean something on
their own: how many distinct meaningful query terms it holds (standing
entities, everyday English and words common in this library never count,
knowledge.query.lexical_admits), and the raw cosine against the floor
measured for exactly this embedding model (EmbeddingCalibration).
A passage admitted by cosine alone whose only words in common with the query
are standing entities is refused too: the cast is in every query, so a
similarity carried by their names (a short hidden file about the protagonist)
says nothing about the scene. A passage sharing no term at all is a match by
meaning, which is what the semantic path is for, and stays.
Neither compares a candidate with the others, so a library in which nothing
matches supplies nothing. The seed's first version normalized against the
best candidate and then floored at a share of the best, which the best clears
by construction: a query about tide tables and container tonnage retrieved a
whole fantasy library, hidden Canon included.

Ranking then normalizes each path against its best *admitted* value (bm25 and
ts_rank have no fixed range, and cosine's zero is not zero), takes
`max + 0.15 × min` so a passage found by one path is not thereby worse and
agreement breaks ties, and multiplies by the class weight. The class orders
what matched; it never rescues what did not.

Suppression runs before the budget cut (so a freed slot can go to something
else) and never across classes: identical text, or cosine ≥ 0.93 when both
passages have vectors. There is no model reranker: a second inference call
per turn, and opaque to the inspector.

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
from dataclasses import dataclass, field, replace

import numpy as np
from django.db import connection

from contextbuild.records import CANON, INSPIRATION, REFERENCE, KnowledgeCandidate, KnowledgeResult, Rejection

from . import lexical, selectors, termstats
from .embeddings import DTYPE
from .models import EmbeddingCalibration, KnowledgeChunk, KnowledgeEmbedding, KnowledgeSource
from .query import (
    SHORT_TERM,
    Query,
    QueryInputs,
    assemble,
    lexical_admits,
    passage_keys,
    stem,
    why_not_admitted,
    words,
)

LEXICAL_CANDIDATES = 40
#: Rejected candidates a turn's snapshot lists with their reasons (the strongest first).
REJECTIONS_KEPT = 25
SEMANTIC_CANDIDATES = 40
#: How much agreement between the two paths is worth when ordering survivors.
AGREEMENT = 0.15
#: Authority orders what matched: Canon > Reference > Inspiration.
CLASS_WEIGHTS = {CANON: 1.0, REFERENCE: 0.85, INSPIRATION: 0.7}
#: Two passages this close say the same thing (measured for the memory bank:
#: redundant pairs 0.938-0.996, distinct ones up to 0.906).
REDUNDANT_SIMILARITY = 0.93
#: Always-included Canon passages loaded per turn; inject caps what is shown
#: at 20 % of the budget, this only keeps the read bounded.
ALWAYS_LIMIT = 200
#: Libraries kept in memory per process (a 100,000-passage library at 384
#: dimensions is 150 MB).
CACHED_LIBRARIES = 4

Ready = KnowledgeSource.IndexState.READY


@dataclass(frozen=True)
class Retrieval:
    """A retrieval with its workings: the result, the query, and one decision
    per generated candidate (for the `retrieve` command)."""

    result: KnowledgeResult
    query: Query
    decisions: tuple[dict, ...] = ()


#: Turns the scene's text into its query vector, or returns None and why
#: (knowledge.embeddings.for_retrieval builds one from an endpoint profile).
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
    worked = explain(
        campaign_id=campaign_id, query=query, embedding_model=embedding_model,
        embed_query=embed_query, query_vector=query_vector, decisions=True,
    )
    rejected = [d for d in worked.decisions if not d["admitted"] and "passage" in d]
    return replace(worked.result, rejections=tuple(_rejection(d) for d in rejected[:REJECTIONS_KEPT]))


def _rejection(decision: dict) -> Rejection:
    return Rejection(
        title=decision["source"],
        filename=decision["filename"],
        passage=decision["passage"],
        heading_path=decision["heading_path"],
        classification=decision["classification"],
        visibility=decision["visibility"],
        matched_terms=tuple(decision.get("matched_terms", ())),
        lexical=decision.get("lexical"),
        cosine=decision.get("cosine"),
        why=decision["why"],
    )


def semantic_floor(model: str) -> float | None:
    """The calibrated cosine floor for exactly `model`, or None."""
    if not model:
        return None
    return EmbeddingCalibration.objects.filter(model=model).values_list("floor", flat=True).first()


def explain(
    *,
    campaign_id: int,
    query: QueryInputs,
    embedding_model: str = "",
    embed_query: EmbedQuery | None = None,
    query_vector: np.ndarray | None = None,
    decisions: bool = False,
) -> Retrieval:
    """`retrieve`, keeping its workings.

    1. Assemble the query; generate lexical and semantic candidates.
    2. Admit on absolute signals.
    3. Load the survivors and always-included Canon, in one scoped query.
    4. Rank the survivors; suppress near-duplicates within a class.
    """
    q = assemble(query)
    model = embedding_model.strip()
    floor = semantic_floor(model)

    stamp = selectors.library_stamp(campaign_id)
    rank_on: list[int] = []
    distinctive: set[int] = set()
    hits = []
    if q.terms:
        counts = termstats.profile_for(campaign_id, stamp[0])
        rank_on = termstats.rank_terms(q.terms, counts)
        distinctive = termstats.distinctive_terms(q.terms, counts)
        hits = _confirmed(
            lexical.search(campaign_id=campaign_id, terms=q.terms, rank_on=rank_on, limit=LEXICAL_CANDIDATES), q
        )
    semantic, note, library = _semantic(campaign_id, embed_query, model, floor, q, query_vector, stamp)

    # ---- admission: per passage, per path, never against the others
    admitted: dict[int, dict] = {}
    record: dict[int, dict] = {}
    for chunk_id, similarity in semantic:
        entry = record.setdefault(chunk_id, {"chunk_id": chunk_id})
        entry["cosine"] = round(similarity, 4)
        if floor is not None and similarity >= floor:
            admitted.setdefault(chunk_id, {})["semantic"] = similarity
    lexical_raw = {}
    for hit in hits:
        lexical_raw[hit.chunk_id] = hit.score
        entry = record.setdefault(hit.chunk_id, {"chunk_id": hit.chunk_id})
        entry["lexical"] = round(hit.score, 4)
        entry["matched_terms"] = sorted(q.terms[i] for i in hit.matched if i < len(q.terms))
        if lexical_admits(hit.matched, q.terms, q.standing, q.shares, distinctive):
            admitted.setdefault(hit.chunk_id, {})["lexical"] = hit.matched
        else:
            entry["lexical_reason"] = why_not_admitted(hit.matched, q.terms, q.standing, distinctive)
    generated = len(record)

    always_sources = list(
        KnowledgeSource.objects.filter(
            campaign_id=campaign_id, enabled=True, index_state=Ready, always_include=True, classification=CANON
        ).values_list("pk", flat=True)
    )
    # Asked of the few source rows first: most campaigns have none, and then
    # the passages are not read at all.
    always = list(
        KnowledgeChunk.objects.filter(source_id__in=always_sources)
        .order_by("source__title", "source_id", "index")
        .values_list("pk", flat=True)[:ALWAYS_LIMIT]
    ) if always_sources else []
    wanted = set(admitted) | set(always)
    if decisions and record:
        wanted_rows = set(record) | set(always)
    else:
        wanted_rows = wanted
    rows = {c.pk: c for c in selectors.searchable_chunks(campaign_id=campaign_id, chunk_ids=sorted(wanted_rows))}
    for chunk_id, how in list(admitted.items()):
        if set(how) == {"semantic"} and chunk_id in rows:
            names = _standing_only(rows[chunk_id], q)
            if names:
                # The cast is in every query, so a similarity carried by their
                # names says nothing about the scene: the lexical rule's
                # reasoning, applied to the words the two texts share.
                del admitted[chunk_id]
                record[chunk_id]["semantic_reason"] = (
                    "shares only standing entities with the query (" + ", ".join(names) + ")"
                )
    wanted = set(admitted) | set(always)

    # ---- ranking, among the survivors only
    survivors = [c for c in admitted if c in rows]
    lexical_top = max((lexical_raw[c] for c in survivors if "lexical" in admitted[c]), default=0.0)
    semantic_top = max((admitted[c]["semantic"] for c in survivors if "semantic" in admitted[c]), default=0.0)
    candidates: list[KnowledgeCandidate] = []
    for chunk_id in sorted(wanted):
        chunk = rows.get(chunk_id)
        if chunk is None:
            continue
        how = admitted.get(chunk_id, {})
        lex = _normalized(lexical_raw.get(chunk_id, 0.0), lexical_top) if "lexical" in how else 0.0
        sem = _normalized(how["semantic"], semantic_top) if "semantic" in how else 0.0
        relevance = max(lex, sem) + AGREEMENT * min(lex, sem)
        matched = ()
        if chunk_id in lexical_raw:
            matched = tuple(record[chunk_id].get("matched_terms", ()))
        cosine = record.get(chunk_id, {}).get("cosine")
        candidates.append(
            _candidate(
                chunk,
                always_include=chunk_id in always,
                lexical=round(lex, 4),
                semantic=round(sem, 4),
                cosine=cosine,
                matched_terms=matched,
                admitted_by=_admitted_by(how, chunk_id in always),
                relevance=round(relevance, 4),
                score=round(relevance * CLASS_WEIGHTS.get(chunk.source.classification, 0.5), 4),
            )
        )
    candidates.sort(key=lambda c: (not (c.always_include and c.classification == CANON), -c.score, c.chunk_id))
    kept, suppressed = _suppress(candidates, library)

    result = KnowledgeResult(
        candidates=tuple(kept),
        suppressed=tuple(suppressed),
        terms=q.terms,
        rank_terms=tuple(q.terms[i] for i in rank_on),
        considered=len(candidates),
        generated=generated,
        rejected=generated - len(admitted),
        semantic_floor=floor or 0.0,
        semantic_calibrated=floor is not None,
        embedding_model=model,
        semantic_used=not note and library is not None,
        semantic_note=note,
    )
    explained = ()
    if decisions:
        explained = tuple(_decisions(record, admitted, rows, kept, suppressed, floor))
    return Retrieval(result=result, query=q, decisions=explained)


def _confirmed(hits: list[lexical.LexicalHit], q: Query) -> list[lexical.LexicalHit]:
    """The hits with each short term's match (knowledge.query.SHORT_TERM)
    checked against the passage's own words; longer stems are specific
    enough to trust."""
    short = {i for i, term in enumerate(q.terms) if len(term) <= SHORT_TERM}
    doubtful = [hit.chunk_id for hit in hits if hit.matched & short]
    if not doubtful:
        return hits
    held = {
        pk: passage_keys(heading_path, text)
        for pk, heading_path, text in KnowledgeChunk.objects.filter(pk__in=doubtful).values_list(
            "pk", "heading_path", "text"
        )
    }
    return [
        replace(
            hit,
            matched=frozenset(
                i for i in hit.matched if i not in short or stem(q.terms[i]) in held.get(hit.chunk_id, ())
            ),
        )
        for hit in hits
    ]


def _standing_only(chunk: KnowledgeChunk, q: Query) -> list[str]:
    """The standing-entity words a passage shares with the query, when those
    are all it shares; [] when it shares another term, or nothing at all (a
    match by meaning alone, which is what the semantic path is for)."""
    held = passage_keys(chunk.heading_path, chunk.text)
    shared = [t for t in q.terms if stem(t) in held]
    standing = q.standing_words
    if shared and all(stem(t) in standing for t in shared):
        return shared
    return []


def _normalized(value: float, top: float) -> float:
    return value / top if top > 0 else 0.0


def _admitted_by(how: dict, always: bool) -> str:
    if len(how) == 2:
        return "both"
    if how:
        return next(iter(how))
    return "always" if always else ""


def _candidate(chunk: KnowledgeChunk, **scores) -> KnowledgeCandidate:
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
        **scores,
    )


def _suppress(
    ranked: list[KnowledgeCandidate], library: _Library | None
) -> tuple[list[KnowledgeCandidate], list[KnowledgeCandidate]]:
    """Sets aside passages that repeat a higher-ranked one of the same class:
    identical text, or cosine ≥ REDUNDANT_SIMILARITY when both have vectors.
    Wording overlap is not used: "Mara promised Aldric" and "Aldric promised
    Mara" share their words and mean the opposite."""
    vectors = library.vectors_for([c.chunk_id for c in ranked]) if library is not None else {}
    kept: list[KnowledgeCandidate] = []
    suppressed: list[KnowledgeCandidate] = []
    seen: dict[tuple[str, str], int | str] = {}
    for candidate in ranked:
        duplicate_of = seen.get((candidate.classification, candidate.text.strip()))
        vector = vectors.get(candidate.chunk_id)
        if duplicate_of is None and vector is not None:
            for other in kept:
                other_vector = vectors.get(other.chunk_id)
                if (
                    other.classification == candidate.classification
                    and other_vector is not None
                    and float(vector @ other_vector) >= REDUNDANT_SIMILARITY
                ):
                    duplicate_of = other.chunk_id
                    break
        if duplicate_of is None:
            seen.setdefault((candidate.classification, candidate.text.strip()), candidate.chunk_id)
            kept.append(candidate)
        else:
            suppressed.append(replace(candidate, duplicate_of=duplicate_of))
    return kept, suppressed


def _decisions(record, admitted, rows, kept, suppressed, floor) -> list[dict]:
    """One line per generated candidate: admitted (and its rank) or why not."""
    rank = {c.chunk_id: i + 1 for i, c in enumerate(kept)}
    dupes = {c.chunk_id: c.duplicate_of for c in suppressed}
    scores = {c.chunk_id: c for c in (*kept, *suppressed)}
    out = []
    for chunk_id, entry in record.items():
        chunk = rows.get(chunk_id)
        line = dict(entry)
        if chunk is not None:
            line.update(
                source=chunk.source.title,
                filename=chunk.source.original_filename,
                classification=chunk.source.classification,
                visibility=chunk.source.visibility,
                passage=chunk.index + 1,
                heading_path=chunk.heading_path,
            )
        how = admitted.get(chunk_id)
        if how and chunk is not None:
            line["admitted"] = True
            line["admitted_by"] = _admitted_by(how, False)
            candidate = scores.get(chunk_id)
            if candidate is not None:
                line.update(relevance=candidate.relevance, score=candidate.score)
            if chunk_id in dupes:
                line["suppressed_as_duplicate_of"] = dupes[chunk_id]
            else:
                line["rank"] = rank.get(chunk_id)
        else:
            line["admitted"] = False
            reasons = []
            if "lexical" in entry:
                reasons.append("lexical: " + entry.get("lexical_reason", "admitted"))
            if "semantic_reason" in entry:
                reasons.append("semantic: " + entry["semantic_reason"])
            elif "cosine" in entry:
                reasons.append(f"semantic: cosine {entry['cosine']:.3f} below the floor {floor:.3f}")
            if how and chunk is None:
                reasons.append("its source is no longer enabled and ready")
            line["why"] = "; ".join(reasons)
        line.pop("lexical_reason", None)
        line.pop("semantic_reason", None)
        out.append(line)
    out.sort(key=lambda d: (not d["admitted"], d.get("rank") or 10**9, -(d.get("lexical") or 0)))
    return out


# --------------------------------------------------------------- semantic path


def _semantic(
    campaign_id: int,
    embed_query: EmbedQuery | None,
    model: str,
    floor: float | None,
    q: Query,
    query_vector: np.ndarray | None,
    stamp: tuple[tuple, frozenset],
) -> tuple[list[tuple[int, float]], str, _Library | None]:
    """Top cosine candidates over the whole library, or none and the reason."""
    if not model:
        return [], "No embedding model is configured for this campaign's endpoint, so retrieval is lexical only.", None
    if floor is None:
        # Cosine scales differ between models: borrowing another model's floor
        # is how a model that scores unrelated text higher readmits everything.
        calibrated = sorted(EmbeddingCalibration.objects.values_list("model", flat=True))
        return [], (
            f"The embedding model “{model}” has no measured relevance floor, so semantic retrieval is "
            f"disabled and retrieval is lexical only. Run `manage.py calibrate_embeddings --model {model}`. "
            f"Calibrated models: {', '.join(calibrated) or 'none'}."
        ), None
    if not words(q.semantic_text):
        return [], "Nothing in the current scene to search on.", None
    library = library_for(campaign_id, model, stamp=stamp)
    if library.size == 0:
        why = (
            KnowledgeSource.objects.filter(campaign_id=campaign_id, enabled=True, index_state=Ready)
            .exclude(error="").values_list("error", flat=True).first()
        )
        return [], (
            f"No passage has been embedded with “{model}” yet, so retrieval is lexical only."
            + (f" {why}" if why else "")
        ), None
    if query_vector is None:
        if embed_query is None:
            return [], "No query embedder was given, so retrieval is lexical only this turn.", None
        query_vector, failure = embed_query(q.semantic_text)
        if query_vector is None:
            return [], f"Semantic retrieval unavailable this turn: {failure}", None
    query_vector = np.asarray(query_vector, dtype=DTYPE)
    if query_vector.shape != (library.dimensions,):
        return [], (
            f"The query vector has {query_vector.size} dimensions and the library's “{model}” vectors "
            f"{library.dimensions}; semantic retrieval skipped this turn."
        ), None
    return library.top(query_vector, SEMANTIC_CANDIDATES), "", library


@dataclass
class _Library:
    """One campaign's vectors from one model: ids sorted, rows unit length."""

    stamp: tuple
    chunk_ids: np.ndarray
    source_ids: np.ndarray
    matrix: np.ndarray
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

    def vectors_for(self, chunk_ids) -> dict[int, np.ndarray]:
        wanted = np.asarray(sorted(int(c) for c in chunk_ids), dtype=np.int64)
        if not wanted.size or not self.size:
            return {}
        at = np.searchsorted(self.chunk_ids, wanted)
        at = np.clip(at, 0, self.size - 1)
        found = self.chunk_ids[at] == wanted
        return {int(c): self.matrix[i] for c, i, ok in zip(wanted, at, found, strict=True) if ok}


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
        .values_list("chunk_id", "chunk__source_id", "dimensions", "vector")
    )
    ids: list[int] = []
    sources: list[int] = []
    blobs: list[bytes] = []
    width = None
    for chunk_id, source_id, dimensions, vector in rows.iterator(chunk_size=5000):
        width = width or dimensions
        if dimensions != width:
            continue  # a vector of another width cannot be compared; skip it
        ids.append(chunk_id)
        sources.append(source_id)
        blobs.append(bytes(vector))
    if not ids:
        empty = np.zeros(0, dtype=np.int64)
        return _Library(stamp, empty, empty, np.zeros((0, 0), dtype=DTYPE))
    matrix = np.frombuffer(b"".join(blobs), dtype=DTYPE).reshape(len(ids), width).copy()
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    matrix /= norms
    return _Library(stamp, np.asarray(ids, dtype=np.int64), np.asarray(sources, dtype=np.int64), matrix)


def clear_cache() -> None:
    """Forgets every cached library matrix and term profile in this process."""
    with _cache_lock:
        _cache.clear()
    termstats.clear_cache()
