"""A lorebook entry's World Info settings, between the entry editor's
fields and the entry's extras (issue 25).

The World Info engine reads an entry's settings by SillyTavern's names
first, whatever format the book came in, so the editor writes them there
for every format: what a reader sets is what the engine applies, and the
export gives it back in SillyTavern's shape. Keys, secondary keys,
constant and enabled have columns of their own and are not here.

Writing keeps the file's own spelling where the reader changed nothing
(SillyTavern leaves `sticky` null and `delayUntilRecursion` false; an
editor showing 0 must not rewrite them as 0), so a SillyTavern file that
is only opened and saved still survives the round trip field for field.
Pure Python, like the importers: the forms and the services call it.
"""

from __future__ import annotations

from worldinfo.records import AT_DEPTH, POSITION_WORDS, ROLE_NAMES

from .lorebooks.sillytavern import ENTRY_DEFAULTS, enum_name
from .lorebooks.stored import LABELS

#: Settings SillyTavern added after its entry template: false or empty
#: when absent, and only written when the reader sets them.
LATER_DEFAULTS = {
    "ignoreBudget": False,
    "matchPersonaDescription": False,
    "matchCharacterDescription": False,
    "matchCharacterPersonality": False,
    "matchCharacterDepthPrompt": False,
    "matchScenario": False,
    "matchCreatorNotes": False,
    "triggers": [],
}
#: The generation types the editor offers for `triggers` (SillyTavern has
#: more, for its own features; an entry's other trigger names are kept).
TRIGGERS = (("normal", "Normal"), ("continue", "Continue"), ("regenerate", "Retry"))

# Each setting: the editor's field name, SillyTavern's, and how it is read.
FLAG, NUMBER, OPTIONAL_NUMBER, CHOICE, TRISTATE = "flag", "number", "optional number", "choice", "tri-state"
SETTINGS = (
    ("selective", "selective", FLAG),
    ("logic", "selectiveLogic", CHOICE),
    ("order", "order", NUMBER),
    ("position", "position", CHOICE),
    ("depth", "depth", NUMBER),
    ("role", "role", CHOICE),
    ("probability", "probability", NUMBER),
    ("use_probability", "useProbability", FLAG),
    ("group_weight", "groupWeight", NUMBER),
    ("group_override", "groupOverride", FLAG),
    ("use_group_scoring", "useGroupScoring", TRISTATE),
    ("sticky", "sticky", OPTIONAL_NUMBER),
    ("cooldown", "cooldown", OPTIONAL_NUMBER),
    ("delay", "delay", OPTIONAL_NUMBER),
    ("scan_depth", "scanDepth", OPTIONAL_NUMBER),
    ("exclude_recursion", "excludeRecursion", FLAG),
    ("prevent_recursion", "preventRecursion", FLAG),
    ("delay_until_recursion", "delayUntilRecursion", NUMBER),
    ("case_sensitive", "caseSensitive", TRISTATE),
    ("match_whole_words", "matchWholeWords", TRISTATE),
    ("ignore_budget", "ignoreBudget", FLAG),
    ("vectorized", "vectorized", FLAG),
    ("match_persona_description", "matchPersonaDescription", FLAG),
    ("match_character_description", "matchCharacterDescription", FLAG),
    ("match_character_personality", "matchCharacterPersonality", FLAG),
    ("match_character_depth_prompt", "matchCharacterDepthPrompt", FLAG),
    ("match_scenario", "matchScenario", FLAG),
    ("match_creator_notes", "matchCreatorNotes", FLAG),
)
#: The extras the editor edits: what an entry's page shows besides them
#: is what the file kept that nothing uses.
EDITED = frozenset({st for _, st, _ in SETTINGS} | {"group", "characterFilter", "triggers"})
#: The tri-state choices: the book's setting, or the entry's own.
BOOK, YES, NO = "", "yes", "no"


def _default(st_name: str):
    return ENTRY_DEFAULTS[st_name] if st_name in ENTRY_DEFAULTS else LATER_DEFAULTS[st_name]


def _number(value, default) -> int | None:
    """A stored number as the editor shows it: a bool is SillyTavern's
    older spelling (`delayUntilRecursion: true` is level 1), text and
    floats as written by hand-made files are read when they are whole."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return default


def _shown(kind: str, value, default):
    if kind == FLAG:
        return value if isinstance(value, bool) else bool(default)
    if kind == TRISTATE:
        return BOOK if not isinstance(value, bool) else (YES if value else NO)
    if kind == OPTIONAL_NUMBER:
        return _number(value, None)
    number = _number(value, _number(default, 0))
    return str(number) if kind == CHOICE else number


def names_of(value) -> list[str]:
    """A comma-separated line (groups, character names) as its names."""
    return [part.strip() for part in str(value or "").split(",") if part.strip()]


def settings_of(extras: dict) -> dict:
    """The editor's values for an entry's (expanded) extras: SillyTavern's
    fields where the entry has them, its defaults where it has not."""
    values = {form: _shown(kind, extras.get(st), _default(st)) for form, st, kind in SETTINGS}
    group = extras.get("group")
    values["groups"] = ", ".join(names_of(group if isinstance(group, str) else ""))
    selected = extras.get("characterFilter") if isinstance(extras.get("characterFilter"), dict) else {}
    values["character_names"] = ", ".join(str(n) for n in selected.get("names") or () if str(n).strip())
    values["character_exclude"] = bool(selected.get("isExclude"))
    triggers = extras.get("triggers") if isinstance(extras.get("triggers"), list) else []
    values["triggers"] = [name for name, _ in TRIGGERS if name in triggers]
    return values


def _stored(kind: str, value):
    if kind == TRISTATE:
        return None if value == BOOK else value == YES
    if kind == CHOICE:
        return int(value)
    return value


def _same(kind: str, old, new, default) -> bool:
    """Whether the reader left a setting as the editor showed it: then the
    file's own spelling stays (null, false, "3")."""
    return _stored(kind, _shown(kind, old, default)) == new


def with_settings(extras: dict, values: dict) -> dict:
    """The entry's (expanded) extras with the editor's values written under
    SillyTavern's names; a setting the reader did not change keeps the
    file's own value, and a later setting left at its default is not added."""
    result = dict(extras)
    for form, st, kind in SETTINGS:
        new = _stored(kind, values[form])
        if st in result and _same(kind, result[st], new, _default(st)):
            continue
        if st in ENTRY_DEFAULTS or st in result or new != _default(st):
            result[st] = new
    _write_groups(result, names_of(values["groups"]))
    _write_filter(result, names_of(values["character_names"]), values["character_exclude"])
    _write_triggers(result, list(values["triggers"]))
    for label, (st, names) in LABELS.items():
        if label in result:
            result[label] = enum_name(names, result.get(st))
    return result


def _write_groups(result: dict, groups: list[str]) -> None:
    old = result.get("group")
    if names_of(old if isinstance(old, str) else "") != groups or not isinstance(old, str):
        result["group"] = ",".join(groups)


def _write_filter(result: dict, names: list[str], exclude: bool) -> None:
    """SillyTavern's `characterFilter`, tags kept; none at all when it
    filters nothing (as SillyTavern's editor removes it)."""
    old = result.get("characterFilter") if isinstance(result.get("characterFilter"), dict) else {}
    tags = list(old.get("tags") or [])
    if not names and not tags and not exclude:
        result.pop("characterFilter", None)
        return
    if [str(n) for n in old.get("names") or ()] == names and bool(old.get("isExclude")) == exclude and old:
        return
    result["characterFilter"] = {**old, "isExclude": exclude, "names": names, "tags": tags}


def _write_triggers(result: dict, chosen: list[str]) -> None:
    """The generation types ticked, after the entry's others; the file's
    list as it was when the same types are ticked, in whatever order."""
    old = result.get("triggers") if isinstance(result.get("triggers"), list) else []
    offered = {name for name, _ in TRIGGERS}
    if {t for t in old if t in offered} == set(chosen):
        return
    result["triggers"] = [t for t in old if t not in offered] + [name for name, _ in TRIGGERS if name in chosen]


def summary(values: dict) -> list[str]:
    """The settings an entry's card shows under its title, in a reader's
    words: where it goes, its order, and whatever it sets besides."""
    position = int(values["position"])
    where = POSITION_WORDS.get(position, "unknown position")
    if position == AT_DEPTH:
        where += f" {values['depth']} as {ROLE_NAMES.get(int(values['role']), 'system')}"
    parts = [where[0].upper() + where[1:], f"order {values['order']}"]
    if values["groups"]:
        parts.append(f"groups {values['groups']}")
    if values["use_probability"] and values["probability"] < 100:
        parts.append(f"{values['probability']} % chance")
    parts += [f"{name} {values[name]}" for name in ("sticky", "cooldown", "delay") if values[name]]
    return parts
