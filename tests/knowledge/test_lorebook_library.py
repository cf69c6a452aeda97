"""Lorebooks in the library: every format imports as one source whose
entries keep their titles, keys and flags, keys retrieve their entries,
and what a format carries that Loremaster does not use is kept."""

import json
from pathlib import Path

import pytest

from knowledge import retrieval, services
from knowledge.models import KnowledgeSource, LoreEntry
from knowledge.query import QueryInputs
from knowledge.retrieval import retrieve

DATA = Path(__file__).parent / "lorebooks" / "data"


@pytest.fixture(autouse=True)
def fresh_cache():
    retrieval.clear_cache()
    yield
    retrieval.clear_cache()


def imported(campaign, *names, **options):
    result = services.sources_import(
        campaign=campaign, files=[(n, (DATA / n).read_bytes()) for n in names], enqueue=False, **options
    )
    assert not result.problems, result.problems
    return [services.source_index_now(s) for s in result.created], result


def ask(campaign, *recent, persona="Mara", state=None):
    inputs = QueryInputs.build(state=state or {}, recent=list(recent), persona_name=persona)
    return retrieve(campaign_id=campaign.pk, query=inputs)


def titles(result):
    return sorted(c.heading_path for c in result.candidates)


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.iterdir()))
def test_every_fixture_imports_as_one_canon_source_with_every_entry(campaign, name):
    from knowledge.lorebooks import read
    from knowledge.lorebooks.cards import with_macros_filled

    book = with_macros_filled(read((DATA / name).read_bytes(), name=name))
    [source], result = imported(campaign, name)
    assert source.format == book.format
    assert source.classification == KnowledgeSource.Classification.CANON
    assert source.index_state == KnowledgeSource.IndexState.READY
    stored = list(source.entries.order_by("position"))
    assert len(stored) == len(book.entries)
    for row, entry in zip(stored, book.entries, strict=True):
        assert (row.title, row.text, row.keys, row.regex_keys, row.enabled, row.constant) == (
            entry.title, entry.text, list(entry.keys), list(entry.regex_keys), entry.enabled, entry.constant
        )
    # One passage or more per enabled entry with text; disabled ones are kept, not searched.
    with_text = [e for e in book.entries if e.enabled and e.text.strip()]
    assert len(with_text) <= source.passage_count
    assert {c.entry.position for c in source.chunks.select_related("entry")} == {
        i for i, e in enumerate(book.entries) if e.enabled and e.text.strip()
    }
    assert result.reports and source.title in result.reports[0]


def test_world_info_flags_arrive_and_unused_fields_are_kept_and_reported(campaign):
    [source], result = imported(campaign, "st_westhaven.json")
    entries = {e.title: e for e in source.entries.all()}
    assert entries["The salt wind"].constant
    assert not entries["The Old Lighthouse (draft)"].enabled
    assert entries["Sea serpents"].regex_keys == ["/sea ?serpents?/i"]
    assert entries["Mira's secret"].extras["position"] == 4 and entries["Mira's secret"].extras["depth"] == 2
    assert entries["Sea serpents"].extras["probability"] == 80
    assert {"depth", "position", "probability", "group", "scan_depth"} <= set(source.metadata["unused"])
    assert source.metadata["extras"]["description"] == "The harbour city"
    [line] = result.reports
    assert "6 entries, 1 disabled, 1 always included" in line and "probability" in line
    # A disabled entry is kept, and not searched: five entries with text have passages.
    assert source.passage_count == 5
    assert all(c.entry_id for c in source.chunks.all())


def test_a_scene_that_names_a_key_retrieves_its_entry(campaign):
    imported(campaign, "st_westhaven.json")
    result = ask(campaign, "You push through the crowd toward the lamplighters gathered by the quay.")
    assert "The Lantern Guild" in titles(result)
    [guild] = [c for c in result.candidates if c.heading_path == "The Lantern Guild"]
    assert guild.admitted_by == "key" and "lamplighters" in guild.matched_terms


def test_a_regex_key_is_matched_as_a_regex_against_the_scene(campaign):
    imported(campaign, "st_westhaven.json")
    assert "Sea serpents" in titles(ask(campaign, "Something huge moves under the barge. A SEA SERPENT, the boy cries."))
    assert "Sea serpents" not in titles(ask(campaign, "The sea is calm and grey this morning."))


def test_a_scene_naming_only_the_protagonist_does_not_retrieve_her_hidden_entry(campaign):
    [source], _ = imported(campaign, "st_westhaven.json")
    services.source_update(
        source=source, title=source.title, classification="canon", visibility="hidden",
        always_include=False, enabled=True,
    )
    result = ask(campaign, "Mira wakes before dawn and pulls on her boots.", persona="Mira")
    assert "Mira's secret" not in titles(result)
    refused = {r.heading_path: r.why for r in result.rejections}
    assert "standing entities" in refused["Mira's secret"]


def test_secondary_keys_hold_an_entry_back_until_the_scene_names_one(campaign):
    imported(campaign, "st_westhaven.json")
    assert "Raising the harbour chain" not in titles(ask(campaign, "You study the harbour chain in the noon sun."))
    assert "Raising the harbour chain" in titles(ask(campaign, "At midnight you watch the harbour chain rise."))


def test_constant_entries_are_always_included_while_the_source_is_canon(campaign):
    [source], _ = imported(campaign, "st_westhaven.json")
    result = ask(campaign, "You count your coins.")
    assert [c.heading_path for c in result.candidates if c.always_include] == ["The salt wind"]
    services.source_update(
        source=source, title=source.title, classification="reference", visibility="visible",
        always_include=False, enabled=True,
    )
    assert not any(c.always_include for c in ask(campaign, "You count your coins.").candidates)


def test_a_disabled_entry_is_not_retrieved(campaign):
    imported(campaign, "st_westhaven.json")
    assert "The Old Lighthouse (draft)" not in titles(ask(campaign, "You climb the Old Lighthouse stairs."))


def test_kobold_keys_match_as_lowercase_substrings(campaign):
    from knowledge.lorebooks import read

    book = read((DATA / "kobold_story_save.json").read_bytes(), name="kobold_story_save.json")
    entry = next(e for e in book.entries if e.keys and e.enabled)
    imported(campaign, "kobold_story_save.json")
    key = entry.keys[0]
    scene = f"Half-heard, the word {key.upper()}S echoes across the hall."
    assert any(c.source_id for c in ask(campaign, scene, persona="").candidates if c.heading_path.startswith(entry.title[:20]))


def test_editing_an_entry_reindexes_it_with_its_new_keys(campaign):
    [source], _ = imported(campaign, "st_westhaven.json")
    entry = source.entries.get(title="The Lantern Guild")
    services.entry_update(entry=entry, title="The Wick Guild", keys="wickmakers, /oil ?merchants?/i", text="The Wick Guild sells oil.", enabled=True)
    source = services.source_index_now(KnowledgeSource.objects.get(pk=source.pk))
    entry.refresh_from_db()
    assert entry.keys == ["wickmakers"] and entry.regex_keys == ["/oil ?merchants?/i"]
    assert "The Wick Guild" in titles(ask(campaign, "Two oil merchants argue in the square."))
    assert "The Wick Guild" not in titles(ask(campaign, "The lamplighters gather by the quay."))


def test_disabling_an_entry_in_the_library_takes_its_passages_out(campaign):
    [source], _ = imported(campaign, "st_westhaven.json")
    entry = source.entries.get(title="The Lantern Guild")
    services.entry_update(entry=entry, title=entry.title, keys=", ".join(entry.keys), text=entry.text, enabled=False)
    source = services.source_index_now(KnowledgeSource.objects.get(pk=source.pk))
    assert source.passage_count == 4
    assert "The Lantern Guild" not in titles(ask(campaign, "The lamplighters gather by the quay."))


def test_world_info_exports_back_with_edits_and_kept_settings(campaign):
    [source], _ = imported(campaign, "st_westhaven.json")
    entry = source.entries.get(title="Sea serpents")
    services.entry_update(entry=entry, title="Serpents", keys="/sea ?serpents?/i, wyrm", text="Edited.", enabled=True)
    document = services.world_info_of(KnowledgeSource.objects.get(pk=source.pk))
    original = json.loads((DATA / "st_westhaven.json").read_text())
    exported = {e["comment"]: e for e in document["entries"].values()}
    assert exported["Serpents"]["key"] == ["wyrm", "/sea ?serpents?/i"]
    assert exported["Serpents"]["content"] == "Edited." and exported["Serpents"]["probability"] == 80
    assert exported["The salt wind"]["constant"] and exported["The Old Lighthouse (draft)"]["disable"]
    assert document["scan_depth"] == original["scan_depth"]
    assert len(document["entries"]) == len(original["entries"])


def test_an_empty_lorebook_is_accepted_with_a_note(campaign):
    result = services.sources_import(campaign=campaign, files=[("empty.json", b'{"entries": {}}')], enqueue=False)
    [source] = result.created
    assert source.format == "SillyTavern World Info" and not LoreEntry.objects.filter(source=source).exists()
    assert "no entries" in result.reports[0]
    assert services.source_index_now(source).index_state == KnowledgeSource.IndexState.READY


@pytest.mark.parametrize(
    ("name", "data", "words"),
    [
        ("broken.json", b'{"entries": {"0": {"key": "dragon", "content": 5}}}', ["SillyTavern", "entry 0", "content"]),
        ("broken.json", b'{"entries": {"0": ', ["not valid JSON", "line 1"]),
        ("book.lorebook", b'{"lorebookVersion": 5, "entries": [{"text": "x", "keys": "dragon"}]}', ["NovelAI", "entry", "keys"]),
        ("photo.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 20, ["PNG"]),
        ("mystery.json", b'{"hello": "world"}', ["not a format Loremaster reads"]),
        ("notes.docx", b"PK\x03\x04", ["Markdown", "lorebooks"]),
    ],
)
def test_a_malformed_file_is_refused_naming_what_is_wrong_and_stores_nothing(campaign, name, data, words):
    result = services.sources_import(campaign=campaign, files=[(name, data)], enqueue=False)
    assert not result.created
    [message] = result.refused
    assert message.startswith(name)
    for word in words:
        assert word in message
    assert not KnowledgeSource.objects.filter(campaign=campaign).exists()
    assert not LoreEntry.objects.exists()


def test_a_text_file_that_is_json_of_no_format_is_imported_as_text(campaign):
    result = services.sources_import(campaign=campaign, files=[("notes.txt", b'{"hello": "world"}')], enqueue=False)
    [source] = result.created
    assert source.format == "" and source.classification == KnowledgeSource.Classification.REFERENCE


def test_a_lorebook_renamed_to_txt_is_still_read_as_a_lorebook(campaign):
    data = (DATA / "st_westhaven.json").read_bytes()
    [source] = services.sources_import(campaign=campaign, files=[("westhaven.txt", data)], enqueue=False).created
    assert source.format == "SillyTavern World Info"


def test_a_cards_book_arrives_with_its_macros_filled_in(campaign):
    from tests.knowledge.lorebooks.test_cards import V2, png, text_chunk

    card = json.loads(json.dumps(V2))
    card["data"]["character_book"]["entries"][0]["content"] = "{{char}} tends the glade where {{user}} woke."
    result = services.sources_import(campaign=campaign, files=[("seren.png", png(text_chunk("chara", card)))], enqueue=False)
    [source] = result.created
    first = source.entries.order_by("position").first()
    assert first.text == f"{card['data']['name']} tends the glade where you woke."
