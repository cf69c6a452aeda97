"""A lorebook entry's extras are stored without the defaults the import
filled in (issue 23: about 1 KB an entry the file never held), and read
back as the importer made them, for every format and fixture."""

import json
from pathlib import Path

import pytest

from knowledge.lorebooks import read
from knowledge.lorebooks.stored import compact, expand

DATA = Path(__file__).parent / "data"


def _same(extras: dict) -> dict:
    return {**extras, "defaulted": sorted(extras["defaulted"])} if "defaulted" in extras else extras


@pytest.mark.parametrize("filename", sorted(p.name for p in DATA.iterdir()))
def test_stored_extras_read_back_as_imported(filename):
    book = read((DATA / filename).read_bytes(), name=filename)
    for entry in book.entries:
        assert _same(expand(compact(entry.extras))) == _same(entry.extras)
        assert compact(compact(entry.extras)) == compact(entry.extras)


def _minimal_book(count: int) -> bytes:
    return json.dumps({"entries": {str(i): {"uid": i, "key": [f"name{i}"], "content": f"Lore of {i}."}
                                   for i in range(count)}}).encode()


def test_a_minimal_world_info_entry_stores_a_few_bytes_of_extras():
    book = read(_minimal_book(1000), name="big.json")
    full = sum(len(json.dumps(e.extras)) for e in book.entries) / 1000
    stored = sum(len(json.dumps(compact(e.extras))) for e in book.entries) / 1000
    assert full > 700
    assert stored < 40


def test_a_setting_the_file_gave_is_kept_even_at_its_default():
    book = read(json.dumps({"entries": {"1": {"uid": 1, "key": ["a"], "content": "x", "order": 100,
                                              "depth": 2, "delayUntilRecursion": False}}}).encode(), name="w.json")
    stored = compact(book.entries[0].extras)
    assert (stored["order"], stored["depth"], stored["delayUntilRecursion"]) == (100, 2, False)
    assert "probability" not in stored
