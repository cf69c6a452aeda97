"""What every lorebook importer produces: a format's entries as plain records.

Readers arrive with lore written by other tools (SillyTavern, NovelAI, AI
Dungeon, KoboldAI, character cards). Each importer reads one format into
these records and nothing else, so the library stores every format the same
way: an entry's title, text and keys become a passage and its lexical
evidence, its flags map to Loremaster's (enabled, always included), and
whatever the format carries that Loremaster does not use is kept in
`extras`, never dropped. Pure Python: no Django, no database.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..regexkeys import MAX_LENGTH


class LorebookError(ValueError):
    """A file that claims a format but breaks it. The message names the
    format, the entry and the field, so a reader can find the fault."""

    def __init__(self, format_name: str, problem: str, *, entry: str | int | None = None, field: str = ""):
        where = [format_name]
        if entry is not None:
            where.append(f"entry {entry}")
        if field:
            where.append(f"field “{field}”")
        super().__init__(f"{', '.join(where)}: {problem}")
        self.format_name, self.entry, self.field = format_name, entry, field


@dataclass(frozen=True)
class Entry:
    """One lore entry. `keys` are matched as words; `regex_keys` are
    patterns written `/pattern/flags`, kept as written; `secondary_keys` are
    the optional second set some formats have (SillyTavern's
    `keysecondary`). `extras` holds the entry's other fields, by the
    format's own names, with SillyTavern-style defaults filled in where the
    file left them out."""

    title: str
    text: str
    keys: tuple[str, ...] = ()
    secondary_keys: tuple[str, ...] = ()
    regex_keys: tuple[str, ...] = ()
    enabled: bool = True
    constant: bool = False
    extras: dict = field(default_factory=dict)


@dataclass(frozen=True)
class CharacterCard:
    """What a character card carries besides its book: enough to start a
    campaign (the opening scene, the persona the narrator plays, the plot
    essentials)."""

    name: str
    description: str = ""
    personality: str = ""
    scenario: str = ""
    first_message: str = ""
    alternate_greetings: tuple[str, ...] = ()
    extras: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Lorebook:
    """A whole file: its format (with version), its name, its entries in
    the file's order, book-level extras, notes for the import report (an
    empty book, a stale embedded copy ignored), the card, for a character
    card, and the book's World Info settings as Loremaster keeps them
    (worldinfo.records.BookSettings.as_stored; empty for the defaults),
    which an export writes and its import reads back."""

    format: str
    name: str
    entries: tuple[Entry, ...]
    extras: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    card: CharacterCard | None = None
    settings: dict = field(default_factory=dict)


def split_keys(value) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Plain keys and regex keys from a list of strings: a key written
    `/pattern/flags` is a regular expression. Blank keys are dropped and
    duplicates kept once, in order."""
    plain, patterns, seen = [], [], set()
    for raw in value or ():
        key = str(raw).strip()
        if not key or key in seen:
            continue
        seen.add(key)
        (patterns if is_regex_key(key) else plain).append(key)
    return tuple(plain), tuple(patterns)


def key_line(line: str) -> list[str]:
    """A reader's comma-separated keys as a list. A comma inside a
    `/pattern/flags` key ("/a{1,3}/") belongs to the pattern."""
    keys: list[str] = []
    pending = None
    for part in line.split(","):
        if pending is not None:
            pending += "," + part
            if is_regex_key(pending.strip()):
                keys.append(pending)
                pending = None
        elif part.strip().startswith("/") and not is_regex_key(part.strip()):
            pending = part
        else:
            keys.append(part)
    if pending is not None:
        keys.append(pending)
    return [k.strip() for k in keys if k.strip()]


def is_regex_key(key: str) -> bool:
    """`/pattern/` with optional flags (SillyTavern's convention)."""
    if len(key) < 3 or not key.startswith("/"):
        return False
    end = key.rfind("/")
    return end > 0 and all(flag in "gimsuy" for flag in key[end + 1:])


def compiles_as_pattern(key: str) -> bool:
    """Whether a key written bare reads as a regular expression (the
    standard library's reading), for the formats whose keys may be patterns
    without the `/…/` (Risu's `useRegex`, a V3 card's `use_regex`, AI
    Dungeon's). A key longer than a regex key may be is not tried: it would
    be refused as one, and compiling a 900 KB key takes seconds."""
    if len(key) > MAX_LENGTH:
        return False
    try:
        re.compile(key)
    except (re.error, RecursionError, OverflowError, ValueError):
        return False
    return True


def strict_flag(raw: dict, field: str, *, default: bool = False, format_name: str, entry) -> bool:
    """A boolean field of a format that writes only true or false (NovelAI,
    Agnai, KoboldAI): missing or null is the default, anything else a fault."""
    value = raw.get(field, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise LorebookError(format_name, f"{field} must be true or false, found {kind_of(value)}", entry=entry, field=field)
    return value


def kind_of(value) -> str:
    """A JSON value's kind in a reader's words, for refusals ("found a list")."""
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )
