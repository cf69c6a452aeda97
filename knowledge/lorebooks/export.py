"""Lorebook records back into SillyTavern World Info JSON.

A reader who brought their lore from another tool must be able to take it
back out, edits included, in the format most tools read: SillyTavern's.

- Every field of SillyTavern's entry template is written, from the entry's
  extras where an import kept it under SillyTavern's name (every importer
  maps what SillyTavern's own converters map), else the template's default.
- A World Info file's entries also get back every other field they
  carried (a newer SillyTavern's, an extension's): its file survives the
  round trip field for field. Other formats' own settings have no
  SillyTavern meaning and stay out, but a card book's `extensions` go
  back, as SillyTavern keeps them on the entries it converts.
- What the entry editor changes is in the entry's own fields (keys,
  secondary keys, text, constant, enabled) and wins over the extras.
- The book's World Info settings go under a top-level key SillyTavern
  ignores (`loremaster_settings`), which an import reads back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from .entries import Entry, Lorebook
from .sillytavern import ANNOTATIONS, ENTRY_DEFAULTS, FORMAT, SETTINGS_KEY, entry_default

#: The entry's own fields, written from the Entry rather than its extras.
_OWN = frozenset({"uid", "displayIndex", "key", "keysecondary", "comment", "content", "constant", "disable",
                  "enabled"})


def to_world_info(book: Lorebook) -> dict:
    """The book as a World Info document (`{"entries": {uid: entry}}`)."""
    return {"entries": dict(_with_uids(book.entries, whole=book.format == FORMAT)), **_book_fields(book)}


def world_info_text(book: Lorebook, entries: Iterable[Entry]) -> Iterator[str]:
    """The World Info document of `book` with these `entries`, as the JSON
    text `json.dumps(..., ensure_ascii=False, indent=2)` writes, a piece per
    entry: a 100,000-entry book goes out without being held whole (issue 23)."""
    yield '{\n  "entries": {'
    first = True
    for uid, fields in _with_uids(entries, whole=book.format == FORMAT):
        yield ("\n" if first else ",\n") + f"    {_dumps(uid, 0)}: {_dumps(fields, 2)}"
        first = False
    yield "}" if first else "\n  }"
    for name, value in _book_fields(book).items():
        yield f",\n  {_dumps(name, 0)}: {_dumps(value, 1)}"
    yield "\n}"


def _dumps(value, level: int) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2).replace("\n", "\n" + "  " * level)


def _with_uids(entries: Iterable[Entry], *, whole: bool) -> Iterator[tuple[str, dict]]:
    """Each entry under its uid: its own when it has a free one, else the next after the highest so far."""
    used: set[int] = set()
    highest = -1
    for index, entry in enumerate(entries):
        uid = entry.extras.get("uid")
        if not isinstance(uid, int) or isinstance(uid, bool) or uid in used:
            uid = max(highest, index - 1) + 1
        used.add(uid)
        highest = max(highest, uid)
        yield str(uid), _entry(entry, uid, whole=whole)


def _book_fields(book: Lorebook) -> dict:
    """A World Info file's own top-level fields back as they came; for any
    book, its name and its settings."""
    fields = dict(book.extras) if book.format == FORMAT else {}
    fields.setdefault("name", book.name)
    if book.settings:
        fields[SETTINGS_KEY] = book.settings
    return fields


def _entry(entry: Entry, uid: int, *, whole: bool) -> dict:
    """One entry in SillyTavern's shape. `whole`: the entry came from a
    World Info file, and every field it carried goes back."""
    extras = entry.extras
    fields = {name: extras[name] if name in extras else entry_default(name) for name in ENTRY_DEFAULTS}
    keys, comment = _keys_and_comment(entry)
    fields.update({
        "uid": uid,
        "displayIndex": extras.get("displayIndex", uid),
        "key": keys,
        "keysecondary": list(entry.secondary_keys),
        "comment": comment,
        "content": entry.text,
        "constant": entry.constant,
        "disable": not entry.enabled,
    })
    if whole:
        fields.update({name: value for name, value in extras.items()
                       if name not in fields and name not in ANNOTATIONS and name not in _OWN})
    elif isinstance(extras.get("extensions"), dict):
        fields["extensions"] = extras["extensions"]
    return fields


def _keys_and_comment(entry: Entry) -> tuple[list[str], str]:
    """The keys and the comment to write. An entry's title is its comment,
    else its first key, else its number (sillytavern.title_for), so a title
    that is still what the import made writes the comment the file had
    (an empty one stays empty, its key first so it names the entry again);
    a title the reader changed becomes the comment."""
    keys = [*entry.keys, *entry.regex_keys]
    comment = entry.extras.get("comment")
    if not isinstance(comment, str):
        return keys, entry.title
    if comment.strip():
        return keys, comment if entry.title == comment.strip() else entry.title
    if entry.title in keys:
        keys.remove(entry.title)
        return [entry.title, *keys], comment
    if not keys and entry.title == f"Entry {entry.extras.get('uid')}":
        return keys, comment
    return keys, entry.title
