"""The semantic path: the campaign's library per (campaign, model), its
sources' vector segments mapped from disk (knowledge.segments) and cached in
this process, checked on every turn against the library stamp (or, on
PostgreSQL with pgvector, the same questions asked of the database:
knowledge.pgvector); the query vector and its top cosine candidates, or the
reason there are none this turn."""

from __future__ import annotations

import copy
import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from django.db import connection

from endpoints import calibration, localembed
from endpoints.embeddings import DTYPE

from .. import pgvector, segments, selectors
from ..models import KnowledgeSource
from ..query import Query
from ..query.vocabulary import words
from .beside import beside


SEMANTIC_CANDIDATES = 40
#: Libraries kept per process (a 100,000-passage library's 150 MB of vectors
#: at 384 dimensions are mapped: page cache shared between processes).
CACHED_LIBRARIES = 4

Ready = KnowledgeSource.IndexState.READY

#: Turns the scene's text into its query vector, or returns None and why
#: (endpoints.embeddings.for_retrieval builds one from an endpoint profile).
EmbedQuery = Callable[[str], tuple["np.ndarray | None", str]]


#: The semantic path's answer: its candidates, why there are none (or ""),
#: the library and the query's unit vector.
Outcome = tuple[list[tuple[int, float]], str, "Library | pgvector.Library | None", "np.ndarray | None"]


def semantic_started(
    campaign_id: int,
    embed_query: EmbedQuery | None,
    model: str,
    floor: float | None,
    q: Query,
    query_vector: np.ndarray | None,
    stamp: tuple[tuple, frozenset],
) -> Callable[[], Outcome]:
    """The top cosine candidates over the whole library, the library and
    the query's unit vector, or none of them and the reason. Begun here:
    the database half at once (the checks, the library by its stamp), the
    query's embedding and the mapped library's cosines beside the caller's
    own queries (knowledge.retrieval.beside); the call returned waits for
    them. On pgvector the nearest are a query, asked by the caller's thread."""
    note = _unavailable(model, floor, q)
    if note:
        return lambda: ([], note, None, None)
    library = library_for(campaign_id, model, stamp=stamp)
    if library.size == 0:
        why = stamp[0][0] and (
            KnowledgeSource.objects.filter(campaign_id=campaign_id, enabled=True, index_state=Ready)
            .exclude(error="").values_list("error", flat=True).first()
        )
        note = (
            f"No passage has been embedded with “{model}” yet, so retrieval is lexical only."
            + (f" {why}" if why else "")
        )
        return lambda: ([], note, None, None)
    if query_vector is None and embed_query is None:
        return lambda: ([], "No query embedder was given, so retrieval is lexical only this turn.", None, None)
    mapped = isinstance(library, Library)

    def vector_and_cosines():
        unit, failure = _unit_query(library, model, embed_query, q, query_vector)
        if unit is None:
            return [], failure, None, None
        return (library.top(unit, SEMANTIC_CANDIDATES) if mapped else None), "", library, unit

    waiting = beside(vector_and_cosines)

    def finished() -> Outcome:
        found, failure, searched, unit = waiting()
        if found is None:
            found = searched.top(unit, SEMANTIC_CANDIDATES)
        return found, failure, searched, unit

    return finished


def _unavailable(model: str, floor: float | None, q: Query) -> str:
    """Why the semantic path cannot run this turn before any vector is
    read, or ""."""
    if not model:
        return "No embedding model is configured for this campaign's endpoint, so retrieval is lexical only."
    if localembed.is_local(model) and (absent := localembed.missing(model)):
        return absent
    if floor is None:
        # Cosine scales differ between models: borrowing another model's floor
        # is how a model that scores unrelated text higher readmits everything.
        calibrated = calibration.calibrated_models()
        return (
            f"The embedding model “{model}” has no measured relevance floor, so semantic retrieval is "
            f"disabled and retrieval is lexical only. Run `manage.py calibrate_embeddings --model {model}`. "
            f"Calibrated models: {', '.join(calibrated) or 'none'}."
        )
    if not words(q.semantic_text):
        return "Nothing in the current scene to search on."
    return ""


def _unit_query(
    library, model: str, embed_query: EmbedQuery | None, q: Query, query_vector
) -> tuple[np.ndarray | None, str]:
    """The query's unit vector, embedded when none was given, or None and
    why. Runs beside the turn's queries: no database here."""
    if query_vector is None:
        query_vector, failure = embed_query(q.semantic_text)
        if query_vector is None:
            return None, f"Semantic retrieval unavailable this turn: {failure}"
    query_vector = np.asarray(query_vector, dtype=DTYPE)
    if query_vector.shape != (library.dimensions,):
        return None, (
            f"The query vector has {query_vector.size} dimensions and the library's “{model}” vectors "
            f"{library.dimensions}; semantic retrieval skipped this turn."
        )
    norm = float(np.linalg.norm(query_vector))
    if norm == 0:
        return None, "The query vector is all zeros; semantic retrieval skipped this turn."
    return query_vector / norm, ""


@dataclass
class Library:
    """One campaign's vectors from one model, as its sources' segments
    (knowledge.segments, mapped from disk); the per-row arrays in
    passage id order, the rows unit length."""

    stamp: tuple
    segments: list[segments.Segment]
    chunk_ids: np.ndarray = field(init=False)
    source_ids: np.ndarray = field(init=False)
    #: Each row's neutral share (knowledge.hubs), NaN where unmeasured.
    shares: np.ndarray = field(init=False)
    searchable: frozenset = frozenset()
    #: Rows of searchable sources, None when every row is.
    mask: np.ndarray | None = None

    def __post_init__(self) -> None:
        live = [s for s in self.segments if s.size]
        # A vector of another width than the first passage's cannot be compared.
        width = min(live, key=lambda s: int(s.chunk_ids[0])).width if live else 0
        self.segments = [s for s in live if s.width == width]
        self._width = width
        self._offsets = np.cumsum([0] + [s.size for s in self.segments[:-1]], dtype=np.int64)
        ids = self._concat([s.chunk_ids for s in self.segments], np.int64)
        order = None if np.all(ids[1:] >= ids[:-1]) else np.argsort(ids, kind="stable")
        #: Row order → passage id order, None when they are the same.
        self._order = order
        sources = self._concat([s.source_ids for s in self.segments], np.int64)
        shares = self._concat([s.shares for s in self.segments], np.float64)
        self.chunk_ids, self.source_ids, self.shares = (
            (ids, sources, shares) if order is None else (ids[order], sources[order], shares[order])
        )

    def searching(self, searchable: frozenset) -> Library:
        """This library limited to the searchable sources: a copy sharing
        the arrays, so the cached entry stays as other turns read it."""
        limited = copy.copy(self)
        mask = np.isin(self.source_ids, np.fromiter(searchable, dtype=np.int64, count=len(searchable)))
        limited.searchable, limited.mask = searchable, None if mask.all() else mask
        return limited

    @staticmethod
    def _concat(parts: list[np.ndarray], dtype) -> np.ndarray:
        return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype=dtype)

    @property
    def size(self) -> int:
        return int(self.chunk_ids.size)

    @property
    def dimensions(self) -> int:
        return self._width

    @property
    def matrix(self) -> np.ndarray:
        """The rows in passage id order, as one (private) array."""
        if not self.size:
            return np.zeros((0, 0), dtype=DTYPE)
        whole = np.concatenate([s.matrix for s in self.segments])
        return whole if self._order is None else whole[self._order]

    def top(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        norm = float(np.linalg.norm(query))
        if norm == 0 or not self.size:
            return []
        unit = query / norm
        scores = np.empty(self.size, dtype=np.result_type(DTYPE, unit.dtype))
        for segment, start in zip(self.segments, self._offsets, strict=True):
            np.matmul(segment.matrix, unit, out=scores[start : start + segment.size])
        if self._order is not None:
            scores = scores[self._order]
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
            int(c): (self._row(i), None if np.isnan(self.shares[i]) else float(self.shares[i]))
            for c, i, ok in zip(wanted, at, found, strict=True)
            if ok
        }

    def _row(self, i: int) -> np.ndarray:
        """The unit vector of the passage at position i in id order."""
        row = int(i if self._order is None else self._order[i])
        seg = int(np.searchsorted(self._offsets, row, side="right")) - 1
        return self.segments[seg].matrix[row - int(self._offsets[seg])]


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
    library = _cached(key)
    if library is None or library.stamp != stamp:
        library = _load(campaign_id, model, stamp).searching(searchable)
    elif library.searchable != searchable:
        library = library.searching(searchable)
    else:
        return library
    _publish(key, library, CACHED_LIBRARIES)
    return library


def _cached(key: tuple):
    """The cached entry, now the most recently used, or None."""
    with _cache_lock:
        library = _cache.get(key)
        if library is not None:
            _cache.move_to_end(key)
    return library


def _publish(key: tuple, library, limit: int) -> None:
    """Caches a library entry; narrations of one campaign share it from
    several threads, so it is replaced, never changed."""
    with _cache_lock:
        _cache[key] = library
        _cache.move_to_end(key)
        while len(_cache) > limit:
            _cache.popitem(last=False)


def _in_database(campaign_id: int, model: str, stamp: tuple, searchable: frozenset) -> pgvector.Library:
    """The campaign's pgvector store: its size and width asked again only
    when the stamp changes. Never changed once cached: narrations of one
    campaign share the entry from several threads, so other searchable
    sources make a new entry."""
    key = ("pgvector", connection.alias, str(connection.settings_dict.get("NAME")), campaign_id, model)
    library = _cached(key)
    if library is None or library.stamp != stamp:
        library = pgvector.library(campaign_id, model, stamp, searchable)
    elif library.searchable != searchable:
        library = dataclasses.replace(library, searchable=searchable)
    else:
        return library
    _publish(key, library, CACHED_LIBRARIES * 4)
    return library


def _load(campaign_id: int, model: str, stamp: tuple) -> Library:
    return Library(stamp, segments.load(campaign_id, model, stamp))


def clear() -> None:
    """Forgets every cached library matrix in this process."""
    with _cache_lock:
        _cache.clear()
    segments.clear()
