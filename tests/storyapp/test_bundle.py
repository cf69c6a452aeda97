"""Campaign bundles, format version 1: round trip, the documented example, and refusals."""

import copy
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from storyapp import lineage, services
from storyapp.bundle import BundleError
from storyapp.bundle.export import export
from storyapp.bundle.importer import import_and_index, import_bundle
from storyapp.models import Action, Campaign, ContextSnapshot
from tests.factories import CampaignFactory

EXAMPLE = {
    "format": "loremaster.campaign",
    "version": 1,
    "campaign": {
        "title": "The Salt Road",
        "narrator_prompt": "",
        "ai_instructions": "Second person, present tense.",
        "plot_essentials": "Mara carries the broken seal.",
        "authors_note": "Keep the tone grim.",
        "persona": {"name": "Mara", "pronouns": "she/her", "description": "A smuggler."},
        "narration_length": "medium",
        "canon": {"rules": ["Magic always costs blood."], "forbidden_status_changes": [{"from": "dead", "to": "alive"}]},
    },
    "narrative_state": {
        "scene": {"summary": "Mara waits at the quay.", "location": "Westhaven harbour"},
        "entities": {"aldric": {"name": "Aldric", "aliases": ["the harbourmaster"], "status": "alive"}},
        "threads": {"seal": {"title": "Return the broken seal", "status": "open"}},
    },
    "actions": [
        {"id": "a1", "parent": None, "kind": "player", "text": "I walk to the quay."},
        {"id": "a2", "parent": "a1", "kind": "ai", "text": "Gulls wheel over the tide..."},
    ],
    "head": "a2",
    "sources": [
        {"title": "Westhaven", "filename": "westhaven.md", "classification": "canon",
         "visibility": "visible", "always_include": False, "enabled": True,
         "text": "# Westhaven\n\n## The Harbour\n\nThe harbour of Westhaven freezes in winter."},
    ],
    "snapshots": [{"action": "a2", "report": {"sections": []}, "system": "...", "story": "..."}],
    "a_key_from_a_later_version": {"ignored": True},
}


def _shape(data: dict) -> dict:
    """A bundle with its action ids replaced by their path, so two exports compare."""
    paths: dict[str, str] = {}
    for action in data["actions"]:
        parent = paths.get(action["parent"], "")
        paths[action["id"]] = f"{parent}/{action['kind']}:{action['text']}"
    shaped = copy.deepcopy(data)
    shaped["actions"] = sorted((paths[a["id"]], json.dumps(a["state"], sort_keys=True)) for a in data["actions"])
    shaped["head"] = paths.get(data["head"])
    shaped["snapshots"] = sorted((paths[s["action"]], json.dumps(s["report"], sort_keys=True)) for s in data["snapshots"])
    return shaped


def test_the_documented_example_imports_with_its_sources_indexed(alice):
    campaign = import_and_index(EXAMPLE, owner=alice)
    assert campaign.owner == alice and campaign.persona_name == "Mara"
    assert [a.text for a in lineage.tail(campaign.pk, campaign.head_id, 10)] == [
        "I walk to the quay.", "Gulls wheel over the tide...",
    ]
    assert campaign.head.state["entities"]["aldric"]["aliases"] == ["the harbourmaster"]
    [source] = campaign.sources.all()
    assert source.index_state == "ready" and source.passage_count >= 1
    assert ContextSnapshot.objects.get(action=campaign.head).system_text == "..."


def test_a_branched_campaign_round_trips(alice, endpoint, model, django_capture_on_commit_callbacks):
    campaign = CampaignFactory(owner=alice, endpoint=endpoint, initial_state=EXAMPLE["narrative_state"])
    for text in ("One.", "Two.", "Three."):
        with django_capture_on_commit_callbacks(execute=True):
            services.turn_submit(campaign=campaign, text=text, now=timezone.now())
    services.turn_undo(campaign=campaign, now=timezone.now())
    services.turn_undo(campaign=campaign, now=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        services.turn_submit(campaign=campaign, text="Another three.", now=timezone.now())
    campaign.refresh_from_db()
    first = export(campaign)
    copy_ = import_bundle(json.loads(json.dumps(first)), owner=alice)
    second = export(copy_)
    assert _shape(second) == _shape(first)
    assert len(first["actions"]) == 8 and len(first["snapshots"]) == 4


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda b: b.update(version=2), "version 2 is not supported"),
        (lambda b: b.update(format="something.else"), "not a Loremaster campaign bundle"),
        (lambda b: b.pop("actions"), "missing the required key “actions”"),
        (lambda b: b["campaign"].update(title=7), "campaign.title should be str"),
        (lambda b: b["actions"][1].update(parent="a9"), "parent “a9”"),
        (lambda b: b.update(head="a9"), "head names the action “a9”"),
        (lambda b: b["actions"][0].update(parent="a2"), "cycle"),
        (lambda b: b["actions"][1].update(id="a1"), "share the id"),
        (lambda b: b["sources"][0].update(classification="gospel"), "classification"),
        (lambda b: b["snapshots"][0].update(action="a7"), r"snapshots\[0\]\.action"),
    ],
)
def test_a_malformed_bundle_is_refused_and_writes_nothing(alice, change, message):
    broken = copy.deepcopy(EXAMPLE)
    change(broken)
    with pytest.raises(BundleError, match=message):
        import_bundle(broken, owner=alice)
    assert not Campaign.objects.exists() and not Action.objects.exists()


def test_an_action_without_state_takes_its_ancestors_then_the_bundles(alice):
    data = copy.deepcopy(EXAMPLE)
    data["actions"][0]["state"] = {"scene": {"summary": "Earlier.", "location": "Road"}}
    campaign = import_bundle(data, owner=alice)
    assert campaign.head.state["scene"]["location"] == "Road"
    data["actions"][0].pop("state")
    other = import_bundle(data, owner=alice)
    assert other.head.state == EXAMPLE["narrative_state"]


def test_the_commands_round_trip_and_print_the_new_id_last(alice, tmp_path):
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(EXAMPLE))
    out = StringIO()
    call_command("import_campaign", str(path), owner="alice", stdout=out)
    new_id = int(out.getvalue().split()[-1])
    exported = StringIO()
    call_command("export_campaign", new_id, stdout=exported)
    assert _shape(json.loads(exported.getvalue()))["actions"] == _shape(EXAMPLE | {"actions": [
        dict(a, state=EXAMPLE["narrative_state"]) for a in EXAMPLE["actions"]
    ]})["actions"]


def test_the_import_command_refuses_a_broken_file(alice, tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(CommandError, match="not a JSON document"):
        call_command("import_campaign", str(path), owner="alice", stdout=StringIO())
    assert not Campaign.objects.exists()


def test_a_lorebook_source_round_trips_with_its_entries_keys_flags_and_kept_fields(alice, bob):
    from pathlib import Path

    from knowledge import services as knowledge

    data = (Path(__file__).parents[1] / "knowledge" / "lorebooks" / "data" / "st_westhaven.json").read_bytes()
    campaign = CampaignFactory(owner=alice)
    [source] = knowledge.sources_import(campaign=campaign, files=[("westhaven.json", data)], enqueue=False).created
    entry = source.entries.get(title="The Lantern Guild")
    knowledge.entry_update(entry=entry, title="The Wick Guild", keys="wicks", text="Edited.", enabled=False)
    exported = json.loads(json.dumps(export(campaign)))
    copied = import_and_index(exported, owner=bob)
    [book] = copied.sources.all()
    assert (book.format, book.classification, book.index_state) == ("SillyTavern World Info", "canon", "ready")
    assert book.metadata == source.metadata
    fields = ("title", "text", "keys", "secondary_keys", "regex_keys", "enabled", "constant", "extras")
    assert list(book.entries.values_list(*fields)) == list(source.entries.values_list(*fields))
    assert book.passage_count == 4


def test_a_malformed_lorebook_in_a_bundle_is_refused_naming_the_entry(alice):
    broken = copy.deepcopy(EXAMPLE)
    broken["sources"][0]["lorebook"] = {"format": "SillyTavern World Info", "entries": [{"keys": "dragon"}]}
    with pytest.raises(BundleError, match=r"sources\[0\]\.lorebook\.entries\[0\]\.keys"):
        import_bundle(broken, owner=alice)
    assert not Campaign.objects.filter(owner=alice).exists()


def test_a_bundle_whose_lorebook_holds_a_compile_bomb_is_refused_and_writes_nothing(alice):
    broken = copy.deepcopy(EXAMPLE)
    bomb = "/(?:(?:(?:a{100}){100}){100})/"
    broken["sources"][0]["lorebook"] = {
        "format": "SillyTavern World Info", "entries": [{"title": "Bomb", "text": "x", "regex_keys": [bomb]}],
    }
    with pytest.raises(BundleError, match="the entry “Bomb” cannot be used: the pattern .* repeats too much"):
        import_bundle(broken, owner=alice)
    assert not Campaign.objects.filter(owner=alice).exists()


def test_a_source_known_to_one_seat_keeps_its_seat_through_a_bundle(alice, bob):
    from knowledge import services as knowledge

    campaign = CampaignFactory(owner=alice)
    knowledge.source_create(campaign=campaign, filename="mara.md", text="Mara hears the drowned bells.",
                            secret_seat="Mara", enqueue=False)
    knowledge.source_create(campaign=campaign, filename="town.md", text="The town sleeps.", enqueue=False)
    exported = json.loads(json.dumps(export(campaign)))
    assert [s.get("secret_seat", "") for s in exported["sources"]] == ["Mara", ""]
    copied = import_bundle(exported, owner=bob)
    assert dict(copied.sources.values_list("original_filename", "secret_seat")) == {"mara.md": "Mara", "town.md": ""}


def test_a_lorebook_entry_known_to_one_seat_keeps_its_seat_through_a_bundle(alice, bob):
    from pathlib import Path

    from knowledge import services as knowledge
    from knowledge.models import LoreEntry

    data = (Path(__file__).parents[1] / "knowledge" / "lorebooks" / "data" / "st_westhaven.json").read_bytes()
    campaign = CampaignFactory(owner=alice)
    [source] = knowledge.sources_import(campaign=campaign, files=[("westhaven.json", data)], enqueue=False).created
    LoreEntry.objects.filter(source=source, title="The Lantern Guild").update(secret_seat="Mara")
    exported = json.loads(json.dumps(export(campaign)))
    entries = exported["sources"][0]["lorebook"]["entries"]
    assert {e["title"]: e.get("secret_seat", "") for e in entries}["The Lantern Guild"] == "Mara"
    assert sum("secret_seat" in e for e in entries) == 1
    copied = import_bundle(exported, owner=bob)
    [book] = copied.sources.all()
    assert list(book.entries.values_list("title", "secret_seat")) == list(source.entries.values_list("title", "secret_seat"))
    assert book.entries.get(secret_seat="Mara").title == "The Lantern Guild" and book.secret_seat == ""


@pytest.mark.parametrize(("seat", "fault"), [(7, r"entries\[0\]\.secret_seat should be str"),
                                             ("M" * 101, r"entries\[0\]: a seat's name is at most 100")])
def test_a_lorebook_entry_with_a_malformed_seat_is_refused(alice, seat, fault):
    broken = copy.deepcopy(EXAMPLE)
    broken["sources"][0]["lorebook"] = {
        "format": "SillyTavern World Info", "entries": [{"title": "Oath", "text": "x", "secret_seat": seat}],
    }
    with pytest.raises(BundleError, match=fault):
        import_bundle(broken, owner=alice)
    assert not Campaign.objects.filter(owner=alice).exists()
