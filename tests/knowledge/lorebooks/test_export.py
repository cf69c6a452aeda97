"""Lore goes back out as SillyTavern World Info: a World Info file survives
the round trip with its settings, and any other format's entries arrive
with their titles, keys, text and flags."""

import json
from pathlib import Path

from knowledge.lorebooks import read
from knowledge.lorebooks.export import to_world_info

DATA = Path(__file__).parent / "data"

WORLD = {
    "name": "The Salt Road",
    "entries": {
        "7": {"uid": 7, "key": ["harbour", "/tide(s)?/i"], "keysecondary": ["night"], "comment": "The Harbour",
              "content": "Tides run high.", "constant": True, "disable": False, "position": 4, "depth": 2,
              "order": 50, "probability": 60, "group": "coast"},
        "9": {"uid": 9, "key": ["bell"], "comment": "The Bell", "content": "It tolls twice.", "disable": True},
    },
}


def _round_trip(book):
    return read(json.dumps(to_world_info(book)).encode(), name="back.json")


def test_a_world_info_file_survives_the_round_trip_with_its_settings():
    book = read(json.dumps(WORLD).encode(), name="world.json")
    again = _round_trip(book)
    assert again.name == "The Salt Road"
    assert [(e.title, e.keys, e.regex_keys, e.secondary_keys, e.text, e.enabled, e.constant) for e in again.entries] == [
        (e.title, e.keys, e.regex_keys, e.secondary_keys, e.text, e.enabled, e.constant) for e in book.entries]
    harbour = to_world_info(book)["entries"]["7"]
    assert (harbour["position"], harbour["depth"], harbour["order"], harbour["probability"], harbour["group"]) == (
        4, 2, 50, 60, "coast")


def test_other_formats_arrive_with_titles_keys_text_and_flags():
    for filename in ("nai_v5_saltroad.lorebook", "aid_legacy_jarls.json", "kobold_story_save.json"):
        book = read((DATA / filename).read_bytes(), name=filename)
        document = to_world_info(book)
        assert all(set(entry) >= {"uid", "key", "content", "comment", "disable", "position"}
                   for entry in document["entries"].values())
        again = _round_trip(book)
        assert [(e.title, e.text, e.enabled, e.constant) for e in again.entries] == [
            (e.title, e.text, e.enabled, e.constant) for e in book.entries], filename
        assert [set(e.keys) | set(e.regex_keys) for e in again.entries] == [
            set(e.keys) | set(e.regex_keys) for e in book.entries], filename


def test_uids_stay_unique_when_the_source_repeats_or_lacks_them():
    book = read(json.dumps({"entries": [{"key": ["a"], "content": "A"}, {"key": ["b"], "content": "B"}]}).encode(),
                name="list.json")
    assert sorted(to_world_info(book)["entries"]) == ["0", "1"]
