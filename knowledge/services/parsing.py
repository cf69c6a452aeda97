"""What an index job indexes: an uploaded file, read in the worker, or the
source's stored text or entries; and what the entries take stored.

A web request only stores the file as it came (knowledge.services.uploads):
reading a 100,000-entry book held a web thread 74-255 s and 1.5 GB (issue
23). The job reads it here (text, or a lorebook and its entries), checks
what the upload could not know yet (the always-include rule once the kind
is known, a duplicate of the text another file already brought), and the
swap stores the text, the entries and the passages in one transaction, so
a refusal or a crash leaves the file and nothing half-made. The import
report (entries, disabled, kept fields, notes) goes on the source's
metadata, for the source page and the library.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import footprint
from ..chunking import Passage, chunk_entries, chunk_text
from ..lorebooks import Entry, Lorebook
from ..lorebooks.cards import with_macros_filled
from ..lorebooks.stored import compact
from ..models import KnowledgeSource, LoreEntry
from .books import entry_rows, metadata_for, render, report, title_of
from .reading import DuplicateSource, content_hash, read_upload, source_always_include_check, title_for
from .regexcaps import regex_keys_check

Source = KnowledgeSource
ENTRY_BATCH = 1000


@dataclass(frozen=True)
class Parsed:
    """An uploaded file as read: the source's new fields and, for a book, its entries."""

    fields: dict
    entries: tuple[Entry, ...] = ()


def upload_parse(source: KnowledgeSource) -> Parsed:
    """The source's uploaded file, read; ImportRefused (DuplicateSource
    among them) says why it cannot be stored, in the reader's words.
    The classification and always-include the reader asked for at upload
    are in `metadata["upload"]`; no classification means by content: a
    lorebook is Canon, a text Reference."""
    asked = (source.metadata or {}).get("upload") or {}
    name = source.original_filename
    content = read_upload(filename=name, data=bytes(source.upload))
    if isinstance(content, Lorebook):
        book = with_macros_filled(content)
        regex_keys_check(campaign_id=source.campaign_id, name=name, entries=book.entries, replacing=source)
        text, entries = render(book.entries), book.entries
        classification = asked.get("classification") or Source.Classification.CANON
        fields = {"title": title_of(book, name), "format": book.format[:80],
                  "metadata": {**metadata_for(book), "report": report(book)}}
    else:
        text, entries = content, ()
        classification = asked.get("classification") or Source.Classification.REFERENCE
        fields = {"title": title_for(name, text)[:200], "metadata": {}}
    always_include = bool(asked.get("always_include"))
    source_always_include_check(classification=classification, always_include=always_include)
    digest = content_hash(text)
    existing = Source.objects.filter(campaign_id=source.campaign_id, sha256=digest).exclude(pk=source.pk).first()
    if existing is not None:
        raise DuplicateSource(name, existing)
    fields.update(content=text, sha256=digest, size_bytes=len(text.encode("utf-8")), upload=b"",
                  classification=classification, always_include=always_include)
    return Parsed(fields=fields, entries=tuple(entries))


def parsed_passages(parsed: Parsed, *, count) -> tuple[list[Passage], int]:
    """The passages the file makes (a book's tied to its entries by their
    place in it) and the bytes its entries take."""
    if not parsed.fields.get("format"):
        return chunk_text(parsed.fields["content"], count=count), 0
    rows = [(i, e.title[:300], e.text) for i, e in enumerate(parsed.entries) if e.enabled]
    entry_bytes = sum(
        footprint.entry_bytes(e.title[:300], e.text, list(e.keys), list(e.secondary_keys), list(e.regex_keys),
                              compact(e.extras))
        for e in parsed.entries
    )
    return chunk_entries(rows, count=count), entry_bytes


def parsed_store(source: KnowledgeSource, parsed: Parsed) -> dict[int, int]:
    """Stores the file as read on its (locked) source; returns each entry's
    id by its place in the book, for the passages cut from it."""
    Source.objects.filter(pk=source.pk).update(**parsed.fields)
    for name, value in parsed.fields.items():  # what the rest of the swap reads of it
        setattr(source, name, value)
    LoreEntry.objects.filter(source=source).delete()
    LoreEntry.objects.bulk_create(
        entry_rows(source, parsed.entries),
        batch_size=ENTRY_BATCH,
    )
    return dict(LoreEntry.objects.filter(source=source).values_list("position", "pk"))


def source_passages(source: KnowledgeSource, *, count) -> tuple[list[Passage], int]:
    """A text's passages, or a lorebook's: its enabled entries, one or more
    passages each (a disabled entry is kept, and not searched); and the
    bytes its entries take (knowledge.footprint)."""
    if not source.is_lorebook:
        return chunk_text(source.content, count=count), 0
    rows = source.entries.order_by("position").values_list(
        "pk", "title", "text", "enabled", "keys", "secondary_keys", "regex_keys", "extras"
    )
    entries, entry_bytes = [], 0
    for pk, title, text, enabled, *fields in rows.iterator(chunk_size=2000):
        entry_bytes += footprint.entry_bytes(title, text, *fields)
        if enabled:
            entries.append((pk, title, text))
    return chunk_entries(entries, count=count), entry_bytes
