import json
from pathlib import Path

import pytest

from knowledge.lorebooks import read
from knowledge.lorebooks.entries import LorebookError
from knowledge.lorebooks.koboldai import parse

DATA = Path(__file__).parent / "data"


def load(name):
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def wi(**overrides):
    entry = {
        "key": "Mira, Cartographer",
        "keysecondary": "",
        "content": "Mira Vell is the caravan's cartographer.",
        "comment": "Mira Vell",
        "folder": None,
        "selective": False,
        "constant": False,
    }
    entry.update(overrides)
    return entry


def test_story_save_keeps_titles_keys_and_constant():
    book = parse(load("kobold_story_save.json"), name="Salt Road")

    assert book.format == "KoboldAI world info"
    mira, secret, road = book.entries
    assert (mira.title, mira.keys) == ("Mira Vell", ("Mira", "Cartographer"))
    assert road.constant is True and mira.constant is False
    assert road.keys == () and road.title == "The Salt Road"


def test_secondary_keys_and_selective_are_kept():
    secret = parse(load("kobold_story_save.json"), name="x").entries[1]

    assert secret.secondary_keys == ("secret", "second")
    assert secret.extras["selective"] is True


def test_entry_without_a_comment_is_named_by_its_first_key():
    secret = parse(load("kobold_story_save.json"), name="x").entries[1]

    assert secret.title == "map"


def test_folder_ids_are_named_from_the_save():
    book = parse(load("kobold_story_save.json"), name="x")

    assert book.entries[0].extras["folderName"] == "Characters"
    assert book.entries[0].extras["folder"] == 1482395104
    assert "folderName" not in book.entries[2].extras
    assert book.extras["wifolders_l"] == [1482395104]


def test_keys_are_marked_as_substring_matches():
    book = parse(load("kobold_story_save.json"), name="x")

    assert all(entry.extras["match"] == "substring" for entry in book.entries)


def test_blank_entries_are_skipped_with_a_count():
    book = parse(load("kobold_story_save.json"), name="x")

    assert len(book.entries) == 3
    assert any("1 blank entry" in note for note in book.notes)


def test_save_with_only_key_and_content_reads_with_defaults():
    book = parse(load("kobold_key_content_only.json"), name="Tamriel")

    katariah, whiterun = book.entries
    assert whiterun.keys == ("Whiterun", "Dragonsreach")
    assert whiterun.title == "Whiterun"
    assert whiterun.constant is False and whiterun.enabled is True
    assert katariah.keys == ("Katariah|(|the )emp(ress|eror)#[t=5l=5f=2S=2]",)
    assert katariah.regex_keys == ()


def test_bare_array_with_uids_reads_and_keeps_the_uid():
    (entry,) = parse([wi(uid=-1340585541, constant=True)], name="x").entries

    assert entry.constant is True
    assert entry.extras["uid"] == -1340585541


def test_bare_array_in_koboldai_export_names_keys_and_entry_reads():
    (entry,) = parse([{"keys": "Karth, white city", "entry": "Karth is a city of salt-brick towers."}], name="x").entries

    assert entry.keys == ("Karth", "white city")
    assert entry.text == "Karth is a city of salt-brick towers."


def test_koboldcpp_lite_fields_are_kept():
    (entry,) = parse({"prompt": "", "worldinfo": [wi(keyanti="", probability=80)]}, name="x").entries

    assert entry.extras["probability"] == 80 and entry.extras["keyanti"] == ""


def test_united_worldinfo_v2_is_read_instead_of_the_old_copy():
    save = {
        "prompt": "x",
        "worldinfo": [wi()],
        "worldinfo_v2": {
            "folders": {"root": [0], "Places": [1]},
            "entries": {
                "0": {"uid": 0, "title": "Mira Vell", "key": ["Mira", "Cartographer"], "keysecondary": [],
                      "folder": "root", "constant": False, "content": "Mira is the cartographer.",
                      "manual_text": "Mira is the cartographer.", "comment": "", "type": "wi",
                      "selective": False, "use_wpp": False},
                "1": {"uid": 1, "title": "Karth", "key": ["Karth"], "keysecondary": ["salt"],
                      "folder": "Places", "constant": True, "content": "Karth is a city.",
                      "manual_text": "Karth is a city.", "comment": "the capital", "type": "constant",
                      "selective": True},
            },
        },
    }

    book = parse(save, name="x")

    assert book.format == "KoboldAI world info (v2)"
    mira, karth = book.entries
    assert mira.title == "Mira Vell" and mira.keys == ("Mira", "Cartographer")
    assert karth.constant is True and karth.secondary_keys == ("salt",)
    assert karth.extras["folderName"] == "Places" and "folderName" not in mira.extras
    assert karth.extras["comment"] == "the capital"
    assert any("worldinfo_v2" in note for note in book.notes)


@pytest.mark.parametrize("data", [[], {"prompt": "x", "worldinfo": []}, {"prompt": "x", "worldinfo": None}])
def test_empty_world_info_is_accepted_with_a_note(data):
    book = parse(data, name="x")

    assert book.entries == () and "empty lorebook" in book.notes


@pytest.mark.parametrize(
    ("data", "entry", "field"),
    [
        ({"prompt": "x", "worldinfo": {"0": wi()}}, None, "worldinfo"),
        ({"prompt": "x", "memory": ""}, None, "worldinfo"),
        ([wi(), wi(comment="Karth", content=42)], "Karth", "content"),
        ([wi(comment="", key=["Mira", 3])], 0, "key"),
        ([wi(keysecondary=7)], "Mira Vell", "keysecondary"),
        ([wi(constant="yes")], "Mira Vell", "constant"),
    ],
)
def test_malformed_save_names_format_entry_and_field(data, entry, field):
    with pytest.raises(LorebookError) as caught:
        parse(data, name="x")

    assert str(caught.value).startswith("KoboldAI world info")
    assert caught.value.entry == entry and caught.value.field == field
    assert field in str(caught.value)


@pytest.mark.parametrize("data", ["worldinfo", [wi(), "Mira"]])
def test_files_of_the_wrong_shape_are_refused(data):
    with pytest.raises(LorebookError, match="KoboldAI world info"):
        parse(data, name="x")


# Real files (audit): KoboldAI Lite saves, KoboldAI United's story saves and
# its world info export (koboldai_settings.KoboldWorldInfo.to_json).


def test_lite_save_keeps_a_switched_off_entry_disabled():
    book = parse(load("kobold_lite_save.json"), name="x")

    assert [entry.title for entry in book.entries] == ["Mira Vell", "Karth", "Road law", "oasis"]
    mira, karth, law, oasis = book.entries
    assert karth.enabled is False and mira.enabled and law.enabled and oasis.enabled
    assert law.constant and law.keys == ()
    assert oasis.secondary_keys == ("water",) and oasis.extras["keyanti"] == "mirage"
    assert mira.extras["wigroup"] == "People" and "widisabled" not in mira.extras


def test_united_story_save_reads_worldinfo_v2_and_skips_the_folder_placeholders():
    book = parse(load("kobold_united_save.json"), name="x")

    assert book.format == "KoboldAI world info (v2)"
    karth, mira = book.entries
    assert (karth.title, mira.title) == ("Karth", "Mira Vell")
    assert mira.constant and mira.keys == ("Mira", "cartographer") and mira.secondary_keys == ("map",)
    assert mira.extras["folderName"] == "People"


def test_united_world_info_export_on_its_own_is_koboldai_not_sillytavern():
    book = parse(load("kobold_united_wi_export.json"), name="x")

    assert book.format == "KoboldAI world info (v2)"
    assert [entry.title for entry in book.entries] == ["Karth", "Mira Vell", "Narrator"]
    assert all(entry.extras["match"] == "substring" for entry in book.entries)
    assert book.extras["worldinfo_v2_folders"] == {"root": [0], "People": [1, 2]}


@pytest.mark.parametrize("kind", ["constant", "commentator"])
def test_united_constant_and_commentator_entries_are_constant(kind):
    data = {"folders": {"root": [0]}, "entries": {"0": {"uid": 0, "title": "t", "key": [], "keysecondary": [],
                                                         "content": "x", "constant": False, "type": kind}}}

    (entry,) = parse(data, name="x").entries

    assert entry.constant is True


def test_a_save_holding_only_the_new_entry_placeholder_is_empty_with_a_note():
    book = parse(load("kobold_save_only_placeholder.json"), name="x")

    assert book.entries == () and any("1 blank entry" in note for note in book.notes)


def test_a_titled_entry_without_keys_or_text_is_kept():
    (entry,) = parse({"prompt": "", "worldinfo": [wi(key="", content="", comment="To write")]}, name="x").entries

    assert entry.title == "To write"


def test_widisabled_that_is_not_a_boolean_is_refused_naming_the_field():
    with pytest.raises(LorebookError) as caught:
        parse([wi(widisabled="yes")], name="x")

    assert caught.value.field == "widisabled"


def test_a_story_save_without_world_info_is_an_empty_book_with_a_note():
    """The shape of KoboldAI-Client's own stories/sample_story.json: a
    story (prompt, actions, memory, author's note) and no `worldinfo`."""
    book = read((DATA / "kobold_story_save_no_world_info.json").read_bytes(), name="sample_story.json")

    assert book.format == "KoboldAI world info" and book.entries == ()
    assert any("a KoboldAI story save with no world info" in note for note in book.notes)
    assert book.extras["memory"].startswith("Oren is the last lamplighter")
    assert book.extras["authorsnote"] == "The fog is rolling in."
