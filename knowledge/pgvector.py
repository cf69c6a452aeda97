"""pgvector as the semantic path's store on PostgreSQL, where the database
has the extension.

A process on the numpy path holds a campaign's whole library as a matrix
(150 MB at 100,000 passages of 384 dimensions, per process and campaign);
here the vectors stay in the database, in `knowledge_chunkvector` beside
the exact float32 blobs of KnowledgeEmbedding, under an HNSW index per
width (a partial index on `embedding::vector(N)`, so a campaign whose
embedding model changes width is re-embedded into an index of its own
width). A turn asks the index for the campaign's nearest passages with
pgvector 0.8's iterative scan, so the campaign and source filters cannot
starve the answer, then reads those candidates' stored vectors and orders
them by their exact cosine: what the ranking core judges is the same number
the numpy path gives it. The index is approximate in which passages it
offers at the margin of the top 40, never in a passage's cosine.

Rows are written beside every KnowledgeEmbedding write (`store`); a
statement trigger removes them with the embeddings they copy, and a chunk's
deletion cascades to them in the database. LOREMASTER_PGVECTOR=off keeps a
database with the extension on the numpy path (the benchmarks compare both).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import DatabaseError, connection, transaction

from endpoints.embeddings import DTYPE

from .models import KnowledgeEmbedding
from .plannerscope import planner_settings

TABLE = "knowledge_chunkvector"
#: The widths whose index the migration builds; another is indexed when its
#: first vector is stored.
KNOWN_WIDTHS = (384, 1024)
#: Candidates the HNSW scan looks at per query (pgvector's default is 40,
#: the number asked for: a wider beam finds the true nearest more often).
EF_SEARCH = 200
#: Rows an iterative scan may visit before it gives up on a filter that
#: keeps almost nothing (pgvector's default is 20,000).
MAX_SCAN_TUPLES = 100_000
#: A campaign this size or smaller is scanned exactly, through its campaign
#: index (a few milliseconds); a larger one through the HNSW index, which
#: the planner is then not allowed to replace by sorting the campaign's
#: rows (it prices each distance as a cheap operator: 100,000 of them are
#: not). A small campaign in a large instance is also where a filtered
#: approximate scan is weakest.
EXACT_UP_TO = 10_000

_known: dict[tuple, bool] = {}
_indexed: set[tuple] = set()
_lock = threading.Lock()


def install(schema_editor) -> str:
    """The extension, the table, its trigger and the known widths' indexes;
    or nothing, and why. Never fails a migration: without pgvector the numpy
    path serves the same retrieval."""
    if schema_editor.connection.vendor != "postgresql":
        return ""
    with schema_editor.connection.cursor() as cursor:
        try:
            with transaction.atomic(using=schema_editor.connection.alias):
                cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except DatabaseError as error:
            return (
                "pgvector is not available in this database "
                f"({str(error).strip().splitlines()[0]}); semantic retrieval uses the numpy path. "
                "Install the extension and run `manage.py migrate knowledge 0014 && manage.py migrate` to use it."
            )
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        (version,) = cursor.fetchone()
        if tuple(int(part) for part in version.split(".")[:2] if part.isdigit()) < (0, 8):
            return (
                f"pgvector {version} is older than 0.8, whose iterative index scans a campaign's search needs; "
                "semantic retrieval uses the numpy path. Upgrade the extension (ALTER EXTENSION vector UPDATE) and "
                "run `manage.py migrate knowledge 0014 && manage.py migrate` to use it."
            )
        cursor.execute(f"""
            CREATE TABLE IF NOT EXISTS {TABLE} (
                chunk_id bigint NOT NULL REFERENCES knowledge_knowledgechunk (id) ON DELETE CASCADE,
                model varchar(200) NOT NULL,
                campaign_id bigint NOT NULL,
                source_id bigint NOT NULL,
                dimensions integer NOT NULL,
                embedding vector NOT NULL,
                PRIMARY KEY (chunk_id, model)
            )
        """)
        cursor.execute(f"CREATE INDEX IF NOT EXISTS {TABLE}_campaign ON {TABLE} (campaign_id, model, dimensions)")
        cursor.execute(f"""
            CREATE OR REPLACE FUNCTION {TABLE}_forget() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                DELETE FROM {TABLE} v USING gone g WHERE v.chunk_id = g.chunk_id AND v.model = g.model;
                RETURN NULL;
            END $$
        """)
        cursor.execute(f"DROP TRIGGER IF EXISTS {TABLE}_forget ON knowledge_knowledgeembedding")
        cursor.execute(f"""
            CREATE TRIGGER {TABLE}_forget AFTER DELETE ON knowledge_knowledgeembedding
            REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION {TABLE}_forget()
        """)
        for width in KNOWN_WIDTHS:
            _create_index(cursor, width)
    _copy_stored(schema_editor.connection)
    return "pgvector is installed: semantic retrieval searches its HNSW index."


def uninstall(schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {TABLE}_forget ON knowledge_knowledgeembedding")
        schema_editor.execute(f"DROP TABLE IF EXISTS {TABLE}")
        schema_editor.execute(f"DROP FUNCTION IF EXISTS {TABLE}_forget()")


def _copy_stored(db) -> None:
    """The vectors stored before the store existed, copied in batches."""
    last = 0
    with db.cursor() as cursor:
        while True:
            cursor.execute(
                "SELECT chunk_id, model, vector FROM knowledge_knowledgeembedding WHERE chunk_id > %s "
                "ORDER BY chunk_id LIMIT 2000",
                [last],
            )
            rows = cursor.fetchall()
            if not rows:
                return
            last = rows[-1][0]
            by_model: dict[str, tuple[list, list]] = {}
            for chunk_id, model, blob in rows:
                ids, blobs = by_model.setdefault(model, ([], []))
                ids.append(chunk_id)
                blobs.append(bytes(blob))
            for model, (ids, blobs) in by_model.items():
                _insert(cursor, model, ids, blobs)


def _create_index(cursor, width: int) -> None:
    cursor.execute(
        f"CREATE INDEX IF NOT EXISTS {TABLE}_hnsw_{int(width)} ON {TABLE} "
        f"USING hnsw ((embedding::vector({int(width)})) vector_cosine_ops) WHERE dimensions = {int(width)}"
    )


def enabled() -> bool:
    """Whether this connection's database serves the semantic path from
    pgvector: PostgreSQL, the table present, and not switched off."""
    if connection.vendor != "postgresql" or not settings.LOREMASTER_PGVECTOR:
        return False
    key = _database()
    if key not in _known:
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [TABLE])
            _known[key] = bool(cursor.fetchone()[0])
    return _known[key]


def _database() -> tuple:
    return connection.alias, str(connection.settings_dict.get("NAME")), connection.settings_dict.get("PORT")


def store(chunk_ids: list[int], vectors: list[bytes], model: str) -> None:
    """Copies freshly stored embeddings (little-endian float32, as in
    KnowledgeEmbedding) into the store, in one statement."""
    if not chunk_ids or not enabled():
        return
    # CREATE INDEX IF NOT EXISTS takes the table's lock even when the index
    # exists, which would queue concurrent imports: asked once per width.
    widths = {(*_database(), len(v) // 4) for v in vectors}
    with connection.cursor() as cursor:
        for width in sorted(widths - _indexed):
            _create_index(cursor, width[-1])
            with _lock:
                _indexed.add(width)
        _insert(cursor, model, chunk_ids, vectors)


@contextmanager
def bulk_load():
    """For a bulk build (the instance benchmark): the HNSW indexes dropped
    for the load and built once after it. Growing the graph a row at a time
    took 12 minutes for 100,000 vectors here; one build is a fraction."""
    if not enabled():
        yield
        return
    with connection.cursor() as cursor:
        for width in KNOWN_WIDTHS:
            cursor.execute(f"DROP INDEX IF EXISTS {TABLE}_hnsw_{width}")
    with _lock:
        _indexed.update((*_database(), width) for width in KNOWN_WIDTHS)  # `store` must not build them meanwhile
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            # The graph is built in memory while it fits, several times
            # faster than on disk: 1M vectors at 384 dimensions need ~2.2 GB
            # (at 512 MB the build went to disk after 250,000 of them).
            cursor.execute("SET maintenance_work_mem = '3GB'")
            for width in KNOWN_WIDTHS:
                _create_index(cursor, width)


def _insert(cursor, model: str, chunk_ids: list[int], vectors: list[bytes]) -> None:
    cursor.execute(
        f"""
        INSERT INTO {TABLE} (chunk_id, model, campaign_id, source_id, dimensions, embedding)
        SELECT v.chunk_id, %s, c.campaign_id, c.source_id, v.dimensions, v.embedding::vector
        FROM unnest(%s::bigint[], %s::integer[], %s::text[]) AS v(chunk_id, dimensions, embedding)
        JOIN knowledge_knowledgechunk c ON c.id = v.chunk_id
        ON CONFLICT (chunk_id, model) DO UPDATE
            SET embedding = EXCLUDED.embedding, dimensions = EXCLUDED.dimensions
        """,
        [model, list(chunk_ids), [len(v) // 4 for v in vectors], [_literal(v) for v in vectors]],
    )


def _literal(blob: bytes) -> str:
    return "[" + ",".join(map(repr, np.frombuffer(blob, dtype=DTYPE).tolist())) + "]"


#: The settings of a search through the HNSW index.
APPROXIMATE = (
    f"SET LOCAL hnsw.ef_search = {EF_SEARCH}; SET LOCAL hnsw.iterative_scan = relaxed_order; "
    f"SET LOCAL hnsw.max_scan_tuples = {MAX_SCAN_TUPLES}; SET LOCAL enable_sort = off"
)


@dataclass
class Library:
    """One campaign's vectors from one model, in the database: the numpy
    Library's questions (size, width, nearest, the candidates' vectors)
    answered by queries, so no process holds the library."""

    campaign_id: int
    model: str
    stamp: tuple
    size: int
    dimensions: int
    searchable: frozenset = frozenset()

    def top(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        norm = float(np.linalg.norm(query))
        if norm == 0 or not self.size or not self.searchable:
            return []
        unit = np.asarray(query, dtype=DTYPE) / norm
        width = int(self.dimensions)
        with planner_settings(APPROXIMATE if self.size > EXACT_UP_TO else "") as cursor:
            cursor.execute(
                f"""
                SELECT chunk_id FROM {TABLE}
                WHERE campaign_id = %s AND model = %s AND dimensions = {width} AND source_id = ANY(%s::bigint[])
                ORDER BY embedding::vector({width}) <=> %s::vector({width})
                LIMIT %s
                """,
                [self.campaign_id, self.model, sorted(self.searchable), _literal(unit.tobytes()), k],
            )
            ids = [row[0] for row in cursor.fetchall()]
        vectors = self.vectors_for(ids)
        scored = sorted(((float(vectors[i][0] @ unit), i) for i in ids if i in vectors), key=lambda p: (-p[0], p[1]))
        return [(chunk_id, score) for score, chunk_id in scored]

    def vectors_for(self, chunk_ids) -> dict[int, tuple[np.ndarray, float | None]]:
        """Each passage's exact unit vector and neutral share, read from
        KnowledgeEmbedding for these passages only."""
        wanted = sorted({int(c) for c in chunk_ids})
        if not wanted:
            return {}
        rows = KnowledgeEmbedding.objects.filter(
            model=self.model, chunk_id__in=wanted, dimensions=self.dimensions
        ).values_list("chunk_id", "vector", "neutral_share")
        found = {}
        for chunk_id, blob, share in rows:
            vector = np.frombuffer(bytes(blob), dtype=DTYPE)
            norm = float(np.linalg.norm(vector))
            found[chunk_id] = (vector / norm if norm else vector, share)
        return found


def library(campaign_id: int, model: str, stamp: tuple, searchable: frozenset) -> Library:
    """The campaign's store for `model`: its size and the width of its
    first vector (the numpy path's rule: vectors of another width are
    skipped)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT dimensions FROM {TABLE} WHERE campaign_id = %s AND model = %s ORDER BY chunk_id LIMIT 1",
            [campaign_id, model],
        )
        first = cursor.fetchone()
        if first is None:
            return Library(campaign_id, model, stamp, 0, 0, searchable)
        cursor.execute(
            f"SELECT count(*) FROM {TABLE} WHERE campaign_id = %s AND model = %s AND dimensions = %s",
            [campaign_id, model, first[0]],
        )
        return Library(campaign_id, model, stamp, int(cursor.fetchone()[0]), int(first[0]), searchable)
