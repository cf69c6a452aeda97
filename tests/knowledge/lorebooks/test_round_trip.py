"""A SillyTavern World Info file survives import → export field for field:
every field of SillyTavern's current entry template set to something other
than its default, fields Loremaster does not know, an empty comment, the
book's settings; through the records and through the library's rows, whose
extras are stored compacted. What the entry editor edits goes back too."""

import json

from knowledge import services
from knowledge.lorebooks import read
from knowledge.lorebooks.export import to_world_info
from knowledge.models import KnowledgeSource

HARBOUR = {
    "uid": 7, "displayIndex": 3, "key": ["harbour", "/tides?/i"], "keysecondary": ["night", "/fog/"],
    "comment": "The Harbour", "content": "Tides run high at the harbour.", "constant": True, "vectorized": True,
    "selective": False, "selectiveLogic": 2, "addMemo": True, "order": 250, "position": 4, "disable": True,
    "ignoreBudget": True, "excludeRecursion": True, "preventRecursion": True,
    "matchPersonaDescription": True, "matchCharacterDescription": True, "matchCharacterPersonality": True,
    "matchCharacterDepthPrompt": True, "matchScenario": True, "matchCreatorNotes": True,
    "delayUntilRecursion": 2, "probability": 35, "useProbability": False, "depth": 7, "outletName": "weather",
    "group": "coast,night", "groupOverride": True, "groupWeight": 40, "scanDepth": 5, "caseSensitive": True,
    "matchWholeWords": False, "useGroupScoring": True, "automationId": "tide-bell", "role": 2,
    "sticky": 3, "cooldown": 4, "delay": 1, "triggers": ["normal", "continue"],
    "characterFilter": {"isExclude": True, "names": ["Seren"], "tags": ["villain"]},
    "extensions": {"weight": 3}, "futureField": {"kept": [1, 2]},
}
#: No comment, a regex key first: the list shows the entry by that key.
BELL = {"uid": 9, "key": ["/bells?/i", "tower"], "comment": "", "content": "It tolls twice.", "position": 1}
SETTINGS = {
    "scan_depth": 4, "budget_percent": 40, "budget_cap": 2048, "recursive": True, "max_recursion_steps": 3,
    "min_activations": 2, "min_activations_depth_max": 10, "case_sensitive": True, "match_whole_words": True,
    "use_group_scoring": True, "include_names": False, "vectorize_all": True,
}
WORLD = {"entries": {"7": HARBOUR, "9": BELL}, "name": "The Salt Road", "loremaster_settings": SETTINGS}

#: SillyTavern's defaults for what BELL leaves out, as an export writes them.
BELL_DEFAULTS = {
    "displayIndex": 9, "keysecondary": [], "constant": False, "vectorized": False, "selective": True,
    "selectiveLogic": 0, "addMemo": False, "order": 100, "disable": False, "ignoreBudget": False,
    "excludeRecursion": False, "preventRecursion": False, "matchPersonaDescription": False,
    "matchCharacterDescription": False, "matchCharacterPersonality": False, "matchCharacterDepthPrompt": False,
    "matchScenario": False, "matchCreatorNotes": False, "delayUntilRecursion": 0, "probability": 100,
    "useProbability": True, "depth": 4, "outletName": "", "group": "", "groupOverride": False, "groupWeight": 100,
    "scanDepth": None, "caseSensitive": None, "matchWholeWords": None, "useGroupScoring": None, "automationId": "",
    "role": 0, "sticky": None, "cooldown": None, "delay": None, "triggers": [],
    "characterFilter": {"isExclude": False, "names": [], "tags": []},
}
EXPECTED = {**WORLD, "entries": {"7": HARBOUR, "9": {**BELL_DEFAULTS, **BELL}}}


def _world() -> bytes:
    return json.dumps(WORLD).encode()


def test_every_field_survives_the_round_trip_through_the_records():
    book = read(_world(), name="world.json")
    assert book.settings == SETTINGS
    assert "loremaster_settings" not in book.extras
    assert to_world_info(book) == EXPECTED


def test_an_empty_comment_stays_empty_and_its_key_still_names_the_entry():
    book = read(_world(), name="world.json")
    bell = to_world_info(book)["entries"]["9"]
    assert bell["comment"] == "" and bell["key"] == ["/bells?/i", "tower"]
    assert read(json.dumps(to_world_info(book)).encode(), name="again.json").entries[1].title == "/bells?/i"


def test_a_world_info_file_without_settings_exports_none():
    world = {key: value for key, value in WORLD.items() if key != "loremaster_settings"}
    book = read(json.dumps(world).encode(), name="world.json")
    assert book.settings == {} and "loremaster_settings" not in to_world_info(book)


def test_settings_of_the_wrong_type_read_back_as_the_defaults():
    world = {**WORLD, "loremaster_settings": {"scan_depth": "deep", "recursive": 1, "budget_percent": 10}}
    settings = read(json.dumps(world).encode(), name="world.json").settings
    assert (settings["scan_depth"], settings["recursive"], settings["budget_percent"]) == (2, False, 10)


def _imported(campaign) -> KnowledgeSource:
    result = services.sources_import(campaign=campaign, files=[("world.json", _world())], enqueue=False)
    [source] = result.created
    return KnowledgeSource.objects.get(pk=source.pk)


def test_every_field_survives_the_round_trip_through_the_library(campaign):
    source = _imported(campaign)
    assert source.metadata["world_info"] == SETTINGS
    assert services.world_info_of(source) == EXPECTED
    assert json.loads("".join(services.world_info_stream(source))) == EXPECTED


def test_the_export_writes_what_the_editor_changed(campaign):
    source = _imported(campaign)
    harbour = source.entries.get(title="The Harbour")
    services.entry_update(entry=harbour, title="The Old Harbour", keys="quay, /wharf/", text="Silted up.",
                          enabled=True)
    harbour.refresh_from_db()
    harbour.secondary_keys, harbour.constant = ["dusk"], False
    harbour.save(update_fields=["secondary_keys", "constant"])
    source.metadata = {**source.metadata, "world_info": {**SETTINGS, "scan_depth": 9}}
    source.save(update_fields=["metadata"])

    document = services.world_info_of(KnowledgeSource.objects.get(pk=source.pk))
    exported = document["entries"]["7"]
    assert (exported["comment"], exported["key"], exported["keysecondary"], exported["content"]) == (
        "The Old Harbour", ["quay", "/wharf/"], ["dusk"], "Silted up.")
    assert (exported["constant"], exported["disable"]) == (False, False)
    unchanged = {k: v for k, v in HARBOUR.items()
                 if k not in ("comment", "key", "keysecondary", "content", "constant", "disable")}
    assert {k: exported[k] for k in unchanged} == unchanged
    assert document["loremaster_settings"]["scan_depth"] == 9


def test_entries_never_share_a_default_list_or_filter():
    book = read(json.dumps({"entries": [{"key": ["a"]}, {"key": ["b"]}]}).encode(), name="two.json")
    first, second = (entry.extras for entry in book.entries)
    first["triggers"].append("continue")
    first["characterFilter"]["names"].append("Seren")
    assert second["triggers"] == [] and second["characterFilter"]["names"] == []
    document = to_world_info(book)
    document["entries"]["0"]["keysecondary"].append("x")
    assert document["entries"]["1"]["characterFilter"] == {"isExclude": False, "names": [], "tags": []}
    assert read(json.dumps({"entries": [{"key": ["c"]}]}).encode(), name="c.json").entries[0].extras["triggers"] == []
