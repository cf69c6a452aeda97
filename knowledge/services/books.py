"""A lorebook as the library keeps it besides its entries: the book as
text, its title, what it carries that Loremaster keeps unused, and the
line of the import report.

Its own module, below the index job, because the worker that reads an
uploaded book (knowledge.services.parsing) stores it with these, as
`lorebook_create` does for a book a command or a bundle brings.

The source's `content` is the book rendered as text, one section per entry
with its keys and flags: its hash is the duplicate check and the index
job's version, so an edit to a key or a flag, not only to a text, makes a
new version to index; and a reader who opens the file sees what the
narrator can be given.
"""

from __future__ import annotations

from pathlib import PurePath

from ..lorebooks import Lorebook
from ..lorebooks.sillytavern import APPLIED_FIELDS
from ..lorebooks.stored import compact
from ..models import LoreEntry

#: Entry extras that are how SillyTavern matches keys, which Loremaster
#: applies (knowledge.keys), the title it read, and the readable labels the
#: importers add beside numbered settings: every other extra is the file's
#: own, kept and shown as unused.
USED_EXTRAS = APPLIED_FIELDS | {
    "uid", "displayIndex", "comment", "defaulted", "position_name", "selectiveLogic_name", "role_name",
    "categoryName", "folderName", "keysecondary_regex", "regex_from_use_regex",
}


def render(entries) -> str:
    """The book as text: a section per entry, its title, keys and flags,
    then its text. Entries are LoreEntry rows or lorebook Entry records."""
    sections = []
    for entry in entries:
        lines = [f"## {entry.title or 'Untitled entry'}"]
        keys = [*entry.keys, *entry.regex_keys]
        if keys:
            lines.append("Keys: " + ", ".join(keys))
        if entry.secondary_keys:
            lines.append("Secondary keys: " + ", ".join(entry.secondary_keys))
        flags = [flag for flag, on in (("always included", entry.constant), ("disabled", not entry.enabled)) if on]
        if flags:
            lines.append("(" + ", ".join(flags) + ")")
        sections.append("\n".join(lines) + ("\n\n" + entry.text.strip() if entry.text.strip() else ""))
    return "\n\n".join(sections) + "\n"


def title_of(book: Lorebook, filename: str) -> str:
    if book.card is not None:
        return f"{book.card.name}'s lorebook" if book.card.name else "Character card lorebook"
    name = book.name.strip()
    if not name or name == PurePath(filename).name:
        name = PurePath(filename).stem or filename  # a book without a name of its own
    return name[:200]


def unused_fields(book: Lorebook) -> list[str]:
    """The names of the fields the book carries that Loremaster keeps but
    does not use: the book's own, the card's, and its entries'."""
    names = set(book.extras)
    if book.card is not None:
        names |= {f"card.{name}" for name in book.card.extras}
    for entry in book.entries:
        filled = set(entry.extras.get("defaulted") or ())
        names |= {name for name in entry.extras if name not in USED_EXTRAS and name not in filled}
    return sorted(names)


def metadata_for(book: Lorebook) -> dict:
    """What the source keeps of the book besides its entries."""
    metadata = {"name": book.name, "extras": book.extras, "notes": list(book.notes), "unused": unused_fields(book)}
    if book.settings:
        metadata["world_info"] = book.settings  # worldinfo.records.BookSettings, read back from an export
    if book.card is not None:
        card = book.card
        metadata["card"] = {
            "name": card.name, "description": card.description, "personality": card.personality,
            "scenario": card.scenario, "first_message": card.first_message,
            "alternate_greetings": list(card.alternate_greetings), "extras": card.extras,
        }
    return metadata


def report(book: Lorebook) -> str:
    """One line for the import report: what arrived and what was kept."""
    entries = book.entries
    parts = [f"{book.format}, {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"]
    disabled = sum(not e.enabled for e in entries)
    constant = sum(e.constant for e in entries)
    if disabled:
        parts.append(f"{disabled} disabled")
    if constant:
        parts.append(f"{constant} always included")
    line = ", ".join(parts)
    unused = unused_fields(book)
    if unused:
        line += ". Kept but not used: " + ", ".join(unused)
    if not entries:
        line += ". The book has no entries; it is kept, empty, and there is nothing to index"
    notes = [n for n in book.notes if n != "empty lorebook"]
    if notes:
        line += ". " + "; ".join(notes)
    return line + "."


def entry_rows(source, entries) -> list[LoreEntry]:
    """The rows a book's entries are stored as, in the book's order, each
    keeping only the extras the file gave."""
    return [
        LoreEntry(
            source=source, position=i, title=e.title[:300], text=e.text, keys=list(e.keys),
            secondary_keys=list(e.secondary_keys), regex_keys=list(e.regex_keys),
            enabled=e.enabled, constant=e.constant, extras=compact(e.extras),
        )
        for i, e in enumerate(entries)
    ]
