"""A bundle cannot bring in what a library upload could not (issue 13, finding 11)."""

import copy
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from storyapp.bundle import BundleError
from storyapp.bundle.importer import import_bundle
from storyapp.bundle.validate import parse
from storyapp.models import Campaign
from tests.storyapp.test_bundle import EXAMPLE


def with_source(**changes):
    data = copy.deepcopy(EXAMPLE)
    source = {"filename": "lore.md", "classification": "reference", "text": "# Lore\n\nThe quay is old."}
    source.update(changes)
    data["sources"] = [source]
    return data


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"text": "x" * (16 * 1024 * 1024)}, "over the"),
        ({"text": "The quay\x00is old."}, "binary data"),
        ({"filename": "evil.exe"}, "only Markdown"),
    ],
)
def test_a_source_that_an_upload_would_refuse_is_refused(alice, changes, message):
    with pytest.raises(BundleError, match=message):
        import_bundle(with_source(**changes), owner=alice)
    assert not Campaign.objects.exists()


def test_a_path_in_a_source_filename_is_dropped(alice):
    campaign = import_bundle(with_source(filename="../../notes/lore.md"), owner=alice)
    assert campaign.sources.get().original_filename == "lore.md"


def test_deeply_nested_json_is_refused_with_a_reason(alice, tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CommandError, match="nested too deeply"):
        call_command("import_campaign", str(path), owner="alice", stdout=StringIO())
    with pytest.raises(BundleError, match="not a JSON document"):
        parse(b"{not json", name="x.json")
    assert parse(json.dumps(EXAMPLE).encode(), name="ok.json") == EXAMPLE
