"""Macros in keys stay as written at import: the World Info engine fills
them at match time, as SillyTavern fills every key before matching, while
a card book's titles and texts are filled at import for the narrator."""

import json

from knowledge import services
from knowledge.lorebooks import read
from knowledge.lorebooks.cards import with_macros_filled

CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Seren",
        "description": "Guardian of the glade.",
        "first_mes": "*You wake.*",
        "character_book": {
            "entries": [
                {"id": 0, "keys": ["{{user}}'s Room", "{{char}}'s lamp"], "secondary_keys": ["<USER>"],
                 "content": "{{char}} watches over {{user}}.", "comment": "{{char}}'s watch",
                 "enabled": True, "insertion_order": 10},
            ],
        },
    },
}


def _book():
    return with_macros_filled(read(json.dumps(CARD).encode(), name="seren.json"))


def test_a_cards_keys_keep_their_macros_while_its_title_and_text_are_filled():
    (entry,) = _book().entries
    assert entry.keys == ("{{user}}'s Room", "{{char}}'s lamp")
    assert entry.secondary_keys == ("<USER>",)
    assert entry.title == "Seren's watch"
    assert entry.text == "Seren watches over you."


def test_a_world_info_key_with_a_macro_is_stored_as_written(campaign):
    world = {"entries": {"0": {"uid": 0, "key": ["{{user}}'s Room"], "content": "A narrow bed."}}}
    result = services.sources_import(campaign=campaign, files=[("rooms.json", json.dumps(world).encode())],
                                     enqueue=False)
    [source] = result.created
    [row] = source.entries.all()
    assert row.keys == ["{{user}}'s Room"]
    exported = services.world_info_of(source)["entries"]["0"]
    assert exported["key"] == ["{{user}}'s Room"]


def test_a_cards_book_in_the_library_keeps_the_macro_keys(campaign):
    result = services.sources_import(campaign=campaign, files=[("seren.json", json.dumps(CARD).encode())],
                                     enqueue=False)
    [source] = result.created
    [row] = source.entries.all()
    assert row.keys == ["{{user}}'s Room", "{{char}}'s lamp"] and row.text == "Seren watches over you."
