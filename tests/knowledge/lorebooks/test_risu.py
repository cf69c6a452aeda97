"""RisuAI lorebook exports, in the fields SillyTavern's convertRisuLorebook
reads: comma-string `key` and `secondkey`, `comment` the title,
`alwaysActive` always included; folder items name their entries' folder."""

import json
from pathlib import Path

import pytest

from knowledge.lorebooks.entries import LorebookError
from knowledge.lorebooks.risu import parse

DATA = Path(__file__).parent / "data"


def load(name):
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def test_export_keeps_titles_keys_flags_and_folders_but_not_folders_as_entries():
    book = parse(load("risu_lorebook_saltroad.json"), name="risu.json")

    assert book.format == "RisuAI lorebook"
    mira, law, karth = book.entries
    assert (mira.title, mira.keys) == ("Mira Vell", ("Mira", "cartographer"))
    assert mira.extras["folderName"] == "People"
    assert law.constant and law.keys == ()
    assert karth.secondary_keys == ("tower", "towers") and karth.extras["selective"] is True


def test_use_regex_makes_every_key_a_regex_key():
    (entry,) = parse({"type": "risu", "data": [{"key": "dwem(er|ers), Markarth", "comment": "Dwemer",
                                                "content": "t", "useRegex": True}]}, name="x").entries

    assert entry.regex_keys == ("/dwem(er|ers)/", "/Markarth/") and entry.keys == ()


def test_malformed_entry_is_refused_naming_format_entry_and_field():
    with pytest.raises(LorebookError) as caught:
        parse({"type": "risu", "data": [{"key": ["Mira"], "comment": "Mira", "content": "t"}]}, name="x")

    assert caught.value.format_name == "RisuAI lorebook"
    assert caught.value.entry == "Mira" and caught.value.field == "key"
