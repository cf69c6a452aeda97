"""A file's format is read off its content: renamed files, `.json` files of
any tool and PNG cards each reach the right importer; text is left alone;
JSON of no known format is refused naming the formats Loremaster reads."""

import base64
import json
from pathlib import Path

import pytest

from knowledge.lorebooks import LorebookError, read
from tests.knowledge.lorebooks.test_cards import png, text_chunk

DATA = Path(__file__).parent / "data"


def as_bytes(document) -> bytes:
    return json.dumps(document).encode()


@pytest.mark.parametrize(("filename", "format_starts"), [
    ("aid_legacy_jarls.json", "AI Dungeon"),
    ("aid_story_cards_scenario.json", "AI Dungeon"),
    ("kobold_key_content_only.json", "KoboldAI"),
    ("kobold_story_save.json", "KoboldAI"),
    ("nai_v1_tamriel.story", "NovelAI story"),
    ("nai_v5_saltroad.lorebook", "NovelAI lorebook"),
    ("nai_v6_saltroad.scenario", "NovelAI scenario"),
    ("st_default_eldoria.json", "SillyTavern World Info"),
    ("st_card_lore_original_data.json", "SillyTavern World Info"),
    ("st_default_seraphina_card.json", "Character Card V2"),
    ("chub_lorebook_saltroad.json", "Character book"),
    ("agnai_memory_saltroad.json", "Agnai memory book"),
    ("risu_lorebook_saltroad.json", "RisuAI lorebook"),
    ("kobold_lite_save.json", "KoboldAI"),
    ("kobold_united_save.json", "KoboldAI world info (v2)"),
    ("kobold_united_wi_export.json", "KoboldAI world info (v2)"),
    ("aid_scenario_with_options.json", "AI Dungeon"),
    ("aid_scenarios_archive.json", "AI Dungeon scenarios"),
])
def test_each_tools_file_reaches_its_importer_whatever_its_name(filename, format_starts):
    book = read((DATA / filename).read_bytes(), name="renamed.txt")
    assert book.format.startswith(format_starts) and book.entries


def test_sillytavern_world_info_is_recognised_by_its_entries():
    book = read(as_bytes({"entries": {"0": {"uid": 0, "key": ["harbour"], "content": "Tides run high.",
                                            "comment": "The Harbour"}}}), name="world.json")
    assert book.format.startswith("SillyTavern") and book.entries[0].title == "The Harbour"


def test_a_character_card_as_json_and_as_png():
    card = {"spec": "chara_card_v2", "spec_version": "2.0",
            "data": {"name": "Mara", "description": "A salt-road courier.", "first_mes": "You wake.",
                     "personality": "", "scenario": "", "mes_example": ""}}
    assert read(as_bytes(card), name="mara.json").card.name == "Mara"
    image = png(text_chunk("chara", card))
    assert read(image, name="mara.png").card.name == "Mara"


def test_a_v1_card_with_only_top_level_fields_is_a_card():
    book = read(as_bytes({"name": "Aldric", "first_mes": "The harbourmaster looks up.", "description": "Old."}),
                name="aldric.json")
    assert book.card is not None and book.card.name == "Aldric"


@pytest.mark.parametrize("data", [b"# The Harbour\n\nTides run high.", "Plain notes.".encode("utf-16"),
                                  base64.b64encode(b"not json")])
def test_text_is_not_a_lorebook(data):
    assert read(data, name="notes.md") is None


@pytest.mark.parametrize("document", [{"title": "A story", "chapters": []}, [1, 2, 3], [], "just a string", 42])
def test_json_of_no_known_format_is_refused_naming_what_is_read(document):
    with pytest.raises(LorebookError) as refused:
        read(as_bytes(document), name="mystery.json")
    assert "SillyTavern World Info" in str(refused.value) and "NovelAI" in str(refused.value)


def test_absurdly_nested_json_is_refused_not_a_crash():
    with pytest.raises(LorebookError, match="nests too deeply"):
        read(b"[" * 100_000 + b"]" * 100_000, name="deep.json")


def test_world_info_whose_entries_use_the_card_spec_names_is_read_as_a_character_book():
    """Some tools write World Info's shape with a card book's entries
    (`keys`, `insertion_order`); read as World Info every key was lost."""
    book = read(as_bytes({"entries": {"0": {"uid": 0, "keys": ["harbour"], "content": "Tides run high.",
                                            "comment": "The Harbour", "insertion_order": 100}}}), name="w.json")

    assert book.format.startswith("Character book") and book.entries[0].keys == ("harbour",)
    assert book.entries[0].title == "The Harbour"


def test_a_novelai_lorebook_image_is_read_from_its_naidata_chunk():
    lorebook = {"lorebookVersion": 5, "entries": [{"displayName": "Karth", "text": "Salt brick.", "keys": ["Karth"]}]}

    book = read(png(text_chunk("naidata", lorebook)), name="lore.png")

    assert book.format == "NovelAI lorebook v5" and book.entries[0].keys == ("Karth",)


def test_an_image_with_a_card_and_a_naidata_chunk_is_the_card():
    card = {"spec": "chara_card_v2", "data": {"name": "Mira", "first_mes": "Hi."}}

    book = read(png(text_chunk("naidata", {"lorebookVersion": 5, "entries": []}), text_chunk("chara", card)),
                name="x.png")

    assert book.card is not None and book.card.name == "Mira"
