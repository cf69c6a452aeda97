"""PostgreSQL full-text backend: `tsvector` + a (campaign, tsvector) GIN index."""

from __future__ import annotations

import json

from django.db import DatabaseError, connection, transaction

from ..plannerscope import planner_settings
from . import LexicalHit

CONFIG = "english"
INDEX_NAME = "knowledge_chunk_campaign_search"
#: Rows one insert must write for the index's pending list to be merged and
#: the table's statistics renewed once it commits.
LARGE_WRITE = 2000


def install(schema_editor) -> None:
    """The GIN index. With btree_gin its first column is the campaign id, so
    the campaign filter is applied inside the index scan; where the extension
    cannot be created (no privilege), a GIN index on the vector alone."""
    with schema_editor.connection.cursor() as cursor:
        try:
            with transaction.atomic(using=schema_editor.connection.alias):
                cursor.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
            columns = "campaign_id, search"
        except DatabaseError:
            columns = "search"
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {INDEX_NAME} ON knowledge_knowledgechunk USING gin ({columns})"
        )


def uninstall(schema_editor) -> None:
    schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX_NAME}")


def insert(*, rows) -> None:
    """One INSERT for all the rows, from arrays, with the tsvector computed in
    it (heading trail weight A, text weight B). Writing the vector with a
    later UPDATE rewrote every row, and a statement per row spent more time
    on round trips than on indexing."""
    columns = list(zip(*rows, strict=True))
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO knowledge_knowledgechunk
                (source_id, campaign_id, "index", heading_path, text, token_count, entry_id, search)
            SELECT v.source_id, v.campaign_id, v.idx, v.heading_path, v.body, v.token_count, v.entry_id,
                   setweight(to_tsvector('{CONFIG}', v.heading_path), 'A')
                   || setweight(to_tsvector('{CONFIG}', v.body), 'B')
            FROM unnest(%s::bigint[], %s::bigint[], %s::integer[], %s::text[], %s::text[], %s::integer[],
                        %s::bigint[])
                 AS v(source_id, campaign_id, idx, heading_path, body, token_count, entry_id)
            """,
            [list(column) for column in columns],
        )
    if len(rows) >= LARGE_WRITE:
        transaction.on_commit(refresh_statistics)



def refresh_statistics() -> None:
    """After a large write: the GIN index's pending list merged (a freshly
    written 10,000-passage library answered its searches from the unsorted
    pending list, 180 ms a query, until autovacuum came) and the chunk
    table analysed, so the planner knows the campaign's new size at once.
    Run after the commit, outside the import's transaction: ANALYZE takes a
    lock concurrent imports would otherwise queue on."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT gin_clean_pending_list(%s::regclass)", [INDEX_NAME])
        cursor.execute("ANALYZE knowledge_knowledgechunk")


def search(
    *, campaign_id: int, terms: list[tuple[int, str]], ranking: list[tuple[int, str]], limit: int
) -> list[LexicalHit]:
    """1. Rank the matches of any `ranking` term with ts_rank, campaign and
    source state filtered in the same query, top `limit`. 2. For those rows
    only, test each of all the `terms` on its own."""
    sql, params = _ranking_query(campaign_id, ranking, limit)
    with planner_settings(INDEX_ONLY) as cursor:
        cursor.execute(sql, params)
        ranked = cursor.fetchall()
        if not ranked:
            return []
        matched = _evidence(cursor, [chunk_id for chunk_id, _ in ranked], terms)
    return [LexicalHit(chunk_id, float(score), matched.get(chunk_id, frozenset())) for chunk_id, score in ranked]


#: The matches are found through the (campaign, search) GIN index, never by
#: reading the campaign's rows (a sequential scan, or the campaign index
#: row by row): the planner prices `@@` per row as a cheap operator, but
#: each test decompresses the row's vector. At 100,000 passages in one
#: campaign, with fresh statistics it chose a sequential scan (760-970 ms
#: against 30-45 ms through the GIN index), and before ANALYZE a loop over
#: the campaign's 2,000 sources, each scanning the campaign index
#: (5.8-6.4 s); a 1,000-passage campaign read its rows through the campaign
#: index. Bitmap scans stay allowed, so the campaign index can still be
#: intersected with the GIN index's matches. Only this query is affected
#: (knowledge.plannerscope).
INDEX_ONLY = "SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = off"


def _ranking_query(campaign_id: int, ranking: list[tuple[int, str]], limit: int) -> tuple[str, list]:
    """The matches ranked in a materialized step of their own, then filtered
    to the searchable sources: joined in one step, the planner drove the
    search from the source rows (one index scan per source).

    The campaign id is cast to the column's type: btree_gin's operator class
    knows bigint = bigint only, so compared with an integer the campaign was
    tested row by row at the heap or through a second bitmap, never inside
    the GIN index (in a 1M-passage instance the two bitmaps cost 17-20 ms, the
    GIN index with the campaign in it 1.8 ms)."""
    any_term = " || ".join(["plainto_tsquery(%s::regconfig, %s)"] * len(ranking))
    params: list = []
    for _, term in ranking:
        params += [CONFIG, term]
    sql = f"""
        WITH q AS (SELECT {any_term} AS query),
        matches AS MATERIALIZED (
            SELECT c.id, c.source_id, ts_rank(c.search, q.query) AS score
            FROM knowledge_knowledgechunk c, q
            WHERE c.campaign_id = %s::bigint AND c.search @@ q.query
        )
        SELECT m.id, m.score
        FROM matches m
        WHERE m.source_id IN (
            SELECT s.id FROM knowledge_knowledgesource s
            WHERE s.campaign_id = %s AND s.enabled AND s.index_state = 'ready' AND s.format = ''
        )
        ORDER BY m.score DESC, m.id
        LIMIT %s
    """
    return sql, [*params, campaign_id, campaign_id, limit]


def explain(*, campaign_id: int, ranking: list[tuple[int, str]], limit: int, analyze: bool = False) -> dict:
    """The plan of `search`'s ranking query, as PostgreSQL's EXPLAIN
    (FORMAT JSON) gives it, under the same settings."""
    sql, params = _ranking_query(campaign_id, ranking, limit)
    with planner_settings(INDEX_ONLY) as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON{', ANALYZE' if analyze else ''}) {sql}", params)
        plan = cursor.fetchone()[0]
    return (plan if isinstance(plan, list) else json.loads(plan))[0]


def _evidence(cursor, ids: list[int], terms: list[tuple[int, str]]) -> dict[int, frozenset[int]]:
    """Which terms each of the ranked rows matched.

    A term matches a passage when all its lexemes are in the passage's
    vector, which is what `search @@ plainto_tsquery(term)` tests (both parse
    with the same configuration). The test is made here on lexeme sets, read
    once per row and once per term: asked of Postgres pair by pair, each of
    the 2,400 (row, term) tests decompressed the row's vector again.
    """
    cursor.execute(
        f"SELECT i, tsvector_to_array(to_tsvector('{CONFIG}', term)) "
        "FROM unnest(%s::integer[], %s::text[]) AS u(i, term)",
        [[i for i, _ in terms], [term for _, term in terms]],
    )
    # A term of stop words only has no lexemes and, as a tsquery, matches nothing.
    wanted = [(i, frozenset(lexemes)) for i, lexemes in cursor.fetchall() if lexemes]
    # One string per row, split here: the parser never puts white space in a
    # lexeme, and read as 200 arrays of a hundred strings the rows cost 2 ms
    # more a turn (9.6 against 7.5 ms at 100,000 passages in a 1M instance).
    cursor.execute(
        "SELECT id, array_to_string(tsvector_to_array(search), ' ') FROM knowledge_knowledgechunk WHERE id = ANY(%s)",
        [ids],
    )
    matched = {}
    for chunk_id, lexemes in cursor.fetchall():
        held = frozenset(lexemes.split(" ")) if lexemes else frozenset()
        matched[chunk_id] = frozenset(i for i, needed in wanted if needed <= held)
    return matched
