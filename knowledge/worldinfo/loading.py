"""The campaign's lorebook entries for the World Info engine, loaded once
per process per campaign and kept until the library stamp changes.

Every lorebook source (a source with a format) contributes its entries as
`worldinfo.records.Entry` and its settings as `BookSettings`; which books a
turn reads is decided when it is asked (the enabled, ready sources), as the
library matrix masks its rows, so disabling a book needs no reload. An
entry edit bumps its source's revision (knowledge.services.lorebooks), so
the stamp, and with it this cache, changes on the next turn.

The campaign's compiled regex keys (knowledge.regexkeys.Patterns) live in
the same cache entry: compiled once, reused every turn, freed with the
entry; a reload adopts the keys the library still has.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from contextbuild.tokens import count_tokens
from worldinfo.records import BookSettings, Entry

from .. import selectors
from ..keys import REFUSALS_REPORTED, REGEX_BUDGET, REGEX_TIMEOUT
from ..lorebooks.stored import expand
from ..models import KnowledgeChunk, KnowledgeSource, LoreEntry
from ..regexkeys import OUT_OF_TIME, Patterns
from ..retrieval.library import CACHED_LIBRARIES
from .fields import entry_record


@dataclass(frozen=True)
class Books:
    """The campaign's lorebooks as the engine reads them: every entry and
    every book's settings, the sources' titles (for the report), and the
    entry key of each lorebook passage (for activation by meaning), and
    the name and creator's notes of the character card the campaign came
    from, if one did (the card's book keeps them)."""

    entries: tuple[Entry, ...] = ()
    settings: dict[str, BookSettings] | None = None
    titles: dict[str, str] | None = None
    passages: dict[int, str] | None = None
    card_name: str = ""
    creator_notes: str = ""
    #: The books whose source is for the narrator only.
    hidden: frozenset[str] = frozenset()

    def searchable(self, sources: frozenset, shown: dict[str, tuple[str, bool]]) -> Books:
        """Only the books of `sources` (the enabled, ready ones), with the
        titles and visibility read this turn (`shown`: neither is in the
        library stamp, so a rename or a change to narrator-only is seen at once)."""
        books = {str(s) for s in sources}
        return Books(
            entries=tuple(e for e in self.entries if e.book in books),
            settings={b: s for b, s in (self.settings or {}).items() if b in books},
            titles={book: title for book, (title, _) in shown.items()},
            passages=self.passages,
            card_name=self.card_name,
            creator_notes=self.creator_notes,
            hidden=frozenset(book for book, (_, hidden) in shown.items() if hidden),
        )


_cache: OrderedDict[tuple, tuple[tuple, Books, Patterns]] = OrderedDict()
_lock = threading.Lock()


def books_for(campaign_id: int, *, stamp: tuple[tuple, frozenset] | None = None) -> tuple[Books, Patterns]:
    """The campaign's searchable lorebooks and its compiled regex keys;
    `stamp` is the library's this turn, when the caller read it already."""
    stamp, searchable = stamp or selectors.library_stamp(campaign_id)
    key = (connection.alias, str(connection.settings_dict.get("NAME")), campaign_id)
    with _lock:
        cached = _cache.get(key)
        if cached is not None:
            _cache.move_to_end(key)
    if cached is None or cached[0] != stamp:
        books = _load(campaign_id)
        patterns = Patterns(max_keys=settings.KNOWLEDGE_REGEX_KEYS_PER_CAMPAIGN)
        if cached is not None:
            patterns.adopt(cached[2], (k for e in books.entries for k in (*e.keys, *e.secondary_keys)
                                       if k.startswith("/")))
        cached = (stamp, books, patterns)
        with _lock:
            _cache[key] = cached
            _cache.move_to_end(key)
            while len(_cache) > CACHED_LIBRARIES * 4:
                _cache.popitem(last=False)
    if not cached[1].entries:
        return cached[1], cached[2]
    shown = {
        str(pk): (title, visibility == KnowledgeSource.Visibility.HIDDEN)
        for pk, title, visibility in KnowledgeSource.objects.filter(campaign_id=campaign_id, pk__in=searchable)
        .exclude(format="").values_list("pk", "title", "visibility")
    }
    return cached[1].searchable(searchable, shown), cached[2]


def _load(campaign_id: int) -> Books:
    """Every lorebook source's entries and settings, in the books' order."""
    sources = {
        pk: (title, format_name, metadata)
        for pk, title, format_name, metadata in KnowledgeSource.objects.filter(campaign_id=campaign_id)
        .exclude(format="").values_list("pk", "title", "format", "metadata")
    }
    if not sources:
        return Books(settings={}, titles={}, passages={})
    # An entry known to one seat alone is that seat's secret, not World Info's.
    rows = LoreEntry.objects.filter(source_id__in=list(sources), secret_seat="").order_by("source_id", "position").values_list(
        "pk", "source_id", "title", "text", "keys", "secondary_keys", "regex_keys", "enabled", "constant", "extras"
    )
    entries = [
        entry_record(
            source_id=source_id, entry_id=pk, title=title, text=text, keys=keys or (),
            secondary_keys=secondary or (), regex_keys=patterns or (), enabled=enabled, constant=constant,
            extras=expand(extras if isinstance(extras, dict) else {}), format_name=sources[source_id][1],
            tokens=count_tokens(text),
        )
        for pk, source_id, title, text, keys, secondary, patterns, enabled, constant, extras in rows.iterator()
    ]
    passages = {
        chunk_id: f"{source_id}:{entry_id}"
        for chunk_id, source_id, entry_id in KnowledgeChunk.objects.filter(
            campaign_id=campaign_id, entry__isnull=False
        ).values_list("pk", "source_id", "entry_id")
    }
    card = next((m["card"] for _, _, m in sources.values()
                 if isinstance(m, dict) and isinstance(m.get("card"), dict)), {})
    card_extras = card.get("extras") if isinstance(card.get("extras"), dict) else {}
    return Books(
        card_name=str(card.get("name") or ""),
        creator_notes=str(card_extras.get("creator_notes") or ""),
        entries=tuple(entries),
        settings={
            str(pk): BookSettings.from_stored((metadata or {}).get("world_info") if isinstance(metadata, dict) else None)
            for pk, (_, _, metadata) in sources.items()
        },
        passages=passages,
    )


class TurnRegex:
    """The engine's regex search over this campaign's compiled keys, with
    one deadline for the whole turn (every pass shares it): True or False,
    or None when the key is refused, times out or the turn's time ran out.
    `refused` keeps why each refused key was not used, for the report."""

    def __init__(self, patterns: Patterns, *, budget: float = REGEX_BUDGET):
        self.patterns = patterns
        self.deadline = time.monotonic() + budget
        self.refused: dict[str, str] = {}

    def __call__(self, key: str, text: str) -> bool | None:
        pattern, why = self.patterns.get(key, self.deadline)
        if pattern is None:
            if why != OUT_OF_TIME:
                self.refused[key] = why
            return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            return pattern.search(text, timeout=min(REGEX_TIMEOUT, left)) is not None
        except TimeoutError:
            return None

    def notes(self) -> tuple[str, ...]:
        """One line per refused key (at most REFUSALS_REPORTED)."""
        return tuple(f"A regex key is not used: {why}." for why in list(self.refused.values())[:REFUSALS_REPORTED])


def clear() -> None:
    """Forgets every cached campaign's books in this process."""
    with _lock:
        _cache.clear()
