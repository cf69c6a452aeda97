"""A stored lorebook entry's fields as the World Info engine reads them.

Every importer keeps a format's own fields in `extras`, and the entry
editor writes SillyTavern's names there for every format, so SillyTavern's
names are read first, whatever the book's format. Where a format has its
own name for the same setting, it is the fallback: NovelAI's and a card
book's insertion order and priorities, Agnai's priority, Risu's insert
order; KoboldAI matches its keys as substrings. A value of the wrong type
is the engine's default, never an error: a book from the field must still
play.

Pure: no Django, no database.
"""

from __future__ import annotations

import hashlib
import json

from worldinfo.records import CharacterFilter, Entry

#: Where a format other than SillyTavern keeps an entry's insertion order.
ORDER_FALLBACKS = ("insertion_order", "insertorder", "priority", "budgetPriority")
#: SillyTavern's `match…` flags, by the engine's field names.
MATCH_FLAGS = {
    "matchPersonaDescription": "match_persona_description",
    "matchCharacterDescription": "match_character_description",
    "matchCharacterPersonality": "match_character_personality",
    "matchCharacterDepthPrompt": "match_character_depth_prompt",
    "matchScenario": "match_scenario",
    "matchCreatorNotes": "match_creator_notes",
}
#: SillyTavern's plain flags, by the engine's field names.
FLAGS = {
    "selective": "selective",
    "vectorized": "vectorized",
    "useProbability": "use_probability",
    "groupOverride": "group_override",
    "excludeRecursion": "exclude_recursion",
    "preventRecursion": "prevent_recursion",
    "ignoreBudget": "ignore_budget",
}
#: Flags that default to the book's setting when absent (None).
BOOK_FLAGS = {
    "caseSensitive": "case_sensitive",
    "matchWholeWords": "match_whole_words",
    "useGroupScoring": "use_group_scoring",
}


def _number(value, default: int, *, low: int = 0, high: int | None = None) -> int:
    """An integer setting within [low, high]; a numeric string counts
    (some exporters write them), anything else is the default."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        return default
    value = max(low, value)
    return min(value, high) if high is not None else value


def _flag(value, default):
    return value if isinstance(value, bool) else default


def _order(extras: dict) -> int:
    if "order" in extras:
        return _number(extras["order"], 100)
    context = extras.get("contextConfig")
    sources = [extras, context if isinstance(context, dict) else {}]
    for name in ORDER_FALLBACKS:
        for where in sources:
            if name in where:
                return _number(where[name], 100)
    return 100


def _groups(value) -> tuple[str, ...]:
    """SillyTavern's `group`: several groups, comma-separated."""
    if not isinstance(value, str):
        return ()
    return tuple(dict.fromkeys(g.strip() for g in value.split(",") if g.strip()))


def _character_filter(value) -> CharacterFilter:
    if not isinstance(value, dict):
        return CharacterFilter()
    names = value.get("names")
    names = tuple(str(n) for n in names if isinstance(n, str) and n.strip()) if isinstance(names, list) else ()
    return CharacterFilter(names=names, exclude=value.get("isExclude") is True)


def _delay_until_recursion(value) -> int:
    """`delayUntilRecursion`: true is level 1, a number is its level."""
    if value is True:
        return 1
    return _number(value, 0)


def _triggers(value) -> tuple[str, ...]:
    return tuple(str(t) for t in value if isinstance(t, str)) if isinstance(value, list) else ()


def fingerprint(*, title: str, text: str, keys, secondary_keys, regex_keys, enabled: bool, constant: bool,
                extras: dict) -> str:
    """A hash of everything an edit can change: a timed effect recorded for
    another fingerprint is dropped, so editing an entry resets its timers."""
    document = json.dumps(
        [title, text, list(keys), list(secondary_keys), list(regex_keys), enabled, constant, extras],
        sort_keys=True, ensure_ascii=False, default=str,
    )
    return hashlib.sha256(document.encode("utf-8")).hexdigest()[:16]


def entry_record(*, source_id: int, entry_id: int, title: str, text: str, keys, secondary_keys, regex_keys,
                 enabled: bool, constant: bool, extras: dict, format_name: str, tokens: int) -> Entry:
    """The engine's record of one stored entry (`extras` already expanded)."""
    substring = format_name.startswith("KoboldAI") or extras.get("match") == "substring"
    whole_words = extras.get("matchWholeWords")
    flags = {name: _flag(extras.get(stored), Entry.__dataclass_fields__[name].default)
             for stored, name in {**FLAGS, **MATCH_FLAGS}.items()}
    book_flags = {name: extras.get(stored) if isinstance(extras.get(stored), bool) else None
                  for stored, name in BOOK_FLAGS.items()}
    if substring and not isinstance(whole_words, bool):
        book_flags["match_whole_words"] = False
    scan_depth = extras.get("scanDepth")
    return Entry(
        key=f"{source_id}:{entry_id}",
        fingerprint=fingerprint(title=title, text=text, keys=keys, secondary_keys=secondary_keys,
                                regex_keys=regex_keys, enabled=enabled, constant=constant, extras=extras),
        book=str(source_id),
        title=title,
        content=text,
        tokens=tokens,
        keys=tuple(str(k) for k in (*keys, *regex_keys)),
        secondary_keys=tuple(str(k) for k in secondary_keys),
        logic=_number(extras.get("selectiveLogic"), 0, high=3),
        constant=constant,
        enabled=enabled,
        order=_order(extras),
        position=_number(extras.get("position"), 0, high=6),
        depth=_number(extras.get("depth"), 4),
        role=_number(extras.get("role"), 0, high=2),
        probability=_number(extras.get("probability"), 100, high=100),
        groups=_groups(extras.get("group")),
        group_weight=_number(extras.get("groupWeight"), 100, low=1),
        sticky=_number(extras.get("sticky"), 0),
        cooldown=_number(extras.get("cooldown"), 0),
        delay=_number(extras.get("delay"), 0),
        scan_depth=None if _number(scan_depth, -1) < 0 else _number(scan_depth, 0),
        delay_until_recursion=_delay_until_recursion(extras.get("delayUntilRecursion")),
        character_filter=_character_filter(extras.get("characterFilter")),
        triggers=_triggers(extras.get("triggers")),
        **flags,
        **book_flags,
    )
