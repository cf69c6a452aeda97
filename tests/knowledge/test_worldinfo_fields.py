"""A stored entry's fields as the World Info engine reads them
(knowledge.worldinfo.fields): SillyTavern's names first for every format,
each format's own names as the fallback, and a wrong value the default."""

import pytest

from knowledge.worldinfo.fields import entry_record, fingerprint
from worldinfo.records import AT_DEPTH, ASSISTANT, NOT_ANY, CharacterFilter


def record(extras=None, *, format_name="SillyTavern World Info", **row):
    fields = {"title": "Storm", "text": "Storms close the harbour.", "keys": ["storm"], "secondary_keys": [],
              "regex_keys": [], "enabled": True, "constant": False, **row}
    return entry_record(source_id=3, entry_id=9, extras=extras or {}, format_name=format_name, tokens=5, **fields)


def test_identity_keys_and_book():
    entry = record(regex_keys=["/gale/i"], secondary_keys=["night"])
    assert (entry.key, entry.book, entry.tokens) == ("3:9", "3", 5)
    assert entry.keys == ("storm", "/gale/i") and entry.secondary_keys == ("night",)


@pytest.mark.parametrize(
    "extras, field, expected",
    [
        ({"position": 4, "depth": 2, "role": 2}, "position", AT_DEPTH),
        ({"position": 4, "depth": 2, "role": 2}, "role", ASSISTANT),
        ({"depth": "3"}, "depth", 3),
        ({"order": 250}, "order", 250),
        ({"selectiveLogic": 2}, "logic", NOT_ANY),
        ({"probability": 30, "useProbability": False}, "use_probability", False),
        ({"group": "weather, sky ,weather"}, "groups", ("weather", "sky")),
        ({"groupOverride": True, "groupWeight": 40}, "group_weight", 40),
        ({"sticky": 3, "cooldown": None}, "sticky", 3),
        ({"sticky": None}, "sticky", 0),
        ({"delayUntilRecursion": True}, "delay_until_recursion", 1),
        ({"delayUntilRecursion": 3}, "delay_until_recursion", 3),
        ({"scanDepth": None}, "scan_depth", None),
        ({"scanDepth": 0}, "scan_depth", 0),
        ({"caseSensitive": None}, "case_sensitive", None),
        ({"matchWholeWords": False}, "match_whole_words", False),
        ({"excludeRecursion": True}, "exclude_recursion", True),
        ({"ignoreBudget": True}, "ignore_budget", True),
        ({"vectorized": True}, "vectorized", True),
        ({"matchPersonaDescription": True}, "match_persona_description", True),
        ({"matchScenario": "yes"}, "match_scenario", False),
        ({"characterFilter": {"isExclude": True, "names": ["Mara"], "tags": []}}, "character_filter",
         CharacterFilter(names=("Mara",), exclude=True)),
        ({"triggers": ["continue", 3]}, "triggers", ("continue",)),
        ({"probability": 250}, "probability", 100),
        ({"order": "soon"}, "order", 100),
    ],
)
def test_sillytavern_fields(extras, field, expected):
    assert getattr(record(extras), field) == expected


@pytest.mark.parametrize(
    "extras, format_name, order",
    [
        ({"insertion_order": 40}, "Character card V2 book", 40),
        ({"contextConfig": {"budgetPriority": 400}}, "NovelAI lorebook", 400),
        ({"priority": 7}, "Agnai memory book", 7),
        ({"insertorder": 12}, "Risu lorebook", 12),
        ({"order": 5, "insertion_order": 40}, "Character card V2 book", 5),
    ],
)
def test_other_formats_insertion_order_is_the_fallback(extras, format_name, order):
    assert record(extras, format_name=format_name).order == order


def test_koboldai_keys_match_inside_words_unless_the_entry_says_otherwise():
    assert record({"match": "substring"}, format_name="KoboldAI world info").match_whole_words is False
    assert record({}, format_name="KoboldAI story save").match_whole_words is False
    assert record({"matchWholeWords": True}, format_name="KoboldAI world info").match_whole_words is True


def test_an_edit_of_any_field_changes_the_fingerprint():
    base = {"title": "Storm", "text": "t", "keys": ["storm"], "secondary_keys": [], "regex_keys": [],
            "enabled": True, "constant": False, "extras": {"sticky": 3}}
    first = fingerprint(**base)
    assert fingerprint(**base) == first
    for change in ({"text": "u"}, {"keys": ["gale"]}, {"constant": True}, {"extras": {"sticky": 4}}):
        assert fingerprint(**{**base, **change}) != first
