"""AI Dungeon story cards and legacy world info.

Story cards (the current format) are `[{keys, value, type, title,
description, useForCharacterCreation}]`; legacy world info is `[{keys,
entry, hidden}]`, often with an `id`. Both come bare or wrapped in an
object (`{"storyCards": [...]}`, `{"worldInfo": [...]}`).

`keys` is one comma-separated string. Script-era exports (the EWIJSON
scripts) write keys such as `Katariah|(|the )emp(ress|eror)#[t=5l=5f=2S=2]`:
a regex-like alternation with a `#[...]` settings suffix. The suffix is
stripped and kept in extras; a key with regex metacharacters becomes a
regex key written `/…/i` (AI Dungeon matched keys case-insensitively), the
key as written kept beside it. Scenario dumps stringify booleans and lists
(`"false"`, `"[\"a\",\"b\"]"`); they are read back.

Archivers (AIDCAT among them) export many scenarios at once, as a list of
scenario objects, each with its own world info or story cards: one book
holds them all, each entry noting its scenario.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

from .entries import Entry, Lorebook, LorebookError, compiles_as_pattern, kind_of, split_keys

CARDS = "AI Dungeon story cards"
WORLD_INFO = "AI Dungeon world info"
SCENARIOS = "AI Dungeon scenarios"

_WRAPPERS = ("storyCards", "worldInfo", "worldInfos", "cards")
_USED = {"keys", "value", "entry", "title"}
_REGEX_CHARS = set("|()[]*+?\\^$")
_SUFFIX = re.compile(r"#\[[^\]]*\]\s*$")


def parse(data, *, name: str) -> Lorebook:
    """The entries of an AI Dungeon export's decoded JSON.

    1. Unwrap the list of cards (bare, or under a known key).
    2. Tell story cards (`value`) from legacy world info (`entry`).
    3. Read each card; one with no keys and no text is skipped and counted.
    """
    cards, wrapper = _cards(data)
    legacy = bool(cards) and all(isinstance(card, dict) and "value" not in card and "entry" in card for card in cards)
    format_name = WORLD_INFO if legacy else CARDS

    entries, skipped = [], 0
    for index, raw in enumerate(cards):
        entry = _entry(raw, index, format_name)
        if entry is None:
            skipped += 1
        else:
            entries.append(entry)

    notes = []
    if not cards:
        notes.append("empty lorebook")
    if skipped:
        notes.append(f"{skipped} blank entr{'y' if skipped == 1 else 'ies'} with no keys and no text skipped")
    extras = {}
    if wrapper is not None:
        extras = {key: value for key, value in data.items() if key != wrapper}
        extras["wrapper"] = wrapper
        in_options = _option_cards(data.get("options"))
        if in_options:
            notes.append(
                f"the scenario's options carry {in_options} more world info entr{'y' if in_options == 1 else 'ies'} "
                "of their own, kept with the book but not read: import an option's own export for its entries"
            )
    return Lorebook(format=format_name, name=name, entries=tuple(entries), extras=extras, notes=tuple(notes))


def is_scenario(item) -> bool:
    """A scenario object: its cards under one of the wrappers' names."""
    return isinstance(item, dict) and any(key in item for key in _WRAPPERS)


def parse_scenarios(data: list, *, name: str) -> Lorebook:
    """A list of scenario objects as one book: every scenario's cards in
    the list's order, each entry's extras naming its scenario (`scenario`,
    and `scenarioId` where it has one). A fault names its scenario."""
    entries, skipped, in_options, kept = [], 0, 0, []
    for number, scenario in enumerate(data, start=1):
        if not is_scenario(scenario):
            raise LorebookError(SCENARIOS, f"scenario {number} is {kind_of(scenario)} with no world info or story cards")
        title = scenario.get("title") if isinstance(scenario.get("title"), str) and scenario["title"].strip() else ""
        label = title.strip() or f"Scenario {number}"
        cards, wrapper = _cards(scenario)
        origin = {"scenario": label}
        scenario_id = scenario.get("publicId") or scenario.get("id")
        if scenario_id is not None:
            origin["scenarioId"] = scenario_id
        for index, raw in enumerate(cards):
            entry = _entry(raw, index, f"{SCENARIOS} (scenario “{label}”)")
            if entry is None:
                skipped += 1
            else:
                entries.append(replace(entry, extras={**entry.extras, **origin}))
        in_options += _option_cards(scenario.get("options"))
        kept.append({key: value for key, value in scenario.items() if key != wrapper})
    notes = [f"{len(data)} scenario{'' if len(data) == 1 else 's'} read into one book, "
             f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'} between them"]
    if not entries:
        notes.insert(0, "empty lorebook")
    if skipped:
        notes.append(f"{skipped} blank entr{'y' if skipped == 1 else 'ies'} with no keys and no text skipped")
    if in_options:
        notes.append(
            f"the scenarios' options carry {in_options} more world info entr{'y' if in_options == 1 else 'ies'} "
            "of their own, kept with the book but not read: import an option's own export for its entries"
        )
    return Lorebook(format=SCENARIOS, name=name, entries=tuple(entries), extras={"scenarios": kept}, notes=tuple(notes))


def _option_cards(options, depth: int = 0) -> int:
    """How many cards a multiple-choice scenario's `options` (nested
    scenarios, each with its own `worldInfo`) hold between them."""
    if not isinstance(options, list) or depth > 8:
        return 0
    count = 0
    for option in options:
        if isinstance(option, dict):
            cards = _destring(next((option[key] for key in _WRAPPERS if key in option), None))
            count += len(cards) if isinstance(cards, list) else 0
            count += _option_cards(option.get("options"), depth + 1)
    return count


def _cards(data) -> tuple[list, str | None]:
    if isinstance(data, list):
        return data, None
    if isinstance(data, dict):
        for key in _WRAPPERS:
            if key in data:
                cards = _destring(data[key])
                if cards is None:
                    return [], key
                if not isinstance(cards, list):
                    raise LorebookError(CARDS, f"“{key}” must be a list, found {kind_of(cards)}", field=key)
                return cards, key
        raise LorebookError(CARDS, f"expected a list of cards or an object with one of {', '.join(_WRAPPERS)}")
    raise LorebookError(CARDS, f"expected a list of cards, found {kind_of(data)}")


def _entry(raw, index: int, format_name: str) -> Entry | None:
    if not isinstance(raw, dict):
        raise LorebookError(format_name, f"a card must be an object, found {kind_of(raw)}", entry=index)
    title = raw.get("title") if isinstance(raw.get("title"), str) else ""
    label = title.strip() or index

    text_field = "value" if "value" in raw else "entry"
    text = raw.get(text_field)
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise LorebookError(format_name, f"{text_field} must be a string, found {kind_of(text)}", entry=label, field=text_field)

    written, suffixes = _split(raw.get("keys"), format_name, label)
    plain, patterns, as_regex = [], [], {}
    for key in written:
        if _REGEX_CHARS & set(key) and compiles_as_pattern(key):
            pattern = f"/{key}/i"
            patterns.append(pattern)
            as_regex[pattern] = key
        else:
            plain.append(key)
    keys, regex_keys = split_keys(plain + patterns)
    if not keys and not regex_keys and not text.strip() and not title.strip():
        return None  # a blank card: nothing to keep (a titled one is kept)

    extras = {field: _destring(value) for field, value in raw.items() if field not in _USED}
    if suffixes:
        extras["keySuffixes"] = suffixes
    if as_regex:
        extras["regexKeysAsWritten"] = as_regex
    if raw.get("keys") is not None:
        extras["keysAsWritten"] = raw["keys"]
    fallback = written[0] if written else (text.strip().splitlines() or [""])[0][:60] or f"Card {index + 1}"
    return Entry(
        title=title.strip() or (raw.get("name") if isinstance(raw.get("name"), str) and raw.get("name") else fallback),
        text=text,
        keys=keys,
        regex_keys=regex_keys,
        extras=extras,
    )


def _split(raw, format_name: str, label) -> tuple[list[str], dict]:
    """The keys as written, each without its `#[...]` suffix, and the
    suffixes by key. Commas inside parentheses (a regex's `{1,3}` or
    alternation) do not split."""
    raw = _destring(raw)
    if raw is None:
        return [], {}
    if isinstance(raw, str):
        parts = _top_level_commas(raw)
    elif isinstance(raw, list) and all(isinstance(key, str) for key in raw):
        parts = raw
    else:
        raise LorebookError(format_name, f"keys must be a comma-separated string, found {kind_of(raw)}", entry=label, field="keys")
    keys, suffixes = [], {}
    for part in parts:
        key = part.strip()
        match = _SUFFIX.search(key)
        if match:
            key = key[: match.start()].strip()
            suffixes[key] = match.group(0).strip()
        if key:
            keys.append(key)
    return keys, suffixes


def _top_level_commas(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for position, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            parts.append(text[start:position])
            start = position + 1
    parts.append(text[start:])
    return parts



def _destring(value):
    """A scenario dump's `"true"`, `"false"` and `"[...]"` back to JSON."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped in ("true", "false"):
            return stripped == "true"
        if stripped.startswith("[") and stripped.endswith("]"):
            try:
                return json.loads(stripped)
            except ValueError:
                return value
    return value
