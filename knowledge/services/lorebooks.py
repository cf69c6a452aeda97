"""Lorebooks in the library: storing an imported book and giving it back
(issue 14); editing it is knowledge.services.entries.

A book is one source whose passages are cut from its entries
(knowledge.chunking.chunk_entries), each passage tied to its entry so the
entry's keys admit it (knowledge.keys); its text, title and report are
made in knowledge.services.books.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePath


from storyapp.models import Campaign

from ..lorebooks import Entry, Lorebook
from ..lorebooks.cards import with_macros_filled
from ..lorebooks.export import to_world_info, world_info_text
from ..lorebooks.stored import expand
from ..models import KnowledgeSource, LoreEntry
from .books import entry_rows, metadata_for, render, title_of
from .reading import source_always_include_check
from .regexcaps import regex_keys_check
from .sources import source_store

Source = KnowledgeSource
#: Entries read at a time for an export.
EXPORT_BATCH = 1000

def lorebook_create(
    *,
    campaign: Campaign,
    filename: str,
    book: Lorebook,
    classification: str | None = None,
    visibility: str = Source.Visibility.VISIBLE,
    always_include: bool = False,
    enabled: bool = True,
    title: str = "",
    metadata: dict | None = None,
    enqueue: bool = True,
    secret_seat: str = "",
) -> KnowledgeSource:
    """Stores a book as one source with its entries and queues its index job.
    `metadata` is what a campaign bundle kept of the file (else the book's);
    `secret_seat` makes the book known to that seat alone.

    Raises DuplicateSource when the campaign holds the same book already,
    ImportRefused for always-include outside Canon, for a regex key that
    cannot be compiled safely, and past the book's or the campaign's
    regex-key limits (knowledge.services.regexcaps).
    """
    # World info and lorebooks are Canon, and so is a card's book (of that character).
    classification = classification or Source.Classification.CANON
    book = with_macros_filled(book)
    source_always_include_check(classification=classification, always_include=always_include)
    name = PurePath(filename).name
    regex_keys_check(campaign_id=campaign.pk, name=name, entries=book.entries)

    def store_entries(source: KnowledgeSource) -> None:
        LoreEntry.objects.bulk_create(entry_rows(source, book.entries))

    return source_store(
        campaign=campaign, filename=name, content=render(book.entries), enqueue=enqueue, then=store_entries,
        title=title or title_of(book, name), classification=classification, visibility=visibility,
        always_include=always_include, enabled=enabled, format=book.format[:80],
        metadata=metadata or metadata_for(book), secret_seat=secret_seat.strip()[:100],
    )


def book_of(source: KnowledgeSource) -> Lorebook:
    """The source's entries, edits included, as a lorebook record."""
    return _book_head(source, entries=tuple(_entries_of(source)))


def _book_head(source: KnowledgeSource, *, entries: tuple[Entry, ...] = ()) -> Lorebook:
    metadata = source.metadata or {}
    return Lorebook(
        format=source.format, name=metadata.get("name") or source.title, entries=entries,
        extras=metadata.get("extras") or {}, settings=metadata.get("world_info") or {},
    )


def _entries_of(source: KnowledgeSource, *, batch: int = EXPORT_BATCH) -> Iterator[Entry]:
    """The source's entries in the book's order, read `batch` rows at a
    time (by position, so each read is a short query of its own)."""
    after = -1
    while True:
        rows = list(source.entries.filter(position__gt=after).order_by("position")[:batch])
        for e in rows:
            yield Entry(
                title=e.title, text=e.text, keys=tuple(e.keys), secondary_keys=tuple(e.secondary_keys),
                regex_keys=tuple(e.regex_keys), enabled=e.enabled, constant=e.constant,
                extras=expand(e.extras or {}),
            )
        if len(rows) < batch:
            return
        after = rows[-1].position


def world_info_of(source: KnowledgeSource) -> dict:
    """The source as SillyTavern World Info JSON, for the export link."""
    return to_world_info(book_of(source))


def world_info_stream(source: KnowledgeSource) -> Iterator[str]:
    """The same document as JSON text, in pieces, its entries read in
    batches: what the export link sends, so a big book is never held whole."""
    return world_info_text(_book_head(source), _entries_of(source))
