"""A character card's book (`character_book`, V2 and V3) into entries, also
when the book is saved on its own.

- A book entry's real SillyTavern settings (position, depth, probability,
  groups, timers, the `match…` scan flags, triggers, the character filter)
  live in its `extensions`, where SillyTavern's card export writes them in
  snake case; they are read as its `convertCharacterBook` reads them and
  kept by SillyTavern's names, so a card's book and a World Info file carry
  the same extras.
- SillyTavern sets `use_regex: true` on every entry it exports ("ST keys
  are always regex") whatever the keys are, and its `ccv3` copy carries
  that flag into V3. So `use_regex` never turns a plain word into a
  pattern: a key written `/…/flags` is a regex key in any version, and in a
  V3 entry with `use_regex` a key that uses regex syntax (and compiles) is
  kept as the pattern `/key/`; plain keys stay plain either way.
"""

from __future__ import annotations

import copy
import re
from dataclasses import replace

from knowledge.lorebooks.entries import Entry, Lorebook, LorebookError, compiles_as_pattern, is_regex_key
from knowledge.lorebooks.sillytavern import (
    LOGIC_NAMES,
    POSITION_NAMES,
    ROLE_NAMES,
    enum_name,
    json_type,
    parse_entry,
    read_flag,
)

BOOK_FORMAT = "Character book (V2 lorebook)"
# Characters that make a key a pattern rather than a word (for V3 `use_regex`).
_REGEX_SYNTAX = re.compile(r"[\\^$|()\[\]{}*+?]")

# How SillyTavern's convertCharacterBook reads a book entry's extensions:
# SillyTavern's name ← the extension's name, and the default when absent.
_EXTENSION_SETTINGS = (
    ("excludeRecursion", "exclude_recursion", False),
    ("preventRecursion", "prevent_recursion", False),
    ("delayUntilRecursion", "delay_until_recursion", False),
    ("probability", "probability", 100),
    ("useProbability", "useProbability", True),
    ("depth", "depth", 4),
    ("selectiveLogic", "selectiveLogic", 0),
    ("group", "group", ""),
    ("groupOverride", "group_override", False),
    ("groupWeight", "group_weight", 100),
    ("scanDepth", "scan_depth", None),
    ("caseSensitive", "case_sensitive", None),
    ("matchWholeWords", "match_whole_words", None),
    ("useGroupScoring", "use_group_scoring", None),
    ("automationId", "automation_id", ""),
    ("role", "role", 0),
    ("vectorized", "vectorized", False),
    ("sticky", "sticky", None),
    ("cooldown", "cooldown", None),
    ("delay", "delay", None),
    ("outletName", "outlet_name", ""),
    ("ignoreBudget", "ignore_budget", False),
    ("matchPersonaDescription", "match_persona_description", False),
    ("matchCharacterDescription", "match_character_description", False),
    ("matchCharacterPersonality", "match_character_personality", False),
    ("matchCharacterDepthPrompt", "match_character_depth_prompt", False),
    ("matchScenario", "match_scenario", False),
    ("matchCreatorNotes", "match_creator_notes", False),
    ("triggers", "triggers", []),
    ("characterFilter", "character_filter", {"isExclude": False, "names": [], "tags": []}),
)
# Book entry fields the spec defines; anything else an entry carries is kept as is.
_BOOK_ENTRY_FIELDS = (
    "keys",
    "secondary_keys",
    "content",
    "enabled",
    "constant",
    "insertion_order",
    "case_sensitive",
    "name",
    "priority",
    "id",
    "comment",
    "selective",
    "position",
    "use_regex",
    "extensions",
)


def parse_character_book(data: dict, *, name: str) -> Lorebook:
    """A character book saved on its own, outside any card: Chub's lorebook
    download and card editors' "export lorebook" write the V2 spec's
    `character_book` object (`{"name", "scan_depth", "token_budget",
    "extensions", "entries": [{keys, secondary_keys, content, enabled,
    insertion_order, ...}]}`). It looks like a World Info file but its
    entries use the card's names, so the card's book reader reads it."""
    entries, extras = read_book(data, format_name=BOOK_FORMAT, version="V2", where="")
    own_name = data.get("name")
    return Lorebook(
        format=BOOK_FORMAT,
        name=own_name.strip() if isinstance(own_name, str) and own_name.strip() else name,
        entries=entries,
        extras=extras,
        notes=() if entries else ("empty lorebook",),
    )


def read_book(book, *, format_name: str, version: str, where: str = "character_book.") -> tuple[tuple[Entry, ...], dict]:
    """The book's entries, and its other fields (name, scan_depth, ...)."""
    if book is None:
        return (), {}
    if not isinstance(book, dict):
        raise LorebookError(
            format_name,
            f"the character book is a {json_type(book)}, not an object",
            field="character_book",
        )
    raw_entries = book.get("entries")
    if raw_entries is None:
        raw_entries = []
    elif isinstance(raw_entries, dict):
        raw_entries = list(raw_entries.values())
    if not isinstance(raw_entries, list):
        raise LorebookError(
            format_name,
            f"the character book's entries are a {json_type(raw_entries)}, not a list",
            field=f"{where}entries",
        )
    entries = tuple(
        _book_entry(raw, index=index, format_name=format_name, version=version)
        for index, raw in enumerate(raw_entries)
    )
    return entries, {key: value for key, value in book.items() if key != "entries"}


def _book_entry(raw, *, index: int, format_name: str, version: str) -> Entry:
    """One book entry, read as SillyTavern's convertCharacterBook reads it.

    1. Turn it into a World Info entry (its settings from `extensions`) and
       read that with the World Info reader, for the same checks and extras.
    2. Put back the card's own names: its field names in errors, the title
       (`name`, else `comment`, else the first key), and the entry fields
       World Info does not have (`id`, `name`, `priority`, `use_regex`, ...).
    3. For a V3 `use_regex` entry, keys in regex syntax become patterns.
    """
    if not isinstance(raw, dict):
        raise LorebookError(
            format_name, f"the entry is a {json_type(raw)}, not an object", entry=index
        )
    uid = raw.get("id", index)
    extensions = raw.get("extensions")
    if extensions is None:
        extensions = {}
    if not isinstance(extensions, dict):
        raise LorebookError(
            format_name,
            f"the extensions are a {json_type(extensions)}, not an object",
            entry=uid,
            field="extensions",
        )
    world_info, defaulted = _as_world_info(
        raw, index=index, uid=uid, extensions=extensions, format_name=format_name
    )
    entry = _read_world_info(world_info, uid=uid, format_name=format_name)
    extras = _entry_extras(raw, entry=entry, extensions=extensions, defaulted=defaulted)

    keys, regex_keys = entry.keys, entry.regex_keys
    if version == "V3" and read_flag(
        raw, "use_regex", False, format_name=format_name, uid=uid
    ):
        keys, promoted = _promote_regex_keys(keys)
        if promoted:
            regex_keys = regex_keys + promoted
            extras["regex_from_use_regex"] = list(promoted)

    title = next(
        (
            value.strip()
            for value in (raw.get("name"), raw.get("comment"))
            if isinstance(value, str) and value.strip()
        ),
        "",
    )
    return replace(
        entry,
        title=title or entry.title,
        keys=keys,
        regex_keys=regex_keys,
        extras=extras,
    )


def _as_world_info(
    raw: dict, *, index: int, uid, extensions: dict, format_name: str
) -> tuple[dict, list[str]]:
    """The entry in World Info's shape, and the SillyTavern settings it did
    not set (filled with convertCharacterBook's defaults)."""
    world_info = {
        "uid": uid,
        "key": raw.get("keys"),
        "keysecondary": raw.get("secondary_keys"),
        "comment": raw.get("comment") or "",
        "content": raw.get("content"),
        "constant": raw.get("constant"),
        "selective": raw.get("selective") or False,
        "order": _default(raw.get("insertion_order"), 100),
        "disable": _disabled(raw, format_name=format_name, uid=uid),
        "displayIndex": _default(extensions.get("display_index"), index),
    }
    position = extensions.get("position")
    world_info["position"] = (
        position
        if position is not None
        else (0 if raw.get("position") == "before_char" else 1)
    )
    defaulted = []
    for st_name, extension_name, default in _EXTENSION_SETTINGS:
        value = extensions.get(extension_name)
        if st_name == "caseSensitive" and value is None:
            value = raw.get("case_sensitive")
        if value is None and default is not None:
            defaulted.append(st_name)
        world_info[st_name] = _default(value, copy.deepcopy(default))
    world_info["addMemo"] = bool(raw.get("comment"))
    return world_info, defaulted


def _read_world_info(world_info: dict, *, uid, format_name: str) -> Entry:
    """The World Info reader's entry, its faults told by the card's field names."""
    try:
        return parse_entry(world_info, uid=uid, format_name=format_name)
    except LorebookError as error:
        card_field = {
            "key": "keys",
            "keysecondary": "secondary_keys",
            "disable": "enabled",
        }.get(error.field, error.field)
        problem = str(error).split(": ", 1)[1]
        raise LorebookError(format_name, problem, entry=uid, field=card_field) from None


def _entry_extras(
    raw: dict, *, entry: Entry, extensions: dict, defaulted: list[str]
) -> dict:
    """The World Info reader's extras, with the card entry's own fields put back."""
    extras = {key: value for key, value in entry.extras.items() if key != "defaulted"}
    extras.update(
        {
            key: value
            for key, value in raw.items()
            if key not in _BOOK_ENTRY_FIELDS
            or key
            in ("id", "name", "priority", "insertion_order", "use_regex", "extensions")
        }
    )
    if "position" in raw:
        extras["card_position"] = raw["position"]
    extras["position_name"] = enum_name(POSITION_NAMES, extras["position"])
    extras["selectiveLogic_name"] = enum_name(LOGIC_NAMES, extras["selectiveLogic"])
    extras["role_name"] = enum_name(ROLE_NAMES, extras["role"])
    if "position" not in extensions and "position" not in raw:
        defaulted.append("position")
    if defaulted:
        extras["defaulted"] = defaulted
    return extras


def _disabled(raw: dict, *, format_name: str, uid) -> bool:
    """Whether a book entry is switched off: its `enabled` (the spec's
    name); a book written in SillyTavern's style with `disable` instead
    keeps that meaning rather than reading as enabled."""
    if "enabled" not in raw and "disable" in raw:
        return read_flag(raw, "disable", False, format_name=format_name, uid=uid)
    return not read_flag(raw, "enabled", True, format_name=format_name, uid=uid)


def _promote_regex_keys(
    keys: tuple[str, ...],
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Of a `use_regex` entry's plain keys, those written in regex syntax
    that compile, as `/key/` patterns; plain words stay plain keys."""
    plain, patterns = [], []
    for key in keys:
        if _REGEX_SYNTAX.search(key) and compiles_as_pattern(key):
            pattern = f"/{key}/"
            patterns.append(pattern if is_regex_key(pattern) else key)
        else:
            plain.append(key)
    return tuple(plain), tuple(patterns)



def _default(value, default):
    return default if value is None else value
