"""Lorebook records back into SillyTavern World Info JSON.

A reader who brought their lore from another tool must be able to take it
back out, edits included, in the format most tools read: SillyTavern's.
Every field SillyTavern's entry template has is written, from the entry's
extras where an import kept it under SillyTavern's name (a World Info file
or a card's book), else the template's default; other formats' settings
have no SillyTavern meaning and stay out of the file.
"""

from __future__ import annotations

from .entries import Entry, Lorebook
from .sillytavern import ENTRY_DEFAULTS, FORMAT

#: Book-level fields a World Info file carries besides its entries.
BOOK_FIELDS = ("name", "description", "scan_depth", "token_budget", "recursive_scanning", "extensions")


def to_world_info(book: Lorebook) -> dict:
    """The book as a World Info document (`{"entries": {uid: entry}}`)."""
    used: set[int] = set()
    entries = {}
    for index, entry in enumerate(book.entries):
        uid = entry.extras.get("uid")
        if not isinstance(uid, int) or isinstance(uid, bool) or uid in used:
            uid = max(used | {index - 1}) + 1
        used.add(uid)
        entries[str(uid)] = _entry(entry, uid)
    document = {"entries": entries}
    if book.format == FORMAT:
        document.update({k: v for k, v in book.extras.items() if k in BOOK_FIELDS})
    document.setdefault("name", book.name)
    return document


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
