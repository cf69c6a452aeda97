"""Reads from the library: the pages' lists, a profile's embedding status,
and the scoped reads retrieval (issue 5) builds on."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from django.core.paginator import Page, Paginator
from django.db import connection
from django.db.models import Count

from contextbuild import records
from endpoints import embeddings
from storyapp.models import Campaign

from . import entrysettings
from .models import IndexJob, KnowledgeChunk, KnowledgeSource, LoreEntry
from .lorebooks.stored import expand
from .services.books import USED_EXTRAS

Ready = KnowledgeSource.IndexState.READY


def library_sources(campaign: Campaign) -> list[KnowledgeSource]:
    """The campaign's sources, each with `active_job` (or None) and
    `stale_vectors` (its vectors are from a model other than the current)."""
    sources = list(
        campaign.sources.defer("content", "upload").annotate(entry_count=Count("entries")).order_by("title", "id")
    )
    active = {
        job.source_id: job
        for job in IndexJob.objects.in_flight().filter(source__campaign=campaign)
    }
    model = embeddings.model_for(campaign)
    for source in sources:
        source.active_job = active.get(source.pk)
        source.stale_vectors = bool(model) and source.index_state == Ready and source.embedding_model != model
    return sources


def in_flight(sources: Sequence[KnowledgeSource]) -> bool:
    return any(s.active_job is not None or s.index_state in ("pending", "indexing") for s in sources)


def source_passages(source: KnowledgeSource, *, limit: int = 50) -> list[KnowledgeChunk]:
    return list(source.chunks.order_by("index")[:limit])


#: Entries on one page of a lorebook's source page.
ENTRIES_PER_PAGE = 100


def source_entries(source: KnowledgeSource, *, page: str | int | None = 1, per_page: int = ENTRIES_PER_PAGE) -> Page:
    """One page of a lorebook's entries in the file's order, each ready for
    its page (`entry_view`): a 100,000-entry book's page stays small (issue 23)."""
    shown = Paginator(source.entries.order_by("position"), per_page).get_page(page)
    shown.object_list = [entry_view(e) for e in shown.object_list]
    return shown


def entry_view(entry: LoreEntry) -> LoreEntry:
    """The entry with what its page shows: its keys as the line the reader
    edits, its World Info settings in brief, and what the file gave it
    that nothing uses (the settings the editor edits are not repeated)."""
    entry.key_text = ", ".join(entry.all_keys)
    extras = expand(entry.extras or {})
    entry.world_info = entrysettings.summary(entrysettings.settings_of(extras))
    filled = set(extras.get("defaulted") or ())
    entry.kept = [
        (name, _shown(value)) for name, value in sorted(extras.items())
        if name not in USED_EXTRAS | entrysettings.EDITED | filled
    ]
    return entry


def kept_fields(source: KnowledgeSource) -> list[tuple[str, str]]:
    """What the file carried besides its entries, for the source's page:
    the book's own fields, then a card's, each as (name, value shown)."""
    metadata = source.metadata or {}
    shown = [(name, _shown(value)) for name, value in sorted((metadata.get("extras") or {}).items())]
    card = metadata.get("card") or {}
    for name, value in card.items():
        if name == "extras":
            shown += [(f"card {key}", _shown(v)) for key, v in sorted((value or {}).items())]
        elif value:
            shown.append((f"card {name.replace('_', ' ')}", _shown(value)))
    return shown


def _shown(value) -> str:
    """A kept value as the page prints it: text as it is, the rest as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)




# ------------------------------------------------- for retrieval (issue 5)


@dataclass(frozen=True)
class SearchablePassage:
    """A searchable chunk with what retrieval reads of its source, as plain
    values: retrieval reads 80 or more of these a turn, and model instances
    (two per row, with their converters) cost more than the query."""

    pk: int
    source_id: int
    index: int
    heading_path: str
    text: str
    token_count: int
    entry_id: int | None
    title: str
    filename: str
    classification: str
    visibility: str


_PASSAGES_SQL = """
SELECT c.id, c.source_id, c."index", c.heading_path, c.text, c.token_count, c.entry_id,
       s.title, s.original_filename, s.classification, s.visibility
FROM {chunks} c JOIN {sources} s ON s.id = c.source_id
WHERE c.id IN ({ids}) AND s.campaign_id = %s AND s.enabled AND s.index_state = %s AND s.secret_seat = ''
"""


def searchable_chunks(*, campaign_id: int, chunk_ids: Sequence[int]) -> list[SearchablePassage]:
    """The named chunks that are still searchable in this campaign (enabled,
    ready sources), with their source's metadata, in one query, in no
    particular order. Re-applies the scope to ids that came out of an index.
    Written out: a turn's 80 passages cost the ORM 1.2-2 ms more than the
    query itself (0.8 ms on PostgreSQL at 100,000 passages)."""
    ids = [int(pk) for pk in chunk_ids]
    if not ids:
        return []
    sql = _PASSAGES_SQL.format(
        chunks=KnowledgeChunk._meta.db_table, sources=KnowledgeSource._meta.db_table, ids=", ".join(["%s"] * len(ids))
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*ids, campaign_id, Ready])
        return [SearchablePassage(*row) for row in cursor.fetchall()]


def library_stamp(campaign_id: int) -> tuple[tuple, frozenset]:
    """(stamp of the library's passages and vectors, ids of the searchable
    sources), for the per-process caches built from them.

    Every write to a source's passages or vectors (index, re-index, re-embed)
    bumps the source's `revision`, and a delete removes the row, so the
    count, the id sum and the revision sum change with any of them (a time
    would not: two workers can commit in the other order than they read the
    clock). Enabled and index state are not in the stamp: they are the mask,
    read fresh every turn.
    """
    # One statement for both, on every turn, summed by the database: at
    # 2,000 sources reading the rows took 1.7 ms on PostgreSQL, this 0.6.
    searchable = "enabled AND index_state = %s AND secret_seat = ''"
    ids = (
        f"array_agg(id) FILTER (WHERE {searchable})" if connection.vendor == "postgresql"
        else f"group_concat(CASE WHEN {searchable} THEN id END)"
    )
    with connection.cursor() as cursor:
        # A seat's secret source is never searched: the narrator is given it
        # whole as that seat's secret (seat_secrets).
        cursor.execute(
            f"SELECT count(*), coalesce(sum(id), 0), coalesce(sum(revision), 0), {ids} "
            f"FROM {KnowledgeSource._meta.db_table} WHERE campaign_id = %s",
            [Ready, campaign_id],
        )
        count, id_sum, revision_sum, found = cursor.fetchone()
    if isinstance(found, str):
        found = [int(pk) for pk in found.split(",")]
    return (count, int(id_sum), int(revision_sum)), frozenset(found or ())


def seat_secrets(campaign_id: int, *, stamp: tuple[tuple, frozenset] | None = None) -> list[records.Secret]:
    """What each seat alone knows from the library: every enabled source
    marked for a seat (a lorebook's enabled entries, else its text), then
    every enabled entry marked for a seat in a source that is not. A
    library whose `stamp` (library_stamp) counts no source has none."""
    if stamp is not None and not stamp[0][0]:
        return []
    found = []
    for source in KnowledgeSource.objects.filter(campaign_id=campaign_id, enabled=True).exclude(secret_seat=""):
        if source.is_lorebook:
            found += [
                records.Secret(seat=source.secret_seat, title=title or source.title, text=text)
                for title, text in source.entries.filter(enabled=True).values_list("title", "text")
            ]
        else:
            found.append(records.Secret(seat=source.secret_seat, title=source.title, text=source.content))
    entries = LoreEntry.objects.filter(
        source__campaign_id=campaign_id, source__enabled=True, source__secret_seat="", enabled=True
    ).exclude(secret_seat="").values_list("secret_seat", "title", "text")
    found += [records.Secret(seat=seat, title=title, text=text) for seat, title, text in entries]
    return [s for s in found if s.text.strip()]
