"""The semantic path: the campaign's whole library as one float32 matrix
per (campaign, model), normalized once and cached in this process, checked
on every turn against the library stamp (or, on PostgreSQL with pgvector,
the same questions asked of the database: knowledge.pgvector); the query
vector and its top cosine candidates, or the reason there are none this turn."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from django.db import connection

from endpoints import calibration, localembed
from endpoints.embeddings import DTYPE

from .. import pgvector, selectors
from ..models import KnowledgeEmbedding, KnowledgeSource
from ..query import Query
from ..query.vocabulary import words

SEMANTIC_CANDIDATES = 40
#: Libraries kept in memory per process (a 100,000-passage library at 384
#: dimensions is 150 MB).
CACHED_LIBRARIES = 4

Ready = KnowledgeSource.IndexState.READY

#: Turns the scene's text into its query vector, or returns None and why
#: (endpoints.embeddings.for_retrieval builds one from an endpoint profile).
EmbedQuery = Callable[[str], tuple["np.ndarray | None", str]]


def semantic_candidates(
    campaign_id: int,
    embed_query: EmbedQuery | None,
    model: str,
    floor: float | None,
    q: Query,
    query_vector: np.ndarray | None,
    stamp: tuple[tuple, frozenset],
) -> tuple[list[tuple[int, float]], str, Library | pgvector.Library | None, np.ndarray | None]:
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
class Library:
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


_cache: OrderedDict[tuple, Library] = OrderedDict()
_cache_lock = threading.Lock()


def library_for(
    campaign_id: int, model: str, *, stamp: tuple[tuple, frozenset] | None = None
) -> Library | pgvector.Library:
    """The cached library, reloaded when the campaign's sources say it changed.

    The stamp is read before the vectors, so a change committed in between
    leaves a newer matrix under an older stamp (one extra reload next turn),
    never an older matrix under a newer stamp.
    """
    stamp, searchable = stamp or selectors.library_stamp(campaign_id)
    if pgvector.enabled():
        return _in_database(campaign_id, model, stamp, searchable)
    key = (connection.alias, str(connection.settings_dict.get("NAME")), campaign_id, model)
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


def _in_database(campaign_id: int, model: str, stamp: tuple, searchable: frozenset) -> pgvector.Library:
    """The campaign's pgvector store: its size and width asked again only
    when the stamp changes; the searchable sources are the turn's."""
    key = ("pgvector", connection.alias, str(connection.settings_dict.get("NAME")), campaign_id, model)
    with _cache_lock:
        library = _cache.get(key)
    if library is None or library.stamp != stamp:
        library = pgvector.library(campaign_id, model, stamp, searchable)
        with _cache_lock:
            _cache[key] = library
            while len(_cache) > CACHED_LIBRARIES * 4:
                _cache.popitem(last=False)
    library.searchable = searchable
    return library


def _load(campaign_id: int, model: str, stamp: tuple) -> Library:
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
        return Library(stamp, empty, empty, np.zeros((0, 0), dtype=DTYPE))
    matrix = np.frombuffer(b"".join(blobs), dtype=DTYPE).reshape(len(ids), width).copy()
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    matrix /= norms
    return Library(
        stamp, np.asarray(ids, dtype=np.int64), np.asarray(sources, dtype=np.int64), matrix,
        np.asarray(shares, dtype=np.float64),
    )


def clear() -> None:
    """Forgets every cached library matrix in this process."""
    with _cache_lock:
        _cache.clear()
