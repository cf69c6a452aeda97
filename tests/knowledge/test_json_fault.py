"""A broken JSON file is refused naming its fault and place once (issue 24):
"starting at at line 31" doubled the decoder's own "at"; and the library and
the campaign-from-card page say the same (issue 25)."""

import html
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from knowledge import services
from knowledge.lorebooks import json_fault, unreadable
from storyapp.bundle import BundleError
from storyapp.bundle.validate import parse

#: Line 2's string opens at column 13 and never closes.
UNTERMINATED = b'{"entries": {"0": {"key": ["dragon"],\n "content": "The dragon sleeps}}}'


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (UNTERMINATED.decode(), "Unterminated string starting at line 2, column 13"),
        ('{"a": "tab\there"}', "Invalid control character at line 1, column 11"),
        ('{"a": 1,}', "Expecting property name enclosed in double quotes at line 1, column 9"),
        ('{"a": 1} 2', "Extra data at line 1, column 10"),
    ],
)
def test_the_fault_names_its_place_once(text, said):
    with pytest.raises(json.JSONDecodeError) as caught:
        json.loads(text)
    assert json_fault(caught.value) == said


def test_a_malformed_json_upload_is_refused_with_the_place_said_once(campaign):
    result = services.sources_import(campaign=campaign, files=[("broken.json", UNTERMINATED)], enqueue=False)
    assert result.refused == [
        "broken.json: the file is not valid JSON (Unterminated string starting at line 2, column 13). "
        "Nothing was imported from it."
    ]


def test_a_malformed_bundle_is_refused_with_the_place_said_once():
    with pytest.raises(BundleError) as caught:
        parse(UNTERMINATED, name="story.json")
    assert str(caught.value) == "story.json is not a JSON document (Unterminated string starting at line 2, column 13)."


#: A card cut short in its download: the string on line 3 never closes.
TRUNCATED_CARD = b'{"spec": "chara_card_v2",\n "data": {"name": "Seren",\n  "description": "Guardian of the gl'
TRUNCATED_SAID = "the file is not valid JSON (Unterminated string starting at line 3, column 18)"


@pytest.mark.parametrize(("name", "data", "said"), [
    ("seren.json", TRUNCATED_CARD, TRUNCATED_SAID),
    ("seren.png", TRUNCATED_CARD, TRUNCATED_SAID),
    ("seren.json", b"Just some notes.", "the file is not valid JSON (Expecting value at line 1, column 1)"),
    ("notes.txt", b"Just some notes.", "the file is neither a PNG image nor JSON"),
    ("map.png", b"not really a png", "the file is not a PNG image"),
    ("blob.lorebook", b"\xff\xfe\x00binary", "the file is neither a PNG image nor JSON"),
])
def test_an_unreadable_file_is_described_by_what_it_opens_as(name, data, said):
    assert unreadable(data, name=name).startswith(said)


def test_the_card_page_and_the_library_say_the_same_of_a_truncated_json_file(reader, campaign):
    response = reader.post(reverse("campaign_from_card"), {"card": SimpleUploadedFile("seren.json", TRUNCATED_CARD)})
    assert f"seren.json is not a character card: {TRUNCATED_SAID}." in html.unescape(response.content.decode())
    result = services.sources_import(campaign=campaign, files=[("seren.json", TRUNCATED_CARD)], enqueue=False)
    assert result.refused == [f"seren.json: {TRUNCATED_SAID}. Nothing was imported from it."]
