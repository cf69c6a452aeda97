"""SQLite backend: an FTS5 table over the chunk rows.

The table is external-content (`content=knowledge_knowledgechunk`), so the
text is stored once. New chunks are indexed by `insert`, in one statement
right after the rows are written (the only way chunks are written); a
per-row insert trigger cost four times as much as the whole rest of a large
import. Deletes and updates are caught by triggers, so the cascades when a
source or a campaign is deleted keep the index exact. The campaign id is an
indexed column, and every query matches on it, so scoping happens inside the
index rather than after it.

A later migration that rebuilds `knowledge_knowledgechunk` on SQLite (Django
does that for most ALTERs) drops the triggers with the old table: it must
call `install()` again. tests/knowledge/test_lexical.py checks they exist.
"""

from __future__ import annotations

from django.db import connection

from . import LexicalHit

TABLE = "knowledge_chunk_fts"
TRIGGERS = ("knowledge_chunk_fts_delete", "knowledge_chunk_fts_update")
_COLUMNS = "campaign_id, heading_path, text"
_TOKENIZE = "porter unicode61 remove_diacritics 2"
#: bm25 weights per column: the campaign column only scopes, the heading
#: trail counts more than the text.
_WEIGHTS = "0.0, 4.0, 1.0"

_INSTALL = [
    f"""CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE} USING fts5(
        {_COLUMNS}, content='knowledge_knowledgechunk', content_rowid='id',
        tokenize='{_TOKENIZE}')""",
    f"""CREATE TRIGGER IF NOT EXISTS knowledge_chunk_fts_delete AFTER DELETE ON knowledge_knowledgechunk BEGIN
        INSERT INTO {TABLE}({TABLE}, rowid, {_COLUMNS})
        VALUES ('delete', old.id, old.campaign_id, old.heading_path, old.text);
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS knowledge_chunk_fts_update AFTER UPDATE ON knowledge_knowledgechunk BEGIN
        INSERT INTO {TABLE}({TABLE}, rowid, {_COLUMNS})
        VALUES ('delete', old.id, old.campaign_id, old.heading_path, old.text);
        INSERT INTO {TABLE}(rowid, {_COLUMNS}) VALUES (new.id, new.campaign_id, new.heading_path, new.text);
    END""",
    # Rows that existed before the table (none on a fresh install).
    f"INSERT INTO {TABLE}({TABLE}) VALUES ('rebuild')",
]


def install(schema_editor) -> None:
    for statement in _INSTALL:
        schema_editor.execute(statement)


def uninstall(schema_editor) -> None:
    for trigger in TRIGGERS:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    schema_editor.execute(f"DROP TABLE IF EXISTS {TABLE}")


def insert(*, rows) -> None:
    """The rows, then their index entries in one statement."""
    with connection.cursor() as cursor:
        # The write lock is held from here to commit (IMMEDIATE transactions),
        # so the rows after the current highest id are exactly these.
        cursor.execute("SELECT COALESCE(MAX(id), 0) FROM knowledge_knowledgechunk")
        (before,) = cursor.fetchone()
        cursor.executemany(
            'INSERT INTO knowledge_knowledgechunk (source_id, campaign_id, "index", heading_path, text, token_count, '
            "entry_id) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            rows,
        )
        cursor.execute(
            f"INSERT INTO {TABLE}(rowid, {_COLUMNS}) SELECT id, {_COLUMNS} FROM knowledge_knowledgechunk WHERE id > %s",
            [before],
        )


def _phrase(term: str) -> str:
    # `search` reduced each term to word characters and spaces, so quoting
    # each word is enough to keep it a plain token, never an operator.
    return "(" + " AND ".join(f'"{word}"' for word in term.split()) + ")"


def _scoped(campaign_id: int, expression: str) -> str:
    return f'campaign_id : "{int(campaign_id)}" AND ({expression})'


#: Best matches ranked before the source filter is applied: enough that the
#: filter (disabled, unready and lorebook sources) nearly always leaves
#: `limit`; when it does not, the search is run again with the filter joined.
_UNFILTERED = 200
_SCOPE = "s.campaign_id = %s AND s.enabled AND s.index_state = 'ready' AND s.format = ''"


def search(
    *, campaign_id: int, terms: list[tuple[int, str]], ranking: list[tuple[int, str]], limit: int
) -> list[LexicalHit]:
    """1. bm25-rank the matches of any `ranking` term in the campaign, top
    `limit` of the enabled, ready prose sources' (`_ranked`). 2. For those
    rows only, which of all the `terms` each one matched (`_evidence`)."""
    any_term = _scoped(campaign_id, " OR ".join(_phrase(term) for _, term in ranking))
    with connection.cursor() as cursor:
        ranked = _ranked(cursor, any_term, campaign_id, limit)
        if not ranked:
            return []
        matched = _evidence(cursor, [chunk_id for chunk_id, _ in ranked], terms)
    # bm25 is lower-is-better; the interface promises higher-is-better.
    return [LexicalHit(chunk_id, -float(score), frozenset(matched.get(chunk_id, ()))) for chunk_id, score in ranked]


def _ranked(cursor, match: str, campaign_id: int, limit: int) -> list[tuple[int, float]]:
    """The best `limit` (rowid, bm25) of the campaign's searchable rows.

    bm25 has to score every match whatever the LIMIT, but the join that
    filters by source state need not see them all: the best _UNFILTERED are
    ranked on the index alone and filtered by id, and when that leaves
    `limit` (or they were every match) they are exactly the best `limit`
    the joined query would give. Joining every match cost as much again as
    ranking them (2,000 matches at 100,000 passages)."""
    cursor.execute(
        f"SELECT rowid, bm25({TABLE}, {_WEIGHTS}) AS score FROM {TABLE} WHERE {TABLE} MATCH %s "
        "ORDER BY score, rowid LIMIT %s",
        [match, max(limit, _UNFILTERED)],
    )
    best = cursor.fetchall()
    if not best:
        return []
    marks = ", ".join(["%s"] * len(best))
    cursor.execute(
        f"SELECT c.id FROM knowledge_knowledgechunk c JOIN knowledge_knowledgesource s ON s.id = c.source_id "
        f"WHERE c.id IN ({marks}) AND {_SCOPE}",
        [chunk_id for chunk_id, _ in best] + [campaign_id],
    )
    kept = {chunk_id for (chunk_id,) in cursor.fetchall()}
    ranked = [row for row in best if row[0] in kept][:limit]
    if len(ranked) == limit or len(best) < max(limit, _UNFILTERED):
        return ranked
    cursor.execute(
        f"""
        SELECT f.rowid, bm25({TABLE}, {_WEIGHTS}) AS score
        FROM {TABLE} f
        JOIN knowledge_knowledgechunk c ON c.id = f.rowid
        JOIN knowledge_knowledgesource s ON s.id = c.source_id
        WHERE {TABLE} MATCH %s AND {_SCOPE}
        ORDER BY score, f.rowid
        LIMIT %s
        """,
        [match, campaign_id, limit],
    )
    return cursor.fetchall()


_EVIDENCE = "knowledge_chunk_evidence"


def _evidence(cursor, ids: list[int], terms: list[tuple[int, str]]) -> dict[int, set[int]]:
    """Which terms each of the ranked rows matched.

    FTS5 cannot restrict a MATCH to a list of rowids (`rowid IN (...)` is
    applied after the whole campaign has been matched), so asking the main
    index term by term costs a full search per term. Instead the few ranked
    rows are copied into a connection-private FTS5 table with the same
    tokenizer, where each term's match touches only them. The table is
    contentless, so emptying it is one command rather than re-tokenizing
    every row to delete it, which cost as much as copying them in.
    """
    cursor.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_EVIDENCE} USING fts5(body, content='', tokenize='{_TOKENIZE}')"
    )
    cursor.execute(f"INSERT INTO temp.{_EVIDENCE}({_EVIDENCE}) VALUES ('delete-all')")
    marks = ", ".join(["%s"] * len(ids))
    cursor.execute(
        f"INSERT INTO temp.{_EVIDENCE}(rowid, body) SELECT id, heading_path || ' ' || text "
        f"FROM knowledge_knowledgechunk WHERE id IN ({marks})",
        ids,
    )
    parts, params = [], []
    for index, term in terms:
        parts.append(f"SELECT {int(index)}, rowid FROM temp.{_EVIDENCE} WHERE {_EVIDENCE} MATCH %s")
        params.append(_phrase(term))
    cursor.execute(" UNION ALL ".join(parts), params)
    matched: dict[int, set[int]] = {}
    for index, chunk_id in cursor.fetchall():
        matched.setdefault(chunk_id, set()).add(index)
    return matched
