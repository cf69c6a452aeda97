"""Editing a lorebook in the library: its entries, one at a time, and its
World Info settings (issues 14 and 25).

Every change bumps the source's `revision`, which is in the library stamp
(knowledge.selectors.library_stamp): the caches built from the library,
the World Info loader's among them, reload on the next turn. A change to
what the book's text shows (titles, keys, texts, flags) also queues its
re-index; the old passages stay searchable until the new ones are swapped
in. A change to a setting alone (a position, a group, the book's scan
depth) needs none: the passages are the same.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import F, Max

from worldinfo.records import BookSettings

from ..entrysettings import with_settings
from ..lorebooks import key_line, split_keys
from ..lorebooks.sillytavern import ENTRY_DEFAULTS
from ..lorebooks.stored import compact, expand
from ..models import IndexJob, KnowledgeSource, LoreEntry
from .books import render
from .jobs import _enqueue, _job_for
from .reading import ImportRefused, content_hash
from .regexcaps import regex_keys_check

Source = KnowledgeSource


@transaction.atomic
def entry_update(
    *, entry: LoreEntry, title: str, keys: str, text: str, enabled: bool,
    constant: bool | None = None, secondary_keys: str | None = None, settings: dict | None = None,
    secret_seat: str | None = None,
) -> LoreEntry:
    """Changes one entry. `keys` and `secondary_keys` are the reader's
    comma-separated lines; a key written /pattern/flags is a regex, held to
    the same limits as an import's. `settings` are the editor's World Info
    values (knowledge.entrysettings), written under SillyTavern's names.
    `secret_seat` names the one seat the entry is known to ("" for all):
    World Info then leaves it out and the narrator is given it as that
    seat's secret. None leaves constant, the secondary keys, the settings
    or the seat as they are."""
    entry.title = title.strip()[:300]
    entry.keys, entry.regex_keys = (list(part) for part in split_keys(key_line(keys)))
    extras = expand(entry.extras or {})
    if secondary_keys is not None:
        plain, patterns = split_keys(key_line(secondary_keys))
        entry.secondary_keys = [*plain, *patterns]
        extras.pop("keysecondary_regex", None)
        if patterns:
            extras["keysecondary_regex"] = list(patterns)
    if constant is not None:
        entry.constant = constant
    if secret_seat is not None:
        entry.secret_seat = secret_seat.strip()[:100]
    if settings is not None:
        extras = with_settings(extras, settings)
    entry.extras = compact(extras)
    book = [entry if e.pk == entry.pk else e for e in entry.source.entries.only("title", "regex_keys", "secondary_keys")]
    regex_keys_check(campaign_id=entry.source.campaign_id, name=entry.source.title, entries=book, replacing=entry.source)
    entry.text = _text(text)
    entry.enabled = enabled
    entry.save(update_fields=[
        "title", "keys", "regex_keys", "secondary_keys", "text", "enabled", "constant", "secret_seat", "extras"
    ])
    _book_changed(entry.source_id)
    return entry


@transaction.atomic
def entry_create(*, source: KnowledgeSource, title: str, keys: str, text: str, constant: bool = False) -> LoreEntry:
    """Adds an entry at the end of the book, with SillyTavern's defaults
    for its settings (stored as an import stores a file's minimal entry),
    and a uid after the highest when the book's entries have uids."""
    plain, patterns = split_keys(key_line(keys))
    rows = source.entries.all()
    uids = [u for u in rows.values_list("extras__uid", flat=True) if isinstance(u, int) and not isinstance(u, bool)]
    extras = {**({"uid": max(uids) + 1} if uids else {}), **ENTRY_DEFAULTS}
    extras["displayIndex"] = extras.get("uid")
    extras["defaulted"] = [*ENTRY_DEFAULTS, "displayIndex"]
    last = rows.aggregate(last=Max("position"))["last"]
    entry = LoreEntry(
        source=source, position=0 if last is None else last + 1, title=title.strip()[:300], text=_text(text),
        keys=list(plain), regex_keys=list(patterns), constant=constant, extras=compact(extras),
    )
    book = [*rows.only("title", "regex_keys", "secondary_keys"), entry]
    regex_keys_check(campaign_id=source.campaign_id, name=source.title, entries=book, replacing=source)
    entry.save()
    _book_changed(source.pk)
    return entry


@transaction.atomic
def entry_delete(*, entry: LoreEntry) -> None:
    """Removes one entry (its passages go with it) and re-indexes the rest."""
    source_id = entry.source_id
    entry.delete()
    _book_changed(source_id)


@transaction.atomic
def book_settings_update(*, source: KnowledgeSource, settings: BookSettings) -> None:
    """Stores a lorebook's World Info settings in its metadata; the passages
    are unchanged, so only the revision moves."""
    locked = Source.objects.select_for_update().only("metadata").get(pk=source.pk)
    locked.metadata = {**(locked.metadata or {}), "world_info": settings.as_stored()}
    locked.save(update_fields=["metadata", "updated"])
    Source.objects.filter(pk=source.pk).update(revision=F("revision") + 1)
    source.metadata = locked.metadata


def _text(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _book_changed(source_id: int) -> None:
    """The book's text made again from its entries; a new text is a new
    version to index (refused when it would duplicate another source of the
    library). The revision moves either way."""
    source = Source.objects.select_for_update().get(pk=source_id)
    content = render(source.entries.order_by("position"))
    digest = content_hash(content)
    if digest != source.sha256:
        if Source.objects.filter(campaign_id=source.campaign_id, sha256=digest).exclude(pk=source.pk).exists():
            raise ImportRefused("With this change the book would be the same as another source in this library.")
        source.content, source.sha256 = content, digest
        source.size_bytes = len(content.encode("utf-8"))
        source.save(update_fields=["content", "sha256", "size_bytes", "updated"])
        _enqueue(_job_for(source, kind=IndexJob.Kind.INDEX))
    Source.objects.filter(pk=source.pk).update(revision=F("revision") + 1)
