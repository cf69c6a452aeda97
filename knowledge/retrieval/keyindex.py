"""The lorebook-key path: the campaign's keyed passages with their entries'
keys, cached per process until the library stamp changes, and the passages
whose keys the scene names (knowledge.keys judges them).

The campaign's compiled regex keys (knowledge.regexkeys.Patterns) live in
the same cache entry: compiled once, reused every turn, and freed when the
entry is evicted, or, for the keys the library no longer has, when it is
replaced (a book changed); never in a global cache that thrashes past its
size."""

from __future__ import annotations

import threading
from collections import OrderedDict

from django.conf import settings
from django.db import connection

from .. import keys, selectors
from ..regexkeys import Patterns
from ..query import Query
from .library import CACHED_LIBRARIES

Indexed = list[tuple[int, int, keys.EntryKeys]]
#: Key indexes kept per process, one per (database, campaign): the library
#: stamp, (chunk id, source id, entry keys) rows and the compiled regex keys.
_key_cache: OrderedDict[tuple, tuple[tuple, Indexed, Patterns]] = OrderedDict()
_key_lock = threading.Lock()


def named_by_key(campaign_id: int, q: Query, stamp: tuple[tuple, frozenset]) -> dict[int, keys.KeyMatch]:
    """The passages of searchable sources whose entry's keys the scene names
    (or names to no effect, with the reason), by chunk id."""
    library_stamp, searchable = stamp
    indexed, patterns = _key_index(campaign_id, library_stamp)
    if not indexed or not q.text.strip():
        return {}
    live = [(chunk_id, entry) for chunk_id, source_id, entry in indexed if source_id in searchable]
    by_entry = keys.match(dict.fromkeys(entry for _, entry in live), q.text, q.standing_words, patterns)
    return {chunk_id: by_entry[entry.entry_id] for chunk_id, entry in live if entry.entry_id in by_entry}


def _key_index(campaign_id: int, library_stamp: tuple) -> tuple[Indexed, Patterns]:
    """(chunk id, source id, its entry's keys) for the campaign's keyed
    passages and the table of its compiled regex keys, cached until the
    library stamp changes."""
    key = (connection.alias, str(connection.settings_dict.get("NAME")), campaign_id)
    with _key_lock:
        cached = _key_cache.get(key)
        if cached is not None:
            _key_cache.move_to_end(key)
    if cached is not None and cached[0] == library_stamp:
        return cached[1], cached[2]
    entries: dict[int, keys.EntryKeys] = {}
    indexed = []
    for chunk_id, source_id, entry_id, plain, patterns, secondary, *matching, format_name in (
        selectors.keyed_passages(campaign_id)
    ):
        if entry_id not in entries:
            entries[entry_id] = _entry_keys(entry_id, plain, patterns, secondary, matching, format_name)
        if entries[entry_id].keys or entries[entry_id].regex_keys:
            indexed.append((chunk_id, source_id, entries[entry_id]))
    compiled = Patterns(max_keys=settings.KNOWLEDGE_REGEX_KEYS_PER_CAMPAIGN)
    if cached is not None:
        compiled.adopt(cached[2], (k for e in entries.values() for k in (*e.regex_keys, *e.secondary_keys)))
    with _key_lock:
        _key_cache[key] = (library_stamp, indexed, compiled)
        _key_cache.move_to_end(key)
        while len(_key_cache) > CACHED_LIBRARIES * 4:
            _key_cache.popitem(last=False)
    return indexed, compiled


def _entry_keys(entry_id, plain, patterns, secondary, matching, format_name: str) -> keys.EntryKeys:
    """An entry's keys as knowledge.keys matches them. KoboldAI matches keys
    as lowercase substrings; SillyTavern's per-entry settings are read where
    the entry has them (None means the book's default: whole words, any case)."""
    selective, logic, case_sensitive, whole_words = matching
    return keys.EntryKeys(
        entry_id=entry_id,
        keys=tuple(str(k) for k in plain or ()),
        regex_keys=tuple(str(k) for k in patterns or ()),
        secondary_keys=tuple(str(k) for k in secondary or ()),
        selective=selective is not False,
        logic=logic if isinstance(logic, int) and not isinstance(logic, bool) else keys.AND_ANY,
        substring=format_name.startswith("KoboldAI") or whole_words is False,
        case_sensitive=case_sensitive is True,
    )


def clear() -> None:
    """Forgets every cached key index in this process."""
    with _key_lock:
        _key_cache.clear()
