"""Agnaistic memory books, in the fields SillyTavern's convertAgnaiMemoryBook
and KoboldAI Lite's load_agnai_wi read: `name`, `entry`, `keywords`,
`enabled`, with `priority` and `weight` kept."""

import json
from pathlib import Path

import pytest

from knowledge.lorebooks.agnai import parse
from knowledge.lorebooks.entries import LorebookError

DATA = Path(__file__).parent / "data"


def load(name):
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def test_memory_book_keeps_titles_texts_keywords_and_enabled():
    book = parse(load("agnai_memory_saltroad.json"), name="x.json")

    assert book.format == "Agnai memory book" and book.name == "Salt Road memory"
    mira, karth = book.entries
    assert (mira.title, mira.text, mira.keys) == ("Mira Vell", "Mira Vell keeps the maps.", ("Mira", "cartographer"))
    assert mira.enabled and not karth.enabled
    assert mira.extras == {"priority": 10, "weight": 5, "comment": "Mira Vell", "addMemo": True, "selective": False,
                           "order": 5}
    assert book.extras["kind"] == "memory" and book.extras["description"] == "People of the road"


def test_entry_without_a_name_is_titled_by_its_first_keyword():
    (entry,) = parse({"kind": "memory", "entries": [{"entry": "t", "keywords": ["oasis"]}]}, name="x").entries

    assert entry.title == "oasis" and entry.enabled


@pytest.mark.parametrize(("raw", "field"), [
    ({"name": "Mira", "entry": 3, "keywords": []}, "entry"),
    ({"name": "Mira", "entry": "t", "keywords": [1]}, "keywords"),
    ({"name": "Mira", "entry": "t", "keywords": [], "enabled": "yes"}, "enabled"),
])
def test_malformed_entry_is_refused_naming_format_entry_and_field(raw, field):
    with pytest.raises(LorebookError) as caught:
        parse({"kind": "memory", "entries": [raw]}, name="x")

    assert caught.value.format_name == "Agnai memory book"
    assert caught.value.entry == "Mira" and caught.value.field == field
