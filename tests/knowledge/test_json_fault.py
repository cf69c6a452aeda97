"""A broken JSON file is refused naming its fault and place once (issue 24):
"starting at at line 31" doubled the decoder's own "at"."""

import json

import pytest

from knowledge import services
from knowledge.lorebooks import json_fault
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
