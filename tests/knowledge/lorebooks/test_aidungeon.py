import json
import re
from pathlib import Path

import pytest

from knowledge.lorebooks import read
from knowledge.lorebooks.aidungeon import parse
from knowledge.lorebooks.entries import LorebookError

DATA = Path(__file__).parent / "data"


def load(name):
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def card(**overrides):
    entry = {
        "keys": "Mira, cartographer",
        "value": "Mira Vell is the caravan's cartographer.",
        "type": "character",
        "title": "Mira Vell",
        "description": "",
        "useForCharacterCreation": False,
    }
    entry.update(overrides)
    return entry


def test_story_cards_keep_title_text_keys_and_type():
    book = parse([card(), card(title="Karth", keys="Karth", value="A city of salt.", type="location")], name="x")

    assert book.format == "AI Dungeon story cards"
    mira, karth = book.entries
    assert (mira.title, mira.keys, mira.text) == ("Mira Vell", ("Mira", "cartographer"), "Mira Vell is the caravan's cartographer.")
    assert mira.extras["type"] == "character" and karth.extras["type"] == "location"
    assert mira.enabled is True and mira.constant is False


def test_wrapped_scenario_cards_coerce_stringified_booleans_and_lists():
    book = parse(load("aid_story_cards_scenario.json"), name="Salt Road")

    mira, karth, coast = book.entries
    assert mira.extras["useForCharacterCreation"] is False
    assert karth.extras["useForCharacterCreation"] is True
    assert karth.keys == ("Karth", "the white city")
    assert mira.extras["description"] == "Protagonist's rival; reveal the map late."
    assert book.extras["title"] == "The Salt Road" and book.extras["wrapper"] == "storyCards"


def test_card_without_a_title_is_named_by_its_first_key():
    coast = parse(load("aid_story_cards_scenario.json"), name="x").entries[2]

    assert coast.title == "Glass Coast"


def test_legacy_world_info_is_recognised_and_keeps_hidden_without_disabling():
    book = parse(load("aid_legacy_jarls.json"), name="Jarls")

    assert book.format == "AI Dungeon world info"
    vrage = book.entries[1]
    assert vrage.extras["hidden"] is True
    assert vrage.enabled is True
    assert book.entries[0].extras["hidden"] is False
    assert vrage.extras["id"] == "1.3"


def test_script_suffixes_are_stripped_and_kept():
    katariah = parse(load("aid_legacy_jarls.json"), name="x").entries[0]

    assert katariah.extras["keySuffixes"] == {"Katariah|(|the )emp(ress|eror)": "#[t=5l=5f=2S=2]"}
    assert not any("#[" in key for key in katariah.keys + katariah.regex_keys)


def test_alternation_keys_become_case_insensitive_regex_keys_that_match():
    katariah, vrage, _ = parse(load("aid_legacy_jarls.json"), name="x").entries

    assert katariah.regex_keys == ("/Katariah|(|the )emp(ress|eror)/i",)
    assert katariah.keys == ()
    assert katariah.extras["regexKeysAsWritten"]["/Katariah|(|the )emp(ress|eror)/i"] == "Katariah|(|the )emp(ress|eror)"
    (pattern,) = vrage.regex_keys
    assert re.search(pattern[1:-2], "the jarl of haafingar", re.IGNORECASE)


def test_plain_comma_keys_are_trimmed():
    whiterun = parse(load("aid_legacy_jarls.json"), name="x").entries[2]

    assert whiterun.keys == ("Whiterun", "Dragonsreach", "Bloated Goat")
    assert whiterun.regex_keys == ()


def test_blank_legacy_entries_are_skipped_with_a_count():
    book = parse(load("aid_legacy_jarls.json"), name="x")

    assert len(book.entries) == 3
    assert any("1 blank entry" in note for note in book.notes)


def test_commas_inside_a_regex_group_do_not_split_the_key():
    (entry,) = parse([{"keys": "(dragon|wyrm){1,2}, Alduin", "entry": "World-eater.", "hidden": False}], name="x").entries

    assert entry.regex_keys == ("/(dragon|wyrm){1,2}/i",)
    assert entry.keys == ("Alduin",)


def test_a_key_that_does_not_compile_stays_a_plain_key():
    (entry,) = parse([card(keys="Mira (the cartographer")], name="x").entries

    assert entry.keys == ("Mira (the cartographer",) and entry.regex_keys == ()


@pytest.mark.parametrize("data", [[], {"storyCards": []}, {"worldInfo": None}])
def test_empty_export_is_accepted_with_a_note(data):
    book = parse(data, name="x")

    assert book.entries == () and "empty lorebook" in book.notes


@pytest.mark.parametrize(
    ("data", "entry", "field"),
    [
        ({"storyCards": {"0": card()}}, None, "storyCards"),
        ([card(), card(title="Karth", value=["Karth is a city"])], "Karth", "value"),
        ([{"keys": 7, "entry": "x", "hidden": False}], 0, "keys"),
        ([card(keys=["Mira", 3])], "Mira Vell", "keys"),
    ],
)
def test_malformed_export_names_format_entry_and_field(data, entry, field):
    with pytest.raises(LorebookError) as caught:
        parse(data, name="x")

    assert str(caught.value).startswith("AI Dungeon")
    assert caught.value.entry == entry and caught.value.field == field
    assert field in str(caught.value)


@pytest.mark.parametrize("data", ["not a list", {"title": "no cards here"}, [card(), "Mira"]])
def test_exports_of_the_wrong_shape_are_refused(data):
    with pytest.raises(LorebookError, match="AI Dungeon"):
        parse(data, name="x")


# Real files (audit): a legacy scenario as AI Dungeon's API gave it, with
# multiple-choice options that carry their own world info.


def test_scenario_reads_its_world_info_and_notes_the_options_own_entries():
    book = parse(load("aid_scenario_with_options.json"), name="x")

    assert book.format == "AI Dungeon world info"
    assert [entry.title for entry in book.entries] == ["Mira", "Karth"]
    assert book.entries[1].extras["hidden"] is True and book.entries[1].enabled
    assert any("options carry 1 more world info entry" in note for note in book.notes)
    assert book.extras["options"][0]["worldInfo"][0]["keys"] == "sword"


def test_a_titled_card_without_keys_or_text_is_kept():
    (entry,) = parse([card(keys="", value="", title="To write")], name="x").entries

    assert entry.title == "To write" and entry.keys == ()


# Archives of many scenarios (AIDCAT's exports): a list of scenario objects as
# AI Dungeon's API gave them, an option's own scenario after its parents
# (`isOption`), whose `options` name the options without their world info.


def test_a_list_of_scenarios_is_one_book_of_every_scenarios_entries():
    book = read((DATA / "aid_scenarios_archive.json").read_bytes(), name="archive.json")

    assert book.format == "AI Dungeon scenarios"
    assert [entry.title for entry in book.entries] == ["Mira", "Karth", "Oren", "bell"]
    assert [entry.extras["scenario"] for entry in book.entries] == [
        "The Salt Road", "The Salt Road", "Westhaven Nights", "Scenario 3"]
    assert book.entries[2].extras["scenarioId"] == "5e1f0000-0000-4000-8000-000000000102"
    assert book.entries[3].extras["scenarioId"] == "9100003" and book.entries[3].extras["hidden"] is False
    assert "4 scenarios read into one book, 4 entries between them" in book.notes
    assert any("1 blank entry" in note for note in book.notes)
    assert any("options carry 1 more world info entry" in note for note in book.notes)
    assert [scenario["prompt"] for scenario in book.extras["scenarios"]][1] == "The lamps of Westhaven are going out."
    assert all("worldInfo" not in s and "storyCards" not in s for s in book.extras["scenarios"])
    assert book.extras["scenarios"][3]["isOption"] is True


def test_a_fault_in_a_scenario_list_names_the_scenario_entry_and_field():
    scenarios = [{"title": "Fine", "worldInfo": []}, {"title": "Broken", "worldInfo": [{"keys": 7, "entry": "x"}]}]
    with pytest.raises(LorebookError) as caught:
        read(json.dumps(scenarios).encode(), name="archive.json")

    assert str(caught.value).startswith("AI Dungeon scenarios (scenario “Broken”), entry 0, field “keys”")


def test_a_scenario_list_with_something_else_in_it_is_refused_naming_its_place():
    with pytest.raises(LorebookError, match="scenario 2 is a string"):
        read(json.dumps([{"title": "Fine", "worldInfo": []}, "stray"]).encode(), name="archive.json")
