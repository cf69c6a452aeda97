import base64
import json
from pathlib import Path

import pytest

from knowledge.lorebooks.entries import LorebookError
from knowledge.lorebooks.novelai import parse_image_text, parse_lorebook, parse_story

DATA = Path(__file__).parent / "data"


def load(name):
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def v1_entry(**overrides):
    """A lorebookVersion 1 entry as NovelAI wrote them in 2021: no id, no
    category, no bias groups, no maximumTrimType."""
    entry = {
        "text": "Whiterun is the center of trade across Skyrim.",
        "contextConfig": {
            "prefix": "", "suffix": "\n", "tokenBudget": 2048, "reservedTokens": 0,
            "budgetPriority": 400, "trimDirection": "trimBottom", "insertionType": "newline",
            "insertionPosition": -1,
        },
        "lastUpdatedAt": 1624410170266,
        "displayName": "Whiterun",
        "keys": ["Whiterun", "Dragonsreach"],
        "searchRange": 1000,
        "enabled": True,
        "forceActivation": False,
    }
    entry.update(overrides)
    return entry


def test_v5_lorebook_keeps_titles_keys_flags_and_order():
    book = parse_lorebook(load("nai_v5_saltroad.lorebook"), name="Salt Road")

    assert book.format == "NovelAI lorebook v5"
    assert [entry.title for entry in book.entries] == ["Mira Vell", "The Salt Road", "Toll-house"]
    mira, road, toll = book.entries
    assert mira.keys == ("Mira", "cartographer")
    assert mira.regex_keys == ("/secret map(s)?/i",)
    assert road.constant is True and mira.constant is False
    assert toll.enabled is False and mira.enabled is True


def test_v5_entry_keeps_unused_fields_and_names_its_category():
    mira = parse_lorebook(load("nai_v5_saltroad.lorebook"), name="Salt Road").entries[0]

    assert mira.extras["categoryName"] == "Characters"
    assert mira.extras["category"] == "0f7a4d5c-1b7e-4c1a-9d3e-6f0e2a9b8c11"
    assert mira.extras["contextConfig"]["maximumTrimType"] == "sentence"
    assert mira.extras["searchRange"] == 1000
    assert mira.extras["id"] == "e9dee567-b2b2-499e-81d2-621a1657f379"
    assert mira.extras["loreBiasGroups"][0]["generateOnce"] is True
    assert "keyRelative" in mira.extras and "nonStoryActivatable" in mira.extras


def test_book_level_categories_and_settings_are_kept():
    book = parse_lorebook(load("nai_v5_saltroad.lorebook"), name="Salt Road")

    assert book.extras["lorebookVersion"] == 5
    assert book.extras["settings"] == {"orderByKeyLocations": False}
    assert book.extras["categories"][0]["name"] == "Characters"


def test_placeholder_entries_are_skipped_with_a_count():
    book = parse_lorebook(load("nai_v5_saltroad.lorebook"), name="Salt Road")

    assert "New Lorebook Entry" not in [entry.title for entry in book.entries]
    assert any("1 placeholder entry" in note for note in book.notes)


def test_entry_with_text_but_no_keys_is_kept_without_keys():
    data = {"lorebookVersion": 4, "entries": [v1_entry(keys=[], displayName="Notes on the Thalmor")]}

    (entry,) = parse_lorebook(data, name="x").entries

    assert entry.title == "Notes on the Thalmor"
    assert entry.keys == () and entry.regex_keys == ()
    assert entry.text.startswith("Whiterun")


def test_v1_entry_without_later_fields_reads_with_defaults():
    minimal = {"text": "The Companions are a guild of warriors.", "keys": ["Companions"]}

    book = parse_lorebook({"lorebookVersion": 1, "entries": [minimal]}, name="x")

    (entry,) = book.entries
    assert entry.title == "Companions"
    assert entry.enabled is True and entry.constant is False
    assert book.format == "NovelAI lorebook v1"


def test_unused_category_id_without_a_category_list_stays_the_id():
    data = {"lorebookVersion": 3, "entries": [v1_entry(category="abc-123")]}

    (entry,) = parse_lorebook(data, name="x").entries

    assert entry.extras["categoryName"] == "abc-123"


def test_empty_lorebook_is_accepted_with_a_note():
    book = parse_lorebook({"lorebookVersion": 6, "entries": [], "settings": {}, "categories": []}, name="x")

    assert book.entries == ()
    assert "empty lorebook" in book.notes


def test_story_file_reads_its_content_lorebook():
    book = parse_story(load("nai_v1_tamriel.story"), name="Tamriel")

    assert [entry.title for entry in book.entries] == [
        "Ungvid,Jarl of Winterhold,Ruler of Winterhold",
        "Yolanda,Jarl of Whiterun,Ruler of Whiterun",
    ]
    assert book.entries[0].keys == ("Ungvid", "Jarl of Winterhold", "Ruler of Winterhold")
    assert book.entries[0].extras["contextConfig"]["insertionPosition"] == -5
    assert book.format.startswith("NovelAI story")
    assert book.extras["title"] == "Tamriel: The Reign of Katariah"


def test_story_content_given_as_a_json_string_is_read():
    story = load("nai_v1_tamriel.story")
    story["content"] = json.dumps(story["content"])

    assert len(parse_story(story, name="Tamriel").entries) == 2


def test_story_content_given_as_base64_json_is_read():
    story = load("nai_v1_tamriel.story")
    story["content"] = base64.b64encode(json.dumps(story["content"]).encode()).decode()

    assert len(parse_story(story, name="Tamriel").entries) == 2


def test_binary_story_content_is_refused_as_unsupported():
    story = {"storyContainerVersion": 1, "metadata": {}, "content": base64.b64encode(b"\x93\xa4\x00\xffzz").decode()}

    with pytest.raises(LorebookError, match="not supported") as caught:
        parse_story(story, name="x")

    assert caught.value.field == "content"


def test_scenario_reads_its_top_level_lorebook():
    scenario = {
        "scenarioVersion": 3,
        "title": "The Salt Road",
        "prompt": "The caravan left Karth at dawn.",
        "context": [],
        "lorebook": {"lorebookVersion": 4, "entries": [v1_entry(forceActivation=True)]},
        "placeholders": [],
    }

    book = parse_story(scenario, name="Salt Road")

    (entry,) = book.entries
    assert entry.constant is True
    assert book.format.startswith("NovelAI scenario")
    assert book.extras["scenarioVersion"] == 3


def test_scenario_without_a_lorebook_is_empty_with_a_note():
    book = parse_story({"scenarioVersion": 2, "prompt": "x"}, name="x")

    assert book.entries == () and "empty lorebook" in book.notes


@pytest.mark.parametrize(
    ("data", "entry", "field"),
    [
        ({"lorebookVersion": 5, "entries": {"0": {}}}, None, "entries"),
        ({"lorebookVersion": 5, "entries": [v1_entry(text=["a"])]}, "Whiterun", "text"),
        ({"lorebookVersion": 5, "entries": [v1_entry(keys="Whiterun, Dragonsreach")]}, "Whiterun", "keys"),
        ({"lorebookVersion": 5, "entries": [v1_entry(), v1_entry(displayName="", keys=[3])]}, 1, "keys"),
        ({"lorebookVersion": 5, "entries": [v1_entry(enabled="yes")]}, "Whiterun", "enabled"),
    ],
)
def test_malformed_lorebook_names_format_entry_and_field(data, entry, field):
    with pytest.raises(LorebookError) as caught:
        parse_lorebook(data, name="x")

    message = str(caught.value)
    assert message.startswith("NovelAI lorebook")
    assert caught.value.entry == entry and caught.value.field == field
    assert field in message


def test_an_entry_that_is_not_an_object_is_refused_by_index():
    with pytest.raises(LorebookError, match="entry 2"):
        parse_lorebook({"lorebookVersion": 2, "entries": [v1_entry(), v1_entry(), "Whiterun"]}, name="x")


# Real files (audit): every lorebookVersion NovelAI has written (1: initial;
# 2: more settings; 3: categories, entry ids; 4: phrase bias overhaul; 5-6
# as current exports write them), a .scenario, a lorebook image.

LATER_FIELDS = {
    2: {"keyRelative": False, "nonStoryActivatable": False},
    3: {"id": "9f0c1a2b-0000-4000-8000-000000000003", "category": "", "keyRelative": False,
        "nonStoryActivatable": False, "loreBiasGroups": []},
}
LATER_FIELDS[4] = {**LATER_FIELDS[3], "loreBiasGroups": [
    {"phrases": [{"sequences": [], "sequence": "salt", "type": 2}], "ensureSequenceFinish": False,
     "generateOnce": True, "bias": 0.1, "enabled": True, "whenInactive": False}]}
LATER_FIELDS[5] = LATER_FIELDS[6] = LATER_FIELDS[4]


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 6])
def test_every_lorebook_version_arrives_with_titles_keys_and_flags(version):
    fields = LATER_FIELDS.get(version, {})
    data = {"lorebookVersion": version, "entries": [
        v1_entry(**fields),
        v1_entry(displayName="Jarls", keys=[], text="Nine jarls rule the holds.", forceActivation=True, **fields),
        v1_entry(displayName="Dwemer ruins", keys=["/dwem(er|ers)/i"], enabled=False, **fields),
    ], **({"settings": {"orderByKeyLocations": False}, "categories": []} if version >= 3 else {})}

    book = parse_lorebook(data, name="x")

    assert book.format == f"NovelAI lorebook v{version}"
    whiterun, jarls, ruins = book.entries
    assert whiterun.keys == ("Whiterun", "Dragonsreach") and whiterun.enabled and not whiterun.constant
    assert jarls.keys == () and jarls.constant
    assert ruins.regex_keys == ("/dwem(er|ers)/i",) and not ruins.enabled
    assert whiterun.extras["lastUpdatedAt"] == 1624410170266 and "contextConfig" in whiterun.extras


def test_a_named_entry_without_text_or_keys_is_kept_and_only_the_placeholder_skipped():
    data = {"lorebookVersion": 6, "entries": [
        v1_entry(displayName="Oasis", text="", keys=[]),
        v1_entry(displayName="New Lorebook Entry", text="", keys=[]),
    ]}

    book = parse_lorebook(data, name="x")

    assert [entry.title for entry in book.entries] == ["Oasis"]
    assert any("1 placeholder entry" in note for note in book.notes)


def test_scenario_with_a_v6_lorebook_and_a_subcontext_category_is_named_by_its_title():
    book = parse_story(load("nai_v6_saltroad.scenario"), name="saltroad.scenario")

    assert book.name == "The Salt Road" and book.format == "NovelAI scenario (NovelAI lorebook v6)"
    assert [entry.title for entry in book.entries] == ["Mira Vell", "Karth", "Road law", "Oasis"]
    mira, karth, law, oasis = book.entries
    assert mira.extras["categoryName"] == "People"
    assert not karth.enabled and karth.regex_keys == ("/salt[- ]?brick/i",)
    assert law.constant and oasis.keys == ("oasis",) and oasis.text == ""
    assert book.extras["lorebook"]["categories"][0]["createSubcontext"] is True


def test_story_is_named_by_its_metadata_title():
    book = parse_story(load("nai_v1_tamriel.story"), name="tamriel.story")

    assert book.name == "Tamriel: The Reign of Katariah"


def test_lorebook_embedded_in_an_image_is_read_from_its_naidata_chunk():
    text = base64.b64encode(json.dumps({"lorebookVersion": 5, "entries": [v1_entry()]}).encode()).decode()

    book = parse_image_text(text, name="lore.png")

    assert book.format == "NovelAI lorebook v5" and book.entries[0].title == "Whiterun"


@pytest.mark.parametrize("text", ["not base64!", base64.b64encode(b'{"title": "x"}').decode()])
def test_an_image_chunk_that_is_no_lorebook_is_refused_naming_the_chunk(text):
    with pytest.raises(LorebookError) as caught:
        parse_image_text(text, name="lore.png")

    assert caught.value.field == "naidata"
