"""The lexical index, behind one interface with a backend per database.

PostgreSQL: a weighted `tsvector` on each chunk (heading trail A, text B) in
a GIN index that leads with the campaign (btree_gin), ranked by `ts_rank`.
SQLite: an FTS5 table over the chunk rows, kept in sync by triggers, with the
campaign id as an indexed column that every query matches on, ranked by bm25.

Both answer the same question: for a campaign and a list of terms, the best
`limit` passages of that campaign's enabled, ready prose sources (a lorebook's
passages are World Info's, worldinfo.engine) that match any
of the terms it ranks on (all of them, or the subset `rank_on` names, see
knowledge.termstats), and for each, which of *all* the terms it matched
(the evidence admission needs). Terms are words; a term of several words matches passages holding
all of them. Callers pass meaningful words: PostgreSQL drops English stop
words and SQLite does not, so a lone "the" is not a portable query.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import connection

#: The most candidates one search returns, whatever the caller asks for.
MAX_LIMIT = 200
#: The most terms one search reads; the rest are ignored.
MAX_TERMS = 64


@dataclass(frozen=True)
class LexicalHit:
    chunk_id: int
    #: Higher is better; comparable within one search only.
    score: float
    #: Indexes into the `terms` the search was given.
    matched: frozenset[int]


def _backend():
    # Imported on first use: each backend speaks one engine's SQL (FTS5 or
    # tsvector), and only the one the connection runs is ever needed.
    if connection.vendor == "postgresql":
        from . import postgres

        return postgres
    from . import sqlite

    return sqlite


def search(
    *, campaign_id: int, terms: Sequence[str], limit: int = 40, rank_on: Sequence[int] | None = None
) -> list[LexicalHit]:
    """The ranked candidate passages of one campaign for `terms`, best first.

    Only chunks of the campaign's enabled, `ready` sources are returned, at
    most `limit` of them; ties are broken by chunk id so the order is stable.
    `rank_on` (indexes into `terms`; None for all) names the terms that find
    and rank passages; evidence is always tested against every term.
    """
    usable = [(i, " ".join(_words(term))) for i, term in enumerate(list(terms)[:MAX_TERMS])]
    usable = [(i, term) for i, term in usable if term]
    chosen = None if rank_on is None else set(rank_on)
    ranking = usable if chosen is None else [(i, term) for i, term in usable if i in chosen]
    limit = max(0, min(limit, MAX_LIMIT))
    if not ranking or not limit:
        return []
    return _backend().search(campaign_id=campaign_id, terms=usable, ranking=ranking, limit=limit)


def insert(*, rows: Sequence[tuple]) -> None:
    """Writes chunk rows — (source_id, campaign_id, index, heading_path,
    text, token_count), and optionally the lorebook entry id — together with
    their index data, in one statement run for every row. The only way
    chunks are written, so the index cannot fall behind them (on SQLite,
    triggers also cover deletes and updates)."""
    if rows:
        _backend().insert(rows=[(*row, None) if len(row) == 6 else tuple(row) for row in rows])


def _words(term: str) -> list[str]:
    """The word characters of a term, so no term can inject query syntax."""
    import re

    return re.findall(r"\w+", term.lower())
