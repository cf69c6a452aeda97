"""SillyTavern World Info JSON into a `Lorebook`.

A World Info file is `{"entries": {uid: entry, ...}, ...}`. What SillyTavern
writes has changed over the years: files from 2023 carry about ten fields
per entry (`uid`, `key`, `keysecondary`, `comment`, `content`, `constant`,
`selective`, `order`, `position`, `disable`), current ones thirty. Every
field a file leaves out takes the default of SillyTavern's own entry
template (`newWorldInfoEntryDefinition` in public/scripts/world-info.js), so
an old file and a new one read the same, and the names of the filled fields
are recorded in the entry's extras under `defaulted`.

A world info file that SillyTavern made from a character card's book also
carries that book, as it was at import time, in `originalData`. It can be
stale and it is never a second book: it is ignored, with a note.
"""

from __future__ import annotations

from knowledge.lorebooks.entries import Entry, Lorebook, LorebookError, key_line, split_keys
from worldinfo.records import BookSettings

FORMAT = "SillyTavern World Info"

# world_info_position in world-info.js.
POSITION_NAMES = {
    0: "before_char",
    1: "after_char",
    2: "an_top",
    3: "an_bottom",
    4: "at_depth",
    5: "em_top",
    6: "em_bottom",
    7: "outlet",
}
# world_info_logic in world-info.js: how secondary keys combine with the primary.
LOGIC_NAMES = {0: "AND ANY", 1: "NOT ALL", 2: "NOT ANY", 3: "AND ALL"}
# extension_prompt_roles in script.js: the role of an at-depth insertion.
ROLE_NAMES = {0: "system", 1: "user", 2: "assistant"}

# newWorldInfoEntryDefinition's defaults (DEFAULT_DEPTH 4, DEFAULT_WEIGHT 100),
# in its order, less the fields that become the Entry's own (key,
# keysecondary, content, constant, disable). `displayIndex` defaults to the
# uid, as the editor does. The fields from `ignoreBudget` on came with
# SillyTavern's later releases; `characterFilter` is absent from its
# template (an entry without one applies to every character), which is what
# the empty filter here means too.
ENTRY_DEFAULTS: dict = {
    "comment": "",
    "vectorized": False,
    "selective": True,
    "selectiveLogic": 0,
    "addMemo": False,
    "order": 100,
    "position": 0,
    "ignoreBudget": False,
    "excludeRecursion": False,
    "preventRecursion": False,
    "matchPersonaDescription": False,
    "matchCharacterDescription": False,
    "matchCharacterPersonality": False,
    "matchCharacterDepthPrompt": False,
    "matchScenario": False,
    "matchCreatorNotes": False,
    "delayUntilRecursion": 0,
    "probability": 100,
    "useProbability": True,
    "depth": 4,
    "outletName": "",
    "group": "",
    "groupOverride": False,
    "groupWeight": 100,
    "scanDepth": None,
    "caseSensitive": None,
    "matchWholeWords": None,
    "useGroupScoring": None,
    "automationId": "",
    "role": 0,
    "sticky": None,
    "cooldown": None,
    "delay": None,
    "triggers": [],
    "characterFilter": {"isExclude": False, "names": [], "tags": []},
}
#: The defaults each entry needs a copy of (a list, an object).
MUTABLE = frozenset(name for name, value in ENTRY_DEFAULTS.items() if isinstance(value, (list, dict)))
#: What the importers add to an entry's extras of their own (the filled
#: fields' names, readable labels): notes for Loremaster, never SillyTavern fields.
ANNOTATIONS = frozenset({"defaulted", "position_name", "selectiveLogic_name", "role_name", "keysecondary_regex"})
#: The top-level key of an export that holds the book's World Info settings
#: as Loremaster keeps them (worldinfo.records.BookSettings); SillyTavern
#: reads only `entries` (and `originalData`), so it ignores this one.
SETTINGS_KEY = "loremaster_settings"


def entry_default(field_name: str):
    """The template's default for a field, a fresh copy of a list or an
    object, so no two entries share one (the others are immutable and
    shared: a 100,000-entry book fills millions of fields)."""
    default = ENTRY_DEFAULTS[field_name]
    return _fresh(default) if field_name in MUTABLE else default


def _fresh(value: list | dict) -> list | dict:
    """A copy of a default list, or of a default object and the lists in it
    (no default nests deeper), many times quicker than deepcopy."""
    if isinstance(value, list):
        return list(value)
    return {key: list(item) if isinstance(item, list) else item for key, item in value.items()}


def title_for(comment, keys, uid) -> str:
    """An entry's title as SillyTavern's list shows it: its comment, else its
    first key, else its number."""
    comment = comment.strip() if isinstance(comment, str) else ""
    first_key = next((str(key).strip() for key in keys if str(key).strip()), "")
    return comment or first_key or f"Entry {uid}"


#: The entry fields the World Info engine applies (knowledge.worldinfo.fields
#: reads them, by these names, for every format), so an import report never
#: lists them as kept but unused.
APPLIED_FIELDS = frozenset({
    "order", "insertion_order", "insertorder", "priority", "budgetPriority", "contextConfig", "position", "depth",
    "role", "probability", "useProbability", "group", "groupOverride", "groupWeight", "useGroupScoring", "sticky",
    "cooldown", "delay", "scanDepth", "caseSensitive", "matchWholeWords", "excludeRecursion", "preventRecursion",
    "delayUntilRecursion", "ignoreBudget", "vectorized", "selective", "selectiveLogic", "characterFilter",
    "triggers", "matchPersonaDescription", "matchCharacterDescription", "matchCharacterPersonality",
    "matchCharacterDepthPrompt", "matchScenario", "matchCreatorNotes", "match",
})

_OWN_FIELDS = ("key", "keysecondary", "content", "constant", "disable", "enabled")


def parse_world_info(data: dict, *, name: str) -> Lorebook:
    """The book in a decoded World Info JSON file.

    1. Check the shape: an object with `entries`, an object keyed by uid
       (a list is accepted too, its index standing in for a missing uid).
    2. Read each entry in the file's order (`parse_entry`).
    3. Keep the book's other fields in extras, except `originalData`,
       which is ignored with a note, and the settings a Loremaster export
       wrote (`loremaster_settings`), which become the book's settings.
    """
    if not isinstance(data, dict):
        raise LorebookError(
            FORMAT, f"the file holds a JSON {json_type(data)}, not an object"
        )
    if "entries" not in data:
        raise LorebookError(FORMAT, "the file has no “entries”", field="entries")
    raw_entries = data["entries"]
    if isinstance(raw_entries, dict):
        items = list(raw_entries.items())
    elif isinstance(raw_entries, list):
        items = list(enumerate(raw_entries))
    elif raw_entries is None:
        items = []
    else:
        raise LorebookError(
            FORMAT,
            f"“entries” is a {json_type(raw_entries)}, not an object keyed by uid",
            field="entries",
        )

    entries = tuple(parse_entry(raw, uid=uid, format_name=FORMAT) for uid, raw in items)

    notes = []
    if not entries:
        notes.append("empty lorebook")
    if "originalData" in data:
        original = data["originalData"]
        count = len(original.get("entries") or ()) if isinstance(original, dict) else 0
        notes.append(
            f"ignored the embedded “originalData” (a character card's book, {count} entries, "
            "possibly stale): the entries above are the book"
        )
    extras = {
        key: value
        for key, value in data.items()
        if key not in ("entries", "originalData", SETTINGS_KEY)
    }
    settings = BookSettings.from_stored(data[SETTINGS_KEY]).as_stored() if SETTINGS_KEY in data else {}
    book_name = (
        data.get("name")
        if isinstance(data.get("name"), str) and data.get("name").strip()
        else name
    )
    return Lorebook(
        format=FORMAT,
        name=book_name.strip(),
        entries=entries,
        extras=extras,
        notes=tuple(notes),
        settings=settings,
    )


def parse_entry(raw, *, uid, format_name: str = FORMAT) -> Entry:
    """One World Info entry, with SillyTavern's defaults for what it lacks.

    `uid` is the entry's key in `entries` (the entry's own `uid` wins when it
    has one); `format_name` lets a card's book, converted to this shape,
    report its faults under its own format.
    """
    if not isinstance(raw, dict):
        raise LorebookError(
            format_name, f"the entry is a {json_type(raw)}, not an object", entry=uid
        )
    uid = raw.get("uid", uid)

    keys = read_keys(raw.get("key"), format_name=format_name, uid=uid, field="key")
    secondary = read_keys(
        raw.get("keysecondary"), format_name=format_name, uid=uid, field="keysecondary"
    )
    plain, patterns = split_keys(keys)
    plain_secondary, secondary_patterns = split_keys(secondary)

    content = raw.get("content")
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise LorebookError(
            format_name,
            f"the content is a {json_type(content)}, not text",
            entry=uid,
            field="content",
        )

    constant = read_flag(raw, "constant", False, format_name=format_name, uid=uid)
    if "disable" in raw:
        enabled = not read_flag(raw, "disable", False, format_name=format_name, uid=uid)
    else:
        enabled = read_flag(raw, "enabled", True, format_name=format_name, uid=uid)

    extras = {"uid": uid}
    defaulted = []
    for field_name in ENTRY_DEFAULTS:
        if field_name in raw:
            extras[field_name] = raw[field_name]
        else:
            extras[field_name] = entry_default(field_name)
            defaulted.append(field_name)
    if "displayIndex" in raw:
        extras["displayIndex"] = raw["displayIndex"]
    else:
        extras["displayIndex"] = uid
        defaulted.append("displayIndex")
    for field_name, value in raw.items():
        if field_name not in extras and field_name not in _OWN_FIELDS:
            extras[field_name] = value
    if secondary_patterns:
        extras["keysecondary_regex"] = list(secondary_patterns)
    extras["position_name"] = enum_name(POSITION_NAMES, extras["position"])
    extras["selectiveLogic_name"] = enum_name(LOGIC_NAMES, extras["selectiveLogic"])
    extras["role_name"] = enum_name(ROLE_NAMES, extras["role"])
    if defaulted:
        extras["defaulted"] = defaulted

    return Entry(
        title=title_for(extras["comment"], keys, uid),
        text=content,
        keys=plain,
        secondary_keys=plain_secondary + secondary_patterns,
        regex_keys=patterns,
        enabled=enabled,
        constant=constant,
        extras=extras,
    )


def enum_name(names: dict, value) -> str:
    """The readable name of a numbered setting; "unknown" for a number
    SillyTavern does not define or a value that is not a number."""
    if isinstance(value, int) and not isinstance(value, bool):
        return names.get(value, "unknown")
    return "unknown"


def read_keys(value, *, format_name: str, uid, field: str) -> list[str]:
    """A key list: a list of strings (numbers are read as their text), or
    nothing. A string is the comma-separated line SillyTavern's editor shows
    (community tools and hand-edited files write `"key": "a, b"`): it is
    split on its commas, a comma inside a `/pattern/` staying in the pattern."""
    if value is None:
        return []
    if isinstance(value, str):
        return key_line(value)
    if not isinstance(value, list):
        raise LorebookError(
            format_name,
            f"the keys are a {json_type(value)}, not a list of strings",
            entry=uid,
            field=field,
        )
    keys = []
    for key in value:
        if isinstance(key, str):
            keys.append(key)
        elif isinstance(key, (int, float)) and not isinstance(key, bool):
            keys.append(str(key))
        else:
            raise LorebookError(
                format_name,
                f"a key is a {json_type(key)}, not a string",
                entry=uid,
                field=field,
            )
    return keys


def read_flag(raw: dict, field: str, default: bool, *, format_name: str, uid) -> bool:
    """A boolean as tools write them: true/false, 0/1, "true"/"false"."""
    value = raw.get(field, default)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in (
        "true",
        "false",
        "1",
        "0",
        "",
    ):
        return value.strip().lower() in ("true", "1")
    raise LorebookError(
        format_name, f"“{value!r}” is not true or false", entry=uid, field=field
    )


def json_type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__
