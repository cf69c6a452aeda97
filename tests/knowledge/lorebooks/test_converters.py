"""Every format's entries carry, under SillyTavern's names, what
SillyTavern's own converters (convertAgnaiMemoryBook, convertRisuLorebook,
convertNovelLorebook, convertCharacterBook in public/scripts/world-info.js)
make of them, so the World Info engine, which reads SillyTavern's names
for every format, applies them; and an export writes them back."""

import json

import pytest

from knowledge.lorebooks import LorebookError, read
from knowledge.lorebooks.export import to_world_info


def _read(document) -> tuple:
    return read(json.dumps(document).encode(), name="book.json").entries


def test_an_agnai_entry_marked_constant_imports_as_constant():
    always, plain = _read({"kind": "memory", "entries": [
        {"name": "Sun", "entry": "The sun never sets.", "keywords": [], "constant": True, "enabled": True},
        {"name": "Moon", "entry": "The moon.", "keywords": ["moon"], "enabled": True},
    ]})
    assert always.constant and not plain.constant
    assert "constant" not in always.extras


def test_an_agnai_constant_that_is_not_a_boolean_is_refused_naming_the_field():
    with pytest.raises(LorebookError) as caught:
        _read({"kind": "memory", "entries": [{"name": "Sun", "entry": "x", "keywords": [], "constant": "yes"}]})
    assert caught.value.field == "constant" and caught.value.entry == "Sun"


def test_an_agnai_weight_is_the_insertion_order_and_goes_back_out():
    memory = {"kind": "memory", "entries": [{"name": "", "entry": "x", "keywords": ["oasis"], "weight": 30}]}
    (entry,) = _read(memory)
    assert (entry.extras["order"], entry.extras["comment"], entry.extras["addMemo"]) == (30, "", False)
    exported = to_world_info(read(json.dumps(memory).encode(), name="b.json"))["entries"]["0"]
    assert (exported["order"], exported["comment"], exported["key"]) == (30, "", ["oasis"])


def test_a_risu_entry_keeps_its_order_probability_and_comment_by_sillytaverns_names():
    (entry,) = _read({"type": "risu", "ver": 1, "data": [
        {"key": "Mira", "secondkey": "", "comment": "Mira Vell", "content": "Maps.", "mode": "normal",
         "insertorder": 250, "alwaysActive": True, "selective": True, "activationPercent": 40},
    ]})
    assert entry.constant
    assert {name: entry.extras[name] for name in ("order", "probability", "useProbability", "comment", "selective")} == {
        "order": 250, "probability": 40, "useProbability": True, "comment": "Mira Vell", "selective": True}


def test_a_novelai_entry_takes_its_order_from_the_budget_priority_or_zero():
    with_priority, without = _read({"lorebookVersion": 5, "entries": [
        {"displayName": "Mira", "text": "Maps.", "keys": ["Mira"], "contextConfig": {"budgetPriority": 800}},
        {"text": "Salt.", "keys": ["Karth"]},
    ]})
    assert (with_priority.extras["order"], with_priority.extras["comment"], with_priority.extras["addMemo"]) == (
        800, "Mira", True)
    assert (without.extras["order"], without.extras["comment"], without.extras["selective"]) == (0, "", False)


CARD_BOOK_ENTRY = {
    "id": 3, "keys": ["harbour"], "content": "Tides.", "enabled": True, "insertion_order": 42,
    "position": "after_char", "comment": "",
    "extensions": {
        "match_persona_description": True, "match_character_description": True,
        "match_character_personality": True, "match_character_depth_prompt": True, "match_scenario": True,
        "match_creator_notes": True, "ignore_budget": True, "triggers": ["continue"], "outlet_name": "tides",
        "character_filter": {"isExclude": True, "names": ["Seren"], "tags": []}, "group_weight": 7,
    },
}


def test_a_card_books_extensions_become_sillytaverns_fields():
    (entry,) = _read({"name": "Harbour", "entries": [CARD_BOOK_ENTRY]})
    extras = entry.extras
    assert (extras["order"], extras["position"], extras["groupWeight"]) == (42, 1, 7)
    assert all(extras[name] is True for name in (
        "matchPersonaDescription", "matchCharacterDescription", "matchCharacterPersonality",
        "matchCharacterDepthPrompt", "matchScenario", "matchCreatorNotes", "ignoreBudget"))
    assert (extras["triggers"], extras["outletName"]) == (["continue"], "tides")
    assert extras["characterFilter"] == {"isExclude": True, "names": ["Seren"], "tags": []}


@pytest.mark.parametrize(("position", "expected"), [("before_char", 0), ("after_char", 1), (None, 1)])
def test_a_card_books_position_word_is_sillytaverns_number(position, expected):
    raw = {**CARD_BOOK_ENTRY, "extensions": {}, "position": position}
    (entry,) = _read({"name": "Harbour", "entries": [raw]})
    assert entry.extras["position"] == expected
