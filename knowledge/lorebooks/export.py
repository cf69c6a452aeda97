"""Lorebook records back into SillyTavern World Info JSON.

A reader who brought their lore from another tool must be able to take it
back out, edits included, in the format most tools read: SillyTavern's.
Every field SillyTavern's entry template has is written, from the entry's
extras where an import kept it under SillyTavern's name (a World Info file
or a card's book), else the template's default; other formats' settings
have no SillyTavern meaning and stay out of the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from .entries import Entry, Lorebook
from .sillytavern import ENTRY_DEFAULTS, FORMAT

#: Book-level fields a World Info file carries besides its entries.
BOOK_FIELDS = ("name", "description", "scan_depth", "token_budget", "recursive_scanning", "extensions")


def to_world_info(book: Lorebook) -> dict:
    """The book as a World Info document (`{"entries": {uid: entry}}`)."""
    return {"entries": dict(_with_uids(book.entries)), **_book_fields(book)}


def world_info_text(book: Lorebook, entries: Iterable[Entry]) -> Iterator[str]:
    """The World Info document of `book` with these `entries`, as the JSON
    text `json.dumps(..., ensure_ascii=False, indent=2)` writes, a piece per
    entry: a 100,000-entry book goes out without being held whole (issue 23)."""
    yield '{\n  "entries": {'
    first = True
    for uid, fields in _with_uids(entries):
        yield ("\n" if first else ",\n") + f"    {_dumps(uid, 0)}: {_dumps(fields, 2)}"
        first = False
    yield "}" if first else "\n  }"
    for name, value in _book_fields(book).items():
        yield f",\n  {_dumps(name, 0)}: {_dumps(value, 1)}"
    yield "\n}"


def _dumps(value, level: int) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2).replace("\n", "\n" + "  " * level)


def _with_uids(entries: Iterable[Entry]) -> Iterator[tuple[str, dict]]:
    """Each entry under its uid: its own when it has a free one, else the next after the highest so far."""
    used: set[int] = set()
    highest = -1
    for index, entry in enumerate(entries):
        uid = entry.extras.get("uid")
        if not isinstance(uid, int) or isinstance(uid, bool) or uid in used:
            uid = max(highest, index - 1) + 1
        used.add(uid)
        highest = max(highest, uid)
        yield str(uid), _entry(entry, uid)


def _book_fields(book: Lorebook) -> dict:
    fields = {k: v for k, v in book.extras.items() if k in BOOK_FIELDS} if book.format == FORMAT else {}
    fields.setdefault("name", book.name)
    return fields


def _entry(entry: Entry, uid: int) -> dict:
    fields = {name: entry.extras.get(name, default) for name, default in ENTRY_DEFAULTS.items()}
    fields.update({
        "uid": uid,
        "displayIndex": entry.extras.get("displayIndex", uid),
        "key": [*entry.keys, *entry.regex_keys],
        "keysecondary": list(entry.secondary_keys),
        "comment": entry.title,
        "content": entry.text,
        "constant": entry.constant,
        "disable": not entry.enabled,
    })
    return fields
