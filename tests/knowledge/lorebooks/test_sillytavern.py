"""SillyTavern World Info JSON, as the versions of SillyTavern wrote it.

The fixtures mirror real files: the current shape is what SillyTavern's
entry template (world-info.js, `newWorldInfoEntryDefinition`) writes; the old
shape is the ten fields of its 2023 default content (Eldoria.json).
"""

import copy
import json
from pathlib import Path

import pytest

from knowledge.lorebooks.entries import LorebookError
from knowledge.lorebooks.sillytavern import parse_world_info


def current_entry(uid, **fields):
    """An entry as a current SillyTavern writes it: every template field."""
    entry = {
        "uid": uid,
        "key": [],
        "keysecondary": [],
        "comment": "",
        "content": "",
        "constant": False,
        "vectorized": False,
        "selective": True,
        "selectiveLogic": 0,
        "addMemo": True,
        "order": 100,
        "position": 0,
        "disable": False,
        "excludeRecursion": False,
        "preventRecursion": False,
        "delayUntilRecursion": False,
        "probability": 100,
        "useProbability": True,
        "depth": 4,
        "group": "",
        "groupOverride": False,
        "groupWeight": 100,
        "scanDepth": None,
        "caseSensitive": None,
        "matchWholeWords": None,
        "useGroupScoring": None,
        "automationId": "",
        "role": None,
        "sticky": 0,
        "cooldown": 0,
        "delay": 0,
        "displayIndex": uid,
    }
    entry.update(fields)
    return entry


CURRENT = {
    "entries": {
        "0": current_entry(
            0,
            key=["Saltmarch", "salt road"],
            comment="Saltmarch",
            content="Saltmarch is a walled port at the end of the salt road.",
            constant=True,
        ),
        "1": current_entry(
            1,
            key=["Vell", "the smuggler"],
            keysecondary=["harbour"],
            selectiveLogic=3,
            comment="Vell the smuggler",
            content="Vell runs salt past the harbour chain at night.",
            disable=True,
        ),
        "2": current_entry(
            2,
            key=["/\\bgh(o|ou)ls?\\b/i", "ghoul"],
            comment="",
            content="Ghouls haunt the salt flats after rain.",
            position=4,
            depth=2,
            role=1,
            probability=60,
            group="monsters",
            groupWeight=30,
            sticky=3,
            cooldown=5,
        ),
        "5": current_entry(
            5, key=[], comment="", content="The tide tables are kept in the chapel."
        ),
    },
    "name": "Salt Road",
    "description": "World of the salt road.",
    "extensions": {"world_tags": ["coast"]},
}

# Eldoria.json, SillyTavern's 2023 default content: ten fields an entry.
OLD = {
    "entries": {
        "0": {
            "uid": 0,
            "key": ["eldoria", "wood", "forest", "magical forest"],
            "keysecondary": [],
            "comment": "",
            "content": "Eldoria is the forest that Seraphina guards.",
            "constant": False,
            "selective": False,
            "order": 100,
            "position": 0,
            "disable": False,
        },
        "1": {
            "uid": 1,
            "key": ["shadowfang", "beast", "monster"],
            "keysecondary": [],
            "comment": "",
            "content": "The Shadowfangs are beasts of darkness.",
            "constant": False,
            "selective": False,
            "order": 100,
            "position": 1,
            "disable": False,
        },
    }
}


def by_title(book):
    return {entry.title: entry for entry in book.entries}


def test_current_file_keeps_every_entry_in_file_order_with_titles_and_keys():
    book = parse_world_info(CURRENT, name="salt-road.json")
    assert book.format == "SillyTavern World Info"
    assert [entry.extras["uid"] for entry in book.entries] == [0, 1, 2, 5]
    first = book.entries[0]
    assert first.title == "Saltmarch"
    assert first.keys == ("Saltmarch", "salt road")
    assert first.text == "Saltmarch is a walled port at the end of the salt road."


def test_constant_entry_is_constant_and_disable_makes_an_entry_disabled():
    entries = by_title(parse_world_info(CURRENT, name="salt-road.json"))
    assert entries["Saltmarch"].constant is True
    assert entries["Saltmarch"].enabled is True
    assert entries["Vell the smuggler"].enabled is False
    assert entries["Vell the smuggler"].constant is False


def test_enabled_field_is_read_when_disable_is_absent():
    raw = {"uid": 0, "key": ["a"], "content": "x", "enabled": False}
    book = parse_world_info({"entries": [raw]}, name="x")
    assert book.entries[0].enabled is False


def test_secondary_keys_and_their_logic_are_kept_with_a_readable_name():
    vell = by_title(parse_world_info(CURRENT, name="salt-road.json"))[
        "Vell the smuggler"
    ]
    assert vell.secondary_keys == ("harbour",)
    assert vell.extras["selectiveLogic"] == 3
    assert vell.extras["selectiveLogic_name"] == "AND ALL"


def test_slash_pattern_key_is_a_regex_key_and_the_title_falls_back_to_the_first_key():
    ghoul = parse_world_info(CURRENT, name="salt-road.json").entries[2]
    assert ghoul.regex_keys == ("/\\bgh(o|ou)ls?\\b/i",)
    assert ghoul.keys == ("ghoul",)
    assert ghoul.title == "/\\bgh(o|ou)ls?\\b/i"


def test_entry_without_comment_or_keys_is_titled_by_its_uid():
    last = parse_world_info(CURRENT, name="salt-road.json").entries[-1]
    assert last.title == "Entry 5"
    assert last.keys == ()


def test_at_depth_position_keeps_depth_role_and_the_other_unused_settings():
    ghoul = parse_world_info(CURRENT, name="salt-road.json").entries[2]
    assert ghoul.extras["position"] == 4
    assert ghoul.extras["position_name"] == "at_depth"
    assert ghoul.extras["depth"] == 2
    assert ghoul.extras["role"] == 1
    assert ghoul.extras["role_name"] == "user"
    assert ghoul.extras["probability"] == 60
    assert ghoul.extras["group"] == "monsters"
    assert ghoul.extras["groupWeight"] == 30
    assert (
        ghoul.extras["sticky"],
        ghoul.extras["cooldown"],
        ghoul.extras["delay"],
    ) == (3, 5, 0)
    # The file has every field of SillyTavern's template of its day; only the later ones are filled.
    assert set(ghoul.extras["defaulted"]) == {
        "ignoreBudget", "matchPersonaDescription", "matchCharacterDescription", "matchCharacterPersonality",
        "matchCharacterDepthPrompt", "matchScenario", "matchCreatorNotes", "outletName", "triggers",
        "characterFilter",
    }


@pytest.mark.parametrize(
    ("position", "name"),
    [
        (0, "before_char"),
        (1, "after_char"),
        (2, "an_top"),
        (3, "an_bottom"),
        (4, "at_depth"),
        (5, "em_top"),
        (6, "em_bottom"),
    ],
)
def test_every_position_number_has_its_readable_name(position, name):
    book = parse_world_info(
        {"entries": {"0": {"key": ["a"], "content": "x", "position": position}}},
        name="x",
    )
    assert book.entries[0].extras["position_name"] == name


def test_book_level_fields_go_to_the_book_extras_and_its_name_is_used():
    book = parse_world_info(CURRENT, name="salt-road.json")
    assert book.name == "Salt Road"
    assert book.extras == {
        "name": "Salt Road",
        "description": "World of the salt road.",
        "extensions": {"world_tags": ["coast"]},
    }
    assert book.notes == ()


def test_old_ten_field_entries_take_sillytaverns_defaults_and_say_which():
    book = parse_world_info(OLD, name="Eldoria")
    assert book.name == "Eldoria"
    forest = book.entries[0]
    assert forest.title == "eldoria"
    assert forest.keys == ("eldoria", "wood", "forest", "magical forest")
    assert forest.enabled is True
    extras = forest.extras
    assert extras["selective"] is False
    assert extras["probability"] == 100
    assert extras["useProbability"] is True
    assert extras["depth"] == 4
    assert extras["groupWeight"] == 100
    assert extras["selectiveLogic"] == 0
    assert extras["selectiveLogic_name"] == "AND ANY"
    assert extras["scanDepth"] is None
    assert extras["displayIndex"] == 0
    assert "probability" in extras["defaulted"]
    assert "depth" in extras["defaulted"]
    assert "order" not in extras["defaulted"]
    assert book.entries[1].extras["position_name"] == "after_char"


def test_fields_unknown_to_the_template_are_kept():
    raw = {
        "uid": 3,
        "key": ["a"],
        "content": "x",
        "characterFilter": {"isExclude": True, "names": ["Vell"]},
        "ignoreBudget": True,
    }
    entry = parse_world_info({"entries": {"3": raw}}, name="x").entries[0]
    assert entry.extras["characterFilter"] == {"isExclude": True, "names": ["Vell"]}
    assert entry.extras["ignoreBudget"] is True


def test_embedded_original_data_never_becomes_a_second_book_and_is_noted():
    data = copy.deepcopy(OLD)
    data["originalData"] = {
        "name": "Eldoria",
        "entries": [
            {
                "id": 0,
                "keys": ["eldoria"],
                "content": "A stale copy.",
                "enabled": True,
                "insertion_order": 100,
                "extensions": {},
            },
            {
                "id": 7,
                "keys": ["gone"],
                "content": "Deleted since.",
                "enabled": True,
                "insertion_order": 100,
                "extensions": {},
            },
        ],
    }
    book = parse_world_info(data, name="Eldoria")
    assert len(book.entries) == 2
    assert all("stale" not in entry.text.lower() for entry in book.entries)
    assert "originalData" not in book.extras
    assert any("originalData" in note for note in book.notes)


@pytest.mark.parametrize("entries", [{}, [], None])
def test_empty_book_is_accepted_with_a_note(entries):
    book = parse_world_info({"entries": entries}, name="Empty")
    assert book.entries == ()
    assert book.notes == ("empty lorebook",)


def test_entries_as_a_list_use_the_index_when_there_is_no_uid():
    book = parse_world_info(
        {"entries": [{"key": ["a"], "content": "x"}, {"key": ["b"], "content": "y"}]},
        name="x",
    )
    assert [entry.extras["uid"] for entry in book.entries] == [0, 1]


def test_a_single_string_key_is_one_key():
    entry = parse_world_info(
        {"entries": {"0": {"key": "salt road", "content": "x"}}}, name="x"
    ).entries[0]
    assert entry.keys == ("salt road",)


@pytest.mark.parametrize(
    ("entry", "field", "words"),
    [
        ({"key": ["a"], "content": 42}, "content", "number"),
        ({"key": {"a": 1}, "content": "x"}, "key", "object"),
        ({"key": ["a", {"b": 1}], "content": "x"}, "key", "object"),
        ({"key": ["a"], "keysecondary": 7, "content": "x"}, "keysecondary", "number"),
        ({"key": ["a"], "content": "x", "disable": "maybe"}, "disable", "maybe"),
    ],
)
def test_malformed_entry_is_refused_naming_format_entry_and_field(entry, field, words):
    with pytest.raises(LorebookError) as caught:
        parse_world_info(
            {"entries": {"0": {"uid": 0, "key": []}, "12": {"uid": 12, **entry}}},
            name="x",
        )
    message = str(caught.value)
    assert message.startswith("SillyTavern World Info, entry 12")
    assert f"“{field}”" in message
    assert words in message
    assert caught.value.field == field


def test_entry_that_is_not_an_object_is_refused_naming_the_entry():
    with pytest.raises(LorebookError) as caught:
        parse_world_info({"entries": {"0": "Saltmarch is a port."}}, name="x")
    assert (
        str(caught.value)
        == "SillyTavern World Info, entry 0: the entry is a string, not an object"
    )


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ([1, 2], "list"),
        ({"name": "x"}, "no “entries”"),
        ({"entries": "abc"}, "“entries” is a string"),
    ],
)
def test_file_without_an_entries_object_is_refused(data, words):
    with pytest.raises(LorebookError) as caught:
        parse_world_info(data, name="x")
    assert words in str(caught.value)


@pytest.mark.parametrize("position", [8, "4", [4], None])
def test_position_sillytavern_does_not_define_is_kept_and_named_unknown(position):
    book = parse_world_info(
        {"entries": {"0": {"key": ["a"], "content": "x", "position": position}}},
        name="x",
    )
    assert book.entries[0].extras["position"] == position
    assert book.entries[0].extras["position_name"] == "unknown"


# Real files (audit): SillyTavern's own default world, books SillyTavern made
# from a card, hand-edited and community files, a large community book.

DATA = Path(__file__).parent / "data"


def load(name):
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def test_sillytaverns_default_eldoria_world_arrives_whole():
    """default/content/Eldoria.json as SillyTavern ships it: four entries
    with only the 2023 fields, no comments, no book name."""
    book = parse_world_info(load("st_default_eldoria.json"), name="Eldoria.json")

    assert [entry.title for entry in book.entries] == ["eldoria", "shadowfang", "glade", "power"]
    assert book.entries[0].keys == ("eldoria", "wood", "forest", "magical forest")
    assert all(entry.enabled and not entry.constant and entry.text for entry in book.entries)
    assert all(entry.extras["selective"] is False for entry in book.entries)


def test_keys_written_as_a_comma_string_are_split_into_keys():
    entry = parse_world_info(
        {"entries": {"0": {"key": "Mira, cartographer,, /salt{1,2}/i", "keysecondary": "map, secret", "content": "x"}}},
        name="x",
    ).entries[0]

    assert entry.keys == ("Mira", "cartographer")
    assert entry.regex_keys == ("/salt{1,2}/i",)
    assert entry.secondary_keys == ("map", "secret")


def test_book_made_from_a_card_keeps_numeric_string_uids_and_every_entry():
    book = parse_world_info(load("st_card_lore_original_data.json"), name="Salt Road.json")

    assert [entry.title for entry in book.entries] == ["Mira Vell", "Karth", "Glass Coast", "Caravan rules"]
    mira, karth, coast, rules = book.entries
    assert karth.keys == ("Karth", "the white city") and karth.regex_keys == ("/salt[- ]?brick/i",)
    assert karth.secondary_keys == ("tower", "towers")
    assert not coast.enabled and rules.constant and rules.extras["position_name"] == "at_depth"
    assert [entry.extras["uid"] for entry in book.entries] == [0, 1, 2, 3]
    assert any("originalData" in note and "1 entries" in note for note in book.notes)


def community_book(count):
    """A community world of `count` entries as SillyTavern saves one: keyed
    by uid strings, every fourth entry constant, every tenth disabled, some
    with secondary keys, a regex key or no comment."""
    entries = {}
    for uid in range(count):
        entries[str(uid)] = current_entry(
            uid,
            key=[f"place{uid}", f"the {uid}th district"] + (["/dist(rict)? ?%d/i" % uid] if uid % 7 == 0 else []),
            keysecondary=["market"] if uid % 5 == 0 else [],
            comment="" if uid % 9 == 0 else f"District {uid}",
            content=f"District {uid} lies by the canal.",
            constant=uid % 4 == 0,
            disable=uid % 10 == 0,
        )
    return {"entries": entries, "name": "Canal City"}


def test_a_250_entry_community_world_arrives_with_every_title_key_and_flag():
    book = parse_world_info(community_book(250), name="canal.json")

    assert len(book.entries) == 250 and book.name == "Canal City"
    for uid, entry in enumerate(book.entries):
        assert entry.title == (f"place{uid}" if uid % 9 == 0 else f"District {uid}")
        assert entry.keys == (f"place{uid}", f"the {uid}th district")
        assert entry.regex_keys == ((f"/dist(rict)? ?{uid}/i",) if uid % 7 == 0 else ())
        assert entry.secondary_keys == (("market",) if uid % 5 == 0 else ())
        assert entry.constant is (uid % 4 == 0) and entry.enabled is (uid % 10 != 0)
